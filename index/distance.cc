#include "index/distance.h"

#include <cstring>

namespace zv::index {
namespace {

typedef float V8 __attribute__((vector_size(32)));

inline V8 Load(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline float Sum(V8 v) {
  float s = 0;
  for (int i = 0; i < 8; ++i) s += v[i];
  return s;
}

// One body, compiled twice: inlined into an AVX2+FMA caller and a portable one.
template <bool kL2>
__attribute__((always_inline)) inline float Kernel(const float* a,
                                                   const float* b, size_t d) {
  V8 s0 = {}, s1 = {};
  for (size_t i = 0; i < d; i += 16) {
    V8 x = Load(a + i), y = Load(a + i + 8);
    if constexpr (kL2) {
      x -= Load(b + i);
      y -= Load(b + i + 8);
      s0 += x * x;
      s1 += y * y;
    } else {
      s0 += x * Load(b + i);
      s1 += y * Load(b + i + 8);
    }
  }
  return Sum(s0 + s1);
}

__attribute__((target("avx2,fma"))) float InnerProductAvx2(const float* a,
                                                           const float* b,
                                                           size_t d) {
  return Kernel<false>(a, b, d);
}
__attribute__((target("avx2,fma"))) float L2SqrAvx2(const float* a,
                                                    const float* b, size_t d) {
  return Kernel<true>(a, b, d);
}
float InnerProductPortable(const float* a, const float* b, size_t d) {
  return Kernel<false>(a, b, d);
}
float L2SqrPortable(const float* a, const float* b, size_t d) {
  return Kernel<true>(a, b, d);
}

// Chosen on first use rather than by target_clones: an ifunc resolver runs
// during relocation, before a sanitizer runtime is up (TSan crashed there).
bool HasAvx2() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace

float InnerProduct16(const float* a, const float* b, size_t d) {
  return HasAvx2() ? InnerProductAvx2(a, b, d) : InnerProductPortable(a, b, d);
}

float L2Sqr16(const float* a, const float* b, size_t d) {
  return HasAvx2() ? L2SqrAvx2(a, b, d) : L2SqrPortable(a, b, d);
}

}  // namespace zv::index
