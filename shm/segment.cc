#include "shm/segment.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <system_error>

#include "base/group.h"

namespace zv::shm {
namespace {

namespace bip = boost::interprocess;

constexpr uint64_t kMagic = 0x3130474553565a5aULL;  // "ZZVSEG01" little-endian
constexpr uint32_t kHeaderBytes = 4096;
constexpr uint64_t kPage = 4096;

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
constexpr uint32_t kOldestReadableVersion = 1;

constexpr size_t SharedStateOffset(uint32_t version) {
  return version == 1 ? 64 : 128;
}
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

uint64_t HeaderChecksum(const FixedHeader& h) {
  return Fnv1a64(&h, offsetof(FixedHeader, checksum));
}
uint64_t HeaderChecksum(const FixedHeaderV1& h) {
  return Fnv1a64(&h, offsetof(FixedHeaderV1, checksum));
}

// The bytes of `h` as version h.version stores them (checksum computed).
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

uint32_t RowStrideFor(uint32_t dim) { return (dim + 15u) / 16u * 16u; }

uint64_t RoundUp(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

// Extent geometry, all implied by first_extent_rows and rows_per_extent
// (validated: 1 <= first <= rows_per_extent <= 2^24, so at most 24 doublings).
uint64_t GrowthExtents(const SegmentInfo& info) {
  uint64_t k = 0;
  while ((info.first_extent_rows << k) < info.rows_per_extent) ++k;
  return k;
}
uint64_t ExtentRows(const SegmentInfo& info, uint64_t index) {
  return index < GrowthExtents(info) ? info.first_extent_rows << index
                                     : info.rows_per_extent;
}
// First row of extent `index`, i.e. the rows extents [0, index) hold.
uint64_t ExtentFirstRow(const SegmentInfo& info, uint64_t index) {
  const uint64_t k = GrowthExtents(info);
  const uint64_t growth = std::min(index, k);
  return info.first_extent_rows * ((uint64_t{1} << growth) - 1) +
         (index - growth) * info.rows_per_extent;
}

// Default extent 0: the largest power of two of rows within the byte target.
uint64_t AutoFirstExtentRows(uint32_t row_stride, uint64_t rows_per_extent) {
  const uint64_t row_bytes = uint64_t{row_stride} * sizeof(float);
  uint64_t rows = 1;
  while (rows * 2 * row_bytes <= kFirstExtentTargetBytes) rows *= 2;
  return std::min(rows, rows_per_extent);
}

// Where rows, ids and tombstones sit inside one extent file.
struct ExtentLayout {
  uint64_t rows;  // rows this extent holds
  uint64_t rows_offset;
  uint64_t ids_offset;
  uint64_t tombstones_offset;
  uint64_t file_bytes;

  static ExtentLayout For(const SegmentInfo& info, uint64_t rows) {
    ExtentLayout l;
    l.rows = rows;
    l.rows_offset = kHeaderBytes;
    l.ids_offset = l.rows_offset + rows * info.row_stride * sizeof(float);
    l.tombstones_offset = l.ids_offset + rows * sizeof(int64_t);
    l.file_bytes = RoundUp(l.tombstones_offset + RoundUp(rows, 64) / 8, kPage);
    return l;
  }
};

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

SegmentInfo InfoFrom(const FixedHeader& h) {
  SegmentInfo info;
  info.dim = h.dim;
  info.row_stride = h.row_stride;
  info.metric = static_cast<Metric>(h.metric);
  info.rows_per_extent = h.rows_per_extent;
  info.first_extent_rows = h.first_extent_rows;
  return info;
}

// Closes a file descriptor on scope exit.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads and validates the fixed header of an extent file without mapping it.
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

// Extent `index` must carry extent 0's uuid and geometry: it is mapped with
// the sizes extent 0 implies, so a mismatch would map past its end.
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

}  // namespace

// One mapped vectors.NNNNN file.
class Extent {
 public:
  // Maps extent `index` of the segment `info` describes; `header` is its
  // decoded, validated header.
  static StatusOr<std::unique_ptr<Extent>> Map(
      const std::filesystem::path& path, bool writable, const SegmentInfo& info,
      uint64_t index, const FixedHeader& header) {
    const ExtentLayout layout =
        ExtentLayout::For(info, ExtentRows(info, index));
    try {
      const auto mode = writable ? bip::read_write : bip::read_only;
      bip::file_mapping file(path.c_str(), mode);
      bip::mapped_region region(file, mode, 0, layout.file_bytes);
      if (region.get_size() != layout.file_bytes) {
        return DataLossError(path.filename().string() +
                             ": mapped size mismatch");
      }
      return std::unique_ptr<Extent>(
          new Extent(std::move(region), layout, header));
    } catch (const bip::interprocess_exception& e) {
      return Status(e.get_error_code() == bip::not_found_error
                        ? StatusCode::kNotFound
                    : e.get_error_code() == bip::security_error
                        ? StatusCode::kPermissionDenied
                        : StatusCode::kInternal,
                    path.string() + ": cannot map: " + e.what());
    }
  }

