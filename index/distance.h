// Distance kernels for rows in place. Rows and padded queries are row_stride
// floats (a multiple of 16, zero padded), so the loops need no tail. Built for
// AVX-512 and AVX2+FMA with a portable fallback, chosen on first use (the
// Debian faiss build is SSE only). Hot loops that call a distance per step
// (the HNSW search) inline distance_kernel.h per ISA instead.
#ifndef ZEROVEC_INDEX_DISTANCE_H_
#define ZEROVEC_INDEX_DISTANCE_H_

#include <cstddef>

namespace zv::index {

// The instruction set this CPU runs the kernels with (detected once).
enum class Isa { kPortable, kAvx2, kAvx512 };
Isa DetectIsa();

// d must be a multiple of 16.
float InnerProduct16(const float* a, const float* b, size_t d);
float L2Sqr16(const float* a, const float* b, size_t d);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_DISTANCE_H_
