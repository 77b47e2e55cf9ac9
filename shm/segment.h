// The shared-memory vector segment: one writer, many readers, lock-free
// publication.
//
// On-disk layout (all integers little-endian; see README "Segment format"):
// clang-format off
//   <dir>/LOCK           flock()ed by the single writer; released by the
//                        kernel on death.
//   <dir>/vectors.NNNNN  extents, each mapped MAP_SHARED. Extent i holds
//                        min(first_extent_rows << i, rows_per_extent) rows, so
//                        an empty segment costs a few hundred KiB and a large
//                        one still grows in rows_per_extent steps. Each file:
//     [0, 4096)    page 0: ExtentHeader (magic, version, fixed fields, this
//                  extent's rows, checksum); in extent 0 it also holds the
//                  mutable, atomic segment state (committed row count, extent
//                  count, generation, tombstones).
//     rows         extent rows x row_stride floats, 64-byte aligned; the
//                  stride is dim rounded up to 16 floats, padding kept at zero
//                  (so a zero-padded query gives exact IP and L2 over it).
//     ids          extent rows x int64 external ids.
//     tombstones   bitmap, one bit a row, in 64-bit atomic words.
// clang-format on
// Growth adds extents and never remaps one a reader holds. The writer fills
// rows past the committed count, then publishes them with a store-release of
// the count; readers load-acquire it and read only [0, committed).
#ifndef ZEROVEC_SHM_SEGMENT_H_
#define ZEROVEC_SHM_SEGMENT_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace zv::shm {

// Written by Create. 2: extents grow geometrically (first_extent_rows).
// Version 1 segments (fixed-size extents) are still read and appended to in
// version 1; compaction's new generation is version 2.
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kMaxDim = 65536;
inline constexpr uint64_t kMaxRowsPerExtent = uint64_t{1} << 24;
inline constexpr uint64_t kMaxExtents = 1u << 20;

enum class Metric : uint32_t { kInnerProduct = 0, kL2 = 1 };
enum class ElementType : uint32_t { kFloat32 = 0 };

struct SegmentOptions {
  uint32_t dim = 0;
  Metric metric = Metric::kInnerProduct;
  // 65536 rows of dim 384 = 96 MiB an extent: big enough that a 1M-row
  // collection is 16 files, small enough that growth reserves disk in modest
  // steps.
  uint64_t rows_per_extent = 65536;
  // Rows of extent 0; each later extent doubles it up to rows_per_extent.
  // 0 = about 256 KiB of rows (a power of two), so an empty segment is small.
  uint64_t first_extent_rows = 0;
  // When set, files are created 0640 and chgrp'ed to this group, the directory
  // 02750 (else 0600 and 0700). The caller must be in the group (or root).
  std::optional<std::string> group;
  // Commit() waits for msync of the new rows and ids, for power-loss
  // durability.
  bool sync = false;
};

// Fixed facts about a segment, read from its header.
struct SegmentInfo {
  uint32_t dim = 0;
  uint32_t row_stride =
      0;  // floats between consecutive rows (>= dim, multiple of 16)
  Metric metric = Metric::kInnerProduct;
  uint64_t rows_per_extent = 0;    // rows of the largest extents
  uint64_t first_extent_rows = 0;  // rows of extent 0, in [1, rows_per_extent]
};

// A contiguous run of rows inside one extent, for searching in place.
struct RowBlock {
  uint64_t first_row = 0;
  uint64_t count = 0;
  const float* rows = nullptr;  // count x row_stride floats
  const int64_t* ids = nullptr;
  // The extent's tombstone bitmap: bit i (LSB first in little-endian 64-bit
  // words) is row first_row + i. Live: the writer sets bits in place.
  const uint64_t* tombstones = nullptr;
};

class Extent;  // shm-internal: one mapped vectors.NNNNN file

// Read access shared by Writer and Reader. Row pointers stay valid for the
// object's lifetime: extents are only ever added.
class SegmentView {
 public:
  virtual ~SegmentView();
  SegmentView(const SegmentView&) = delete;
  SegmentView& operator=(const SegmentView&) = delete;

  const SegmentInfo& info() const { return info_; }
  const std::filesystem::path& dir() const { return dir_; }

