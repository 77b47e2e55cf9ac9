#include "index/distance.h"

#include "index/distance_kernel.h"

namespace zv::index {
namespace {

using kernel::Distance;

// One body (distance_kernel.h), inlined into each ISA's function.
__attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma"))) float
InnerProductAvx512(const float* a, const float* b, size_t d) {
  return Distance<false>(a, b, d);
}
__attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma"))) float L2SqrAvx512(
    const float* a, const float* b, size_t d) {
  return Distance<true>(a, b, d);
}
__attribute__((target("avx2,fma"))) float InnerProductAvx2(const float* a,
                                                           const float* b,
                                                           size_t d) {
  return Distance<false>(a, b, d);
}
__attribute__((target("avx2,fma"))) float L2SqrAvx2(const float* a,
                                                    const float* b, size_t d) {
  return Distance<true>(a, b, d);
}
float InnerProductPortable(const float* a, const float* b, size_t d) {
  return Distance<false>(a, b, d);
}
float L2SqrPortable(const float* a, const float* b, size_t d) {
  return Distance<true>(a, b, d);
}

using Fn = float (*)(const float*, const float*, size_t);
struct Kernels {
  Fn ip, l2;
};

// Chosen on first use rather than by target_clones: an ifunc resolver runs
// during relocation, before a sanitizer runtime is up (TSan crashed there).
const Kernels& Chosen() {
  static const Kernels k = [] {
    switch (DetectIsa()) {
      case Isa::kAvx512:
        return Kernels{InnerProductAvx512, L2SqrAvx512};
      case Isa::kAvx2:
        return Kernels{InnerProductAvx2, L2SqrAvx2};
      default:
        return Kernels{InnerProductPortable, L2SqrPortable};
    }
  }();
  return k;
}

}  // namespace

Isa DetectIsa() {
  static const Isa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
      return Isa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return Isa::kAvx2;
    return Isa::kPortable;
  }();
  return isa;
}

float InnerProduct16(const float* a, const float* b, size_t d) {
  return Chosen().ip(a, b, d);
}

float L2Sqr16(const float* a, const float* b, size_t d) {
  return Chosen().l2(a, b, d);
}

}  // namespace zv::index
