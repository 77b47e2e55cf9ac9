// Element-wise parts of the CPU encoder (GELU, LayerNorm, softmax) in fp32,
// vectorised: AVX-512 or AVX2+FMA chosen at run time, else portable scalar
// code. The GEMMs stay in OpenBLAS. embed/-internal.
#ifndef ZEROVEC_EMBED_CPU_KERNELS_H_
#define ZEROVEC_EMBED_CPU_KERNELS_H_

#include <cstddef>

namespace zv::embed::cpu {

// y[r][i] = GELU(y[r][i] + bias[i]) (erf form, as torch's default GELU), for
// `rows` rows of width n.
void BiasGelu(float* y, const float* bias, size_t rows, size_t n);

// x[r] = LayerNorm(x[r] + add[r] + bias) * gamma + beta, for `rows` rows of
// width h; `add` and `bias` may be null.
void AddLayerNorm(float* x, const float* add, const float* bias, size_t rows,
                  size_t h, const float* gamma, const float* beta, float eps);

// Each of `rows` rows of width n becomes softmax(row).
void Softmax(float* s, size_t rows, size_t n);

// "avx512", "avx2" or "scalar": the path the functions above take here.
const char* KernelIsa();

// For tests: the same functions forced onto one path (false where this CPU
// lacks it).
enum class Isa { kScalar, kAvx2, kAvx512 };
bool IsaSupported(Isa isa);
void BiasGeluIsa(Isa isa, float* y, const float* bias, size_t rows, size_t n);
void AddLayerNormIsa(Isa isa, float* x, const float* add, const float* bias,
                     size_t rows, size_t h, const float* gamma,
                     const float* beta, float eps);
void SoftmaxIsa(Isa isa, float* s, size_t rows, size_t n);

}  // namespace zv::embed::cpu

#endif  // ZEROVEC_EMBED_CPU_KERNELS_H_
