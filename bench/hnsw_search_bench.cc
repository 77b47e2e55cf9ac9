// HNSW search at matched recall (issue 21): ZeroVec's in-place HNSW (the
// writer's AnnIndex over segment rows, as a collection holds it) vs faiss
// IndexHNSWFlat vs hnswlib, on the same rows, same M and efConstruction, every
// build and batch on the same OpenMP threads. For each engine: build time,
// index-owned memory (ZeroVec: the graph files; the peers: graph + their copy
// of the vectors), an efSearch sweep (recall@10, latency of one query, QPS of
// a batch), and at recall@10 0.90 / 0.95 / 0.99 the smallest ef reaching it
// with latency and QPS ratios against each peer.
//
// ZeroVec rows arrive as upserts would (batches of --batch rows, pieces of
// --interval rows built in the background), then the index is sealed (the
// tail becomes a piece; with --merge_to_one every piece one graph, timed
// apart). --pieces_too sweeps the pieces too before the merge. --bulk is
// `zerovec build`'s path: the index is deferred during the load (no live
// graph, no pieces) and the seal builds the one graph once (implies
// --merge_to_one; build time = load + seal).
//
//   bazel build //bench:hnsw_search_bench
//   bazel-bin/bench/hnsw_search_bench --rows=100000 --queries=500
//     [--dim=384] [--clusters=1000] [--latent=16] [--m=32] [--efc=100]
//     [--threads=N]
//     [--interval=20000] [--batch=10000] [--merge_to_one] [--pieces_too]
//     [--bulk] [--efs=10,16,32,...]
//     [--skip_faiss] [--skip_hnswlib] [--build_beam=float|bf16]
//     [--build_prefetch=N] [--build_order=BITS[:RANDOM_FRACTION[:STRIPES]]]
//     [--search_prefetch=N,...]
//     [--base=X.npy --query_file=Q.npy]
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <hnswlib/hnswlib.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/ef_list.h"
#include "index/ann_index.h"
#include "index/distance.h"
#include "index/flat_index.h"
#include "index/hnsw_pieces.h"
#include "index/hnsw_search.h"
#include "index/test_util.h"
#include "shm/segment.h"
#include "tools/vector_file.h"

extern "C" void openblas_set_num_threads(int);

