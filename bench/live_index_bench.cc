// The live index under load (issue 12; a benchmark, not a test). Three modes,
// each against a collection built from N clustered, L2-normalised vectors:
//
//   live_index_bench writers --zerovec Z --rows N [--dim 384] [--index hnsw]
//       [--clients 8] [--seconds 10] [--rounds 2] [--batch 128] [--work DIR]
//     A `zerovec serve` child; alternating phases of search clients alone and
//     the same clients while one more client upserts batches continuously:
//     search QPS, p50, p99 of each phase, their ratios, the writer's rows/s.
//   live_index_bench kill --zerovec Z --rows N [--rounds 20] [...]
//     A writer streams acknowledged upserts; the server is SIGKILLed at a
//     random moment and restarted: seconds until its port answers again, and
//     every acknowledged id of the round checked with Get (lost = missing).
//   live_index_bench attach --zerovec Z --rows N [--queries 200]
//       [--ef 128,256,...] [...]
//     In process: the writer-side Collection::Search against an
//     AttachedCollection over the same data: recall@10 against exact search,
//     p50 of each, per efSearch; then the reader's RSS in a child that only
//     attaches and searches, against the size of the index files it maps.
//
// The collection is made once per --work directory by `zerovec build` from a
// .npy file (reused across modes and runs when the row count matches).
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "index/collection.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
namespace pb = zerovec::v1;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string mode;
  std::string zerovec = "bazel-bin/tools/zerovec";
  std::string work = "/tmp/zv-live";
  std::string index = "hnsw";
  long rows = 100000;
  int dim = 384;
  int clients = 8;
  int seconds = 10;
  int rounds = 2;
  int batch = 128;
  int queries = 200;
  int k = 10;
  std::vector<int> efs = {
      zv::index::kDefaultEfSearch};  // attach: efSearch values
};

