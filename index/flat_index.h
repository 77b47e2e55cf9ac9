// Exact k-NN over segment rows where they lie: faiss's knn_inner_product /
// knn_L2sqr run on the mapped extents with d = row_stride (the zero padding
// keeps IP and L2 exact), one block at a time, and the per-block top-k lists
// are merged. Nothing is copied and nothing is allocated per row: this "index"
// has no state.
#ifndef ZEROVEC_INDEX_FLAT_INDEX_H_
#define ZEROVEC_INDEX_FLAT_INDEX_H_

#include <faiss/impl/IDSelector.h>

#include <cstdint>
#include <span>
#include <vector>

#include "shm/segment.h"

namespace zv::index {

// Top-k lists of nq queries, row-major nq x k, best first; row -1 pads a short
// list.
struct TopK {
  TopK(size_t nq, int k, shm::Metric metric);
  size_t nq;
  int k;
  shm::Metric metric;
  std::vector<float> dist;
  std::vector<int64_t> rows;

  // True if `a` ranks before `b` (larger IP, smaller L2).
  bool Better(float a, float b) const {
    return metric == shm::Metric::kInnerProduct ? a > b : a < b;
  }
  // Merges another nq x k2 result (best first, -1 padded; row ids in `rows`).
  void Merge(const float* d, const int64_t* r, int k2);
  void Merge(const TopK& other) {
    Merge(other.dist.data(), other.rows.data(), other.k);
  }
  // Number of filled entries of query q.
  int Filled(size_t q) const;
};

// Copies nq queries of `dim` floats into rows of `stride` floats, zero padded.
std::vector<float> PadQueries(std::span<const float> queries, uint32_t dim,
                              uint32_t stride);

// Exact search over rows [begin, end) of `view`. `queries` are nq x row_stride
// (PadQueries). `sel` (over row numbers) may be null. Results merge into `out`.
void FlatSearch(const shm::SegmentView& view, uint64_t begin, uint64_t end,
                const float* queries, size_t nq, const faiss::IDSelector* sel,
                TopK* out);

// Exact search over an explicit row list (selective filters, re-ranking).
void FlatSearchRows(const shm::SegmentView& view, std::span<const int64_t> rows,
                    const float* queries, size_t nq, TopK* out);

// Exact re-ranking of per-query candidate rows (nq x c, -1 padded) into `out`.
void RerankCandidates(const shm::SegmentView& view, const int64_t* candidates,
                      int c, const float* queries, size_t nq, TopK* out);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_FLAT_INDEX_H_
