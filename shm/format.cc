#include "shm/format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/file.h"

namespace zv::shm {
namespace {

// An empty segment's extent 0 holds about this many bytes of rows.
constexpr uint64_t kFirstExtentTargetBytes = 256 * 1024;

uint64_t Fnv1a64(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t HeaderChecksum(const FixedHeaderV1& h) {
  return Fnv1a64(&h, offsetof(FixedHeaderV1, checksum));
}

// Decodes the first 80 bytes of an extent (any readable version) into the
// version 2 fields, checking magic, version and checksum; a version 1 header
// has first_extent_rows = extent_rows = rows_per_extent.
StatusOr<FixedHeader> DecodeHeader(const unsigned char* bytes,
                                   const std::string& file) {
  FixedHeader h{};
  std::memcpy(&h, bytes, sizeof(h));
  if (h.magic != kMagic) {
    return InvalidArgumentError(file + ": not a ZeroVec segment (bad magic)");
  }
  if (h.version < kOldestReadableVersion || h.version > kFormatVersion) {
    return FailedPreconditionError(
        file + ": format version " + std::to_string(h.version) +
        " is not supported (this build reads versions " +
        std::to_string(kOldestReadableVersion) + " to " +
        std::to_string(kFormatVersion) + ")");
  }
  if (h.version == 1) {
    FixedHeaderV1 v1{};
    std::memcpy(&v1, bytes, sizeof(v1));
    if (HeaderChecksum(v1) != v1.checksum) {
      return DataLossError(file + ": header checksum mismatch");
    }
    h = FixedHeader{v1.magic,
                    v1.version,
                    v1.header_bytes,
                    v1.dim,
                    v1.row_stride,
                    v1.element_type,
                    v1.metric,
                    v1.rows_per_extent,
                    v1.rows_per_extent,
                    v1.extent_index,
                    v1.rows_per_extent,
                    v1.segment_uuid,
                    0};
  } else if (HeaderChecksum(h) != h.checksum) {
    return DataLossError(file + ": header checksum mismatch");
  }
  return h;
}

// Range checks of a decoded header.
Status ValidateFixed(const FixedHeader& h, const std::string& file) {
  if (h.header_bytes != kHeaderBytes || h.dim == 0 || h.dim > kMaxDim ||
      h.row_stride != RowStrideFor(h.dim) ||
      h.element_type != static_cast<uint32_t>(ElementType::kFloat32) ||
      h.metric > 1 || h.rows_per_extent == 0 ||
      h.rows_per_extent > kMaxRowsPerExtent || h.first_extent_rows == 0 ||
      h.first_extent_rows > h.rows_per_extent ||
      h.extent_index >= kMaxExtents) {
    return DataLossError(file + ": header fields out of range");
  }
  SegmentInfo info;
  info.rows_per_extent = h.rows_per_extent;
  info.first_extent_rows = h.first_extent_rows;
  if (h.extent_rows != ExtentRows(info, h.extent_index)) {
    return DataLossError(file + ": header says " +
                         std::to_string(h.extent_rows) + " rows, extent " +
                         std::to_string(h.extent_index) + " must hold " +
                         std::to_string(ExtentRows(info, h.extent_index)));
  }
  return OkStatus();
}

}  // namespace

uint64_t HeaderChecksum(const FixedHeader& h) {
  return Fnv1a64(&h, offsetof(FixedHeader, checksum));
}

std::vector<unsigned char> EncodeHeader(FixedHeader h) {
  std::vector<unsigned char> out;
  if (h.version == 1) {
    FixedHeaderV1 v1{h.magic,
                     h.version,
                     h.header_bytes,
                     h.dim,
                     h.row_stride,
                     h.element_type,
                     h.metric,
                     h.rows_per_extent,
                     h.extent_index,
                     h.segment_uuid,
                     0};
    v1.checksum = HeaderChecksum(v1);
    out.resize(sizeof(v1));
    std::memcpy(out.data(), &v1, sizeof(v1));
  } else {
    h.checksum = HeaderChecksum(h);
    out.resize(sizeof(h));
    std::memcpy(out.data(), &h, sizeof(h));
  }
  return out;
}

uint64_t GrowthExtents(const SegmentInfo& info) {
  uint64_t k = 0;
  while ((info.first_extent_rows << k) < info.rows_per_extent) ++k;
  return k;
}
uint64_t ExtentRows(const SegmentInfo& info, uint64_t index) {
  return index < GrowthExtents(info) ? info.first_extent_rows << index
                                     : info.rows_per_extent;
}
uint64_t ExtentFirstRow(const SegmentInfo& info, uint64_t index) {
  const uint64_t k = GrowthExtents(info);
  const uint64_t growth = std::min(index, k);
  return info.first_extent_rows * ((uint64_t{1} << growth) - 1) +
         (index - growth) * info.rows_per_extent;
}

uint64_t AutoFirstExtentRows(uint32_t row_stride, uint64_t rows_per_extent) {
  const uint64_t row_bytes = uint64_t{row_stride} * sizeof(float);
  uint64_t rows = 1;
  while (rows * 2 * row_bytes <= kFirstExtentTargetBytes) rows *= 2;
  return std::min(rows, rows_per_extent);
}

ExtentLayout ExtentLayout::For(const SegmentInfo& info, uint64_t rows) {
  ExtentLayout l;
  l.rows = rows;
  l.rows_offset = kHeaderBytes;
  l.ids_offset = l.rows_offset + rows * info.row_stride * sizeof(float);
  l.tombstones_offset = l.ids_offset + rows * sizeof(int64_t);
  l.file_bytes = RoundUp(l.tombstones_offset + RoundUp(rows, 64) / 8, kPage);
  return l;
}

SegmentInfo InfoFrom(const FixedHeader& h) {
  SegmentInfo info;
  info.dim = h.dim;
  info.row_stride = h.row_stride;
  info.metric = static_cast<Metric>(h.metric);
  info.rows_per_extent = h.rows_per_extent;
  info.first_extent_rows = h.first_extent_rows;
  return info;
}

StatusOr<FixedHeader> ReadFixedHeader(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError(errno, path.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, path.string());
  if (!S_ISREG(st.st_mode))
    return InvalidArgumentError(name + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) < kHeaderBytes) {
    return DataLossError(name + ": truncated (" + std::to_string(st.st_size) +
                         " bytes, smaller than the 4096-byte header)");
  }
  unsigned char bytes[sizeof(FixedHeader)];
  if (::pread(fd.get(), bytes, sizeof(bytes), 0) !=
      static_cast<ssize_t>(sizeof(bytes))) {
    return ErrnoError(errno, path.string());
  }
  ZV_ASSIGN_OR_RETURN(const FixedHeader h, DecodeHeader(bytes, name));
  ZV_RETURN_IF_ERROR(ValidateFixed(h, name));
  const uint64_t expected =
      ExtentLayout::For(InfoFrom(h), h.extent_rows).file_bytes;
  if (static_cast<uint64_t>(st.st_size) != expected) {
    return DataLossError(name + ": size is " + std::to_string(st.st_size) +
                         " bytes, the header implies " +
                         std::to_string(expected) +
                         " (truncated or foreign file)");
  }
  return h;
}

Status CheckSameSegment(const FixedHeader& h, const FixedHeader& h0,
                        uint64_t index, const std::filesystem::path& path) {
  if (h.segment_uuid != h0.segment_uuid || h.extent_index != index ||
      h.version != h0.version || h.dim != h0.dim ||
      h.row_stride != h0.row_stride || h.element_type != h0.element_type ||
      h.metric != h0.metric || h.rows_per_extent != h0.rows_per_extent ||
      h.first_extent_rows != h0.first_extent_rows) {
    return DataLossError(path.filename().string() +
                         ": belongs to another segment");
  }
  return OkStatus();
}

}  // namespace zv::shm
