#include "index/flat_index.h"

#include <faiss/utils/Heap.h>
#include <faiss/utils/distances.h>
#include <omp.h>

#include <algorithm>
#include <limits>

#include "index/distance.h"
#include "index/filter.h"

namespace zv::index {
namespace {

// Rows per faiss call: big enough for BLAS, small enough to split one query's
// scan across threads.
constexpr uint64_t kChunkRows = 16384;

float Worst(shm::Metric m) {
  return m == shm::Metric::kInnerProduct
             ? -std::numeric_limits<float>::infinity()
             : std::numeric_limits<float>::infinity();
}

float Distance(shm::Metric m, const float* q, const float* row, size_t d) {
  return m == shm::Metric::kInnerProduct ? InnerProduct16(q, row, d)
                                         : L2Sqr16(q, row, d);
}

struct Chunk {
  uint64_t first;
  uint64_t count;
  const float* rows;
};

std::vector<Chunk> Chunks(const shm::SegmentView& view, uint64_t begin,
                          uint64_t end) {
  std::vector<Chunk> chunks;
  const uint32_t stride = view.info().row_stride;
  for (const shm::RowBlock& b : view.Blocks(end)) {
    const uint64_t lo = std::max(begin, b.first_row),
                   hi = b.first_row + b.count;
    for (uint64_t first = lo; first < hi; first += kChunkRows) {
      const uint64_t n = std::min(kChunkRows, hi - first);
      chunks.push_back({first, n, b.rows + (first - b.first_row) * stride});
    }
  }
  return chunks;
}

// Few queries: faiss's sequential path here is a scalar loop (Debian's build),
// so scan with our AVX2 kernel and keep the top k in a faiss heap.
template <typename C>
void ScanChunk(const shm::SegmentView& view, const Chunk& c,
               const float* queries, size_t nq, const faiss::IDSelector* sel,
               TopK* out) {
  const size_t d = view.info().row_stride;
  const int k = out->k;
  const bool ip = out->metric == shm::Metric::kInnerProduct;
  TopK part(nq, k, out->metric);
  for (size_t q = 0; q < nq; ++q) {
    float* hd = &part.dist[q * k];
    int64_t* hi = &part.rows[q * k];
    faiss::heap_heapify<C>(k, hd, hi);
    const float* x = queries + q * d;
    for (uint64_t i = 0; i < c.count; ++i) {
      const int64_t row = static_cast<int64_t>(c.first + i);
      if (sel && !sel->is_member(row)) continue;
      const float* y = c.rows + i * d;
      const float s = ip ? InnerProduct16(x, y, d) : L2Sqr16(x, y, d);
      if (C::cmp(hd[0], s)) faiss::heap_replace_top<C>(k, hd, hi, s, row);
    }
    faiss::heap_reorder<C>(k, hd, hi);
  }
  out->Merge(part);
}

// One faiss call over one chunk; block-local labels shifted to row numbers.
void SearchChunk(const shm::SegmentView& view, const Chunk& c,
                 const float* queries, size_t nq, const faiss::IDSelector* sel,
                 TopK* out) {
  const size_t d = view.info().row_stride;
  if (nq < 20) {  // faiss's own BLAS threshold
    if (out->metric == shm::Metric::kInnerProduct) {
      ScanChunk<faiss::CMin<float, int64_t>>(view, c, queries, nq, sel, out);
    } else {
      ScanChunk<faiss::CMax<float, int64_t>>(view, c, queries, nq, sel, out);
    }
    return;
  }
  TopK part(nq, out->k, out->metric);
  OffsetSelector shifted(sel, static_cast<int64_t>(c.first));
  const faiss::IDSelector* s = sel ? &shifted : nullptr;
  if (out->metric == shm::Metric::kInnerProduct) {
    faiss::knn_inner_product(queries, c.rows, d, nq, c.count, out->k,
                             part.dist.data(), part.rows.data(), s);
  } else {
    faiss::knn_L2sqr(queries, c.rows, d, nq, c.count, out->k, part.dist.data(),
                     part.rows.data(), nullptr, s);
  }
  for (int64_t& r : part.rows) {
    if (r >= 0) r += static_cast<int64_t>(c.first);
  }
  out->Merge(part);
}

}  // namespace

TopK::TopK(size_t nq_, int k_, shm::Metric m)
    : nq(nq_), k(k_), metric(m), dist(nq_ * k_, Worst(m)), rows(nq_ * k_, -1) {}

void TopK::Merge(const float* d, const int64_t* r, int k2) {
  std::vector<float> nd(k);
  std::vector<int64_t> nr(k);
  for (size_t q = 0; q < nq; ++q) {
    float* ad = &dist[q * k];
    int64_t* ar = &rows[q * k];
    const float* bd = d + q * k2;
    const int64_t* br = r + q * k2;
    int i = 0, j = 0;
    for (int o = 0; o < k; ++o) {
      const bool a_ok = i < k && ar[i] >= 0, b_ok = j < k2 && br[j] >= 0;
      if (a_ok && (!b_ok || !Better(bd[j], ad[i]))) {
        nd[o] = ad[i];
        nr[o] = ar[i++];
      } else if (b_ok) {
        nd[o] = bd[j];
        nr[o] = br[j++];
      } else {
        nd[o] = Worst(metric);
        nr[o] = -1;
      }
    }
    std::copy(nd.begin(), nd.end(), ad);
    std::copy(nr.begin(), nr.end(), ar);
  }
}

int TopK::Filled(size_t q) const {
  int n = 0;
  while (n < k && rows[q * k + n] >= 0) ++n;
  return n;
}

std::vector<float> PadQueries(std::span<const float> queries, uint32_t dim,
                              uint32_t stride) {
  const size_t nq = queries.size() / dim;
  std::vector<float> padded(nq * stride, 0.0f);
  for (size_t q = 0; q < nq; ++q) {
    std::copy_n(queries.data() + q * dim, dim, padded.data() + q * stride);
  }
  return padded;
}

void FlatSearch(const shm::SegmentView& view, uint64_t begin, uint64_t end,
                const float* queries, size_t nq, const faiss::IDSelector* sel,
                TopK* out) {
  if (begin >= end) return;
  const std::vector<Chunk> chunks = Chunks(view, begin, end);
  const int threads = omp_get_max_threads();
  // A short range (typically the HNSW tail) is scanned serially: waking a
  // thread team costs more than it saves, and while a writer and the piece
  // builder hold the cores its barrier can wait a whole time slice.
  constexpr uint64_t kParallelMinRows = 32768;
  if (nq >= static_cast<size_t>(threads) * 4 || chunks.size() == 1 ||
      threads == 1 || end - begin < kParallelMinRows) {
    // Many queries: faiss parallelises over them (and uses BLAS) inside each
    // call.
    for (const Chunk& c : chunks) SearchChunk(view, c, queries, nq, sel, out);
    return;
  }
  // Few queries: split the rows across threads; faiss's inner loop runs
  // serially.
#pragma omp parallel
  {
    TopK local(nq, out->k, out->metric);
#pragma omp for schedule(dynamic)
    for (size_t i = 0; i < chunks.size(); ++i) {
      SearchChunk(view, chunks[i], queries, nq, sel, &local);
    }
#pragma omp critical
    out->Merge(local);
  }
}

void FlatSearchRows(const shm::SegmentView& view, std::span<const int64_t> rows,
                    const float* queries, size_t nq, TopK* out) {
  const size_t d = view.info().row_stride;
  const int k = out->k;
#pragma omp parallel for if (nq > 1)
  for (size_t q = 0; q < nq; ++q) {
    std::vector<std::pair<float, int64_t>> cand;
    cand.reserve(rows.size());
    for (int64_t r : rows) {
      cand.emplace_back(Distance(out->metric, queries + q * d, view.Row(r), d),
                        r);
    }
    const size_t n = std::min<size_t>(k, cand.size());
    auto better = [&](const auto& a, const auto& b) {
      return out->Better(a.first, b.first) ||
             (a.first == b.first && a.second < b.second);
    };
    std::partial_sort(cand.begin(), cand.begin() + n, cand.end(), better);
    TopK one(1, k, out->metric);
    for (size_t i = 0; i < n; ++i) {
      one.dist[i] = cand[i].first;
      one.rows[i] = cand[i].second;
    }
    // Each query owns its slice of `out`: merge just that row.
    TopK slice(1, k, out->metric);
    std::copy_n(&out->dist[q * k], k, slice.dist.begin());
    std::copy_n(&out->rows[q * k], k, slice.rows.begin());
    slice.Merge(one);
    std::copy_n(slice.dist.begin(), k, &out->dist[q * k]);
    std::copy_n(slice.rows.begin(), k, &out->rows[q * k]);
  }
}

void RerankCandidates(const shm::SegmentView& view, const int64_t* candidates,
                      int c, const float* queries, size_t nq, TopK* out) {
  const size_t d = view.info().row_stride;
  TopK reranked(nq, out->k, out->metric);
  for (size_t q = 0; q < nq; ++q) {
    std::vector<int64_t> rows;
    for (int i = 0; i < c; ++i) {
      if (candidates[q * c + i] >= 0) rows.push_back(candidates[q * c + i]);
    }
    TopK one(1, out->k, out->metric);
    FlatSearchRows(view, rows, queries + q * d, 1, &one);
    std::copy(one.dist.begin(), one.dist.end(), &reranked.dist[q * out->k]);
    std::copy(one.rows.begin(), one.rows.end(), &reranked.rows[q * out->k]);
  }
  out->Merge(reranked);
}

}  // namespace zv::index
