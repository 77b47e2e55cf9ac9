// The C++ side of bench/query_paths.sh: one k=10 search at a time over a flat
// collection, through (a) gRPC on loopback against an in-process
// service::Server (the code `zerovec serve` runs) and (b) an
// index::AttachedCollection in the same process (what `zerovec attach` uses).
// Writes the base and query vectors as raw float32 so bench/query_path_faiss.py
// searches the same data with Debian's python3-faiss.
//
//   query_path_bench --dir DIR [--rows 100000] [--dim 384] [--queries 1000]
//                    [--runs 5] [--warmup 200] [--k 10] [--out JSON]
//
// One run sends every query once, sequentially (one client, closed loop); a
// run gives p50/p99 of the per-query latency and QPS = queries / run time. The
// runs of (a) and (b) alternate; the figures are medians over the runs.
#include <grpcpp/grpcpp.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "index/collection.h"
#include "index/test_util.h"
#include "service/server.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string Arg(int argc, char** argv, const std::string& name,
                const std::string& def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == "--" + name) return argv[i + 1];
  return def;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double pos = p * (v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

struct RunStats {
  double p50_us, p99_us, qps;
};

// Times search(i) for every query i; `ids` gets the top-k row numbers.
template <typename F>
RunStats TimeRun(size_t nq, F&& search) {
  std::vector<double> lat(nq);
  const auto start = Clock::now();
  for (size_t i = 0; i < nq; ++i) {
    const auto t0 = Clock::now();
    search(i);
    lat[i] =
        std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  const double total =
      std::chrono::duration<double>(Clock::now() - start).count();
  return {Percentile(lat, 0.5), Percentile(lat, 0.99), nq / total};
}

void WriteRaw(const std::filesystem::path& p, const float* data, size_t n) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data),
            static_cast<std::streamsize>(n * sizeof(float)));
}

int Die(const std::string& what) {
  std::fprintf(stderr, "query_path_bench: %s\n", what.c_str());
  return 1;
}

// Writes `rows` rows of `base` into a new Flat collection "bench" at `data`.
zv::Status LoadFlatCollection(const std::filesystem::path& data, uint32_t dim,
                              size_t rows, const float* base) {
  auto db = zv::index::Database::Open(data);
  if (!db.ok()) return db.status();
  zv::index::CollectionOptions opt;
  opt.dim = dim;
  opt.index.descriptor = "Flat";
  auto coll = (*db)->CreateCollection("bench", opt);
  if (!coll.ok()) return coll.status();
  const size_t step = 4096;
  for (size_t i = 0; i < rows; i += step) {
    const size_t m = std::min(step, rows - i);
    std::vector<zv::index::Record> recs(m);
    for (size_t j = 0; j < m; ++j) recs[j].id = std::to_string(i + j);
    auto s = (*coll)->Upsert(recs, {base + i * dim, m * dim});
    if (!s.ok()) return s;
  }
  return zv::OkStatus();
}

// `runs` timed passes of each path: gRPC, attach, attach on one OpenMP thread
// (matching a one-query faiss search, which runs on one thread).
template <typename G, typename A>
void TimeRuns(int runs, size_t nq, int threads, G& grpc_search,
              A& attach_search, std::vector<RunStats>& g,
              std::vector<RunStats>& a, std::vector<RunStats>& a1) {
  for (int r = 0; r < runs; ++r) {
    g.push_back(TimeRun(nq, grpc_search));
    a.push_back(TimeRun(nq, attach_search));
    omp_set_num_threads(1);
    a1.push_back(TimeRun(nq, attach_search));
    omp_set_num_threads(threads);
    std::fprintf(stderr,
                 "run %d: grpc p50 %.0f us p99 %.0f us %.0f qps | attach p50 "
                 "%.0f us p99 %.0f us %.0f qps | attach 1 thread p50 %.0f us\n",
                 r, g.back().p50_us, g.back().p99_us, g.back().qps,
                 a.back().p50_us, a.back().p99_us, a.back().qps,
                 a1.back().p50_us);
  }
}

