// Graph-quality bisect (issue 21): the same rows, M and efConstruction built
// several ways, each searched over an efSearch sweep, so a recall gap between
// ZeroVec's HNSW and faiss's IndexHNSWFlat can be pinned to one difference:
//
//   faiss-one      IndexHNSWFlat, one add of every row (faiss's own storage)
//   faiss-b<B>     IndexHNSWFlat, adds of B rows
//   range-one      faiss::IndexHNSW over RangeStorage (segment rows in place,
//                  ZeroVec's distance computer), one add
//   range-b<B>     the same, adds of B rows (BuildPiece before issue 21: 512,
//                  live graph: 8)
//   range-lf       the same storage, InsertLevelsFirst (BuildPiece now): as
//                  one add (upper levels first) but in interruptible chunks
//   collection     the product path: upserts of 10,000 rows into an HNSW32
//                  collection, pieces + live graph, searched by Collection
//
// faiss graphs are searched twice: by faiss and by ZeroVec's SearchGraph over
// the same arrays (separates the search from the graph).
//
//   bazel build -c opt //bench:hnsw_bisect
//   bazel-bin/bench/hnsw_bisect --rows=200000 --dim=128 --variants=faiss-one,
//       range-b512,collection
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "index/collection.h"
#include "index/collection_impl.h"
#include "index/hnsw_pieces.h"
#include "index/test_util.h"
#include "shm/segment.h"

extern "C" void openblas_set_num_threads(int);

