// The HNSW graph search over rows in place (pieces and the live graph), one
// loop compiled per instruction set with the distance inlined (AVX-512, AVX2,
// portable; chosen once at run time as distance.h does), a dense per-thread
// visited array and rows prefetched several ahead. Internal to index/.
#ifndef ZEROVEC_INDEX_HNSW_SEARCH_H_
#define ZEROVEC_INDEX_HNSW_SEARCH_H_

#include <faiss/impl/IDSelector.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "index/distance.h"
#include "index/hnsw_pieces.h"

namespace zv::index {

// Which nodes a search has visited: one 16-bit tag per node of the largest
// graph this thread searched, equal to the current epoch when visited. A new
// search bumps the epoch (clearing nothing) and clears the array only when the
// epoch wraps, once in 65,535 searches. 2 bytes a row per searching thread
// (2 MB at 1M rows), reused across queries and pieces.
class VisitedArray {
 public:
  // Starts a search over nodes [0, n).
  void Reset(size_t n) {
    if (tags_.size() < n) tags_.resize(n, 0);
    if (++epoch_ == 0) {
      std::fill(tags_.begin(), tags_.end(), 0);
      epoch_ = 1;
    }
  }
  // True if `v` was visited already; marks it otherwise.
  bool TestAndSet(uint32_t v) {
    if (tags_[v] == epoch_) return true;
    tags_[v] = epoch_;
    return false;
  }
  bool Test(uint32_t v) const { return tags_[v] == epoch_; }
  const uint16_t* Tag(uint32_t v) const { return &tags_[v]; }
  size_t capacity() const { return tags_.size(); }
  // Tests force a wrap.
  void SetEpochForTest(uint16_t e) { epoch_ = e; }

 private:
  std::vector<uint16_t> tags_;
  uint16_t epoch_ = 0;
};

// Pieces of the graph loops shared by the search (hnsw_search.cc) and the
// build (hnsw_build.cc).
namespace hnsw_loop {

using Scored = std::pair<float, int32_t>;  // (distance, node), smaller closer

// Row bytes prefetched ahead of a distance: the whole row of `stride` values
// (floats, or the build's bf16; 384 floats = 24 lines); the hardware
// prefetcher does not follow a jump to another row.
template <typename T>
__attribute__((always_inline)) inline void PrefetchRow(const T* r,
                                                       size_t stride) {
  const char* p = reinterpret_cast<const char*>(r);
  for (size_t o = 0; o < stride * sizeof(T); o += 64) __builtin_prefetch(p + o);
}

// The prefetch window of a list of ids scored in order [0, n): before
// scoring entry j, the rows `ahead` entries on are requested (entries
// 0..ahead at j = 0, then entry j + ahead), so several misses are in flight
// at once. Ids below 0 (a slot another thread emptied meanwhile) are skipped.
template <typename RowOf, typename IdAt>
__attribute__((always_inline)) inline void PrefetchAhead(RowOf row_of,
                                                         IdAt id_at, size_t j,
                                                         size_t n, size_t ahead,
                                                         size_t stride) {
  const size_t to = std::min(n, j + ahead + 1);
  for (size_t i = j == 0 ? 0 : j + ahead; i < to; ++i) {
    const int32_t v = id_at(i);
    if (v >= 0) PrefetchRow(row_of(v), stride);
  }
}

// Heap orders over Scored: min-heap (candidates) and max-heap (results).
struct Greater {
  bool operator()(const Scored& a, const Scored& b) const {
    return a.first > b.first;
  }
};
struct Less {
  bool operator()(const Scored& a, const Scored& b) const {
    return a.first < b.first;
  }
};

}  // namespace hnsw_loop

// Top-k rows of one padded query in graph `g` (rows read through `rows`,
// which must hold the graph's rows) among those `sel` accepts (null: all),
// best first, into dist/out (k entries, row -1 pads). `ef` results are kept
// while searching (hnswlib's rule). A RowBitmap filter is tested inline (no
// virtual call). `isa` picks the loop (tests compare them); kAuto: the best
// this CPU runs.
enum class SearchIsa { kAuto, kPortable, kAvx2, kAvx512 };
void SearchGraphRows(const GraphRef& g, const RowTable& rows,
                     const float* query, int k, int ef,
                     const faiss::IDSelector* sel, float* dist, int64_t* out,
                     SearchIsa isa = SearchIsa::kAuto);

// Rows the search requests ahead of the distance it computes (1-64, default
// 8; 1: the next row only, hnswlib's rule). Process-wide; benchmarks set it.
void SetSearchPrefetchRows(int rows);
int SearchPrefetchRows();

// This thread's visited array (tests inspect it).
VisitedArray& ThreadVisited();

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_HNSW_SEARCH_H_
