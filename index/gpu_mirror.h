// GPU mirrors of collections (issue 13): a copy of a segment generation's rows
// in device memory, kept in step by the collection's writer, searched exactly
// by gpusearch/ in place of the CPU flat scan or the HNSW graph (exact and
// faster on a GPU host). The segment stays the source of truth.
//
// The collection calls the mirror under its own locks: CatchUp / Tombstone
// under the exclusive lock that publishes rows (so a search, holding the
// shared lock, always sees mirror rows == committed rows), Search under the
// shared one.
#ifndef ZEROVEC_INDEX_GPU_MIRROR_H_
#define ZEROVEC_INDEX_GPU_MIRROR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "index/collection.h"
#include "index/filter.h"
#include "index/flat_index.h"
#include "shm/segment.h"

namespace zv::gpusearch {
class GpuMirror;
}

namespace zv::index {

// The device memory every mirror of one Database draws from (serve
// --gpu-memory). Thread-safe.
class GpuBudget {
 public:
  // FAILED_PRECONDITION without a CUDA build or device `options.device`.
  static StatusOr<std::shared_ptr<GpuBudget>> Create(
      const GpuSearchOptions& options);
  int device() const { return options_.device; }
  uint64_t budget_bytes() const { return budget_; }
  uint64_t used_bytes() const;
  // Takes `bytes` from the budget; false (nothing taken) when they do not fit.
  bool Take(uint64_t bytes);
  void Give(uint64_t bytes);
  void Log(const std::string& line) const;

 private:
  GpuBudget(const GpuSearchOptions& o, uint64_t budget)
      : options_(o), budget_(budget) {}
  GpuSearchOptions options_;
  uint64_t budget_;
  mutable std::mutex mu_;
  uint64_t used_ = 0;
};

class GenerationMirror {
 public:
  // Uploads rows [0, committed) of `view` (one large copy per extent) and its
  // tombstones. RESOURCE_EXHAUSTED when the rows (with room to grow and the
  // search scratch) do not fit the budget.
  static StatusOr<std::unique_ptr<GenerationMirror>> Build(
      std::shared_ptr<GpuBudget> budget, const shm::SegmentView& view);
  ~GenerationMirror();

  // Appends rows [rows(), view.committed()) from the segment, growing the
  // device buffers (and the budget taken) as needed. RESOURCE_EXHAUSTED when
  // growing would pass the budget: the caller drops the mirror.
  Status CatchUp(const shm::SegmentView& view);
  Status Tombstone(uint64_t row);
  // Exact top-k of nq padded queries (nq x row_stride) over every mirrored
  // row, or only the rows set in `rows` (a filter's live rows), into `top`.
  Status Search(const float* queries, size_t nq, const RowBitmap* rows,
                TopK* top) const;

  uint64_t rows() const;
  uint64_t charged_bytes() const { return charged_; }
  std::string description() const;
  GpuBudget& budget() const { return *budget_; }

 private:
  GenerationMirror(std::shared_ptr<GpuBudget> budget,
                   std::unique_ptr<gpusearch::GpuMirror> mirror,
                   uint64_t charged);
  // Budget bytes for a mirror of `capacity` rows plus its search scratch.
  uint64_t ChargeFor(uint64_t capacity) const;

  std::shared_ptr<GpuBudget> budget_;
  std::unique_ptr<gpusearch::GpuMirror> mirror_;
  uint64_t charged_;
};

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_GPU_MIRROR_H_
