// GPU mirrors of collections (issue 13): a copy of a segment generation's rows
// in device memory, kept in step by the collection's writer, searched exactly
// by gpusearch/ in place of the CPU flat scan or the HNSW graph (exact and
// faster on a GPU host). The segment stays the source of truth.
//
// With several devices (GpuSearchOptions::devices, issue 19) the rows are
// split in stripes over them (index/mirror_split.h): each part is a mirror on
// its own device with its own GpuBudget, a search runs on every part at once
// (one host thread per device) and the parts' top-k lists are merged on the
// host. With one device it is the single-GPU mirror it always was.
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
#include "index/mirror_split.h"
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

// One filter's rows as device masks, one per part of a mirror (the part's
// local rows). Immutable; any thread.
struct MirrorMask {
  std::vector<std::unique_ptr<gpusearch::GpuMask>> parts;
  ~MirrorMask();
};

// One budget per device of `options` (GpuSearchOptions::devices, else
// `device`), each logged. A device listed m times gets m budgets of 1/m of
// what one would get (repeats are for tests of the split path on one GPU).
StatusOr<std::vector<std::shared_ptr<GpuBudget>>> CreateGpuBudgets(
    const GpuSearchOptions& options);

class GenerationMirror {
 public:
  // Uploads rows [0, committed) of `view` (one large copy per extent) and its
  // tombstones, split over the budgets' devices in stripes of `stripe_rows`
  // rows (a multiple of 64) when there are several. RESOURCE_EXHAUSTED when
  // the rows (with room to grow and the search scratch) do not fit a budget.
  static StatusOr<std::unique_ptr<GenerationMirror>> Build(
      std::vector<std::shared_ptr<GpuBudget>> budgets,
      const shm::SegmentView& view, uint64_t stripe_rows = kDefaultStripeRows);
  static StatusOr<std::unique_ptr<GenerationMirror>> Build(
      std::shared_ptr<GpuBudget> budget, const shm::SegmentView& view) {
    return Build(std::vector<std::shared_ptr<GpuBudget>>{std::move(budget)},
                 view);
  }
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
  // segment. Writers only (the collection's writer lock). A split mirror does
  // not stage (can_stage() false): its rows come from the segment.
  bool can_stage() const { return parts_.size() == 1; }
  StatusOr<float*> StageRows(uint64_t first, uint64_t n);
  Status ReadStaged(uint64_t offset, uint64_t n, float* host_rows) const;
  void MarkStaged(std::vector<uint8_t> on_device);
  // The device of an unsplit mirror; -1 when split (no one device holds the
  // rows, so device queries and staging do not apply).
  int device() const;
  uint32_t row_stride() const;
  int parts() const { return static_cast<int>(parts_.size()); }

  // Exact top-k of nq padded queries (nq x row_stride) over every mirrored
  // row, or only the rows set in `mask` (a filter's live rows), into `top`.
  // `device_queries` (optional): the same queries already in device memory
  // on device(), searched from there.
  Status Search(const float* queries, const float* device_queries, size_t nq,
                const MirrorMask* mask, TopK* top) const;

  // Filter masks kept on the device, so a filter repeated while the rows do
  // not change is neither rebuilt on the CPU nor uploaded again. An entry is
  // valid for the (rows, tombstones) it was made at: within a generation rows
  // only grow and tombstones only accrue, so the pair names the state.
  struct CachedMask {
    std::shared_ptr<const MirrorMask> mask;
    uint64_t matching = 0;  // rows set
  };
  // A mask for one search (filters whose bitmap changes with the clock).
  StatusOr<std::unique_ptr<MirrorMask>> UploadMask(
      const RowBitmap& bitmap) const;
  std::optional<CachedMask> FindMask(const std::string& key, uint64_t rows,
                                     uint64_t tombstones) const;
  StatusOr<CachedMask> AddMask(const std::string& key, uint64_t rows,
                               uint64_t tombstones,
                               const RowBitmap& bitmap) const;

  uint64_t rows() const;
  // Rows whose vectors the encoder wrote straight into the mirror.
  uint64_t rows_from_device() const { return staged_count_; }
  // Device bytes charged, over all parts.
  uint64_t charged_bytes() const;
  std::string description() const;

 private:
  // One device's share of the rows.
  // (Out-of-line special members: GpuMirror is incomplete here.)
  struct Part {
    Part(std::shared_ptr<GpuBudget> b, std::unique_ptr<gpusearch::GpuMirror> m,
         uint64_t c);
    Part(Part&&) noexcept;
    ~Part();
    std::shared_ptr<GpuBudget> budget;
    std::unique_ptr<gpusearch::GpuMirror> mirror;
    uint64_t charged = 0;
  };
  explicit GenerationMirror(StripeLayout layout);
  // Budget bytes for a mirror of `capacity` rows plus its search scratch.
  uint64_t ChargeFor(uint64_t capacity) const;
  // Room for `want` rows in part `p`, charged to its budget first.
  Status EnsureCapacity(Part& p, uint64_t want);
  // Global rows [have, want) of `view` onto the parts they belong to.
  Status AppendSplit(const shm::SegmentView& view, uint64_t have,
                     uint64_t want);
  Status SearchSplit(const float* queries, size_t nq, const MirrorMask* mask,
                     TopK* top) const;

  StripeLayout layout_;
  std::vector<Part> parts_;
  // parts_[0].mirror, the whole mirror when unsplit.
  gpusearch::GpuMirror* mirror_ = nullptr;
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
