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
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "index/collection.h"
#include "index/filter.h"
#include "index/flat_index.h"
#include "shm/segment.h"

namespace zv::gpusearch {
class GpuMirror;
class GpuMask;
}  // namespace zv::gpusearch

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

  // Rows an encoder computes on the GPU land in the mirror first (issue 13):
  // StageRows(first, n) (first == rows()) returns the device place of rows
  // [first, first + n) on device(), zeroed; the writer fills some of them
  // there, reads those back into the segment (ReadStaged), and says which with
  // MarkStaged. The next CatchUp then copies only the other rows from the
  // segment. Writers only (the collection's writer lock).
  StatusOr<float*> StageRows(uint64_t first, uint64_t n);
  Status ReadStaged(uint64_t offset, uint64_t n, float* host_rows) const;
  void MarkStaged(std::vector<uint8_t> on_device);
  int device() const;
  uint32_t row_stride() const;

  // Exact top-k of nq padded queries (nq x row_stride) over every mirrored
  // row, or only the rows set in `mask` (a filter's live rows), into `top`.
  // `device_queries` (optional): the same queries already in device memory
  // on device(), searched from there.
  Status Search(const float* queries, const float* device_queries, size_t nq,
                const gpusearch::GpuMask* mask, TopK* top) const;

  // Filter masks kept on the device, so a filter repeated while the rows do
  // not change is neither rebuilt on the CPU nor uploaded again. An entry is
  // valid for the (rows, tombstones) it was made at: within a generation rows
  // only grow and tombstones only accrue, so the pair names the state.
  struct CachedMask {
    std::shared_ptr<const gpusearch::GpuMask> mask;
    uint64_t matching = 0;  // rows set
  };
  // A mask for one search (filters whose bitmap changes with the clock).
  StatusOr<std::unique_ptr<gpusearch::GpuMask>> UploadMask(
      const RowBitmap& bitmap) const;
  std::optional<CachedMask> FindMask(const std::string& key, uint64_t rows,
                                     uint64_t tombstones) const;
  StatusOr<CachedMask> AddMask(const std::string& key, uint64_t rows,
                               uint64_t tombstones,
                               const RowBitmap& bitmap) const;

  uint64_t rows() const;
  // Rows whose vectors the encoder wrote straight into the mirror.
  uint64_t rows_from_device() const { return staged_count_; }
  uint64_t charged_bytes() const { return charged_; }
  std::string description() const;
  GpuBudget& budget() const { return *budget_; }

 private:
  GenerationMirror(std::shared_ptr<GpuBudget> budget,
                   std::unique_ptr<gpusearch::GpuMirror> mirror,
                   uint64_t charged);
  // Budget bytes for a mirror of `capacity` rows plus its search scratch.
  uint64_t ChargeFor(uint64_t capacity) const;
  // Room for `want` rows, charged to the budget first.
  Status EnsureCapacity(uint64_t want);

  std::shared_ptr<GpuBudget> budget_;
  std::unique_ptr<gpusearch::GpuMirror> mirror_;
  uint64_t charged_;
  // Staged rows (writer only): [staged_first_, + staged_on_device_.size()).
  uint64_t staged_first_ = 0;
  std::vector<uint8_t> staged_on_device_;
  uint64_t staged_count_ = 0;
  // Mask cache, newest last.
  struct MaskEntry {
    std::string key;
    uint64_t rows, tombstones;
    CachedMask cached;
  };
  mutable std::mutex masks_mu_;
  mutable std::vector<MaskEntry> masks_;
};

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_GPU_MIRROR_H_
