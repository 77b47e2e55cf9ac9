// Index benchmark: exact search in place over the segment vs faiss::IndexFlatIP
// holding its own copy, and HNSW in place vs faiss::IndexHNSWFlat and hnswlib
// (both with their own copy; same M 32 and efConstruction): recall@10,
// latency, QPS and index-owned memory. Prints a markdown table. With
// --filter also namespace-filtered searches keeping 1 %, 10 % and 50 % of the
// rows against an exact filtered scan.
//
//   bazel run -c opt //bench:index_bench -- --rows=100000 [--queries=200]
//   [--skip_hnsw] [--skip_faiss_hnsw] [--skip_hnswlib] [--filter]
//   [--efc=N] [--threads=N] [--base=X.npy --query_file=Q.npy]
//   [--interval=N] [--batch=N] [--merge_to_one] [--efs=16,32,...]
// --interval: rows per HNSW piece (PieceOptions::interval); --batch: rows per
// Upsert; --merge_to_one: `zerovec build`'s path: the index is deferred during
// the load and built as one graph at the end (DeferIndexing, then
// FinishIndexing's one_graph), in the build time.
// --base/--query_file: vectors from .npy/.fvecs files (e.g. real embeddings,
// bench/realembed/make_realembed.sh) instead of the synthetic clustered set;
// --dump_npy=DIR writes the vectors used as DIR/base.npy and DIR/queries.npy
// and the exact top 10 as DIR/truth.npy (for bench/lancedb on the same rows).
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <hnswlib/hnswlib.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/ef_list.h"
#include "bench/npy_writer.h"
#include "index/collection.h"
#include "index/collection_impl.h"
#include "index/hnsw_pieces.h"
#include "index/test_util.h"
#include "tools/vector_file.h"

extern "C" void openblas_set_num_threads(int);

