#include "base/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

namespace zv {

void ScopedFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

// ----------------------------------------------------------------------------
// AtomicFileWriter

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path,
                                   const WriteOptions& options, ScopedFd fd)
    : path_(std::move(path)),
      temp_path_(path_.string() + ".tmp"),
      options_(options),
      fd_(std::move(fd)) {}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      temp_path_(std::move(other.temp_path_)),
      options_(other.options_),
      fd_(std::move(other.fd_)),
      done_(std::exchange(other.done_, true)) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (done_) return;
  fd_.reset();
  ::unlink(temp_path_.c_str());
}

StatusOr<AtomicFileWriter> AtomicFileWriter::Create(
    std::filesystem::path path, const WriteOptions& options) {
  const std::string temp = path.string() + ".tmp";
  // A crashed writer's leftover; O_EXCL below then refuses to follow a link
  // or share the name with a concurrent writer.
  ::unlink(temp.c_str());
  ScopedFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                     options.mode));
  if (!fd.valid()) {
    return ErrnoError(errno,
                      path.string() + ": create " +
                          std::filesystem::path(temp).filename().string());
  }
  return AtomicFileWriter(std::move(path), options, std::move(fd));
}

Status AtomicFileWriter::Fail(int err, std::string_view what) {
  fd_.reset();
  ::unlink(temp_path_.c_str());
  done_ = true;
  return ErrnoError(err, path_.string() + ": " + std::string(what));
}

Status AtomicFileWriter::Append(const void* data, size_t bytes) {
  if (done_) return FailedPreconditionError(path_.string() + ": already done");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    // At most 64 MiB a call: Linux writes at most ~2 GiB at once anyway.
    const ssize_t n = ::write(fd_.get(), p, std::min<size_t>(bytes, 1 << 26));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Fail(errno, "write");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return OkStatus();
}

Status AtomicFileWriter::Commit() {
  if (done_) return FailedPreconditionError(path_.string() + ": already done");
  if (options_.sync && ::fsync(fd_.get()) != 0) return Fail(errno, "fsync");
  // close() reports deferred write errors (NFS, quota) that write() did not.
  if (::close(fd_.release()) != 0) return Fail(errno, "close");
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return Fail(errno, "rename");
  }
  done_ = true;
  if (options_.sync) {
    const std::filesystem::path dir = path_.parent_path();
    return SyncDirectory(dir.empty() ? std::filesystem::path(".") : dir);
  }
  return OkStatus();
}

Status WriteFileAtomically(const std::filesystem::path& path,
                           std::string_view bytes,
                           const WriteOptions& options) {
  ZV_ASSIGN_OR_RETURN(AtomicFileWriter writer,
                      AtomicFileWriter::Create(path, options));
  ZV_RETURN_IF_ERROR(writer.Append(bytes));
  return writer.Commit();
}

Status SyncDirectory(const std::filesystem::path& dir) {
  ScopedFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, dir.string() + ": open directory");
  if (::fsync(fd.get()) != 0) {
    return ErrnoError(errno, dir.string() + ": fsync directory");
  }
  return OkStatus();
}

// ----------------------------------------------------------------------------
// MappedFile

StatusOr<MappedFile> MappedFile::Open(const std::filesystem::path& path) {
  const std::string name = path.string();
  ScopedFd fd(::open(name.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, name + ": open");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, name + ": fstat");
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgumentError(name + ": not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) return MappedFile();  // mmap refuses a zero length
  // The mapping keeps the file alive once fd closes.
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return ErrnoError(errno, name + ": mmap");
  return MappedFile(static_cast<const std::byte*>(map), size);
}

MappedFile::~MappedFile() { Unmap(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::Unmap() {
  if (data_ != nullptr) {
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
  data_ = nullptr;
  size_ = 0;
}

}  // namespace zv
