// Load generator (a benchmark, not a test): a `zerovec serve` child on
// loopback, N concurrent clients mixing Search and Upsert for a fixed duration,
// repeated --runs times against the same server. Per run: QPS, p50/p99/p999
// latency, errors, and the server's RSS before and after (VmRSS from /proc; it
// must not grow run over run). Results: bench/RESULTS.md.
//
//   bazel build -c opt //tools:zerovec //bench:load_gen
//   bazel-bin/bench/load_gen --zerovec bazel-bin/tools/zerovec --clients 16 \
//       --seconds 20 --runs 3 --upsert-percent 20 --preload 20000
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
#include <string>
#include <thread>
#include <vector>

#include "zerovec/v1/zerovec.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
namespace pb = zerovec::v1;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string zerovec = "bazel-bin/tools/zerovec";
  int clients = 16;
  int seconds = 20;
  int runs = 3;
  int upsert_percent = 20;
  int upsert_batch = 8;
  int preload = 20000;
  int dim = 384;
  int k = 10;
  std::string index = "Flat";
};

Config ParseArgs(int argc, char** argv) {
  Config c;
  std::map<std::string, std::string> kv;
  for (int i = 1; i + 1 < argc; i += 2) kv[argv[i]] = argv[i + 1];
  auto geti = [&](const char* k, int& v) {
    if (kv.count(k)) v = std::stoi(kv[k]);
  };
  if (kv.count("--zerovec")) c.zerovec = kv["--zerovec"];
  if (kv.count("--index")) c.index = kv["--index"];
  geti("--clients", c.clients);
  geti("--seconds", c.seconds);
  geti("--runs", c.runs);
  geti("--upsert-percent", c.upsert_percent);
  geti("--upsert-batch", c.upsert_batch);
  geti("--preload", c.preload);
  geti("--dim", c.dim);
  geti("--k", c.k);
  return c;
}

std::vector<float> RandomUnit(std::mt19937_64& rng, int dim) {
  std::normal_distribution<float> n;
  std::vector<float> v(dim);
  double s = 0;
  for (float& x : v) {
    x = n(rng);
    s += x * x;
  }
  for (float& x : v) x = static_cast<float>(x / std::sqrt(s));
  return v;
}

int64_t RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::seconds(10));
  return ctx;
}

std::shared_ptr<grpc::Channel> OwnChannel(int port) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

struct RunResult {
  uint64_t ops = 0, searches = 0, upserts = 0, errors = 0;
  double seconds = 0;
  std::vector<double> latencies_us;
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

RunResult RunOnce(const Config& c, int port, int run,
                  std::atomic<int64_t>* next_id) {
  std::vector<RunResult> per(c.clients);
  std::vector<std::thread> threads;
  const auto end = Clock::now() + std::chrono::seconds(c.seconds);
  for (int t = 0; t < c.clients; ++t) {
    threads.emplace_back([&, t] {
      auto stub = pb::ZeroVec::NewStub(OwnChannel(port));
      std::mt19937_64 rng(run * 1000 + t);
      RunResult& r = per[t];
      r.latencies_us.reserve(1 << 16);
      while (Clock::now() < end) {
        const bool upsert = static_cast<int>(rng() % 100) < c.upsert_percent;
        grpc::Status s;
        const auto t0 = Clock::now();
        if (upsert) {
          pb::UpsertRequest req;
          req.set_collection("load");
          for (int i = 0; i < c.upsert_batch; ++i) {
            pb::Item* item = req.add_items();
            item->set_id("u" + std::to_string(next_id->fetch_add(1)));
            const auto v = RandomUnit(rng, c.dim);
            item->mutable_vector()->Add(v.begin(), v.end());
            item->set_text("load document " + item->id());
          }
          pb::UpsertResponse resp;
          s = stub->Upsert(Ctx().get(), req, &resp);
          ++r.upserts;
        } else {
          pb::SearchRequest req;
          req.set_collection("load");
          const auto v = RandomUnit(rng, c.dim);
          req.mutable_query()->mutable_vector()->mutable_values()->Add(
              v.begin(), v.end());
          req.set_k(c.k);
          req.set_include_documents(true);
          pb::SearchResponse resp;
          s = stub->Search(Ctx().get(), req, &resp);
          ++r.searches;
        }
        r.latencies_us.push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - t0)
                .count());
        ++r.ops;
        if (!s.ok()) ++r.errors;
      }
    });
  }
  const auto start = Clock::now();
  for (auto& th : threads) th.join();
  RunResult total;
  total.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& r : per) {
    total.ops += r.ops;
    total.searches += r.searches;
    total.upserts += r.upserts;
    total.errors += r.errors;
    total.latencies_us.insert(total.latencies_us.end(), r.latencies_us.begin(),
                              r.latencies_us.end());
  }
  return total;
}

