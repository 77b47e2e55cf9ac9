// Binary vector inputs for `zerovec build`: a NumPy .npy array (format 1.0,
// 2.0 or 3.0; dtype '<f4', 2-D, C order) or an .fvecs file (each row an int32
// dim, then dim float32; every row the same dim). The file is mapped read-only
// and rows are read in place: no per-number parsing, no copy until the caller
// copies a row where it wants it. Every size in the header is checked against
// the file before anything is read (this is a fuzz target), so a bad or
// truncated file is an error naming the file, never a read past the end.
// Ids come from an optional sidecar (one UTF-8 id a line, exactly rows()
// non-empty lines of at most kMaxVectorIdBytes) or are the row numbers.
#ifndef ZEROVEC_TOOLS_VECTOR_FILE_H_
#define ZEROVEC_TOOLS_VECTOR_FILE_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace zv::tools {

inline constexpr uint32_t kMaxVectorFileDim = 65536;
inline constexpr size_t kMaxVectorIdBytes = 512;

enum class VectorFileFormat { kNpy, kFvecs };

class VectorFile {
 public:
  // The format comes from the extension (.npy or .fvecs). `ids_path` empty:
  // ids are the row numbers ("0", "1", ...).
  static StatusOr<std::unique_ptr<VectorFile>> Open(
      const std::filesystem::path& path,
      const std::filesystem::path& ids_path = {});

  ~VectorFile();
  VectorFile(const VectorFile&) = delete;
  VectorFile& operator=(const VectorFile&) = delete;

  VectorFileFormat format() const { return format_; }
  uint64_t rows() const { return rows_; }
  uint32_t dim() const { return dim_; }

  // Row i's dim() floats, in the mapping (valid while this object lives);
  // nullptr when i >= rows(). Each row is contiguous in both formats; .fvecs
  // rows are strided (their dim word sits between them).
  const float* Row(uint64_t i) const {
    return i < rows_
               ? reinterpret_cast<const float*>(data_ + i * row_stride_bytes_)
               : nullptr;
  }

  // Copies rows [first, first + count) to `out`, row r at
  // out + r * out_stride floats (out_stride >= dim(), e.g. a segment's
  // padded row stride); one memcpy for a whole .npy batch when out_stride ==
  // dim(). OutOfRange when the rows are not all in the file.
  Status CopyRows(uint64_t first, uint64_t count, float* out,
                  size_t out_stride) const;
  Status CopyRows(uint64_t first, uint64_t count, float* out) const {
    return CopyRows(first, count, out, dim_);
  }

  // Row i's id: from the sidecar, else i in decimal. Precondition: i < rows().
  std::string Id(uint64_t i) const;

 private:
  VectorFile(VectorFileFormat format, const char* map, size_t map_bytes)
      : format_(format), map_(map), map_bytes_(map_bytes) {}

  Status ParseNpy();
  Status ParseFvecs();
  Status LoadIds(const std::filesystem::path& ids_path,
                 const std::filesystem::path& path);

  const VectorFileFormat format_;
  const char* const map_;  // the whole file, PROT_READ
  const size_t map_bytes_;
  const char* data_ = nullptr;  // row 0's first float
  uint64_t rows_ = 0;
  uint32_t dim_ = 0;
  uint64_t row_stride_bytes_ = 0;
  std::string ids_;                   // sidecar ids back to back
  std::vector<uint64_t> id_offsets_;  // rows()+1 offsets into ids_; or empty
};

}  // namespace zv::tools

#endif  // ZEROVEC_TOOLS_VECTOR_FILE_H_
