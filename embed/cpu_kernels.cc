#include "embed/cpu_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace zv::embed::cpu {
namespace {

// One float: the portable path, and the row tails of the vector paths.
struct S {
  using T = float;
  static constexpr size_t kWidth = 1;
  static T Load(const float* p) { return *p; }
  static void Store(float* p, T v) { *p = v; }
  static T Set(float v) { return v; }
  static T Add(T a, T b) { return a + b; }
  static T Sub(T a, T b) { return a - b; }
  static T Mul(T a, T b) { return a * b; }
  static T Div(T a, T b) { return a / b; }
  static T Fma(T a, T b, T c) { return a * b + c; }
  static T Min(T a, T b) { return std::min(a, b); }
  static T Max(T a, T b) { return std::max(a, b); }
  static T Round(T a) { return std::nearbyint(a); }
  // 2^n for an integral n in [-126, 127].
  static T Pow2(T n) {
    return std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  }
  static float ReduceAdd(T a) { return a; }
  static float ReduceMax(T a) { return a; }
};

namespace scalar {
using V = S;
#define ZV_TARGET
#include "embed/cpu_kernels_impl.inc"
#undef ZV_TARGET
}  // namespace scalar

namespace avx2 {
#define ZV_TARGET __attribute__((target("avx2,fma")))
struct V {
  using T = __m256;
  static constexpr size_t kWidth = 8;
  ZV_TARGET static T Load(const float* p) { return _mm256_loadu_ps(p); }
  ZV_TARGET static void Store(float* p, T v) { _mm256_storeu_ps(p, v); }
  ZV_TARGET static T Set(float v) { return _mm256_set1_ps(v); }
  ZV_TARGET static T Add(T a, T b) { return _mm256_add_ps(a, b); }
  ZV_TARGET static T Sub(T a, T b) { return _mm256_sub_ps(a, b); }
  ZV_TARGET static T Mul(T a, T b) { return _mm256_mul_ps(a, b); }
  ZV_TARGET static T Div(T a, T b) { return _mm256_div_ps(a, b); }
  ZV_TARGET static T Fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  ZV_TARGET static T Min(T a, T b) { return _mm256_min_ps(a, b); }
  ZV_TARGET static T Max(T a, T b) { return _mm256_max_ps(a, b); }
  ZV_TARGET static T Round(T a) {
    return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  ZV_TARGET static T Pow2(T n) {
    const __m256i e =
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  ZV_TARGET static float ReduceAdd(T a) {
    __m128 s =
        _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  ZV_TARGET static float ReduceMax(T a) {
    __m128 s =
        _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
#include "embed/cpu_kernels_impl.inc"
#undef ZV_TARGET
}  // namespace avx2

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which
// -Wmaybe-uninitialized reports at every inlined use (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace avx512 {
#define ZV_TARGET __attribute__((target("avx512f,avx2,fma")))
struct V {
  using T = __m512;
  static constexpr size_t kWidth = 16;
  ZV_TARGET static T Load(const float* p) { return _mm512_loadu_ps(p); }
  ZV_TARGET static void Store(float* p, T v) { _mm512_storeu_ps(p, v); }
  ZV_TARGET static T Set(float v) { return _mm512_set1_ps(v); }
  ZV_TARGET static T Add(T a, T b) { return _mm512_add_ps(a, b); }
  ZV_TARGET static T Sub(T a, T b) { return _mm512_sub_ps(a, b); }
  ZV_TARGET static T Mul(T a, T b) { return _mm512_mul_ps(a, b); }
  ZV_TARGET static T Div(T a, T b) { return _mm512_div_ps(a, b); }
  ZV_TARGET static T Fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  ZV_TARGET static T Min(T a, T b) { return _mm512_min_ps(a, b); }
  ZV_TARGET static T Max(T a, T b) { return _mm512_max_ps(a, b); }
  ZV_TARGET static T Round(T a) {
    return _mm512_roundscale_ps(a,
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  ZV_TARGET static T Pow2(T n) {
    const __m512i e =
        _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  ZV_TARGET static float ReduceAdd(T a) { return _mm512_reduce_add_ps(a); }
  ZV_TARGET static float ReduceMax(T a) { return _mm512_reduce_max_ps(a); }
};
#include "embed/cpu_kernels_impl.inc"
#undef ZV_TARGET
}  // namespace avx512
#pragma GCC diagnostic pop

// Chosen on first use rather than by target_clones, as index/distance.cc
// does: an ifunc resolver runs before a sanitizer runtime is up.
Isa Detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return Isa::kAvx2;
  return Isa::kScalar;
}

Isa Best() {
  static const Isa isa = Detect();
  return isa;
}

}  // namespace

bool IsaSupported(Isa isa) {
  return static_cast<int>(isa) <= static_cast<int>(Best());
}

const char* KernelIsa() {
  switch (Best()) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    default:
      return "scalar";
  }
}

void BiasGeluIsa(Isa isa, float* y, const float* bias, size_t rows, size_t n) {
  switch (isa) {
    case Isa::kAvx512:
      return avx512::BiasGeluImpl(y, bias, rows, n);
    case Isa::kAvx2:
      return avx2::BiasGeluImpl(y, bias, rows, n);
    default:
      return scalar::BiasGeluImpl(y, bias, rows, n);
  }
}

void AddLayerNormIsa(Isa isa, float* x, const float* add, const float* bias,
                     size_t rows, size_t h, const float* gamma,
                     const float* beta, float eps) {
  switch (isa) {
    case Isa::kAvx512:
      return avx512::AddLayerNormImpl(x, add, bias, rows, h, gamma, beta, eps);
    case Isa::kAvx2:
      return avx2::AddLayerNormImpl(x, add, bias, rows, h, gamma, beta, eps);
    default:
      return scalar::AddLayerNormImpl(x, add, bias, rows, h, gamma, beta, eps);
  }
}

void SoftmaxIsa(Isa isa, float* s, size_t rows, size_t n) {
  switch (isa) {
    case Isa::kAvx512:
      return avx512::SoftmaxImpl(s, rows, n);
    case Isa::kAvx2:
      return avx2::SoftmaxImpl(s, rows, n);
    default:
      return scalar::SoftmaxImpl(s, rows, n);
  }
}

void BiasGelu(float* y, const float* bias, size_t rows, size_t n) {
  BiasGeluIsa(Best(), y, bias, rows, n);
}

void AddLayerNorm(float* x, const float* add, const float* bias, size_t rows,
                  size_t h, const float* gamma, const float* beta, float eps) {
  AddLayerNormIsa(Best(), x, add, bias, rows, h, gamma, beta, eps);
}

void Softmax(float* s, size_t rows, size_t n) {
  SoftmaxIsa(Best(), s, rows, n);
}

}  // namespace zv::embed::cpu
