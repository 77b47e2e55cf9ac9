// The writer's live HNSW graph: the rows past the last piece, inserted a few
// at a time as they arrive, so searches walk a graph instead of scanning the
// tail exactly. It lives only in the writer process's memory (attached readers
// scan those rows exactly, and a restart re-inserts them: at most about one
// piece interval). When it holds `interval` rows it is written out unchanged
// as the next piece (hnsw_pieces.h), so no row is inserted twice for it.
//
// Concurrency: one inserter thread calls Insert, Publish and Freeze; any
// thread may Search. Searches never wait for inserts: they walk an immutable
// copy of the graph's arrays that the inserter publishes every few hundred
// rows (copying ~5 MB at 20k rows, about 1% of the insert work); rows after
// that copy are the caller's to scan exactly. (A lock per insert step was
// measured first: a search then waited behind the inserter's step, and
// behind a preempted inserter a whole time slice; p50 3-5x.)
#ifndef ZEROVEC_INDEX_HNSW_LIVE_H_
#define ZEROVEC_INDEX_HNSW_LIVE_H_

#include <faiss/IndexHNSW.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "index/hnsw_pieces.h"

namespace zv::index {

class LiveGraph {
 public:
  LiveGraph(const shm::SegmentInfo& info, int m, int efc, uint64_t begin);
  LiveGraph(const LiveGraph&) = delete;
  LiveGraph& operator=(const LiveGraph&) = delete;

  uint64_t begin() const { return begin_; }
  // Rows [begin, end) are in the graph (any thread; searches see them once
  // published).
  uint64_t end() const { return end_.load(std::memory_order_acquire); }
  uint64_t size() const { return end() - begin_; }
  // Rows [begin, searchable) are in the published copy (any thread).
  uint64_t searchable() const;

  // Inserter only: inserts rows [end(), end() + n), read through `rows`
  // (which must hold them, contiguously). Publishes a new copy once enough
  // rows are unpublished, or with `publish`.
  Status Insert(const RowTable& rows, uint64_t n, bool publish = false);
  // Inserter only: publishes the graph as it is now.
  void Publish();

  // Top-k of nq padded queries among published rows below `limit`, merged
  // into `out`; returns the rows covered ([begin, covered) were searched).
  uint64_t Search(const shm::SegmentView& view, const float* queries, size_t nq,
                  const faiss::IDSelector* sel, int ef, uint64_t limit,
                  TopK* out) const;

  // Inserter only: writes the graph as piece `serial` in `dir` and maps it.
  StatusOr<std::shared_ptr<const Piece>> Freeze(
      const std::filesystem::path& dir, uint64_t serial) const;

 private:
  struct Copy {  // the graph's arrays as of `end`
    uint64_t end = 0;
    int entry_point = -1, max_level = -1;
    std::vector<int32_t> cum, levels, neighbors;
    std::vector<uint64_t> offsets;
  };

  const shm::SegmentInfo info_;
  const int m_;
  const uint64_t begin_;
  // The inserter's own: the graph being grown.
  RowTable rows_;  // what storage_ reads rows through
  RangeStorage storage_;
  faiss::IndexHNSW index_;
  std::atomic<uint64_t> end_;
  // Shared with searches.
  mutable std::mutex mu_;  // guards the pointer only
  std::shared_ptr<const Copy> published_;
};

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_HNSW_LIVE_H_