Config Parse(int argc, char** argv) {
  Config c;
  if (argc > 1) c.mode = argv[1];
  std::map<std::string, std::string> kv;
  for (int i = 2; i + 1 < argc; i += 2) kv[argv[i]] = argv[i + 1];
  auto s = [&](const char* k, std::string& v) {
    if (kv.count(k)) v = kv[k];
  };
  auto i = [&](const char* k, int& v) {
    if (kv.count(k)) v = std::stoi(kv[k]);
  };
  s("--zerovec", c.zerovec);
  s("--work", c.work);
  s("--index", c.index);
  if (kv.count("--rows")) c.rows = std::stol(kv["--rows"]);
  i("--dim", c.dim);
  i("--clients", c.clients);
  i("--seconds", c.seconds);
  i("--rounds", c.rounds);
  i("--batch", c.batch);
  i("--queries", c.queries);
  if (kv.count("--ef")) {
    c.efs.clear();
    std::stringstream list(kv["--ef"]);
    for (std::string e; std::getline(list, e, ',');)
      c.efs.push_back(std::stoi(e));
  }
  return c;
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

// Embedding-like vectors: 1000 centres, each row a centre plus noise.
class VectorMaker {
 public:
  VectorMaker(int dim, uint64_t seed) : dim_(dim), rng_(seed) {
    std::mt19937_64 crng(20261203);
    centres_.resize(1000 * size_t(dim));
    for (float& x : centres_) x = g_(crng);
  }
  std::vector<float> Next() {
    std::vector<float> v(dim_);
    const float* c = &centres_[(rng_() % 1000) * dim_];
    double s = 0;
    for (int d = 0; d < dim_; ++d) {
      v[d] = c[d] + 0.6f * g_(rng_);
      s += double(v[d]) * v[d];
    }
    for (float& x : v) x = static_cast<float>(x / std::sqrt(s));
    return v;
  }

 private:
  int dim_;
  std::mt19937_64 rng_;
  std::normal_distribution<float> g_;
  std::vector<float> centres_;
};

int Run(const std::vector<std::string>& argv) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execv(a[0], a.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// The data directory with collection "live" of c.rows rows (built once per
// tag: the attach mode's copy is never written to, so its exact answers are
// those of the built rows).
fs::path Prepare(const Config& c, const std::string& tag) {
  const fs::path work =
      fs::path(c.work) / (std::to_string(c.rows) + "x" + std::to_string(c.dim) +
                          c.index + "-" + tag);
  const fs::path data = work / "data", done = work / "built";
  if (fs::exists(done)) return data;
  fs::remove_all(work);
  fs::create_directories(work);
  const fs::path npy = work / "v.npy";
  {
    std::ofstream out(npy, std::ios::binary);
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                         std::to_string(c.rows) + ", " + std::to_string(c.dim) +
                         "), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    const uint16_t len = static_cast<uint16_t>(header.size());
    out.write("\x93NUMPY\x01\x00", 8);
    out.write(reinterpret_cast<const char*>(&len), 2);
    out << header;
    VectorMaker maker(c.dim, 1);
    for (long r = 0; r < c.rows; ++r) {
      const auto v = maker.Next();
      out.write(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    }
  }
  const auto t0 = Clock::now();
  const int rc =
      Run({c.zerovec, "build", "--data", data.string(), "--collection", "live",
           "--input", npy.string(), "--model", "none", "--index", c.index});
  if (rc != 0) {
    std::fprintf(stderr, "live_index_bench: zerovec build failed (%d)\n", rc);
    std::exit(1);
  }
  std::printf("prepared %ld x %d (%s) in %.1f s\n", c.rows, c.dim,
              c.index.c_str(), Since(t0));
  fs::remove(npy);
  std::ofstream(done) << "ok\n";
  return data;
}

struct Server {
  pid_t pid = -1;
  int port = 0;
  double start_seconds = 0;  // exec until the port answers
};

std::shared_ptr<grpc::Channel> Channel(int port) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<grpc::ClientContext> Ctx(int seconds = 30) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::seconds(seconds));
  return ctx;
}

Server StartServer(const Config& c, const fs::path& data) {
  Server s;
  const fs::path port_file = data.parent_path() / "port";
  fs::remove(port_file);
  const auto t0 = Clock::now();
  s.pid = fork();
  if (s.pid == 0) {
    const std::string log = (data.parent_path() / "serve.log").string();
    if (!freopen(log.c_str(), "a", stderr)) _exit(126);
    execl(c.zerovec.c_str(), c.zerovec.c_str(), "serve", "--data", data.c_str(),
          "--listen", "127.0.0.1:0", "--model", "none", "--port-file",
          port_file.c_str(), "--max-concurrent-requests", "1024",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  while (Since(t0) < 600) {
    std::ifstream(port_file) >> s.port;
    if (s.port != 0) {
      // The port file is written once the server listens; confirm it answers.
      auto stub = pb::ZeroVec::NewStub(Channel(s.port));
      pb::ListCollectionsRequest req;
      pb::ListCollectionsResponse resp;
      if (stub->ListCollections(Ctx(2).get(), req, &resp).ok()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  s.start_seconds = Since(t0);
  if (s.port == 0) {
    std::fprintf(stderr, "live_index_bench: the server did not start\n");
    kill(s.pid, SIGKILL);
    std::exit(1);
  }
  return s;
}

void Stop(Server& s, int sig) {
  kill(s.pid, sig);
  waitpid(s.pid, nullptr, 0);
}

struct Phase {
  double qps = 0, p50 = 0, p99 = 0, writer_rows_per_s = 0;
  uint64_t errors = 0;
};

Phase SearchPhase(const Config& c, int port, bool writer, int round,
                  std::atomic<long>* next_id) {
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(c.clients);
  std::vector<uint64_t> errors(c.clients + 1, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < c.clients; ++t) {
    threads.emplace_back([&, t] {
      auto stub = pb::ZeroVec::NewStub(Channel(port));
      VectorMaker maker(c.dim, 100 + round * 64 + t);
      while (!stop) {
        pb::SearchRequest req;
        req.set_collection("live");
        const auto v = maker.Next();
        req.mutable_query()->mutable_vector()->mutable_values()->Add(v.begin(),
                                                                     v.end());
        req.set_k(c.k);
        pb::SearchResponse resp;
        const auto t0 = Clock::now();
        const grpc::Status s = stub->Search(Ctx().get(), req, &resp);
        lat[t].push_back(Since(t0) * 1e3);
        if (!s.ok()) ++errors[t];
      }
    });
  }
  std::atomic<long> written{0};
  std::thread writer_thread;
  if (writer) {
    writer_thread = std::thread([&] {
      auto stub = pb::ZeroVec::NewStub(Channel(port));
      VectorMaker maker(c.dim, 7 + round);
      while (!stop) {
        pb::UpsertRequest req;
        req.set_collection("live");
        for (int i = 0; i < c.batch; ++i) {
          pb::Item* item = req.add_items();
          item->set_id("w" + std::to_string(next_id->fetch_add(1)));
          const auto v = maker.Next();
          item->mutable_vector()->Add(v.begin(), v.end());
        }
        pb::UpsertResponse resp;
        if (stub->Upsert(Ctx().get(), req, &resp).ok()) {
          written += c.batch;
        } else {
          ++errors[c.clients];
        }
      }
    });
  }
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(c.seconds));
  stop = true;
  for (auto& t : threads) t.join();
  if (writer_thread.joinable()) writer_thread.join();
  const double secs = Since(t0);
  Phase p;
  std::vector<double> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  p.qps = all.size() / secs;
  p.p50 = Percentile(all, 0.5);
  p.p99 = Percentile(all, 0.99);
  p.writer_rows_per_s = written / secs;
  for (uint64_t e : errors) p.errors += e;
  return p;
}

int Writers(const Config& c) {
  const fs::path data = Prepare(c, "rw");
  Server s = StartServer(c, data);
  std::printf(
      "writers: %ld rows x %d, index %s, %d search clients, %d s a phase, "
      "writer batches of %d; server up in %.2f s\n",
      c.rows, c.dim, c.index.c_str(), c.clients, c.seconds, c.batch,
      s.start_seconds);
  std::printf(
      "| round | phase | search QPS | p50 ms | p99 ms | writer rows/s | "
      "errors |\n|---|---|---:|---:|---:|---:|---:|\n");
  std::atomic<long> next_id{0};
  std::vector<Phase> alone, with;
  for (int r = 0; r < c.rounds; ++r) {
    for (bool w : {false, true}) {
      Phase p = SearchPhase(c, s.port, w, r, &next_id);
      (w ? with : alone).push_back(p);
      std::printf("| %d | %s | %.0f | %.2f | %.2f | %.0f | %llu |\n", r + 1,
                  w ? "with writer" : "searches only", p.qps, p.p50, p.p99,
                  p.writer_rows_per_s,
                  static_cast<unsigned long long>(p.errors));
      std::fflush(stdout);
    }
  }
  double qa = 0, qw = 0, pa = 0, pw = 0;
  for (auto& p : alone) qa += p.qps, pa += p.p99;
  for (auto& p : with) qw += p.qps, pw += p.p99;
  std::printf(
      "with a writer / searches only (means over rounds): QPS %.2fx, p99 "
      "%.2fx; %ld rows written\n",
      qw / qa, pw / pa, next_id.load());
  Stop(s, SIGTERM);
  return 0;
}

int Kill(const Config& c) {
  const fs::path data = Prepare(c, "rw");
  std::mt19937_64 rng(42);
  std::printf(
      "kill: %ld rows x %d, index %s, %d rounds, writer batches of %d\n"
      "| round | restart s | acknowledged | lost |\n|---|---:|---:|---:|\n",
      c.rows, c.dim, c.index.c_str(), c.rounds, c.batch);
  Server s = StartServer(c, data);
  double worst = 0;
  long total_lost = 0;
  for (int r = 0; r < c.rounds; ++r) {
    std::atomic<bool> stop{false};
    std::vector<std::string> acked;
    std::thread writer([&] {
      auto stub = pb::ZeroVec::NewStub(Channel(s.port));
      VectorMaker maker(c.dim, 1000 + r);
      for (long b = 0; !stop; ++b) {
        pb::UpsertRequest req;
        req.set_collection("live");
        std::vector<std::string> ids;
        for (int i = 0; i < c.batch; ++i) {
          pb::Item* item = req.add_items();
          ids.push_back("k" + std::to_string(r) + "-" +
                        std::to_string(b * c.batch + i));
          item->set_id(ids.back());
          const auto v = maker.Next();
          item->mutable_vector()->Add(v.begin(), v.end());
        }
        pb::UpsertResponse resp;
        if (!stub->Upsert(Ctx().get(), req, &resp).ok()) break;
        acked.insert(acked.end(), ids.begin(), ids.end());
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(500 + rng() % 2500));
    Stop(s, SIGKILL);
    stop = true;
    writer.join();
    s = StartServer(c, data);
    worst = std::max(worst, s.start_seconds);
    long lost = 0;
    auto stub = pb::ZeroVec::NewStub(Channel(s.port));
    for (size_t i = 0; i < acked.size(); i += 500) {
      pb::GetRequest req;
      req.set_collection("live");
      const size_t n = std::min<size_t>(500, acked.size() - i);
      for (size_t j = 0; j < n; ++j) req.add_ids(acked[i + j]);
      pb::GetResponse resp;
      if (!stub->Get(Ctx().get(), req, &resp).ok()) {
        lost += n;
        continue;
      }
      lost += static_cast<long>(n) - resp.items_size();
    }
    total_lost += lost;
    std::printf("| %d | %.2f | %zu | %ld |\n", r + 1, s.start_seconds,
                acked.size(), lost);
    std::fflush(stdout);
  }
  Stop(s, SIGTERM);
  std::printf("kill: worst restart %.2f s, %ld acknowledged writes lost\n",
              worst, total_lost);
  return total_lost == 0 ? 0 : 2;
}

// VmRSS, or one of its parts: "RssAnon:" (private memory), "RssFile:"
// (mapped files: segment rows and index pieces, shared with every process).
long RssKb(const char* field = "VmRSS:") {
  std::ifstream in("/proc/self/status");
  const std::string f = field;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(f, 0) == 0) return std::stol(line.substr(f.size()));
  }
  return -1;
}

// Bytes of the files under `dir` whose names start with `prefix`.
uint64_t DirBytes(const fs::path& dir, const std::string& prefix) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    if (e.path().filename().string().rfind(prefix, 0) == 0) {
      total += e.file_size();
    }
  }
  return total;
}

// Attaches a reader in a forked child (nothing else loaded there), runs every
// query, and reports VmRSS before / after, RssAnon, RssFile into rss[4].
// False only if the pipe cannot be made.
bool ReaderRssInChild(const Config& c, const fs::path& data,
                      const std::vector<float>& queries,
                      const zv::index::SearchOptions& o, long rss[4]) {
  namespace ix = zv::index;
  int pipefd[2];
  if (pipe(pipefd) != 0) return false;
  const pid_t child = fork();
  if (child == 0) {
    close(pipefd[0]);
    const long before = RssKb();
    auto reader = ix::AttachedCollection::Attach(data, "live");
    if (!reader.ok()) _exit(3);
    for (int q = 0; q < c.queries; ++q) {
      (void)(*reader)->Search(
          std::span<const float>(&queries[size_t(q) * c.dim], c.dim), o);
    }
    const long after = RssKb();
    const long out[4] = {before, after, RssKb("RssAnon:"), RssKb("RssFile:")};
    if (write(pipefd[1], out, sizeof(out)) != sizeof(out)) _exit(4);
    _exit(0);
  }
  close(pipefd[1]);
  if (read(pipefd[0], rss, 4 * sizeof(long)) != 4 * sizeof(long)) {
    std::fprintf(stderr, "attach child failed\n");
  }
  waitpid(child, nullptr, 0);
  return true;
}

// Every row's vector (ids are decimal row numbers), read back with Get.
bool ReadAllVectors(zv::index::Collection& coll, uint64_t rows, int dim,
                    std::vector<float>& all) {
  std::vector<std::string> ids;
  for (uint64_t r = 0; r < rows; ++r) ids.push_back(std::to_string(r));
  for (uint64_t first = 0; first < rows; first += 10000) {
    const size_t n = std::min<uint64_t>(10000, rows - first);
    auto got = coll.Get(std::span<const std::string>(&ids[first], n));
    if (!got.ok()) return false;
    for (const auto& g : *got) {
      const uint64_t r = std::stoull(g.record.id);
      std::copy(g.vector.begin(), g.vector.end(), &all[r * dim]);
    }
  }
  return true;
}

// Exact top-k ids of every query by brute force over `all`.
std::vector<std::vector<std::string>> ExactTopK(
    const Config& c, const std::vector<float>& queries,
    const std::vector<float>& all, uint64_t rows) {
  std::vector<std::vector<std::string>> truths;
  for (int q = 0; q < c.queries; ++q) {
    const float* qv = &queries[size_t(q) * c.dim];
    std::vector<std::pair<float, uint64_t>> scores(rows);
    for (uint64_t r = 0; r < rows; ++r) {
      float s = 0;
      for (int d = 0; d < c.dim; ++d) s += qv[d] * all[r * c.dim + d];
      scores[r] = {-s, r};
    }
    std::partial_sort(scores.begin(), scores.begin() + c.k, scores.end());
    truths.emplace_back();
    for (int i = 0; i < c.k; ++i)
      truths.back().push_back(std::to_string(scores[i].second));
  }
  return truths;
}

// One efSearch (o.ef_search) on the writer-side collection and the attached
// reader: prints one table line; false if a search fails.
bool CompareAtEf(const Config& c, zv::index::Collection& coll,
                 zv::index::AttachedCollection& reader,
                 const std::vector<float>& queries,
                 const std::vector<std::vector<std::string>>& truths,
                 const zv::index::SearchOptions& o) {
  namespace ix = zv::index;
  const int ef = o.ef_search;
  double recall_server = 0, recall_reader = 0;
  std::vector<double> lat_server, lat_reader;
  for (int q = 0; q < c.queries; ++q) {
    const auto& truth = truths[q];
    auto hits_in = [&](const std::vector<ix::Hit>& hits) {
      int n = 0;
      for (const auto& h : hits)
        n += std::find(truth.begin(), truth.end(), h.id) != truth.end();
      return double(n) / c.k;
    };
    const std::span<const float> query(&queries[size_t(q) * c.dim], c.dim);
    auto t0 = Clock::now();
    auto a = coll.Search(query, o);
    lat_server.push_back(Since(t0) * 1e3);
    t0 = Clock::now();
    auto b = reader.Search(query, o);
    lat_reader.push_back(Since(t0) * 1e3);
    if (!a.ok() || !b.ok()) return false;
    recall_server += hits_in((*a)[0]);
    recall_reader += hits_in((*b)[0]);
  }
  std::printf("| %d | %.4f | %.3f | %.3f | %.4f | %.3f | %.3f | %.2fx |\n", ef,
              recall_server / c.queries, Percentile(lat_server, 0.5),
              Percentile(lat_server, 0.99), recall_reader / c.queries,
              Percentile(lat_reader, 0.5), Percentile(lat_reader, 0.99),
              Percentile(lat_reader, 0.5) / Percentile(lat_server, 0.5));
  std::fflush(stdout);
  return true;
}

int Attach(const Config& c) {
  namespace ix = zv::index;
  const fs::path data = Prepare(c, "ro");
  VectorMaker maker(c.dim, 99);
  std::vector<float> queries;
  for (int q = 0; q < c.queries; ++q) {
    const auto v = maker.Next();
    queries.insert(queries.end(), v.begin(), v.end());
  }
  ix::SearchOptions o;
  o.k = c.k;
  // The reader's RSS first, in a child that has nothing else loaded.
  long rss[4] = {-1, -1, -1, -1};
  if (!ReaderRssInChild(c, data, queries, o, rss)) return 1;

  auto db = ix::Database::Open(data);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().message().c_str());
    return 1;
  }
  auto coll = (*db)->GetCollection("live");
  auto reader = ix::AttachedCollection::Attach(data, "live");
  if (!coll.ok() || !reader.ok()) {
    std::fprintf(stderr, "open: %s %s\n", coll.status().message().c_str(),
                 reader.status().message().c_str());
    return 1;
  }
  // Exact answers: brute force over every row's vector (read back with Get).
  const uint64_t rows = (*coll)->Describe().rows;
  std::vector<float> all(rows * c.dim);
  if (!ReadAllVectors(**coll, rows, c.dim, all)) return 1;
  // Exact answers once, then each efSearch on both paths.
  const std::vector<std::vector<std::string>> truths =
      ExactTopK(c, queries, all, rows);
  const uint64_t index_bytes = DirBytes(data, "hnsw.piece");
  std::printf(
      "attach: %llu rows x %d, index %s, %d queries, k %d\n"
      "| efSearch | writer-side recall@%d | p50 ms | p99 ms | attached "
      "recall@%d | p50 ms | p99 ms | reader p50 / writer p50 |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|\n",
      static_cast<unsigned long long>(rows), c.dim, c.index.c_str(), c.queries,
      c.k, c.k, c.k);
  for (const int ef : c.efs) {
    o.ef_search = ef;
    if (!CompareAtEf(c, **coll, **reader, queries, truths, o)) return 1;
  }
  std::printf(
      "reader RSS %.1f MiB after %d searches (%.1f MiB before attaching; "
      "private %.1f MiB, mapped files %.1f MiB); HNSW piece files %.1f MiB "
      "(what a private graph copy would cost)\n",
      rss[1] / 1024.0, c.queries, rss[0] / 1024.0, rss[2] / 1024.0,
      rss[3] / 1024.0, index_bytes / 1048576.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Config c = Parse(argc, argv);
  if (c.mode == "writers") return Writers(c);
  if (c.mode == "kill") return Kill(c);
  if (c.mode == "attach") return Attach(c);
  std::fprintf(stderr,
               "usage: live_index_bench writers|kill|attach --zerovec Z "
               "--rows N [--dim 384] [--index hnsw] [--clients 8] "
               "[--seconds 10] [--rounds 2] [--batch 128] [--queries 200] "
               "[--work DIR]\n");
  return 2;
}
