#include "tools/vector_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

namespace zv::tools {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kNpyMagic("\x93NUMPY", 6);
// numpy itself refuses headers over 10000 bytes unless told otherwise.
constexpr uint64_t kMaxNpyHeaderBytes = 1 << 20;
constexpr size_t kMaxNpyDims = 32;  // numpy's own limit (NPY_MAXDIMS)

uint32_t LoadLe32(const char* p) {
  unsigned char b[4];
  std::memcpy(b, p, 4);
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 |
         uint32_t(b[3]) << 24;
}

// A header's text inside an error message: bounded, and printable.
std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 40)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (s.size() > 40) out += "...";
  return out + "'";
}

// RAII for a read-only, shared mapping of a whole file.
class Mapping {
 public:
  Mapping() = default;
  Mapping(const char* data, size_t size) : data_(data), size_(size) {}
  Mapping(Mapping&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  Mapping& operator=(Mapping&&) = delete;
  ~Mapping() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  const char* release() { return std::exchange(data_, nullptr); }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// Maps `path` read-only. An empty file gives an empty Mapping (mmap refuses
// length 0).
StatusOr<Mapping> MapFile(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, path.string() + ": cannot open");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, path.string() + ": cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path.string() + ": not a regular file");
  }
  const size_t size = size_t(st.st_size);
  if (size == 0) {
    ::close(fd);
    return Mapping();
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (map == MAP_FAILED) return ErrnoError(err, path.string() + ": mmap");
  // Advisory: read ahead, drop pages behind (rows are read once, in order).
  (void)::madvise(map, size, MADV_SEQUENTIAL);
  return Mapping(static_cast<const char*>(map), size);
}

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<uint64_t> shape;
};

// The header is a Python dict literal, as numpy writes it:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (1000, 384), }
// This reads exactly that grammar (any key order, either quote style, numpy's
// old 'L' suffix on ints), and nothing more general.
class NpyHeaderParser {
 public:
  explicit NpyHeaderParser(std::string_view text) : s_(text) {}