namespace zv::index {
namespace {

constexpr int kK = 10;
constexpr int kEf[] = {16, 32, 64, 128, 256};

struct Flags {
  size_t rows = 200000, queries = 200;
  uint32_t dim = 128;
  int m = 32, efc = kHnswEfConstruction, clusters = 1000;
  std::string variants = "faiss-one,range-b512,collection";
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

struct Ctx {
  Flags f;
  std::vector<float> base, queries;  // dim-wide rows
  std::vector<float> padded_q;       // stride-wide queries
  std::vector<int64_t> truth;
  std::unique_ptr<shm::Writer> seg;
  RowTable table;
};

using SearchAt = std::function<void(int ef, int64_t* labels)>;

void PrintSweep(const std::string& name, double build_s, const Ctx& c,
                const SearchAt& search) {
  std::printf("| %s | %.1f |", name.c_str(), build_s);
  std::vector<int64_t> labels(c.f.queries * kK);
  for (int ef : kEf) {
    search(ef, labels.data());
    std::printf(" %.4f |", Recall(labels, c.truth, c.f.queries));
  }
  std::printf("\n");
  std::fflush(stdout);
}

// ZeroVec's in-place search over a faiss graph's arrays.
SearchAt OurSearch(const Ctx& c, const faiss::HNSW& h) {
  return [&c, &h](int ef, int64_t* labels) {
    const GraphRef g{0,
                     c.f.rows,
                     h.max_level,
                     h.entry_point,
                     true,
                     c.seg->info().row_stride,
                     h.cum_nneighbor_per_level.data(),
                     reinterpret_cast<const uint64_t*>(h.offsets.data()),
                     h.neighbors.data()};
    const size_t stride = c.seg->info().row_stride;
    std::vector<float> d(kK);
#pragma omp parallel for schedule(dynamic) firstprivate(d)
    for (size_t q = 0; q < c.f.queries; ++q)
      SearchGraph(g, *c.seg, &c.padded_q[q * stride], kK, ef, nullptr, d.data(),
                  labels + q * kK);
  };
}

SearchAt FaissSearch(const Ctx& c, faiss::IndexHNSW& index) {
  return [&c, &index](int ef, int64_t* labels) {
    index.hnsw.efSearch = ef;
    faiss::SearchParametersHNSW p;
    p.efSearch = ef;
    std::vector<float> d(c.f.queries * kK);
    index.search(c.f.queries, c.queries.data(), kK, d.data(), labels, &p);
  };
}

// Adds rows [0, rows) to `index` in adds of `batch` (0: one add).
void AddRows(faiss::IndexHNSW& index, const Ctx& c, size_t batch,
             bool in_place) {
  const size_t n = c.f.rows;
  if (batch == 0) batch = n;
  for (size_t next = 0; next < n;) {
    size_t b = std::min(batch, n - next);
    if (in_place) b = std::min<size_t>(b, c.table.ContiguousFrom(next));
    index.add(b, in_place ? c.table.Row(next) : &c.base[next * c.f.dim]);
    next += b;
  }
}

void RunGraph(const Ctx& c, const std::string& v) {
  const bool in_place = v.rfind("range", 0) == 0;
  const size_t dash = v.find('-');
  const std::string how = v.substr(dash + 1);
  const bool levels_first = how == "lf";
  const size_t batch =
      how == "one" || levels_first ? 0 : std::stoull(how.substr(1));
  std::unique_ptr<faiss::Index> storage;
  std::unique_ptr<faiss::IndexHNSW> index;
  if (in_place) {
    storage = std::make_unique<RangeStorage>(
        c.table, 0, c.seg->info().row_stride, shm::Metric::kInnerProduct);
    index = std::make_unique<faiss::IndexHNSW>(storage.get(), c.f.m);
  } else {
    index = std::make_unique<faiss::IndexHNSWFlat>(c.f.dim, c.f.m,
                                                   faiss::METRIC_INNER_PRODUCT);
  }
  index->hnsw.efConstruction = c.f.efc;
  const double s = Seconds([&] {
    if (levels_first) {
      if (!InsertLevelsFirst(*index, static_cast<RangeStorage&>(*storage),
                             c.f.rows, nullptr, omp_get_max_threads())
               .ok())
        std::abort();
    } else {
      AddRows(*index, c, batch, in_place);
    }
  });
  PrintSweep(v + " / ZeroVec search", s, c, OurSearch(c, index->hnsw));
  if (!in_place)
    PrintSweep(v + " / faiss search", s, c, FaissSearch(c, *index));
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

void RunCollection(const Ctx& c, Database& db) {
  CollectionOptions o;
  o.dim = c.f.dim;
  o.index.descriptor = "HNSW" + std::to_string(c.f.m);
  auto col = db.CreateCollection("bisect", o);
  if (!col.ok()) std::abort();
  const double s = Seconds([&] {
    constexpr size_t kBatch = 10000;
    for (size_t first = 0; first < c.f.rows; first += kBatch) {
      const size_t n = std::min(kBatch, c.f.rows - first);
      std::vector<Record> recs(n);
      for (size_t i = 0; i < n; ++i) recs[i].id = std::to_string(first + i);
      UpsertRetrying(**col, recs,
                     std::span(c.base).subspan(first * c.f.dim, n * c.f.dim));
    }
    if (!dynamic_cast<CollectionImpl&>(**col).WaitIndexIdle(
            std::chrono::hours(4)))
      std::abort();
  });
  const size_t pieces = dynamic_cast<CollectionImpl&>(**col).IndexPieces();
  PrintSweep("collection (" + std::to_string(pieces) + " pieces)", s, c,
             [&](int ef, int64_t* labels) {
               SearchOptions so;
               so.k = kK;
               so.ef_search = ef;
               auto r = (*col)->Search(c.queries, so);
               if (!r.ok()) std::abort();
               for (size_t q = 0; q < c.f.queries; ++q)
                 for (int j = 0; j < kK; ++j)
                   labels[q * kK + j] = j < static_cast<int>((*r)[q].size())
                                            ? std::stoll((*r)[q][j].id)
                                            : -1;
             });
}

int Main(const Flags& f) {
  openblas_set_num_threads(1);
  PieceOptions po;
  po.build_threads = omp_get_max_threads();
  po.ef_construction = f.efc;
  SetPieceOptions(po);
  Ctx c;
  c.f = f;
  std::vector<float> all =
      testing::LatentClustered(f.rows, f.queries, f.dim, f.clusters, 16, 7);
  c.base.assign(all.begin(), all.begin() + f.rows * f.dim);
  c.queries.assign(all.begin() + f.rows * f.dim, all.end());
  {
    faiss::IndexFlatIP flat(f.dim);
    flat.add(f.rows, c.base.data());
    c.truth.resize(f.queries * kK);
    std::vector<float> d(f.queries * kK);
    flat.search(f.queries, c.queries.data(), kK, d.data(), c.truth.data());
  }
  const auto dir = testing::MakeTempDir("zv-bisect");
  shm::SegmentOptions so;
  so.dim = f.dim;
  auto seg = shm::Writer::Create(dir / "seg", so);
  if (!seg.ok() || !(*seg)->Reserve(f.rows).ok()) std::abort();
  c.seg = std::move(seg).value();
  for (size_t r = 0; r < f.rows; ++r)
    std::memcpy(c.seg->MutableRow(r), &c.base[r * f.dim], 4 * f.dim);
  if (!c.seg->Commit(f.rows).ok()) std::abort();
  c.table = RowTable(*c.seg, f.rows);
  const size_t stride = c.seg->info().row_stride;
  c.padded_q.assign(f.queries * stride, 0.f);
  for (size_t q = 0; q < f.queries; ++q)
    std::memcpy(&c.padded_q[q * stride], &c.queries[q * f.dim], 4 * f.dim);

  std::printf(
      "%zu rows x %u (LatentClustered %d clusters), %zu queries, M %d, "
      "efConstruction %d, %d threads\n\n| variant | build s |",
      f.rows, f.dim, f.clusters, f.queries, f.m, f.efc, omp_get_max_threads());
  for (int ef : kEf) std::printf(" ef %d |", ef);
  std::printf("\n|---|---|");
  for (size_t i = 0; i < std::size(kEf); ++i) std::printf("---|");
  std::printf("\n");
  std::fflush(stdout);
  auto db = Database::Open(dir / "db");
  if (!db.ok()) std::abort();
  std::stringstream ss(f.variants);
  for (std::string v; std::getline(ss, v, ',');) {
    if (v == "collection") {
      RunCollection(c, **db);
    } else {
      RunGraph(c, v);
    }
  }
  db->reset();
  c.seg.reset();
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
      f.dim = std::stoul(v);
    } else if (const char* v = val("--m=")) {
      f.m = std::stoi(v);
    } else if (const char* v = val("--efc=")) {
      f.efc = std::stoi(v);
    } else if (const char* v = val("--clusters=")) {
      f.clusters = std::stoi(v);
    } else if (const char* v = val("--variants=")) {
      f.variants = v;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--rows=N] [--queries=N] [--dim=D] [--m=M] "
                   "[--efc=E] [--clusters=C] [--variants=a,b,...]\n",
                   argv[0]);
      return 2;
    }
  }
  return zv::index::Main(f);
}
