// Index benchmark: exact search in place over the segment vs faiss::IndexFlatIP
// holding its own copy, and HNSW in place vs faiss::IndexHNSWFlat: recall@10,
// latency, QPS and index-owned memory. Prints a markdown table.
//
//   bazel run -c opt //bench:index_bench -- --rows=100000 [--queries=200]
//   [--skip_hnsw] [--skip_faiss_hnsw]
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "index/collection.h"
#include "index/collection_impl.h"
#include "index/test_util.h"

extern "C" void openblas_set_num_threads(int);

namespace zv::index {
namespace {

constexpr uint32_t kDim = 384;
constexpr int kK = 10;

struct Flags {
  size_t rows = 100000;
  size_t queries = 200;
  bool skip_hnsw = false;
  bool skip_faiss_hnsw = false;  // its build alone is ~8 min at 1M on 2 cores
};

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

// Searches a collection; maps ids (decimal row numbers) back to labels.
std::function<void(size_t, const float*, int64_t*)> CollectionSearch(
    const Collection& c) {
  return [&c](size_t nq, const float* q, int64_t* labels) {
    SearchOptions o;
    o.k = kK;
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

std::shared_ptr<Collection> BuildCollection(Database& db,
                                            const std::string& descriptor,
                                            const std::vector<float>& data,
                                            size_t rows) {
  CollectionOptions o;
  o.dim = kDim;
  o.index.descriptor = descriptor;
  auto c = db.CreateCollection(descriptor == "Flat" ? "flat" : "hnsw", o);
  if (!c.ok()) std::abort();
  constexpr size_t kBatch = 10000;
  for (size_t first = 0; first < rows; first += kBatch) {
    const size_t n = std::min(kBatch, rows - first);
    std::vector<Record> recs(n);
    for (size_t i = 0; i < n; ++i) recs[i].id = std::to_string(first + i);
    if (!(*c)->Upsert(recs, std::span(data).subspan(first * kDim, n * kDim))
             .ok())
      std::abort();
  }
  return *c;
}

int Main(const Flags& f) {
  openblas_set_num_threads(
      1);  // faiss parallelises with OpenMP; avoid oversubscription
  std::printf("generating %zu x %u vectors + %zu queries...\n", f.rows, kDim,
              f.queries);
  const std::vector<float> data =
      testing::LatentClustered(f.rows, f.queries, kDim, 1000, 16, 7);
  const float* queries = data.data() + f.rows * kDim;
  const std::vector<float> base(data.begin(), data.begin() + f.rows * kDim);

  std::vector<Row> rows;
  // faiss's own flat index: a private copy of every vector.
  faiss::IndexFlatIP flat_copy(kDim);
  Row fc{"faiss IndexFlatIP (own copy)"};
  fc.build_s = Seconds([&] { flat_copy.add(f.rows, base.data()); });
  fc.memory_mb = flat_copy.codes.size() / 1e6;
  std::vector<int64_t> truth(f.queries * kK);
  {
    std::vector<float> d(f.queries * kK);
    flat_copy.search(f.queries, queries, kK, d.data(), truth.data());
  }
  Measure(
      &fc, f.queries, queries,
      [&](size_t nq, const float* q, int64_t* l) {
        std::vector<float> d(nq * kK);
        flat_copy.search(nq, q, kK, d.data(), l);
      },
      truth);

  const auto dir = testing::NewTempDir("zv-bench");
  auto db = Database::Open(dir);
  if (!db.ok()) return 1;
  Row fi{"ZeroVec Flat (in place)"};
  std::shared_ptr<Collection> flat;
  fi.build_s =
      Seconds([&] { flat = BuildCollection(**db, "Flat", data, f.rows); });
  fi.memory_mb = dynamic_cast<CollectionImpl&>(*flat).IndexMemoryBytes() / 1e6;
  Measure(&fi, f.queries, queries, CollectionSearch(*flat), truth);
  rows.push_back(fi);
  rows.push_back(fc);

  if (!f.skip_hnsw) {
    Row hi{"ZeroVec HNSW32 (in place)"};
    std::shared_ptr<Collection> hnsw;
    hi.build_s =
        Seconds([&] { hnsw = BuildCollection(**db, "HNSW32", data, f.rows); });
    hi.memory_mb =
        dynamic_cast<CollectionImpl&>(*hnsw).IndexMemoryBytes() / 1e6;
    Measure(&hi, f.queries, queries, CollectionSearch(*hnsw), truth);
    rows.push_back(hi);
  }
  if (!f.skip_hnsw && !f.skip_faiss_hnsw) {
    faiss::IndexHNSWFlat hf(kDim, 32, faiss::METRIC_INNER_PRODUCT);
    hf.hnsw.efConstruction = 40;
    hf.hnsw.efSearch = 128;
    Row hr{"faiss IndexHNSWFlat (own copy)"};
    hr.build_s = Seconds([&] { hf.add(f.rows, base.data()); });
    const auto* storage =
        dynamic_cast<const faiss::IndexFlatCodes*>(hf.storage);
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
    rows.push_back(hr);
  }

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
  std::printf(
      "\nVectors themselves: %.1f MB (in the segment for ZeroVec rows; copied "
      "into "
      "the faiss index for faiss rows).\n",
      f.rows * kDim * 4 / 1e6);
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
    } else {
      std::fprintf(stderr,
                   "usage: %s [--rows=N] [--queries=N] [--skip_hnsw] "
                   "[--skip_faiss_hnsw]\n",
                   argv[0]);
      return 2;
    }
  }
  return zv::index::Main(f);
}
