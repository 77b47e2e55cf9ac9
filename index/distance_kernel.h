// The distance loop shared by every ISA: an always-inline body that takes the
// instruction set of the function it is inlined into (AVX-512, AVX2+FMA or
// the portable baseline), so a caller compiled for a target gets the kernel
// inlined without a call or a dispatch per distance. Rows and padded queries
// are a multiple of 16 floats (zero padded), so there is no tail loop.
#ifndef ZEROVEC_INDEX_DISTANCE_KERNEL_H_
#define ZEROVEC_INDEX_DISTANCE_KERNEL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace zv::index::kernel {

// 16 floats: one zmm register under AVX-512, two ymm under AVX2.
typedef float V16 __attribute__((vector_size(64)));

// By reference, never by value: a 64-byte vector passed or returned by value
// has a different ABI with and without AVX-512 (gcc -Wpsabi).
__attribute__((always_inline)) inline void Load16(V16& v, const float* p) {
  std::memcpy(&v, p, sizeof(v));
}

__attribute__((always_inline)) inline float Sum16(const V16& v) {
  float s = 0;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}

// bfloat16 (the high half of a float, rounded to nearest even): the HNSW
// build reads rows as bf16, half the bytes of a float row (hnsw_build.cc).
inline uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

typedef uint16_t H16 __attribute__((vector_size(32)));
typedef uint32_t W16 __attribute__((vector_size(64)));

// 16 bf16 values widened to floats (a zero extension and a shift: exact).
__attribute__((always_inline)) inline void Load16(V16& v, const uint16_t* p) {
  H16 h;
  std::memcpy(&h, p, sizeof(h));
  const W16 w = __builtin_convertvector(h, W16) << 16;
  std::memcpy(&v, &w, sizeof(v));
}

// Inner product (kL2 false) or squared L2 distance of a and b, d values (a
// multiple of 16) of floats or bf16 (summed in float). Two accumulators: two
// FMA chains in flight.
template <bool kL2, typename T>
__attribute__((always_inline)) inline float Distance(const T* a, const T* b,
                                                     size_t d) {
  V16 s0 = {}, s1 = {}, x, y, u, w;
  size_t i = 0;
  for (; i + 32 <= d; i += 32) {
    Load16(x, a + i);
    Load16(y, a + i + 16);
    Load16(u, b + i);
    Load16(w, b + i + 16);
    if constexpr (kL2) {
      x -= u;
      y -= w;
      s0 += x * x;
      s1 += y * y;
    } else {
      s0 += x * u;
      s1 += y * w;
    }
  }
  if (i < d) {
    Load16(x, a + i);
    Load16(u, b + i);
    if constexpr (kL2) {
      x -= u;
      s0 += x * x;
    } else {
      s0 += x * u;
    }
  }
  s0 += s1;
  return Sum16(s0);
}

}  // namespace zv::index::kernel

#endif  // ZEROVEC_INDEX_DISTANCE_KERNEL_H_