// Medians over runs, as a JSON object.
std::string Summary(const std::vector<RunStats>& v) {
  std::vector<double> p50, p99, qps;
  for (const auto& s : v) {
    p50.push_back(s.p50_us);
    p99.push_back(s.p99_us);
    qps.push_back(s.qps);
  }
  std::ostringstream o;
  o << "{\"p50_us\":" << Median(p50) << ",\"p99_us\":" << Median(p99)
    << ",\"qps\":" << Median(qps) << ",\"runs\":" << v.size() << "}";
  return o.str();
}

void WriteIds(std::ofstream& out,
              const std::vector<std::vector<int64_t>>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    out << (i ? "," : "") << "[";
    for (size_t j = 0; j < ids[i].size(); ++j)
      out << (j ? "," : "") << ids[i][j];
    out << "]";
  }
}

// The summary bench/query_paths.sh reads: medians per path, then the attach
// path's ids per query.
void WriteJson(const std::string& out_path, size_t rows, uint32_t dim,
               size_t nq, int k, int threads, const std::vector<RunStats>& g,
               const std::vector<RunStats>& a, const std::vector<RunStats>& a1,
               size_t same, const std::vector<std::vector<int64_t>>& ids) {
  std::ofstream out(out_path);
  out << "{\"rows\":" << rows << ",\"dim\":" << dim << ",\"queries\":" << nq
      << ",\"k\":" << k << ",\"omp_threads\":" << threads
      << ",\"grpc\":" << Summary(g) << ",\"attach\":" << Summary(a)
      << ",\"attach_1thread\":" << Summary(a1)
      << ",\"grpc_attach_same_topk\":" << same << ",\"ids\":[";
  WriteIds(out, ids);
  out << "]}\n";
  out.close();
}

// Fresh `dir` holding base.f32 and queries.f32 of embedding-like data
// (clustered, normalised); returns rows + nq vectors, the queries last.
std::vector<float> MakeData(const std::filesystem::path& dir, size_t rows,
                            size_t nq, uint32_t dim) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<float> all = zv::index::testing::LatentClustered(
      rows, nq, dim, /*clusters=*/200, /*latent=*/32, /*seed=*/20261202);
  WriteRaw(dir / "base.f32", all.data(), rows * dim);
  WriteRaw(dir / "queries.f32", all.data() + rows * dim, nq * dim);
  return all;
}

grpc::Status SearchOverGrpc(zerovec::v1::ZeroVec::Stub& stub,
                            const float* query, uint32_t dim, int k,
                            zerovec::v1::SearchResponse* resp) {
  zerovec::v1::SearchRequest req;
  req.set_collection("bench");
  req.set_k(k);
  req.mutable_query()->mutable_vector()->mutable_values()->Add(query,
                                                               query + dim);
  grpc::ClientContext ctx;
  return stub.Search(&ctx, req, resp);
}

// One search of query i over each path, keeping the top-k row numbers; the
// first failure is printed and `failed` set, so the timed loops stay simple.
struct QuerySearchers {
  QuerySearchers(zerovec::v1::ZeroVec::Stub& stub,
                 zv::index::AttachedCollection& attached, const float* queries,
                 uint32_t dim, int k, size_t nq)
      : stub(stub),
        attached(attached),
        queries(queries),
        dim(dim),
        k(k),
        grpc_ids(nq),
        attach_ids(nq) {
    sopt.k = k;
  }

  void Grpc(size_t i) {
    zerovec::v1::SearchResponse resp;
    grpc::Status s = SearchOverGrpc(stub, queries + i * dim, dim, k, &resp);
    if (!s.ok()) {
      if (!failed)
        std::fprintf(stderr, "grpc: %s\n", s.error_message().c_str());
      failed = true;
      return;
    }
    auto& ids = grpc_ids[i];
    ids.clear();
    for (const auto& h : resp.hits()) ids.push_back(std::stoll(h.id()));
  }