// Forks and execs `zerovec serve` on a loopback port it writes to port_file.
pid_t StartServer(const Config& c, const fs::path& dir,
                  const fs::path& port_file) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string data = (dir / "data").string(), pf = port_file.string();
    const std::string log = (dir / "serve.log").string();
    freopen(log.c_str(), "w", stderr);
    execl(c.zerovec.c_str(), c.zerovec.c_str(), "serve", "--data", data.c_str(),
          "--listen", "127.0.0.1:0", "--model", "none", "--port-file",
          pf.c_str(), "--max-concurrent-requests", "1024",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// The port the server wrote, or 0 if none came within 30 s.
int WaitForPort(const fs::path& port_file) {
  int port = 0;
  for (int i = 0; i < 3000 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream(port_file) >> port;
  }
  return port;
}

// Creates the "load" collection and upserts c.preload random rows; false on
// error.
bool CreateAndPreload(pb::ZeroVec::Stub& stub, const Config& c) {
  {
    pb::CreateCollectionRequest req;
    req.set_name("load");
    req.set_dim(c.dim);
    req.set_index(c.index);
    pb::CreateCollectionResponse resp;
    grpc::Status s = stub.CreateCollection(Ctx().get(), req, &resp);
    if (!s.ok()) {
      fprintf(stderr, "create: %s\n", s.error_message().c_str());
      return false;
    }
  }
  std::mt19937_64 rng(7);
  for (int first = 0; first < c.preload; first += 1000) {
    pb::UpsertRequest req;
    req.set_collection("load");
    for (int i = first; i < std::min(c.preload, first + 1000); ++i) {
      pb::Item* item = req.add_items();
      item->set_id("p" + std::to_string(i));
      const auto v = RandomUnit(rng, c.dim);
      item->mutable_vector()->Add(v.begin(), v.end());
      item->set_text("preloaded document " + std::to_string(i));
    }
    pb::UpsertResponse resp;
    if (!stub.Upsert(Ctx().get(), req, &resp).ok()) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const Config c = ParseArgs(argc, argv);
  const fs::path dir =
      fs::temp_directory_path() / ("zv-load-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path port_file = dir / "port";
  const pid_t pid = StartServer(c, dir, port_file);
  const int port = WaitForPort(port_file);
  if (port == 0) {
    fprintf(stderr, "load_gen: the server did not start (%s)\n",
            c.zerovec.c_str());
    kill(pid, SIGKILL);
    return 1;
  }
  auto stub = pb::ZeroVec::NewStub(OwnChannel(port));
  if (!CreateAndPreload(*stub, c)) return 1;
  printf(
      "load_gen: %d clients, %d s a run, %d runs, %d%% upserts (batch %d), "
      "dim %d, k %d, "
      "index %s, preload %d rows\n",
      c.clients, c.seconds, c.runs, c.upsert_percent, c.upsert_batch, c.dim,
      c.k, c.index.c_str(), c.preload);
  printf(
      "| run | ops | QPS | searches | upserts | errors | p50 ms | p99 ms | "
      "p99.9 ms | "
      "server RSS before MiB | after MiB "
      "|\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::atomic<int64_t> next_id{0};
  int failures = 0;
  for (int run = 0; run < c.runs; ++run) {
    const int64_t before = RssKb(pid);
    RunResult r = RunOnce(c, port, run, &next_id);
    const int64_t after = RssKb(pid);
    printf(
        "| %d | %llu | %.0f | %llu | %llu | %llu | %.2f | %.2f | %.2f | %.1f | "
        "%.1f |\n",
        run + 1, static_cast<unsigned long long>(r.ops), r.ops / r.seconds,
        static_cast<unsigned long long>(r.searches),
        static_cast<unsigned long long>(r.upserts),
        static_cast<unsigned long long>(r.errors),
        Percentile(r.latencies_us, 0.5) / 1000,
        Percentile(r.latencies_us, 0.99) / 1000,
        Percentile(r.latencies_us, 0.999) / 1000, before / 1024.0,
        after / 1024.0);
    fflush(stdout);
    failures += r.errors > 0;
  }
  pb::DescribeCollectionRequest dreq;
  dreq.set_name("load");
  pb::CollectionInfo info;
  if (stub->DescribeCollection(Ctx().get(), dreq, &info).ok()) {
    printf("rows at the end: %llu (preload %d + %lld upserted)\n",
           static_cast<unsigned long long>(info.live_rows()), c.preload,
           static_cast<long long>(next_id.load()));
  }
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  fs::remove_all(dir);
  return failures > 0 ? 2 : 0;
}