namespace zv::index {
namespace {

uint32_t kDim = 384;  // of the data set (a flag or the files)
constexpr int kK = 10;

struct Flags {
  size_t rows = 100000;
  size_t queries = 200;
  bool skip_hnsw = false;
  bool skip_faiss_hnsw = false;  // its build alone is ~8 min at 1M on 2 cores
  bool skip_hnswlib = false;
  bool filter = false;
  int efc = kHnswEfConstruction;  // every HNSW's efConstruction
  int threads = 0;                // OpenMP threads (0: OpenMP's default)
  int clusters = 1000;
  std::string base_file, query_file;
  std::string dump_dir;        // writes base.npy and queries.npy there
  bool serial_insert = false;  // the live graph's pre-issue-21 8-row steps
  uint64_t interval = kDefaultPieceInterval;  // PieceOptions::interval
  size_t batch = 10000;                       // rows per Upsert
  bool merge_to_one = false;                  // seal into one graph at the end
  size_t flat_queries = ~size_t{0};  // queries the exact scans are timed on
  size_t FlatQueries() const { return std::min(queries, flat_queries); }
};

// A namespace per row from a hash of its number: "p01" for 1 % of the rows,
// "p10" for 10 %, "p50" for 50 %, "rest" for the others.
std::string NamespaceOf(size_t row) {
  uint64_t z = row + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  const uint64_t h = (z ^ (z >> 31)) % 100;
  return h < 1 ? "p01" : h < 11 ? "p10" : h < 61 ? "p50" : "rest";
}

double Seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

struct Row {
  std::string name;
  double build_s = 0, recall = 0, latency_ms = 0, qps = 0, memory_mb = 0;
};

double Recall(const std::vector<int64_t>& got,
              const std::vector<int64_t>& truth, size_t nq) {
  size_t hits = 0;
  for (size_t q = 0; q < nq; ++q) {
    for (int i = 0; i < kK; ++i) {
      for (int j = 0; j < kK; ++j)
        hits += got[q * kK + i] >= 0 && got[q * kK + i] == truth[q * kK + j];
    }
  }
  return static_cast<double>(hits) / (nq * kK);
}

// One query at a time (latency) and all at once (throughput) through `search`,
// which fills labels (nq x k) for the given queries.
// One line as soon as an index is built and measured (see RunSweep).
void Progress(const Row& r) {
  std::printf(
      "progress: %s built in %.1f s, %.1f MB index-owned, recall@10 "
      "%.4f at the default ef\n",
      r.name.c_str(), r.build_s, r.memory_mb, r.recall);
  std::fflush(stdout);
}

void Measure(Row* row, size_t nq, const float* queries,
             const std::function<void(size_t, const float*, int64_t*)>& search,
             const std::vector<int64_t>& truth) {
  std::vector<int64_t> labels(nq * kK);
  row->latency_ms = 1000 * Seconds([&] {
                      for (size_t q = 0; q < nq; ++q) {
                        search(1, queries + q * kDim, labels.data() + q * kK);
                      }
                    }) /
                    nq;
  row->recall = Recall(labels, truth, nq);
  row->qps = nq / Seconds([&] { search(nq, queries, labels.data()); });
}

using SearchFn = std::function<void(size_t, const float*, int64_t*)>;

// Searches a collection; maps ids (decimal row numbers) back to labels.
// ef_search 0 = the index default.
SearchFn CollectionSearch(const Collection& c, int ef_search = 0,
                          std::string ns = "") {
  return [&c, ef_search, ns](size_t nq, const float* q, int64_t* labels) {
    SearchOptions o;
    o.k = kK;
    o.ef_search = ef_search;
    if (!ns.empty()) o.filter.ns = ns;
    auto r = c.Search(std::span(q, nq * kDim), o);
    if (!r.ok()) std::abort();
    for (size_t i = 0; i < nq; ++i) {
      for (int j = 0; j < kK; ++j) {
        labels[i * kK + j] = j < static_cast<int>((*r)[i].size())
                                 ? std::stoll((*r)[i][j].id)
                                 : -1;
      }
    }
  };
}

// HNSW at several search widths: recall, latency and QPS of each, so the two
// HNSW indexes can be compared at matched recall rather than at one ef.
// --efs=16,32,... replaces it (the real set needs ef > 512 for 0.99).
std::vector<int> ef_sweep = {16, 32, 64, 128, 256, 512};

struct Sweep {
  std::string name;
  std::vector<Row> points;  // one per ef_sweep entry; name = ef
};

Sweep RunSweep(const std::string& name, size_t nq, const float* queries,
               const std::function<SearchFn(int)>& at_ef,
               const std::vector<int64_t>& truth) {
  Sweep s{name, {}};
  for (int ef : ef_sweep) {
    Row r{std::to_string(ef)};
    Measure(&r, nq, queries, at_ef(ef), truth);
    s.points.push_back(r);
    // As measured, so a run cut short by a time limit still reports.
    std::printf("progress: %s ef %d recall@10 %.4f, %.3f ms, %.0f QPS\n",
                name.c_str(), ef, r.recall, r.latency_ms, r.qps);
    std::fflush(stdout);
  }
  return s;
}

// The cheapest swept point reaching `target` recall (null if none does).
const Row* AtRecall(const Sweep& s, double target) {
  for (const Row& r : s.points)
    if (r.recall >= target) return &r;
  return nullptr;
}

void PrintSweeps(const std::vector<Sweep>& sweeps, size_t nq) {
  if (sweeps.empty()) return;
  std::printf("\nHNSW efSearch sweep (QPS = batch of %zu)\n\n| efSearch |", nq);
  for (const Sweep& s : sweeps)
    std::printf(" %s recall@10 | ms | QPS |", s.name.c_str());
  std::printf("\n|---|");
  for (size_t i = 0; i < sweeps.size(); ++i) std::printf("---|---|---|");
  std::printf("\n");
  for (size_t p = 0; p < ef_sweep.size(); ++p) {
    std::printf("| %d |", ef_sweep[p]);
    for (const Sweep& s : sweeps) {
      const Row& r = s.points[p];
      std::printf(" %.4f | %.3f | %.0f |", r.recall, r.latency_ms, r.qps);
    }
    std::printf("\n");
  }
  // The first sweep (ZeroVec) against each other one.
  for (size_t other = 1; other < sweeps.size(); ++other) {
    const Sweep& zv = sweeps[0];
    const Sweep& peer = sweeps[other];
    std::printf(
        "\nAt matched recall (cheapest swept efSearch reaching the target)\n\n"
        "| recall@10 >= | %s ef | %s ef | latency ratio (%s / %s) | QPS ratio "
        "(%s / %s) |\n|---|---|---|---|---|\n",
        zv.name.c_str(), peer.name.c_str(), peer.name.c_str(), zv.name.c_str(),
        zv.name.c_str(), peer.name.c_str());
    for (double target : {0.90, 0.95, 0.99}) {
      const Row* a = AtRecall(zv, target);
      const Row* b = AtRecall(peer, target);
      if (a == nullptr || b == nullptr) {
        std::printf("| %.2f | %s | %s | - | - |\n", target,
                    a ? a->name.c_str() : "not reached",
                    b ? b->name.c_str() : "not reached");
        continue;
      }
      std::printf("| %.2f | %s | %s | %.2f | %.2f |\n", target, a->name.c_str(),
                  b->name.c_str(), b->latency_ms / a->latency_ms,
                  a->qps / b->qps);
    }
  }
}

// hnswlib (the reference HNSW implementation), built on every OpenMP thread
// with its own copy of the vectors; M and efConstruction as ZeroVec's.
void RunHnswlib(const Flags& f, const std::vector<float>& base,
                const float* queries, const std::vector<int64_t>& truth,
                std::vector<Row>* rows, std::vector<Sweep>* sweeps) {
  hnswlib::InnerProductSpace space(kDim);
  hnswlib::HierarchicalNSW<float> index(&space, f.rows, /*M=*/32, f.efc);
  Row row{"hnswlib M32 (own copy)"};
  row.build_s = Seconds([&] {
#pragma omp parallel for schedule(dynamic, 256)
    for (size_t i = 0; i < f.rows; ++i) {
      index.addPoint(base.data() + i * kDim,
                     static_cast<hnswlib::labeltype>(i));
    }
  });
  row.memory_mb = (index.max_elements_ * index.size_data_per_element_ +
                   index.max_elements_ * sizeof(void*)) /
                  1e6;
  for (size_t i = 0; i < f.rows; ++i) {
    if (index.element_levels_[i] > 0)
      row.memory_mb +=
          index.size_links_per_element_ * index.element_levels_[i] / 1e6;
  }
  const auto at_ef = [&index](int ef) -> SearchFn {
    return [&index, ef](size_t nq, const float* q, int64_t* labels) {
      index.setEf(static_cast<size_t>(ef));
#pragma omp parallel for if (nq > 1)
      for (size_t i = 0; i < nq; ++i) {
        auto top = index.searchKnn(q + i * kDim, kK);
        for (int j = kK - 1; j >= 0; --j) {  // the queue pops worst first
          labels[i * kK + j] = -1;
          if (!top.empty()) {
            labels[i * kK + j] = static_cast<int64_t>(top.top().second);
            top.pop();
          }
        }
      }
    };
  };
  Measure(&row, f.queries, queries, at_ef(kDefaultEfSearch), truth);
  Progress(row);
  rows->push_back(row);
  sweeps->push_back(RunSweep("hnswlib", f.queries, queries, at_ef, truth));
}

// Upserts as a client would: UNAVAILABLE (the HNSW index is more than
// max_backlog rows behind the writes) is retried after a pause.
void UpsertRetrying(Collection& c, const std::vector<Record>& recs,
                    std::span<const float> vectors) {
  for (;;) {
    Status s = c.Upsert(recs, vectors);
    if (s.ok()) return;
    if (s.code() != StatusCode::kUnavailable) {
      std::fprintf(stderr, "upsert: %s\n", s.message().c_str());
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::shared_ptr<Collection> BuildCollection(Database& db,
                                            const std::string& descriptor,
                                            const std::vector<float>& data,
                                            size_t rows, size_t batch,
                                            bool seal) {
  CollectionOptions o;
  o.dim = kDim;
  o.index.descriptor = descriptor;
  auto c = db.CreateCollection(descriptor == "Flat" ? "flat" : "hnsw", o);
  if (!c.ok()) std::abort();
  // Sealed at the end: deferred during the load, as `zerovec build` does.
  if (seal) (*c)->DeferIndexing();
  const size_t kBatch = std::max<size_t>(batch, 1);
  for (size_t first = 0; first < rows; first += kBatch) {
    const size_t n = std::min(kBatch, rows - first);
    std::vector<Record> recs(n);
    for (size_t i = 0; i < n; ++i) {
      recs[i].id = std::to_string(first + i);
      recs[i].ns = NamespaceOf(first + i);
    }
    UpsertRetrying(**c, recs, std::span(data).subspan(first * kDim, n * kDim));
  }
  // HNSW pieces build in the background: the build time includes them.
  if (!dynamic_cast<CollectionImpl&>(**c).WaitIndexIdle(std::chrono::hours(4)))
    std::abort();
  // Sealed into one graph (as `zerovec build` ends by default).
  if (seal &&
      !(*c)->FinishIndexing(omp_get_max_threads(), /*one_graph=*/true).ok())
    std::abort();
  return *c;
}

// ZeroVec's HNSW32 collection over the segment: one row plus an ef sweep.
std::shared_ptr<Collection> RunZeroVecHnsw(Database& db, const Flags& f,
                                           const std::vector<float>& data,
                                           const float* queries,
                                           const std::vector<int64_t>& truth,
                                           std::vector<Row>* rows,
                                           std::vector<Sweep>* sweeps) {
  Row hi{"ZeroVec HNSW32 (in place)"};
  std::shared_ptr<Collection> hnsw;
  hi.build_s = Seconds([&] {
    hnsw = BuildCollection(db, "HNSW32", data, f.rows, f.batch, f.merge_to_one);
  });
  hi.memory_mb = dynamic_cast<CollectionImpl&>(*hnsw).IndexMemoryBytes() / 1e6;
  std::printf("HNSW32: %zu pieces\n",
              dynamic_cast<CollectionImpl&>(*hnsw).IndexPieces());
  Measure(&hi, f.queries, queries, CollectionSearch(*hnsw), truth);
  Progress(hi);
  rows->push_back(hi);
  sweeps->push_back(RunSweep(
      "ZeroVec HNSW32", f.queries, queries,
      [&](int ef) { return CollectionSearch(*hnsw, ef); }, truth));
  return hnsw;
}

// Namespace-filtered searches (1 %, 10 %, 50 % of the rows): the HNSW
// collection over an ef sweep and the flat one (exact filtered scan) against
// the exact filtered top-k.
void RunFiltered(const Flags& f, const std::vector<float>& base,
                 const float* queries, const Collection& flat,
                 const Collection& hnsw) {
  std::printf(
      "\nFiltered search (namespace filter; truth = exact top-%d of the "
      "matching rows; QPS = batch of %zu)\n\n| rows kept | matching rows | "
      "index | efSearch | recall@10 | latency ms | QPS |\n"
      "|---|---|---|---|---|---|---|\n",
      kK, f.queries);
  for (const char* ns : {"p01", "p10", "p50"}) {
    std::vector<int64_t> ids;
    for (size_t r = 0; r < f.rows; ++r)
      if (NamespaceOf(r) == ns) ids.push_back(static_cast<int64_t>(r));
    faiss::IndexFlatIP sub(kDim);
    std::vector<float> rows(ids.size() * kDim);
    for (size_t i = 0; i < ids.size(); ++i)
      std::memcpy(&rows[i * kDim], &base[ids[i] * kDim], 4 * kDim);
    sub.add(ids.size(), rows.data());
    std::vector<int64_t> truth(f.queries * kK);
    std::vector<float> d(f.queries * kK);
    sub.search(f.queries, queries, kK, d.data(), truth.data());
    for (int64_t& t : truth) t = t >= 0 ? ids[t] : -1;
    const std::string kept = std::to_string(std::stoi(ns + 1)) + " %";
    // The collection answers a filter this selective by an exact scan of the
    // matching rows (searcher.cc's SelectiveLimit), whatever the index.
    const bool selective = ids.size() <= std::max<size_t>(4096, f.rows / 50);
    Row exact{"exact"};
    Measure(&exact, f.FlatQueries(), queries, CollectionSearch(flat, 0, ns),
            truth);
    std::printf(
        "| %s | %zu | Flat (exact filtered scan) | - | %.4f | %.3f | "
        "%.0f |\n",
        kept.c_str(), ids.size(), exact.recall, exact.latency_ms, exact.qps);
    for (int ef : {16, 64, 128, 256}) {
      Row r{"hnsw"};
      Measure(&r, f.queries, queries, CollectionSearch(hnsw, ef, ns), truth);
      std::printf("| %s | %zu | HNSW32%s | %d | %.4f | %.3f | %.0f |\n",
                  kept.c_str(), ids.size(),
                  selective ? " (exact fallback: selective)" : "", ef, r.recall,
                  r.latency_ms, r.qps);
    }
    std::fflush(stdout);
  }
}

// faiss's own HNSWFlat (a private copy of the vectors): one row plus a sweep.
void RunFaissHnsw(const Flags& f, const std::vector<float>& base,
                  const float* queries, const std::vector<int64_t>& truth,
                  std::vector<Row>* rows, std::vector<Sweep>* sweeps) {
  faiss::IndexHNSWFlat hf(kDim, 32, faiss::METRIC_INNER_PRODUCT);
  hf.hnsw.efConstruction = f.efc;  // ZeroVec's, not faiss's 40
  hf.hnsw.efSearch = kDefaultEfSearch;
  Row hr{"faiss IndexHNSWFlat (own copy)"};
  hr.build_s = Seconds([&] { hf.add(f.rows, base.data()); });
  const auto* storage = dynamic_cast<const faiss::IndexFlatCodes*>(hf.storage);
  hr.memory_mb = (storage->codes.size() + hf.hnsw.neighbors.size() * 4 +
                  hf.hnsw.offsets.size() * 8 + hf.hnsw.levels.size() * 4) /
                 1e6;
  Measure(
      &hr, f.queries, queries,
      [&](size_t nq, const float* q, int64_t* l) {
        std::vector<float> d(nq * kK);
        hf.search(nq, q, kK, d.data(), l);
      },
      truth);
  Progress(hr);
  rows->push_back(hr);
  sweeps->push_back(RunSweep(
      "faiss HNSWFlat", f.queries, queries,
      [&](int ef) -> SearchFn {
        return [&hf, ef](size_t nq, const float* q, int64_t* l) {
          hf.hnsw.efSearch = ef;  // whichever one faiss reads: both agree
          faiss::SearchParametersHNSW p;
          p.efSearch = ef;
          std::vector<float> d(nq * kK);
          hf.search(nq, q, kK, d.data(), l, &p);
        };
      },
      truth));
}

void PrintTable(const Flags& f, const std::vector<Row>& rows,
                const std::vector<Sweep>& sweeps) {
  std::printf("\n%zu rows, dim %u, %zu queries, k=%d, %d OpenMP threads\n\n",
              f.rows, kDim, f.queries, kK, omp_get_max_threads());
  std::printf(
      "| index | build s | recall@10 | latency ms (1 query) | QPS (batch of "
      "%zu) | "
      "index-owned memory MB |\n|---|---|---|---|---|---|\n",
      f.queries);
  for (const Row& r : rows) {
    std::printf("| %s | %.1f | %.4f | %.3f | %.0f | %.1f |\n", r.name.c_str(),
                r.build_s, r.recall, r.latency_ms, r.qps, r.memory_mb);
  }
  PrintSweeps(sweeps, f.queries);
  std::printf(
      "\nVectors themselves: %.1f MB (in the segment for ZeroVec rows; copied "
      "into "
      "the faiss index for faiss rows).\n",
      f.rows * kDim * 4 / 1e6);
}

// The data set: base rows then queries, kDim wide (synthetic clustered
// vectors, or the rows of --base and --query_file). False on a bad file.
bool LoadData(Flags* f, std::vector<float>* data) {
  if (f->base_file.empty()) {
    std::printf("generating %zu x %u vectors + %zu queries...\n", f->rows, kDim,
                f->queries);
    *data =
        testing::LatentClustered(f->rows, f->queries, kDim, f->clusters, 16, 7);
    return true;
  }
  auto base = tools::VectorFile::Open(f->base_file);
  auto query = tools::VectorFile::Open(f->query_file);
  for (const auto* v : {&base, &query}) {
    if (!v->ok()) {
      std::fprintf(stderr, "%s\n", v->status().message().c_str());
      return false;
    }
  }
  if ((*base)->dim() != (*query)->dim()) {
    std::fprintf(stderr, "base and query files differ in dim\n");
    return false;
  }
  kDim = (*base)->dim();
  f->rows = std::min<size_t>(f->rows, (*base)->rows());
  f->queries = std::min<size_t>(f->queries, (*query)->rows());
  data->resize((f->rows + f->queries) * kDim);
  if (!(*base)->CopyRows(0, f->rows, data->data()).ok() ||
      !(*query)->CopyRows(0, f->queries, data->data() + f->rows * kDim).ok())
    return false;
  std::printf("vectors from %s (%zu rows) and %s (%zu queries), dim %u\n",
              f->base_file.c_str(), f->rows, f->query_file.c_str(), f->queries,
              kDim);
  return true;
}

int Main(Flags f) {
  openblas_set_num_threads(
      1);  // faiss parallelises with OpenMP; avoid oversubscription
  if (f.threads > 0) omp_set_num_threads(f.threads);
  // The benchmark builds HNSW pieces on every core (a server uses one).
  PieceOptions po;
  po.build_threads = omp_get_max_threads();
  po.ef_construction = f.efc;
  po.parallel_insert = !f.serial_insert;
  po.interval = f.interval;
  SetPieceOptions(po);
  std::vector<float> data;
  if (!LoadData(&f, &data)) return 1;
  std::printf(
      "HNSW M 32, efConstruction %d, %d threads, interval %llu, batch %zu, "
      "merge_to_one %d, live graph %s\n",
      f.efc, omp_get_max_threads(), static_cast<unsigned long long>(f.interval),
      f.batch, f.merge_to_one ? 1 : 0,
      f.serial_insert ? "8-row steps on 1 thread (before issue 21)"
                      : "parallel steps on every build thread");
  const float* queries = data.data() + f.rows * kDim;
  const std::vector<float> base(data.begin(), data.begin() + f.rows * kDim);
  if (!f.dump_dir.empty() &&
      (!bench::WriteNpy(f.dump_dir + "/base.npy", base.data(), f.rows, kDim) ||
       !bench::WriteNpy(f.dump_dir + "/queries.npy", queries, f.queries,
                        kDim))) {
    std::fprintf(stderr, "cannot write %s/{base,queries}.npy\n",
                 f.dump_dir.c_str());
    return 1;
  }

  std::vector<Row> rows;
  std::vector<Sweep> sweeps;
  // faiss's own flat index: a private copy of every vector.
  faiss::IndexFlatIP flat_copy(kDim);
  Row fc{"faiss IndexFlatIP (own copy)"};
  fc.build_s = Seconds([&] { flat_copy.add(f.rows, base.data()); });
  fc.memory_mb = flat_copy.codes.size() / 1e6;
  std::vector<int64_t> truth(f.queries * kK);
  {
    // The truth on every core (BLAS), the timed searches as configured.
    openblas_set_num_threads(omp_get_max_threads());
    std::vector<float> d(f.queries * kK);
    flat_copy.search(f.queries, queries, kK, d.data(), truth.data());
    openblas_set_num_threads(1);
  }
  // The same truth for bench/lancedb (a JS scan of 1M rows takes minutes).
  if (!f.dump_dir.empty() && !bench::WriteNpy(f.dump_dir + "/truth.npy",
                                              truth.data(), f.queries, kK)) {
    std::fprintf(stderr, "cannot write %s/truth.npy\n", f.dump_dir.c_str());
    return 1;
  }
  Measure(
      &fc, f.FlatQueries(), queries,
      [&](size_t nq, const float* q, int64_t* l) {
        std::vector<float> d(nq * kK);
        flat_copy.search(nq, q, kK, d.data(), l);
      },
      truth);

  const auto dir = testing::MakeTempDir("zv-bench");
  auto db = Database::Open(dir);
  if (!db.ok()) return 1;
  Row fi{"ZeroVec Flat (in place)"};
  std::shared_ptr<Collection> flat;
  fi.build_s = Seconds([&] {
    flat = BuildCollection(**db, "Flat", data, f.rows, f.batch,
                           /*seal=*/false);
  });
  fi.memory_mb = dynamic_cast<CollectionImpl&>(*flat).IndexMemoryBytes() / 1e6;
  Measure(&fi, f.FlatQueries(), queries, CollectionSearch(*flat), truth);
  rows.push_back(fi);
  rows.push_back(fc);

  std::shared_ptr<Collection> hnsw;
  if (!f.skip_hnsw)
    hnsw = RunZeroVecHnsw(**db, f, data, queries, truth, &rows, &sweeps);
  if (!f.skip_hnsw && !f.skip_faiss_hnsw)
    RunFaissHnsw(f, base, queries, truth, &rows, &sweeps);
  if (!f.skip_hnsw && !f.skip_hnswlib)
    RunHnswlib(f, base, queries, truth, &rows, &sweeps);

  PrintTable(f, rows, sweeps);
  if (f.filter && hnsw) RunFiltered(f, base, queries, *flat, *hnsw);
  hnsw.reset();
  flat.reset();
  std::error_code ec;
  db->reset();
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace
}  // namespace zv::index

int main(int argc, char** argv) {
  zv::index::Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--rows=", 0) == 0) {
      f.rows = std::stoull(a.substr(7));
    } else if (a.rfind("--queries=", 0) == 0) {
      f.queries = std::stoull(a.substr(10));
    } else if (a == "--skip_hnsw") {
      f.skip_hnsw = true;
    } else if (a == "--skip_faiss_hnsw") {
      f.skip_faiss_hnsw = true;
    } else if (a == "--skip_hnswlib") {
      f.skip_hnswlib = true;
    } else if (a.rfind("--flat_queries=", 0) == 0) {
      f.flat_queries = std::stoull(a.substr(15));
    } else if (a == "--serial_insert") {
      f.serial_insert = true;
    } else if (a.rfind("--interval=", 0) == 0) {
      f.interval = std::stoull(a.substr(11));
    } else if (a.rfind("--batch=", 0) == 0) {
      f.batch = std::stoull(a.substr(8));
    } else if (a == "--merge_to_one") {
      f.merge_to_one = true;
    } else if (a == "--filter") {
      f.filter = true;
    } else if (a.rfind("--efc=", 0) == 0) {
      f.efc = std::stoi(a.substr(6));
    } else if (a.rfind("--threads=", 0) == 0) {
      f.threads = std::stoi(a.substr(10));
    } else if (a.rfind("--dim=", 0) == 0) {
      zv::index::kDim = std::stoul(a.substr(6));
    } else if (a.rfind("--clusters=", 0) == 0) {
      f.clusters = std::stoi(a.substr(11));
    } else if (a.rfind("--base=", 0) == 0) {
      f.base_file = a.substr(7);
    } else if (a.rfind("--dump_npy=", 0) == 0) {
      f.dump_dir = a.substr(11);
    } else if (a.rfind("--query_file=", 0) == 0) {
      f.query_file = a.substr(13);
    } else if (a.rfind("--efs=", 0) == 0) {
      if (!zv::bench::ParseEfList(a.c_str() + 6, &zv::index::ef_sweep))
        return 2;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--rows=N] [--queries=N] [--skip_hnsw] "
                   "[--skip_faiss_hnsw] [--skip_hnswlib] [--filter] "
                   "[--efc=N] [--threads=N] [--dim=D] [--clusters=C] "
                   "[--base=F.npy|.fvecs --query_file=F.npy|.fvecs] "
                   "[--dump_npy=DIR] [--serial_insert] [--flat_queries=N] "
                   "[--interval=N] [--batch=N] [--merge_to_one] "
                   "[--efs=16,32,...]\n",
                   argv[0]);
      return 2;
    }
  }
  return zv::index::Main(f);
}
