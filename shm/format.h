// The on-disk format of a segment's extent files: the fixed header (both
// readable versions), its checksum, and where rows, ids and tombstones sit.
// shm-internal (Bazel visibility): segment.h is the module's public surface.
#ifndef ZEROVEC_SHM_FORMAT_H_
#define ZEROVEC_SHM_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"
#include "shm/segment.h"

namespace zv::shm {

inline constexpr uint64_t kMagic = 0x3130474553565a5aULL;  // "ZZVSEG01" LE
inline constexpr uint32_t kHeaderBytes = 4096;
inline constexpr uint64_t kPage = 4096;
inline constexpr uint32_t kOldestReadableVersion = 1;

// Bytes [0, 80) of every extent. Fixed at creation; the checksum covers all
// fields before it, so a flipped byte or a foreign file is caught before
// anything is mapped.
struct FixedHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;
  uint32_t dim;
  uint32_t row_stride;
  uint32_t element_type;
  uint32_t metric;
  uint64_t rows_per_extent;    // rows of the largest extents
  uint64_t first_extent_rows;  // rows of extent 0; doubling up to the above
  uint64_t extent_index;
  uint64_t extent_rows;   // this extent's rows: implied by the three above,
                          // stored so a file's size is checkable on its own
  uint64_t segment_uuid;  // ties every extent to its segment
  uint64_t checksum;
};
static_assert(sizeof(FixedHeader) == 80);

// Format version 1 (fixed-size extents): still read and appended to in its
// own format, so existing collections keep working; compaction rewrites them
// as version 2. Its shared state starts at byte 64.
struct FixedHeaderV1 {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;
  uint32_t dim;
  uint32_t row_stride;
  uint32_t element_type;
  uint32_t metric;
  uint64_t rows_per_extent;
  uint64_t extent_index;
  uint64_t segment_uuid;
  uint64_t checksum;
};
static_assert(sizeof(FixedHeaderV1) == 64);

// Where the mutable segment state sits in extent 0's header page.
constexpr size_t SharedStateOffset(uint32_t version) {
  return version == 1 ? 64 : 128;
}

constexpr uint32_t RowStrideFor(uint32_t dim) {
  return (dim + 15u) / 16u * 16u;
}
constexpr uint64_t RoundUp(uint64_t x, uint64_t to) {
  return (x + to - 1) / to * to;
}

uint64_t HeaderChecksum(const FixedHeader& h);
// The bytes of `h` as version h.version stores them (checksum computed).
std::vector<unsigned char> EncodeHeader(FixedHeader h);

// Extent geometry, all implied by first_extent_rows and rows_per_extent
// (validated: 1 <= first <= rows_per_extent <= 2^24, so at most 24 doublings).
uint64_t GrowthExtents(const SegmentInfo& info);
uint64_t ExtentRows(const SegmentInfo& info, uint64_t index);
// First row of extent `index`, i.e. the rows extents [0, index) hold.
uint64_t ExtentFirstRow(const SegmentInfo& info, uint64_t index);
// Default extent 0: the largest power of two of rows within about 256 KiB.
uint64_t AutoFirstExtentRows(uint32_t row_stride, uint64_t rows_per_extent);

// Where rows, ids and tombstones sit inside one extent file.
struct ExtentLayout {
  uint64_t rows;  // rows this extent holds
  uint64_t rows_offset;
  uint64_t ids_offset;
  uint64_t tombstones_offset;
  uint64_t file_bytes;

  static ExtentLayout For(const SegmentInfo& info, uint64_t rows);
};

SegmentInfo InfoFrom(const FixedHeader& h);

// Reads and validates the fixed header of an extent file without mapping it:
// magic, version, checksum, field ranges, and the file's size.
StatusOr<FixedHeader> ReadFixedHeader(const std::filesystem::path& path);

// Extent `index` must carry extent 0's uuid and geometry: it is mapped with
// the sizes extent 0 implies, so a mismatch would map past its end.
Status CheckSameSegment(const FixedHeader& h, const FixedHeader& h0,
                        uint64_t index, const std::filesystem::path& path);

}  // namespace zv::shm

#endif  // ZEROVEC_SHM_FORMAT_H_