  // Rows visible to this view (a snapshot; Reader::Refresh advances it).
  uint64_t committed() const { return visible_rows_; }
  const float* Row(uint64_t row) const;
  int64_t Id(uint64_t row) const;
  bool IsTombstoned(uint64_t row) const;
  uint64_t TombstoneCount() const;
  uint64_t Generation() const;
  // True once compaction has replaced this segment with a newer generation.
  bool Retired() const;
  // Blocks covering rows [0, limit), limit <= committed().
  std::vector<RowBlock> Blocks(uint64_t limit) const;
  std::vector<RowBlock> Blocks() const { return Blocks(committed()); }

 protected:
  SegmentView(std::filesystem::path dir, SegmentInfo info);
  struct SharedState;  // the atomics in extent 0's header page
  SharedState* state() const;
  Extent& extent(uint64_t index) const { return *extents_[index]; }
  // Which extent holds `row`, and where inside it.
  struct Location {
    uint64_t extent;
    uint64_t local;
  };
  Location Locate(uint64_t row) const;

  std::filesystem::path dir_;
  SegmentInfo info_;
  std::vector<std::unique_ptr<Extent>> extents_;
  uint64_t visible_rows_ = 0;
  // Extents [0, growth_extents_) double from first_extent_rows and hold
  // growth_rows_ rows together; every later one holds rows_per_extent.
  uint64_t growth_extents_ = 0;
  uint64_t growth_rows_ = 0;
};

// The single writer of a segment. Not thread-safe: callers serialise writes.
class Writer : public SegmentView {
 public:
  // Creates a new segment in `dir` (created if missing, 0700 or 02750 with a
  // group; must hold no segment).
  static StatusOr<std::unique_ptr<Writer>> Create(
      const std::filesystem::path& dir, const SegmentOptions& options);
  // Reopens an existing segment for writing, e.g. after a crash: rows past the
  // committed count are discarded (their padding re-zeroed when reused).
  static StatusOr<std::unique_ptr<Writer>> Open(
      const std::filesystem::path& dir, bool sync = false);
  ~Writer() override;

  // Makes rows [committed, committed + n) writable, adding extents as needed.
  // Disk exhaustion shows here as RESOURCE_EXHAUSTED, never later as SIGBUS.
  Status Reserve(uint64_t n);
  uint64_t reserved() const { return reserved_rows_; }
  // Writable row in [committed, reserved); dim floats are meaningful, the rest
  // padding.
  float* MutableRow(uint64_t row);
  void SetId(uint64_t row, int64_t id);
  // Publishes rows [committed, new_committed) with a store-release (after msync
  // when options.sync). new_committed must be in (committed, reserved].
  Status Commit(uint64_t new_committed);
  Status Tombstone(uint64_t row);
  // Marks the segment superseded (compaction); attached readers see Retired().
  void Retire();
  void SetGeneration(uint64_t generation);
  // Flushes every mapped extent to disk.
  Status Sync();

  // The writable mapping of each extent (whole file), e.g. for cudaHostRegister
  // so a GPU kernel can store rows straight into the segment.
  struct MappedRange {
    void* data = nullptr;
    size_t bytes = 0;
  };
  std::vector<MappedRange> MappedRanges() const;

 private:
  Writer(std::filesystem::path dir, SegmentInfo info, int lock_fd, bool sync,
         std::optional<std::string> group);
  Status AddExtent();

  int lock_fd_ = -1;
  bool sync_ = false;
  std::optional<std::string> group_;
  uint64_t reserved_rows_ = 0;
};

// A read-only attachment, typically from another process.
class Reader : public SegmentView {
 public:
  // Maps the segment read-only and validates it (magic, version, checksum,
  // sizes against file sizes). A bad, truncated or foreign file is a clear
  // error.
  static StatusOr<std::unique_ptr<Reader>> Attach(
      const std::filesystem::path& dir);
  ~Reader() override;

  // Load-acquires the committed count, maps extents it needs; returns the new
  // count.
  StatusOr<uint64_t> Refresh();

 private:
  using SegmentView::SegmentView;
};

// File name of extent `index` ("vectors.00003").
std::string ExtentFileName(uint64_t index);

}  // namespace zv::shm

#endif  // ZEROVEC_SHM_SEGMENT_H_