  Status Parse(NpyHeader* header) {
    bool have_descr = false, have_order = false, have_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("does not start with '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      ZV_RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after " + Quote(key));
      SkipSpace();
      bool* seen;
      if (key == "descr") {
        seen = &have_descr;
        if (Peek() == '[') {
          return InvalidArgumentError(
              "structured dtypes are not supported (only '<f4')");
        }
        ZV_RETURN_IF_ERROR(ParseString(&header->descr));
      } else if (key == "fortran_order") {
        seen = &have_order;
        ZV_RETURN_IF_ERROR(ParseBool(&header->fortran_order));
      } else if (key == "shape") {
        seen = &have_shape;
        ZV_RETURN_IF_ERROR(ParseShape(&header->shape));
      } else {
        return Error("unexpected key " + Quote(key));
      }
      if (*seen) return Error("repeats key " + Quote(key));
      *seen = true;
      SkipSpace();
      if (Consume('}')) break;
      if (!Consume(',')) return Error("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != s_.size()) return Error("has bytes after its '}'");
    if (!have_descr) return Error("has no 'descr'");
    if (!have_order) return Error("has no 'fortran_order'");
    if (!have_shape) return Error("has no 'shape'");
    return OkStatus();
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgumentError("malformed header: " + what + " (at byte " +
                                std::to_string(pos_) + ")");
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Consume(char c) {
    if (pos_ >= s_.size() || s_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool ConsumeWord(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                                s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  Status ParseString(std::string* out) {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a string");
    const size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return Error("unterminated string");
    const std::string_view body = s_.substr(pos_ + 1, end - pos_ - 1);
    if (body.find('\\') != std::string_view::npos) {
      return Error("escapes in strings are not supported");
    }
    out->assign(body);
    pos_ = end + 1;
    return OkStatus();
  }
  Status ParseBool(bool* out) {
    if (ConsumeWord("True")) {
      *out = true;
    } else if (ConsumeWord("False")) {
      *out = false;
    } else {
      return Error("'fortran_order' must be True or False");
    }
    return OkStatus();
  }
  Status ParseShape(std::vector<uint64_t>* shape) {
    if (!Consume('(')) return Error("'shape' must be a tuple");
    while (true) {
      SkipSpace();
      if (Consume(')')) return OkStatus();
      if (shape->size() == kMaxNpyDims) return Error("'shape' has too many");
      uint64_t v = 0;
      const size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (__builtin_mul_overflow(v, 10u, &v) ||
            __builtin_add_overflow(v, uint64_t(s_[pos_] - '0'), &v)) {
          return Error("a 'shape' entry overflows");
        }
        ++pos_;
      }
      if (pos_ == start) return Error("'shape' entries must be integers");
      Consume('L');  // Python 2 longs, in files from old numpy versions
      shape->push_back(v);
      SkipSpace();
      if (Consume(')')) return OkStatus();
      if (!Consume(',')) return Error("expected ',' or ')' in 'shape'");
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + (shape.size() == 1 ? ",)" : ")");
}

// Strict UTF-8: no overlong forms, surrogates or code points past U+10FFFF.
bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (size_t(end - p) <= n) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (size_t i = 2; i <= n; ++i) {
      if (p[i] < 0x80 || p[i] > 0xBF) return false;
    }
    p += n + 1;
  }
  return true;
}

}  // namespace

VectorFile::~VectorFile() {
  if (map_ != nullptr) ::munmap(const_cast<char*>(map_), map_bytes_);
}

StatusOr<std::unique_ptr<VectorFile>> VectorFile::Open(
    const fs::path& path, const fs::path& ids_path) {
  const std::string ext = path.extension().string();
  VectorFileFormat format;
  if (ext == ".npy") {
    format = VectorFileFormat::kNpy;
  } else if (ext == ".fvecs") {
    format = VectorFileFormat::kFvecs;
  } else {
    return InvalidArgumentError(path.string() +
                                ": not a vector file (expected a .npy or "
                                ".fvecs extension)");
  }
  ZV_ASSIGN_OR_RETURN(Mapping mapping, MapFile(path));
  if (mapping.size() == 0) {
    return InvalidArgumentError(path.string() + ": empty file");
  }
  const size_t size = mapping.size();
  std::unique_ptr<VectorFile> file(
      new VectorFile(format, mapping.release(), size));
  Status parsed =
      format == VectorFileFormat::kNpy ? file->ParseNpy() : file->ParseFvecs();
  ZV_RETURN_IF_ERROR(parsed.WithContext(path.string()));
  if (!ids_path.empty()) ZV_RETURN_IF_ERROR(file->LoadIds(ids_path, path));
  return file;
}

namespace {

// Where the .npy header lies: [start, start + length), after the magic and a
// format version this reads (1.0: uint16 length; 2.0 and 3.0: uint32).
struct NpyHeaderSpan {
  uint64_t start = 0;
  uint64_t length = 0;
};

StatusOr<NpyHeaderSpan> ReadNpyPreamble(std::string_view file) {
  if (file.substr(0, kNpyMagic.size()) != kNpyMagic) {
    return InvalidArgumentError("not a .npy file (bad magic)");
  }
  if (file.size() < 10) {
    return InvalidArgumentError("truncated: " + std::to_string(file.size()) +
                                " bytes, shorter than the .npy preamble");
  }
  const int major = static_cast<unsigned char>(file[6]);
  const int minor = static_cast<unsigned char>(file[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return InvalidArgumentError(
        "unsupported .npy format version " + std::to_string(major) + "." +
        std::to_string(minor) + " (1.0, 2.0 and 3.0 are read)");
  }
  // Little-endian lengths.
  NpyHeaderSpan span;
  if (major == 1) {
    span.start = 10;
    span.length = uint8_t(file[8]) | uint64_t(uint8_t(file[9])) << 8;
  } else {
    if (file.size() < 12) {
      return InvalidArgumentError("truncated: " + std::to_string(file.size()) +
                                  " bytes, shorter than the .npy preamble");
    }
    span.start = 12;
    span.length = LoadLe32(file.data() + 8);
  }
  if (span.length > kMaxNpyHeaderBytes) {
    return InvalidArgumentError("header length " + std::to_string(span.length) +
                                " is implausibly large");
  }
  if (span.start + span.length > file.size()) {
    return InvalidArgumentError("truncated: the header (" +
                                std::to_string(span.length) +
                                " bytes) runs past the end of the file (" +
                                std::to_string(file.size()) + " bytes)");
  }
  return span;
}

// The array this reads: C-order little-endian float32, 2-D (rows, dim).
Status CheckNpyArray(const NpyHeader& header) {
  if (header.descr != "<f4") {
    return InvalidArgumentError(
        "dtype " + Quote(header.descr) +
        " is not supported: only '<f4' (little-endian float32); convert "
        "with arr.astype('<f4')");
  }
  if (header.fortran_order) {
    return InvalidArgumentError(
        "fortran_order is True (column-major): only C-order arrays are "
        "supported; save np.ascontiguousarray(arr)");
  }
  if (header.shape.size() != 2) {
    return InvalidArgumentError("shape " + ShapeText(header.shape) + " is " +
                                std::to_string(header.shape.size()) +
                                "-D; expected 2-D (rows, dim)");
  }
  const uint64_t dim = header.shape[1];
  if (dim < 1 || dim > kMaxVectorFileDim) {
    return InvalidArgumentError("dim " + std::to_string(dim) +
                                " out of range 1.." +
                                std::to_string(kMaxVectorFileDim));
  }
  return OkStatus();
}

}  // namespace

Status VectorFile::ParseNpy() {
  const std::string_view file(map_, map_bytes_);
  ZV_ASSIGN_OR_RETURN(const NpyHeaderSpan span, ReadNpyPreamble(file));
  NpyHeader header;
  ZV_RETURN_IF_ERROR(
      NpyHeaderParser(file.substr(span.start, span.length)).Parse(&header));
  ZV_RETURN_IF_ERROR(CheckNpyArray(header));
  const uint64_t rows = header.shape[0], dim = header.shape[1];
  const uint64_t data_offset = span.start + span.length;
  // numpy pads the header to a multiple of 64; floats need at least 4.
  if (data_offset % alignof(float) != 0) {
    return InvalidArgumentError("data offset " + std::to_string(data_offset) +
                                " is not a multiple of 4");
  }
  const uint64_t row_bytes = dim * sizeof(float);
  uint64_t data_bytes;
  if (__builtin_mul_overflow(rows, row_bytes, &data_bytes)) {
    return InvalidArgumentError("shape " + ShapeText(header.shape) +
                                " is too large");
  }
  const uint64_t available = file.size() - data_offset;
  if (data_bytes > available) {
    return InvalidArgumentError(
        "truncated: shape " + ShapeText(header.shape) + " needs " +
        std::to_string(data_bytes) + " bytes of float32 data, " +
        std::to_string(available) + " follow the header");
  }
  if (data_bytes < available) {
    return InvalidArgumentError(std::to_string(available - data_bytes) +
                                " unexpected bytes after the data of shape " +
                                ShapeText(header.shape));
  }
  data_ = map_ + data_offset;
  rows_ = rows;
  dim_ = uint32_t(dim);
  row_stride_bytes_ = row_bytes;
  return OkStatus();
}

Status VectorFile::ParseFvecs() {
  if (map_bytes_ < sizeof(int32_t)) {
    return InvalidArgumentError("truncated: " + std::to_string(map_bytes_) +
                                " bytes, less than one row's dim");
  }
  const int32_t dim = int32_t(LoadLe32(map_));
  if (dim < 1 || uint32_t(dim) > kMaxVectorFileDim) {
    return InvalidArgumentError(
        "row 0: dim " + std::to_string(dim) + " out of range 1.." +
        std::to_string(kMaxVectorFileDim) + " (not an .fvecs file?)");
  }
  const uint64_t row_bytes = sizeof(int32_t) + uint64_t(dim) * sizeof(float);
  if (map_bytes_ % row_bytes != 0) {
    return InvalidArgumentError("size " + std::to_string(map_bytes_) +
                                " is not a whole number of rows of " +
                                std::to_string(row_bytes) + " bytes (dim " +
                                std::to_string(dim) +
                                "): truncated, or rows of different dims");
  }
  const uint64_t rows = map_bytes_ / row_bytes;
  // Every row must repeat the dim. This touches each page once, but it is
  // what lets Row() hand out a pointer with no check.
  for (uint64_t i = 1; i < rows; ++i) {
    const uint32_t d = LoadLe32(map_ + i * row_bytes);
    if (d != uint32_t(dim)) {
      return InvalidArgumentError("row " + std::to_string(i) + ": dim " +
                                  std::to_string(int32_t(d)) + ", row 0 has " +
                                  std::to_string(dim));
    }
  }
  data_ = map_ + sizeof(int32_t);
  rows_ = rows;
  dim_ = uint32_t(dim);
  row_stride_bytes_ = row_bytes;
  return OkStatus();
}

Status VectorFile::LoadIds(const fs::path& ids_path, const fs::path& path) {
  ZV_ASSIGN_OR_RETURN(Mapping ids, MapFile(ids_path));
  const std::string_view text(ids.data(), ids.size());
  const std::string name = ids_path.string();
  ids_.clear();
  ids_.reserve(text.size());
  id_offsets_.clear();
  id_offsets_.reserve(rows_ + 1);
  id_offsets_.push_back(0);
  uint64_t line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    const size_t next = end == std::string_view::npos ? text.size() : end + 1;
    if (end == std::string_view::npos) end = text.size();
    std::string_view id = text.substr(pos, end - pos);
    if (!id.empty() && id.back() == '\r') id.remove_suffix(1);
    pos = next;
    ++line_number;
    const std::string where = name + ":" + std::to_string(line_number) + ": ";
    if (line_number > rows_) {
      return InvalidArgumentError(where + "more ids than the " +
                                  std::to_string(rows_) + " rows of " +
                                  path.string());
    }
    if (id.empty()) return InvalidArgumentError(where + "empty id");
    if (id.size() > kMaxVectorIdBytes) {
      return InvalidArgumentError(where + "id longer than " +
                                  std::to_string(kMaxVectorIdBytes) + " bytes");
    }
    if (!IsValidUtf8(id)) {
      return InvalidArgumentError(where + "id is not valid UTF-8");
    }
    ids_.append(id);
    id_offsets_.push_back(ids_.size());
  }
  if (line_number != rows_) {
    return InvalidArgumentError(name + ": " + std::to_string(line_number) +
                                " ids, but " + path.string() + " has " +
                                std::to_string(rows_) + " rows");
  }
  ids_.shrink_to_fit();
  return OkStatus();
}

Status VectorFile::CopyRows(uint64_t first, uint64_t count, float* out,
                            size_t out_stride) const {
  if (first > rows_ || count > rows_ - first) {
    return OutOfRangeError("rows [" + std::to_string(first) + ", +" +
                           std::to_string(count) + ") past the " +
                           std::to_string(rows_) + " rows");
  }
  if (out_stride < dim_) {
    return InvalidArgumentError("CopyRows: out_stride " +
                                std::to_string(out_stride) + " < dim " +
                                std::to_string(dim_));
  }
  const size_t row_bytes = size_t(dim_) * sizeof(float);
  if (count == 0) return OkStatus();
  if (row_stride_bytes_ == row_bytes && out_stride == dim_) {
    std::memcpy(out, Row(first), count * row_bytes);  // contiguous both ways
    return OkStatus();
  }
  for (uint64_t i = 0; i < count; ++i) {
    std::memcpy(out + i * out_stride, Row(first + i), row_bytes);
  }
  return OkStatus();
}

std::string VectorFile::Id(uint64_t i) const {
  assert(i < rows_);
  if (id_offsets_.empty()) return std::to_string(i);
  if (i >= rows_) return std::string();
  return ids_.substr(id_offsets_[i], id_offsets_[i + 1] - id_offsets_[i]);
}

}  // namespace zv::tools