  std::byte* base() const {
    return static_cast<std::byte*>(region_.get_address());
  }
  size_t bytes() const { return region_.get_size(); }
  float* rows() const {
    return reinterpret_cast<float*>(base() + layout_.rows_offset);
  }
  int64_t* ids() const {
    return reinterpret_cast<int64_t*>(base() + layout_.ids_offset);
  }
  uint64_t* tombstone_words() const {
    return reinterpret_cast<uint64_t*>(base() + layout_.tombstones_offset);
  }
  // Decoded (version 2 fields, whatever the file's version).
  const FixedHeader& header() const { return header_; }

  Status Flush(uint64_t offset, uint64_t length) const {
    const uint64_t start = offset / kPage * kPage;
    const uint64_t end = RoundUp(offset + length, kPage);
    if (::msync(base() + start, end - start, MS_SYNC) != 0) {
      return ErrnoError(errno, "msync");
    }
    return OkStatus();
  }
  const ExtentLayout& layout() const { return layout_; }

 private:
  Extent(bip::mapped_region region, const ExtentLayout& layout,
         const FixedHeader& header)
      : region_(std::move(region)), layout_(layout), header_(header) {}

  bip::mapped_region region_;
  ExtentLayout layout_;
  FixedHeader header_;
};

// Mutable segment state in extent 0's header page, shared by all processes.
// Accessed only through std::atomic_ref: the writer stores with release,
// readers load acquire.
struct SegmentView::SharedState {
  alignas(64) uint64_t committed;
  alignas(64) uint64_t extent_count;
  uint64_t generation;
  uint64_t tombstones;
  uint64_t retired;
};
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free,
              "the publication protocol needs lock-free 64-bit atomics");

namespace {
std::atomic_ref<uint64_t> Atomic(uint64_t& word) {
  return std::atomic_ref<uint64_t>(word);
}
}  // namespace

std::string ExtentFileName(uint64_t index) {
  char name[32];
  std::snprintf(name, sizeof(name), "vectors.%05llu",
                static_cast<unsigned long long>(index));
  return name;
}

SegmentView::SegmentView(std::filesystem::path dir, SegmentInfo info)
    : dir_(std::move(dir)),
      info_(info),
      growth_extents_(GrowthExtents(info)),
      growth_rows_(ExtentFirstRow(info, growth_extents_)) {}
SegmentView::~SegmentView() = default;

SegmentView::SharedState* SegmentView::state() const {
  static_assert(SharedStateOffset(kFormatVersion) + sizeof(SharedState) <=
                kHeaderBytes);
  const Extent& e = *extents_[0];
  return reinterpret_cast<SharedState*>(e.base() +
                                        SharedStateOffset(e.header().version));
}

SegmentView::Location SegmentView::Locate(uint64_t row) const {
  if (row < growth_rows_) {
    // Extent i starts at first * (2^i - 1).
    const uint64_t first = info_.first_extent_rows;
    const uint64_t i = std::bit_width(row / first + 1) - 1;
    return {i, row - first * ((uint64_t{1} << i) - 1)};
  }
  const uint64_t past = row - growth_rows_;
  return {growth_extents_ + past / info_.rows_per_extent,
          past % info_.rows_per_extent};
}

const float* SegmentView::Row(uint64_t row) const {
  const Location l = Locate(row);
  return extent(l.extent).rows() + l.local * info_.row_stride;
}

int64_t SegmentView::Id(uint64_t row) const {
  const Location l = Locate(row);
  return extent(l.extent).ids()[l.local];
}

bool SegmentView::IsTombstoned(uint64_t row) const {
  const Location l = Locate(row);
  uint64_t& word = extent(l.extent).tombstone_words()[l.local / 64];
  return (Atomic(word).load(std::memory_order_acquire) >> (l.local % 64)) & 1u;
}

uint64_t SegmentView::TombstoneCount() const {
  return Atomic(state()->tombstones).load(std::memory_order_acquire);
}
uint64_t SegmentView::Generation() const {
  return Atomic(state()->generation).load(std::memory_order_acquire);
}
bool SegmentView::Retired() const {
  return Atomic(state()->retired).load(std::memory_order_acquire) != 0;
}

std::vector<RowBlock> SegmentView::Blocks(uint64_t limit) const {
  std::vector<RowBlock> blocks;
  uint64_t first = 0;
  for (uint64_t i = 0; first < limit; ++i) {
    const Extent& e = extent(i);
    const uint64_t rows = e.layout().rows;
    blocks.push_back(
        RowBlock{first, std::min(rows, limit - first), e.rows(), e.ids(),
                 e.tombstone_words()});
    first += rows;
  }
  return blocks;
}

// ----------------------------------------------------------------------------
// Writer

Writer::Writer(std::filesystem::path dir, SegmentInfo info, int lock_fd,
               bool sync, std::optional<std::string> group)
    : SegmentView(std::move(dir), info),
      lock_fd_(lock_fd),
      sync_(sync),
      group_(std::move(group)) {}

Writer::~Writer() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

namespace {

// Takes the single-writer lock; the kernel drops it if the writer dies.
StatusOr<int> LockDir(const std::filesystem::path& dir, mode_t mode) {
  const auto path = dir / "LOCK";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoError(errno, path.string());
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return FailedPreconditionError(dir.string() +
                                   ": another writer has this segment open");
  }
  return fd;
}

// Creates one extent file under a temporary name, reserves its blocks and
// writes its header, then renames it into place: a reader never sees a
// half-made extent.
Status CreateExtentFile(const std::filesystem::path& dir,
                        const FixedHeader& header, const ExtentLayout& layout,
                        mode_t mode, std::optional<gid_t> gid) {
  const auto final_path = dir / ExtentFileName(header.extent_index);
  const auto tmp_path = final_path.string() + ".tmp";
  ::unlink(tmp_path.c_str());
  ScopedFd fd(
      ::open(tmp_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (fd.get() < 0) return ErrnoError(errno, tmp_path);
  auto fail = [&](int err, const char* what) {
    ::unlink(tmp_path.c_str());
    return ErrnoError(err, final_path.filename().string() + ": " + what);
  };
  if (::fchmod(fd.get(), mode) != 0)
    return fail(errno, "fchmod");  // umask-proof
  if (gid && ::fchown(fd.get(), static_cast<uid_t>(-1), *gid) != 0) {
    return fail(errno, "fchown");
  }
  // Real blocks now, so a full disk is an error here rather than SIGBUS on a
  // store.
  if (int err =
          ::posix_fallocate(fd.get(), 0, static_cast<off_t>(layout.file_bytes));
      err != 0) {
    return fail(err, "reserving disk space");
  }
  const std::vector<unsigned char> bytes = EncodeHeader(header);
  if (::pwrite(fd.get(), bytes.data(), bytes.size(), 0) !=
      static_cast<ssize_t>(bytes.size())) {
    return fail(errno, "writing header");
  }
  if (::fdatasync(fd.get()) != 0) return fail(errno, "fdatasync");
  if (::rename(tmp_path.c_str(), final_path.c_str()) != 0)
    return fail(errno, "rename");
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Writer>> Writer::Create(
    const std::filesystem::path& dir, const SegmentOptions& options) {
  if (options.dim == 0 || options.dim > kMaxDim) {
    return InvalidArgumentError("dim must be in [1, " +
                                std::to_string(kMaxDim) + "], got " +
                                std::to_string(options.dim));
  }
  if (options.rows_per_extent == 0 ||
      options.rows_per_extent > kMaxRowsPerExtent) {
    return InvalidArgumentError("rows_per_extent must be in [1, 2^24]");
  }
  if (options.first_extent_rows > options.rows_per_extent) {
    return InvalidArgumentError(
        "first_extent_rows " + std::to_string(options.first_extent_rows) +
        " exceeds rows_per_extent " + std::to_string(options.rows_per_extent));
  }
  std::optional<gid_t> gid;
  if (options.group) {
    ZV_ASSIGN_OR_RETURN(gid, ResolveGroup(*options.group));
  }
  const mode_t file_mode = options.group ? 0640 : 0600;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return InternalError(dir.string() +
                         ": cannot create directory: " + ec.message());
  if (gid) {
    ZV_RETURN_IF_ERROR(ShareWithGroup(dir, *gid));  // 02750: new files inherit
  } else {
    ::chmod(dir.c_str(), 0700);
  }

  ZV_ASSIGN_OR_RETURN(int lock_fd, LockDir(dir, file_mode));
  if (std::filesystem::exists(dir / ExtentFileName(0))) {
    ::close(lock_fd);
    return AlreadyExistsError(dir.string() + ": already holds a segment");
  }

  FixedHeader header{};
  header.magic = kMagic;
  header.version = kFormatVersion;
  header.header_bytes = kHeaderBytes;
  header.dim = options.dim;
  header.row_stride = RowStrideFor(options.dim);
  header.element_type = static_cast<uint32_t>(ElementType::kFloat32);
  header.metric = static_cast<uint32_t>(options.metric);
  header.rows_per_extent = options.rows_per_extent;
  header.first_extent_rows =
      options.first_extent_rows != 0
          ? options.first_extent_rows
          : AutoFirstExtentRows(header.row_stride, options.rows_per_extent);
  header.extent_index = 0;
  header.extent_rows = header.first_extent_rows;
  header.segment_uuid =
      std::random_device{}() * 0x100000000ULL ^ std::random_device{}();
  header.checksum = HeaderChecksum(header);

  std::unique_ptr<Writer> writer(
      new Writer(dir, InfoFrom(header), lock_fd, options.sync, options.group));
  const ExtentLayout layout =
      ExtentLayout::For(writer->info_, header.extent_rows);
  // Extent 0 carries the shared state; it starts zeroed (fallocate),
  // extent_count is set once the file is in place.
  ZV_RETURN_IF_ERROR(CreateExtentFile(dir, header, layout, file_mode, gid));
  ZV_ASSIGN_OR_RETURN(auto extent0, Extent::Map(dir / ExtentFileName(0), true,
                                                writer->info_, 0, header));
  writer->extents_.push_back(std::move(extent0));
  Atomic(writer->state()->extent_count).store(1, std::memory_order_release);
  ZV_RETURN_IF_ERROR(writer->extents_[0]->Flush(0, kHeaderBytes));
  return writer;
}

StatusOr<std::unique_ptr<Writer>> Writer::Open(const std::filesystem::path& dir,
                                               bool sync) {
  ZV_ASSIGN_OR_RETURN(FixedHeader header,
                      ReadFixedHeader(dir / ExtentFileName(0)));
  if (header.extent_index != 0) {
    return DataLossError(ExtentFileName(0) + ": header names extent " +
                         std::to_string(header.extent_index));
  }
  struct stat st {};
  std::optional<std::string> group;
  if (::stat((dir / ExtentFileName(0)).c_str(), &st) == 0 &&
      (st.st_mode & 0040)) {
    if (struct group* g = ::getgrgid(st.st_gid)) group = g->gr_name;
  }
  ZV_ASSIGN_OR_RETURN(int lock_fd, LockDir(dir, group ? 0640 : 0600));
  std::unique_ptr<Writer> writer(
      new Writer(dir, InfoFrom(header), lock_fd, sync, group));
  ZV_ASSIGN_OR_RETURN(auto extent0, Extent::Map(dir / ExtentFileName(0), true,
                                                writer->info_, 0, header));
  writer->extents_.push_back(std::move(extent0));

  SharedState* s = writer->state();
  const uint64_t extent_count =
      Atomic(s->extent_count).load(std::memory_order_acquire);
  const uint64_t committed =
      Atomic(s->committed).load(std::memory_order_acquire);
  if (extent_count == 0 || extent_count > kMaxExtents ||
      committed > ExtentFirstRow(writer->info_, extent_count)) {
    return DataLossError(ExtentFileName(0) + ": committed count " +
                         std::to_string(committed) +
                         " exceeds the extents' capacity");
  }
  for (uint64_t i = 1; i < extent_count; ++i) {
    const auto path = dir / ExtentFileName(i);
    ZV_ASSIGN_OR_RETURN(FixedHeader h, ReadFixedHeader(path));
    ZV_RETURN_IF_ERROR(CheckSameSegment(h, header, i, path));
    ZV_ASSIGN_OR_RETURN(auto extent,
                        Extent::Map(path, true, writer->info_, i, h));
    writer->extents_.push_back(std::move(extent));
  }
  writer->visible_rows_ = committed;
  writer->reserved_rows_ = committed;
  return writer;
}

Status Writer::AddExtent() {
  if (extents_.size() >= kMaxExtents)
    return ResourceExhaustedError("segment is at its extent limit");
  FixedHeader header = extents_[0]->header();
  header.extent_index = extents_.size();
  header.extent_rows = ExtentRows(info_, header.extent_index);
  header.checksum = HeaderChecksum(header);
  std::optional<gid_t> gid;
  if (group_) {
    ZV_ASSIGN_OR_RETURN(gid, ResolveGroup(*group_));
  }
  const ExtentLayout layout = ExtentLayout::For(info_, header.extent_rows);
  ZV_RETURN_IF_ERROR(
      CreateExtentFile(dir_, header, layout, group_ ? 0640 : 0600, gid));
  ZV_ASSIGN_OR_RETURN(
      auto extent, Extent::Map(dir_ / ExtentFileName(header.extent_index), true,
                               info_, header.extent_index, header));
  extents_.push_back(std::move(extent));
  Atomic(state()->extent_count)
      .store(extents_.size(), std::memory_order_release);
  return OkStatus();
}

Status Writer::Reserve(uint64_t n) {
  const uint64_t want = visible_rows_ + n;
  while (want > ExtentFirstRow(info_, extents_.size())) {
    ZV_RETURN_IF_ERROR(AddExtent());
  }
  reserved_rows_ = std::max(reserved_rows_, want);
  return OkStatus();
}

float* Writer::MutableRow(uint64_t row) {
  const Location l = Locate(row);
  return extent(l.extent).rows() + l.local * info_.row_stride;
}

void Writer::SetId(uint64_t row, int64_t id) {
  const Location l = Locate(row);
  extent(l.extent).ids()[l.local] = id;
}

Status Writer::Commit(uint64_t new_committed) {
  if (new_committed <= visible_rows_ || new_committed > reserved_rows_) {
    return InvalidArgumentError(
        "commit to " + std::to_string(new_committed) +
        " outside (committed=" + std::to_string(visible_rows_) +
        ", reserved=" + std::to_string(reserved_rows_) + "]");
  }
  // Padding must read as zero so searching over the full stride stays exact.
  const uint32_t pad = info_.row_stride - info_.dim;
  for (uint64_t row = visible_rows_; pad != 0 && row < new_committed; ++row) {
    std::memset(MutableRow(row) + info_.dim, 0, pad * sizeof(float));
  }
  if (sync_) {
    for (uint64_t first = visible_rows_; first < new_committed;) {
      const auto [index, local] = Locate(first);
      const Extent& e = extent(index);
      const ExtentLayout& l = e.layout();
      const uint64_t count = std::min(l.rows - local, new_committed - first);
      ZV_RETURN_IF_ERROR(
          e.Flush(l.rows_offset + local * info_.row_stride * sizeof(float),
                  count * info_.row_stride * sizeof(float)));
      ZV_RETURN_IF_ERROR(e.Flush(l.ids_offset + local * sizeof(int64_t),
                                 count * sizeof(int64_t)));
      first += count;
    }
  }
  Atomic(state()->committed).store(new_committed, std::memory_order_release);
  visible_rows_ = new_committed;
  if (sync_) ZV_RETURN_IF_ERROR(extents_[0]->Flush(0, kHeaderBytes));
  return OkStatus();
}

Status Writer::Tombstone(uint64_t row) {
  if (row >= visible_rows_) {
    return OutOfRangeError("tombstone of row " + std::to_string(row) +
                           " past committed count " +
                           std::to_string(visible_rows_));
  }
  const auto [index, local] = Locate(row);
  uint64_t& word = extent(index).tombstone_words()[local / 64];
  const uint64_t bit = uint64_t{1} << (local % 64);
  if ((Atomic(word).fetch_or(bit, std::memory_order_release) & bit) == 0) {
    Atomic(state()->tombstones).fetch_add(1, std::memory_order_release);
  }
  return OkStatus();
}

void Writer::Retire() {
  Atomic(state()->retired).store(1, std::memory_order_release);
}

void Writer::SetGeneration(uint64_t generation) {
  Atomic(state()->generation).store(generation, std::memory_order_release);
}

Status Writer::Sync() {
  for (const auto& e : extents_) ZV_RETURN_IF_ERROR(e->Flush(0, e->bytes()));
  return OkStatus();
}

std::vector<Writer::MappedRange> Writer::MappedRanges() const {
  std::vector<MappedRange> ranges;
  for (const auto& e : extents_) ranges.push_back({e->base(), e->bytes()});
  return ranges;
}

// ----------------------------------------------------------------------------
// Reader

Reader::~Reader() = default;

StatusOr<std::unique_ptr<Reader>> Reader::Attach(
    const std::filesystem::path& dir) {
  const auto path0 = dir / ExtentFileName(0);
  if (!std::filesystem::is_directory(dir)) {
    return NotFoundError(dir.string() + ": no such segment directory");
  }
  ZV_ASSIGN_OR_RETURN(FixedHeader header, ReadFixedHeader(path0));
  if (header.extent_index != 0) {
    return DataLossError(ExtentFileName(0) + ": header names extent " +
                         std::to_string(header.extent_index));
  }
  std::unique_ptr<Reader> reader(new Reader(dir, InfoFrom(header)));
  ZV_ASSIGN_OR_RETURN(auto extent0,
                      Extent::Map(path0, false, reader->info_, 0, header));
  reader->extents_.push_back(std::move(extent0));
  ZV_RETURN_IF_ERROR(reader->Refresh().status());
  return reader;
}

StatusOr<uint64_t> Reader::Refresh() {
  SharedState* s = state();
  // Acquire on committed orders every later read of rows, ids and extent_count
  // after the writer's stores that preceded its release.
  const uint64_t committed =
      Atomic(s->committed).load(std::memory_order_acquire);
  const uint64_t extent_count =
      Atomic(s->extent_count).load(std::memory_order_acquire);
  if (extent_count == 0 || extent_count > kMaxExtents ||
      committed > ExtentFirstRow(info_, extent_count)) {
    return DataLossError(ExtentFileName(0) + ": committed count " +
                         std::to_string(committed) +
                         " exceeds the extents' capacity");
  }
  const uint64_t needed = committed == 0 ? 1 : Locate(committed - 1).extent + 1;
  const FixedHeader& h0 = extents_[0]->header();
  while (extents_.size() < needed) {
    const uint64_t i = extents_.size();
    const auto path = dir_ / ExtentFileName(i);
    ZV_ASSIGN_OR_RETURN(FixedHeader h, ReadFixedHeader(path));
    ZV_RETURN_IF_ERROR(CheckSameSegment(h, h0, i, path));
    ZV_ASSIGN_OR_RETURN(auto extent, Extent::Map(path, false, info_, i, h));
    extents_.push_back(std::move(extent));
  }
  visible_rows_ = std::max(visible_rows_, committed);
  return visible_rows_;
}

}  // namespace zv::shm