namespace zv::index {
namespace {

constexpr int kK = 10;
// The efSearch sweep (--efs=A,B,... replaces it; real embeddings need
// wider beams for recall 0.99).
std::vector<int> ef_sweep = {10, 12, 16,  20,  24,  32,  48,
                             64, 96, 128, 160, 192, 256, 512};
constexpr double kTargets[] = {0.90, 0.95, 0.99};

struct Flags {
  size_t rows = 100000, queries = 500;
  uint32_t dim = 384;
  int clusters = 1000, latent = 16, m = 32, efc = kHnswEfConstruction,
      threads = 0;
  uint64_t interval = kDefaultPieceInterval;
  size_t batch = 10000;
  bool merge_to_one = false, pieces_too = false, bulk = false;
  bool skip_faiss = false, skip_hnswlib = false;
  bool bf16_build = PieceOptions{}.bf16_build;  // ZeroVec's build beam rows
  int build_prefetch = PieceOptions{}.build_prefetch_rows;
  int order_bits = PieceOptions{}.build_order_bits;
  double order_random = PieceOptions{}.build_order_random_fraction;
  int order_stripes = PieceOptions{}.build_order_stripes;
  // Search prefetch depths: ZeroVec's graph is swept at each (one engine a
  // depth, the first the main one).
  std::vector<int> search_prefetch = {SearchPrefetchRows()};
  std::string base_file, query_file;
};

double Seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

double Recall(const std::vector<int64_t>& got,
              const std::vector<int64_t>& truth, size_t nq) {
  size_t hits = 0;
  for (size_t q = 0; q < nq; ++q)
    for (int i = 0; i < kK; ++i)
      for (int j = 0; j < kK; ++j)
        hits += got[q * kK + i] >= 0 && got[q * kK + i] == truth[q * kK + j];
  return static_cast<double>(hits) / (nq * kK);
}

// Searches nq queries (row-major, `dim` or the engine's own padding) at one
// ef into labels (nq x k).
using SearchFn =
    std::function<void(int ef, size_t nq, size_t first, int64_t* labels)>;

struct Point {
  int ef = 0;
  double recall = 0, latency_ms = 0, qps = 0;
};
struct Engine {
  std::string name;
  double build_s = 0, memory_mb = 0;
  std::string note;
  std::vector<Point> sweep;
  SearchFn search;             // until swept
  std::shared_ptr<void> hold;  // the index `search` reads
};

// Latency: one query at a time on one thread, best of three passes; QPS: the
// whole batch on every thread, best of three passes of >= 0.2 s.
Point Measure(int ef, size_t nq, const SearchFn& search,
              const std::vector<int64_t>& truth) {
  std::vector<int64_t> labels(nq * kK);
  Point p{ef};
  search(ef, 1, 0, labels.data());  // warm
  // One query on one thread, as a server thread answers a request (faiss
  // 1.7.3 opens an OpenMP region for a single query too: each thread
  // allocates a visited table of ntotal bytes and waits at a barrier).
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  // Best of three passes: the machine is shared, a pass can lose its core.
  p.latency_ms = 1e30;
  for (int pass = 0; pass < 3; ++pass) {
    p.latency_ms =
        std::min(p.latency_ms, 1000 * Seconds([&] {
                                 for (size_t q = 0; q < nq; ++q)
                                   search(ef, 1, q, labels.data() + q * kK);
                               }) / nq);
  }
  omp_set_num_threads(threads);
  p.recall = Recall(labels, truth, nq);
  // QPS: best of three passes, each repeating the batch for >= 0.2 s (one
  // batch of 500 queries on 16 threads lasts ~10 ms: thread wake-ups and one
  // lost core swung a single batch 2-4x).
  for (int pass = 0; pass < 3; ++pass) {
    size_t done = 0;
    const double s = Seconds([&] {
      const auto t0 = std::chrono::steady_clock::now();
      do {
        search(ef, nq, 0, labels.data());
        done += nq;
      } while (std::chrono::steady_clock::now() - t0 <
               std::chrono::milliseconds(200));
    });
    p.qps = std::max(p.qps, static_cast<double>(done) / s);
  }
  return p;
}

// Every engine at one ef, then the next ef: side by side in time, so a
// change in the machine's load hits all of them alike.
void SweepAll(const std::vector<Engine*>& engines, size_t nq,
              const std::vector<int64_t>& truth) {
  for (int ef : ef_sweep) {
    for (Engine* e : engines) {
      const Point p = Measure(ef, nq, e->search, truth);
      std::printf("progress: %s ef %d recall@10 %.4f %.3f ms %.0f QPS\n",
                  e->name.c_str(), ef, p.recall, p.latency_ms, p.qps);
      std::fflush(stdout);
      e->sweep.push_back(p);
    }
  }
}

const Point* AtRecall(const Engine& e, double target) {
  for (const Point& p : e.sweep)
    if (p.recall >= target) return &p;
  return nullptr;
}

struct Data {
  std::vector<float> base, queries;  // dim-wide
  std::vector<int64_t> truth;
};

bool LoadData(Flags* f, Data* d) {
  if (f->base_file.empty()) {
    std::vector<float> all = testing::LatentClustered(
        f->rows, f->queries, f->dim, f->clusters, f->latent, 7);
    d->base.assign(all.begin(), all.begin() + f->rows * f->dim);
    d->queries.assign(all.begin() + f->rows * f->dim, all.end());
  } else {
    auto base = tools::VectorFile::Open(f->base_file);
    auto query = tools::VectorFile::Open(f->query_file);
    if (!base.ok() || !query.ok() || (*base)->dim() != (*query)->dim()) {
      std::fprintf(stderr, "bad --base / --query_file\n");
      return false;
    }
    f->dim = (*base)->dim();
    f->rows = std::min<size_t>(f->rows, (*base)->rows());
    f->queries = std::min<size_t>(f->queries, (*query)->rows());
    d->base.resize(f->rows * f->dim);
    d->queries.resize(f->queries * f->dim);
    if (!(*base)->CopyRows(0, f->rows, d->base.data()).ok() ||
        !(*query)->CopyRows(0, f->queries, d->queries.data()).ok())
      return false;
  }
  faiss::IndexFlatIP flat(f->dim);
  flat.add(f->rows, d->base.data());
  d->truth.resize(f->queries * kK);
  std::vector<float> dist(f->queries * kK);
  openblas_set_num_threads(omp_get_max_threads());
  flat.search(f->queries, d->queries.data(), kK, dist.data(), d->truth.data());
  openblas_set_num_threads(1);
  return true;
}

// ZeroVec: rows written to a segment batch by batch, the writer's HNSW index
// told of each commit (as a collection does), then sealed (AnnIndex::Flush).
std::vector<Engine> RunZeroVec(const Flags& f, const Data& d,
                               const std::filesystem::path& dir) {
  std::vector<Engine> out;
  shm::SegmentOptions so;
  so.dim = f.dim;
  auto seg = shm::Writer::Create(dir, so);
  if (!seg.ok() || !(*seg)->Reserve(f.rows).ok()) std::abort();
  struct Holder {
    std::unique_ptr<shm::Writer> w;
    std::unique_ptr<AnnIndex> ann;  // destroyed before the segment
    std::vector<float> padded;
  };
  auto h = std::make_shared<Holder>();
  h->w = std::move(seg).value();
  shm::Writer& w = *h->w;
  const size_t stride = w.info().row_stride;
  h->padded.assign(f.queries * stride, 0.f);
  for (size_t q = 0; q < f.queries; ++q)
    std::memcpy(&h->padded[q * stride], &d.queries[q * f.dim], 4 * f.dim);
  auto opened = OpenHnswIndex(f.m, w, dir);
  if (!opened.ok()) std::abort();
  h->ann = std::move(opened).value();
  AnnIndex* ann = h->ann.get();
  if (f.bulk) ann->DeferIndexing();
  const double load_s = Seconds([&] {
    for (size_t first = 0; first < f.rows; first += f.batch) {
      const size_t n = std::min(f.batch, f.rows - first);
      while (!ann->AdmitWrite(std::chrono::seconds(10)).ok()) {
      }
      for (size_t r = first; r < first + n; ++r)
        std::memcpy(w.MutableRow(r), &d.base[r * f.dim], 4 * f.dim);
      if (!w.Commit(first + n).ok() || !ann->Update(first + n).ok())
        std::abort();
    }
    ann->SetBuildThreads(omp_get_max_threads());
    while (!ann->WaitIdle(std::chrono::minutes(10))) {
    }
  });
  const SearchFn search = [h, rows = f.rows](int ef, size_t nq, size_t first,
                                             int64_t* labels) {
    const shm::Writer& w = *h->w;
    const size_t stride = w.info().row_stride;
    const std::vector<float>& padded = h->padded;
    AnnIndex* ann = h->ann.get();
    AnnSearchParams p;
    p.hnsw_ef_search = ef;
    TopK top(nq, kK, w.info().metric);
    uint64_t covered = 0;
    if (!ann->Search(&padded[first * stride], nq, nullptr, p, rows, &top,
                     &covered)
             .ok())
      std::abort();
    // Rows the index did not cover (a live graph's unpublished rows): none
    // after sealing; exact otherwise, as a collection would.
    if (covered < rows)
      FlatSearch(w, covered, rows, &padded[first * stride], nq, nullptr, &top);
    std::memcpy(labels, top.rows.data(), nq * kK * sizeof(int64_t));
  };
  if ((f.pieces_too || !f.merge_to_one) && !f.bulk) {
    Engine e{"ZeroVec HNSW" + std::to_string(f.m) + " (in place, " +
             std::to_string(ann->PieceCount()) + " pieces + live graph)"};
    e.build_s = load_s;
    e.memory_mb = ann->MemoryBytes() / 1e6;
    std::printf("progress: %s built in %.1f s\n", e.name.c_str(), load_s);
    if (!f.merge_to_one) {
      // Sealed without merging: the tail becomes a piece.
      e.build_s += Seconds([&] {
        if (!ann->Flush(/*one_graph=*/false).ok()) std::abort();
      });
      e.name = "ZeroVec HNSW" + std::to_string(f.m) + " (in place, " +
               std::to_string(ann->PieceCount()) + " pieces, sealed)";
      e.memory_mb = ann->MemoryBytes() / 1e6;
    }
    e.search = search;
    e.hold = h;
    // Swept now: sealing with merge_to_one changes this index.
    if (f.merge_to_one) SweepAll({&e}, f.queries, d.truth);
    out.push_back(std::move(e));
  }
  if (f.merge_to_one) {
    const size_t pieces = ann->PieceCount();
    const double seal_s = Seconds([&] {
      if (!ann->Flush(/*one_graph=*/true).ok()) std::abort();
    });
    Engine e{"ZeroVec HNSW" + std::to_string(f.m) + " (in place, " +
             (f.bulk ? "bulk load + one graph)"
                     : "merge_to_one: " + std::to_string(ann->PieceCount()) +
                           " graph)")};
    e.build_s = load_s + seal_s;
    e.note = "load " + std::to_string(load_s).substr(0, 5) + " s (" +
             std::to_string(pieces) + " pieces) + seal/merge " +
             std::to_string(seal_s).substr(0, 5) + " s";
    e.memory_mb = ann->MemoryBytes() / 1e6;
    std::printf("progress: %s: %s\n", e.name.c_str(), e.note.c_str());
    e.search = search;
    e.hold = h;
    out.push_back(std::move(e));
  }
  return out;
}

Engine RunFaiss(const Flags& f, const Data& d) {
  auto held = std::make_shared<faiss::IndexHNSWFlat>(
      f.dim, f.m, faiss::METRIC_INNER_PRODUCT);
  faiss::IndexHNSWFlat& hf = *held;
  hf.hnsw.efConstruction = f.efc;
  Engine e{"faiss IndexHNSWFlat M" + std::to_string(f.m) + " (own copy)"};
  e.build_s = Seconds([&] { hf.add(f.rows, d.base.data()); });
  const auto* storage = dynamic_cast<const faiss::IndexFlatCodes*>(hf.storage);
  e.memory_mb = (storage->codes.size() + hf.hnsw.neighbors.size() * 4 +
                 hf.hnsw.offsets.size() * 8 + hf.hnsw.levels.size() * 4) /
                1e6;
  std::printf("progress: %s built in %.1f s\n", e.name.c_str(), e.build_s);
  e.hold = held;
  e.search = [&hf, &d, dim = f.dim](int ef, size_t nq, size_t first,
                                    int64_t* labels) {
    // faiss 1.7.3 sizes its queue by hnsw.efSearch and caps the
    // per-search value by it: set both.
    hf.hnsw.efSearch = ef;
    faiss::SearchParametersHNSW p;
    p.efSearch = ef;
    std::vector<float> dist(nq * kK);
    hf.search(nq, &d.queries[first * dim], kK, dist.data(), labels, &p);
  };
  return e;
}

Engine RunHnswlib(const Flags& f, const Data& d) {
  struct Holder {
    explicit Holder(const Flags& f)
        : space(f.dim), index(&space, f.rows, f.m, f.efc) {}
    hnswlib::InnerProductSpace space;
    hnswlib::HierarchicalNSW<float> index;
  };
  auto held = std::make_shared<Holder>(f);
  hnswlib::HierarchicalNSW<float>& index = held->index;
  Engine e{"hnswlib M" + std::to_string(f.m) + " (own copy)"};
  e.build_s = Seconds([&] {
#pragma omp parallel for schedule(dynamic, 256)
    for (size_t i = 0; i < f.rows; ++i)
      index.addPoint(&d.base[i * f.dim], static_cast<hnswlib::labeltype>(i));
  });
  double bytes = index.max_elements_ * index.size_data_per_element_ +
                 index.max_elements_ * sizeof(void*);
  for (size_t i = 0; i < f.rows; ++i)
    bytes += index.size_links_per_element_ * index.element_levels_[i];
  e.memory_mb = bytes / 1e6;
  std::printf("progress: %s built in %.1f s\n", e.name.c_str(), e.build_s);
  e.hold = held;
  e.search = [&index, &d, dim = f.dim](int ef, size_t nq, size_t first,
                                       int64_t* labels) {
    index.setEf(static_cast<size_t>(ef));
#pragma omp parallel for if (nq > 1)
    for (size_t i = 0; i < nq; ++i) {
      auto top = index.searchKnn(&d.queries[(first + i) * dim], kK);
      for (int j = kK - 1; j >= 0; --j) {  // pops worst first
        labels[i * kK + j] = -1;
        if (!top.empty()) {
          labels[i * kK + j] = static_cast<int64_t>(top.top().second);
          top.pop();
        }
      }
    }
  };
  return e;
}

void Print(const Flags& f, const std::vector<Engine>& engines) {
  std::printf(
      "\n%zu rows x %u, %zu queries, k %d, M %d, efConstruction %d, %d "
      "threads\n\n| engine | build s | index-owned memory MB | note |\n"
      "|---|---|---|---|\n",
      f.rows, f.dim, f.queries, kK, f.m, f.efc, omp_get_max_threads());
  for (const Engine& e : engines)
    std::printf("| %s | %.1f | %.1f | %s |\n", e.name.c_str(), e.build_s,
                e.memory_mb, e.note.c_str());
  std::printf("\n| ef |");
  for (const Engine& e : engines)
    std::printf(" %s recall@10 | ms | QPS |", e.name.c_str());
  std::printf("\n|---|");
  for (size_t i = 0; i < engines.size(); ++i) std::printf("---|---|---|");
  std::printf("\n");
  for (size_t i = 0; i < ef_sweep.size(); ++i) {
    std::printf("| %d |", ef_sweep[i]);
    for (const Engine& e : engines)
      std::printf(" %.4f | %.3f | %.0f |", e.sweep[i].recall,
                  e.sweep[i].latency_ms, e.sweep[i].qps);
    std::printf("\n");
  }
  // Each ZeroVec variant against each peer at matched recall.
  for (const Engine& zv : engines) {
    if (zv.name.rfind("ZeroVec", 0) != 0) continue;
    for (const Engine& peer : engines) {
      if (peer.name.rfind("ZeroVec", 0) == 0) continue;
      std::printf(
          "\n%s vs %s\n\n| recall@10 >= | ZeroVec ef | ms | QPS | peer ef | "
          "ms | QPS | latency ratio (peer / ZeroVec) | QPS ratio (ZeroVec / "
          "peer) |\n|---|---|---|---|---|---|---|---|---|\n",
          zv.name.c_str(), peer.name.c_str());
      for (double t : kTargets) {
        const Point* a = AtRecall(zv, t);
        const Point* b = AtRecall(peer, t);
        if (!a || !b) {
          std::printf("| %.2f | %s | - | - | %s | - | - | - | - |\n", t,
                      a ? "" : "not reached", b ? "" : "not reached");
          continue;
        }
        std::printf(
            "| %.2f | %d | %.3f | %.0f | %d | %.3f | %.0f | %.2f | %.2f |\n", t,
            a->ef, a->latency_ms, a->qps, b->ef, b->latency_ms, b->qps,
            b->latency_ms / a->latency_ms, a->qps / b->qps);
      }
    }
  }
  std::fflush(stdout);
}

int Main(Flags f) {
  openblas_set_num_threads(1);
  if (f.threads > 0) omp_set_num_threads(f.threads);
  PieceOptions po;
  po.build_threads = omp_get_max_threads();
  po.ef_construction = f.efc;
  po.interval = f.interval;
  po.bf16_build = f.bf16_build;
  po.build_prefetch_rows = f.build_prefetch;
  po.build_order_bits = f.order_bits;
  po.build_order_random_fraction = f.order_random;
  po.build_order_stripes = f.order_stripes;
  SetPieceOptions(po);
  Data d;
  if (!LoadData(&f, &d)) return 1;
  std::printf(
      "%zu x %u rows (%s, latent %d), %zu queries, M %d, efConstruction %d, %d "
      "threads, "
      "interval %llu, batch %zu, merge_to_one %d, bulk %d, build beam %s, "
      "build prefetch %d rows, level-0 order %d bits after %.2f random in %d "
      "stripes (0: one a thread), search prefetch %d rows, search ISA %s\n",
      f.rows, f.dim, f.base_file.empty() ? "LatentClustered" : "files",
      f.latent, f.queries, f.m, f.efc, omp_get_max_threads(),
      static_cast<unsigned long long>(f.interval), f.batch,
      f.merge_to_one ? 1 : 0, f.bulk ? 1 : 0, f.bf16_build ? "bf16" : "float",
      f.build_prefetch, f.order_bits, f.order_random, f.order_stripes,
      f.search_prefetch[0],
      DetectIsa() == Isa::kAvx512 ? "avx512"
      : DetectIsa() == Isa::kAvx2 ? "avx2"
                                  : "portable");
  std::fflush(stdout);
  const auto dir = testing::MakeTempDir("zv-hnsw-search");
  std::vector<Engine> engines = RunZeroVec(f, d, dir);
  {
    // The last ZeroVec engine (the graph as `zerovec build` leaves it) at
    // each search prefetch depth.
    Engine& main_engine = engines.back();
    const SearchFn inner = main_engine.search;
    auto at_depth = [inner](int depth) -> SearchFn {
      return [inner, depth](int ef, size_t nq, size_t first, int64_t* labels) {
        SetSearchPrefetchRows(depth);
        inner(ef, nq, first, labels);
      };
    };
    main_engine.search = at_depth(f.search_prefetch[0]);
    Engine variant = main_engine;  // copied: push_back moves main_engine
    variant.note = "the same graph";
    for (size_t i = 1; i < f.search_prefetch.size(); ++i) {
      Engine e = variant;
      e.name += ", search prefetch " + std::to_string(f.search_prefetch[i]);
      e.search = at_depth(f.search_prefetch[i]);
      engines.push_back(std::move(e));
    }
  }
  if (!f.skip_faiss) engines.push_back(RunFaiss(f, d));
  if (!f.skip_hnswlib) engines.push_back(RunHnswlib(f, d));
  // Everything not swept yet, side by side.
  std::vector<Engine*> pending;
  for (Engine& e : engines)
    if (e.sweep.empty()) pending.push_back(&e);
  SweepAll(pending, f.queries, d.truth);
  for (Engine& e : engines) e.search = nullptr, e.hold.reset();
  Print(f, engines);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace
}  // namespace zv::index

int main(int argc, char** argv) {
  zv::index::Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      return a.compare(0, n, name) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = val("--rows=")) {
      f.rows = std::stoull(v);
    } else if (const char* v = val("--queries=")) {
      f.queries = std::stoull(v);
    } else if (const char* v = val("--dim=")) {
      f.dim = static_cast<uint32_t>(std::stoul(v));
    } else if (const char* v = val("--clusters=")) {
      f.clusters = std::stoi(v);
    } else if (const char* v = val("--latent=")) {
      f.latent = std::stoi(v);
    } else if (const char* v = val("--m=")) {
      f.m = std::stoi(v);
    } else if (const char* v = val("--efc=")) {
      f.efc = std::stoi(v);
    } else if (const char* v = val("--threads=")) {
      f.threads = std::stoi(v);
    } else if (const char* v = val("--interval=")) {
      f.interval = std::stoull(v);
    } else if (const char* v = val("--batch=")) {
      f.batch = std::max<size_t>(1, std::stoull(v));
    } else if (const char* v = val("--base=")) {
      f.base_file = v;
    } else if (const char* v = val("--query_file=")) {
      f.query_file = v;
    } else if (a == "--merge_to_one") {
      f.merge_to_one = true;
    } else if (const char* v = val("--efs=")) {
      if (!zv::bench::ParseEfList(v, &zv::index::ef_sweep)) return 2;
    } else if (a == "--bulk") {
      f.bulk = f.merge_to_one = true;
    } else if (a == "--pieces_too") {
      f.pieces_too = true;
    } else if (a == "--skip_faiss") {
      f.skip_faiss = true;
    } else if (a == "--skip_hnswlib") {
      f.skip_hnswlib = true;
    } else if (const char* v = val("--build_beam=")) {
      if (std::strcmp(v, "float") != 0 && std::strcmp(v, "bf16") != 0) {
        std::fprintf(stderr, "--build_beam: float or bf16, got %s\n", v);
        return 2;
      }
      f.bf16_build = std::strcmp(v, "bf16") == 0;
    } else if (const char* v = val("--build_prefetch=")) {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (end == v || *end != '\0' || n < 1 || n > 64) {
        std::fprintf(stderr, "--build_prefetch: rows 1-64, got %s\n", v);
        return 2;
      }
      f.build_prefetch = static_cast<int>(n);
    } else if (const char* v = val("--search_prefetch=")) {
      if (!zv::bench::ParseIntList("--search_prefetch", v, 1, 64,
                                   &f.search_prefetch))
        return 2;
    } else if (const char* v = val("--build_order=")) {
      // BITS[:RANDOM_FRACTION[:STRIPES]]
      std::vector<std::string> parts;
      for (std::string_view rest = v;;) {
        const size_t colon = rest.find(':');
        parts.emplace_back(rest.substr(0, colon));
        if (colon == std::string_view::npos) break;
        rest.remove_prefix(colon + 1);
      }
      char* bits_end = nullptr;
      char* frac_end = nullptr;
      char* stripes_end = nullptr;
      const long bits = std::strtol(parts[0].c_str(), &bits_end, 10);
      const double frac = parts.size() > 1
                              ? std::strtod(parts[1].c_str(), &frac_end)
                              : f.order_random;
      const long stripes = parts.size() > 2
                               ? std::strtol(parts[2].c_str(), &stripes_end, 10)
                               : f.order_stripes;
      const bool bits_ok =
          !parts[0].empty() && *bits_end == '\0' && bits >= 0 && bits <= 31;
      const bool frac_ok =
          parts.size() < 2 ||
          (!parts[1].empty() && *frac_end == '\0' && frac >= 0 && frac <= 1);
      const bool stripes_ok =
          parts.size() < 3 || (!parts[2].empty() && *stripes_end == '\0' &&
                               stripes >= 0 && stripes <= 1024);
      if (!bits_ok || !frac_ok || !stripes_ok || parts.size() > 3) {
        std::fprintf(
            stderr,
            "--build_order: BITS[:RANDOM_FRACTION[:STRIPES]], bits "
            "0-31, fraction 0-1, stripes 0-1024 (0: one a thread), got %s\n",
            v);
        return 2;
      }
      f.order_bits = static_cast<int>(bits);
      f.order_random = frac;
      f.order_stripes = static_cast<int>(stripes);
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--rows=N] [--queries=N] [--dim=D] "
          "[--clusters=C] [--latent=L] [--m=M] [--efc=N] [--threads=N] "
          "[--interval=N] [--batch=N] [--merge_to_one] "
          "[--pieces_too] [--bulk] [--efs=N,N,...] [--skip_faiss] "
          "[--skip_hnswlib] [--build_beam=float|bf16] [--build_prefetch=N] "
          "[--build_order=BITS[:RANDOM_FRACTION[:STRIPES]]] "
          "[--search_prefetch=N,...] "
          "[--search_prefetch=N,...] "
          "[--base=F --query_file=F]\n",
          argv[0]);
      return 2;
    }
  }
  return zv::index::Main(f);
}