  void Attach(size_t i) {
    auto r = attached.Search({queries + i * dim, dim}, sopt);
    if (!r.ok()) {
      if (!failed)
        std::fprintf(stderr, "attach: %s\n", r.status().ToString().c_str());
      failed = true;
      return;
    }
    auto& ids = attach_ids[i];
    ids.clear();
    for (const auto& h : (*r)[0]) ids.push_back(std::stoll(h.id));
  }

  zerovec::v1::ZeroVec::Stub& stub;
  zv::index::AttachedCollection& attached;
  const float* queries;
  uint32_t dim;
  int k;
  zv::index::SearchOptions sopt;
  std::vector<std::vector<int64_t>> grpc_ids, attach_ids;
  bool failed = false;
};

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir = Arg(argc, argv, "dir", "");
  if (dir.empty()) {
    std::fprintf(stderr,
                 "usage: %s --dir DIR [--rows N] [--dim D] [--queries Q] "
                 "[--runs R] [--warmup W] [--k K] [--out JSON]\n",
                 argv[0]);
    return 2;
  }
  const size_t rows = std::stoul(Arg(argc, argv, "rows", "100000"));
  const uint32_t dim = std::stoul(Arg(argc, argv, "dim", "384"));
  const size_t nq = std::stoul(Arg(argc, argv, "queries", "1000"));
  const int runs = std::stoi(Arg(argc, argv, "runs", "5"));
  const size_t warmup = std::stoul(Arg(argc, argv, "warmup", "200"));
  const int k = std::stoi(Arg(argc, argv, "k", "10"));
  const std::string out_path =
      Arg(argc, argv, "out", (dir / "cpp.json").string());

  // Embedding-like data: clustered, normalised; the last nq rows are queries.
  const std::vector<float> all = MakeData(dir, rows, nq, dim);
  const float* base = all.data();
  const float* queries = all.data() + rows * dim;

  const std::filesystem::path data = dir / "data";
  if (zv::Status s = LoadFlatCollection(data, dim, rows, base); !s.ok())
    return Die(s.ToString());

  zv::service::ServerOptions so;
  so.data_dir = data;
  so.listen = "127.0.0.1:0";
  auto server = zv::service::Server::Start(so);
  if (!server.ok()) return Die(server.status().ToString());
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                          grpc::InsecureChannelCredentials());
  auto stub = zerovec::v1::ZeroVec::NewStub(channel);

  auto attached = zv::index::AttachedCollection::Attach(data, "bench");
  if (!attached.ok()) return Die(attached.status().ToString());
  if ((*attached)->Describe().rows != rows) return Die("attached row count");

  QuerySearchers searchers{*stub, **attached, queries, dim, k, nq};
  auto grpc_search = [&](size_t i) { searchers.Grpc(i); };
  auto attach_search = [&](size_t i) { searchers.Attach(i); };

  const size_t w = std::min(warmup, nq);
  for (size_t i = 0; i < w; ++i) {
    grpc_search(i);
    attach_search(i);
  }
  // (b1): the same attach path with one OpenMP thread, matching a one-query
  // faiss search (which runs on one thread).
  const int threads = omp_get_max_threads();
  std::vector<RunStats> g, a, a1;
  TimeRuns(runs, nq, threads, grpc_search, attach_search, g, a, a1);
  if (searchers.failed) return Die("a search failed");
  size_t same = 0;
  for (size_t i = 0; i < nq; ++i)
    same += searchers.grpc_ids[i] == searchers.attach_ids[i];

  WriteJson(out_path, rows, dim, nq, k, threads, g, a, a1, same,
            searchers.attach_ids);
  attached->reset();
  (*server)->Shutdown(std::chrono::system_clock::now());
  return 0;
}
