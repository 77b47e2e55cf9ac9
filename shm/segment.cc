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

#include "base/file.h"
#include "base/group.h"
#include "shm/format.h"

namespace zv::shm {

namespace bip = boost::interprocess;

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
    blocks.push_back(RowBlock{first, std::min(rows, limit - first), e.rows(),
                              e.ids(), e.tombstone_words()});
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
StatusOr<ScopedFd> LockDir(const std::filesystem::path& dir, mode_t mode) {
  const auto path = dir / "LOCK";
  ScopedFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, mode));
  if (!fd.valid()) return ErrnoError(errno, path.string());
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
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
  const auto path = dir / ExtentFileName(header.extent_index);
  // Synced whatever SegmentOptions::sync says: an extent renamed into place
  // whose header a power loss dropped would make the whole segment
  // unreadable, and extents are few.
  ZV_ASSIGN_OR_RETURN(
      AtomicFileWriter file,
      AtomicFileWriter::Create(path, {.sync = true, .mode = mode}));
  auto fail = [&](int err, const char* what) {
    return ErrnoError(err, path.filename().string() + ": " + what);
  };
  if (::fchmod(file.fd(), mode) != 0) return fail(errno, "fchmod");  // umask
  if (gid && ::fchown(file.fd(), static_cast<uid_t>(-1), *gid) != 0) {
    return fail(errno, "fchown");
  }
  // Real blocks now, so a full disk is an error here rather than SIGBUS on a
  // store.
  if (int err = ::posix_fallocate(file.fd(), 0,
                                  static_cast<off_t>(layout.file_bytes));
      err != 0) {
    return fail(err, "reserving disk space");
  }
  const std::vector<unsigned char> bytes = EncodeHeader(header);
  if (::pwrite(file.fd(), bytes.data(), bytes.size(), 0) !=
      static_cast<ssize_t>(bytes.size())) {
    return fail(errno, "writing header");
  }
  return file.Commit();
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

  ZV_ASSIGN_OR_RETURN(ScopedFd lock, LockDir(dir, file_mode));
  if (std::filesystem::exists(dir / ExtentFileName(0))) {
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

  std::unique_ptr<Writer> writer(new Writer(
      dir, InfoFrom(header), lock.release(), options.sync, options.group));
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
  ZV_ASSIGN_OR_RETURN(ScopedFd lock, LockDir(dir, group ? 0640 : 0600));
  std::unique_ptr<Writer> writer(
      new Writer(dir, InfoFrom(header), lock.release(), sync, group));
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
