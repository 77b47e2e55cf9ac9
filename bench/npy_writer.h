// Writes a float32 (or int64) matrix as a NumPy .npy file (format 1.0, '<f4'
// or '<i8', C order): what tools/vector_file.h, `zerovec build --input X.npy`,
// index_bench --base and bench/lancedb read. Benchmarks only.
#ifndef ZEROVEC_BENCH_NPY_WRITER_H_
#define ZEROVEC_BENCH_NPY_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace zv::bench {

template <typename T>
inline bool WriteNpyOf(const std::string& path, const char* descr,
                       const T* data, size_t rows, size_t dim) {
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(dim) +
                       "), }";
  // Magic (6) + version (2) + length (2) + header + '\n', a multiple of 64.
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const unsigned char pre[10] = {
      0x93,
      'N',
      'U',
      'M',
      'P',
      'Y',
      1,
      0,
      static_cast<unsigned char>(header.size() & 255),
      static_cast<unsigned char>(header.size() >> 8)};
  bool ok = std::fwrite(pre, 1, 10, f) == 10 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(data, sizeof(T), rows * dim, f) == rows * dim;
  return std::fclose(f) == 0 && ok;
}

inline bool WriteNpy(const std::string& path, const float* data, size_t rows,
                     size_t dim) {
  return WriteNpyOf(path, "<f4", data, rows, dim);
}

inline bool WriteNpy(const std::string& path, const int64_t* data, size_t rows,
                     size_t dim) {
  return WriteNpyOf(path, "<i8", data, rows, dim);
}

}  // namespace zv::bench

#endif  // ZEROVEC_BENCH_NPY_WRITER_H_
