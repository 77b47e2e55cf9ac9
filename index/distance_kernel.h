// The distance loop shared by every ISA: an always-inline body that takes the
// instruction set of the function it is inlined into (AVX-512, AVX2+FMA or
// the portable baseline), so a caller compiled for a target gets the kernel
// inlined without a call or a dispatch per distance. Rows and padded queries
// are a multiple of 16 floats (zero padded), so there is no tail loop.
#ifndef ZEROVEC_INDEX_DISTANCE_KERNEL_H_
#define ZEROVEC_INDEX_DISTANCE_KERNEL_H_

#include <cstddef>
#include <cstring>

namespace zv::index::kernel {

// 16 floats: one zmm register under AVX-512, two ymm under AVX2.
typedef float V16 __attribute__((vector_size(64)));

__attribute__((always_inline)) inline V16 Load16(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

__attribute__((always_inline)) inline float Sum16(V16 v) {
  float s = 0;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}

// Inner product (kL2 false) or squared L2 distance of a and b, d floats (a
// multiple of 16). Two accumulators: two FMA chains in flight.
template <bool kL2>
__attribute__((always_inline)) inline float Distance(const float* a,
                                                     const float* b, size_t d) {
  V16 s0 = {}, s1 = {};
  size_t i = 0;
  for (; i + 32 <= d; i += 32) {
    V16 x = Load16(a + i), y = Load16(a + i + 16);
    if constexpr (kL2) {
      x -= Load16(b + i);
      y -= Load16(b + i + 16);
      s0 += x * x;
      s1 += y * y;
    } else {
      s0 += x * Load16(b + i);
      s1 += y * Load16(b + i + 16);
    }
  }
  if (i < d) {
    V16 x = Load16(a + i);
    if constexpr (kL2) {
      x -= Load16(b + i);
      s0 += x * x;
    } else {
      s0 += x * Load16(b + i);
    }
  }
  return Sum16(s0 + s1);
}

}  // namespace zv::index::kernel

#endif  // ZEROVEC_INDEX_DISTANCE_KERNEL_H_
