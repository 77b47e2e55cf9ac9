// The one file layer: an owned descriptor, atomic whole-file replacement, and
// read-only mappings. Every module writes "temp file, then rename" through
// here (LevelDB's Env and SetCurrentFile are the model), so durability is
// decided once per caller, in one flag, instead of by hand each time.
#ifndef ZEROVEC_BASE_FILE_H_
#define ZEROVEC_BASE_FILE_H_

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string_view>

#include "base/status.h"

namespace zv {

// Owns a file descriptor and closes it on destruction. Move-only.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() { reset(); }
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership without closing.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes the current descriptor (if any) and owns `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct WriteOptions {
  // Fsync the new file before the rename and its directory after it, so the
  // new contents (and the rename) survive a power loss. Without it the
  // replacement is still atomic for every process on the machine.
  bool sync = false;
  // Permission bits of the new file, as for open(2): the umask applies.
  mode_t mode = 0666;
};

// Writes `path` under a temporary name beside it (`path` + ".tmp", so a
// crashed writer's leftover is overwritten by the next one and is easy to
// sweep) and renames it over `path` on Commit: readers see the old file or the
// new one, never a mix. Destroying it without a successful Commit removes the
// temporary file. One writer per path at a time.
class AtomicFileWriter {
 public:
  static StatusOr<AtomicFileWriter> Create(std::filesystem::path path,
                                           const WriteOptions& options = {});
  ~AtomicFileWriter();
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;

  // The temporary file, for what only the caller knows (fchmod, fchown,
  // posix_fallocate, pwrite).
  int fd() const { return fd_.get(); }
  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temp_path() const { return temp_path_; }

  // Appends at the current offset, retrying short writes and EINTR.
  Status Append(const void* data, size_t bytes);
  Status Append(std::string_view bytes) {
    return Append(bytes.data(), bytes.size());
  }
  // (fsync,) close, rename over path() (, fsync the directory). Once only.
  Status Commit();

 private:
  AtomicFileWriter(std::filesystem::path path, const WriteOptions& options,
                   ScopedFd fd);
  // "<path>: <what>: <errno text>", after removing the temporary file.
  Status Fail(int err, std::string_view what);

  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  WriteOptions options_;
  ScopedFd fd_;
  bool done_ = false;  // committed, failed and cleaned up, or moved from
};

// Replaces `path` with `bytes` atomically (see AtomicFileWriter); on any
// failure `path` keeps its old contents and no temporary file is left.
Status WriteFileAtomically(const std::filesystem::path& path,
                           std::string_view bytes,
                           const WriteOptions& options = {});

// Fsyncs a directory, making renames and creations inside it durable.
Status SyncDirectory(const std::filesystem::path& dir);

// A whole regular file mapped read-only (MAP_SHARED, PROT_READ); unmapped on
// destruction. Move-only. An empty file maps to size() 0, data() nullptr.
class MappedFile {
 public:
  static StatusOr<MappedFile> Open(const std::filesystem::path& path);
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const {
    return {reinterpret_cast<const char*>(data_), size_};
  }

 private:
  MappedFile(const std::byte* data, size_t size) : data_(data), size_(size) {}
  void Unmap();

  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace zv

#endif  // ZEROVEC_BASE_FILE_H_
