// See gen_rows.h.
#include <cuda_runtime.h>

#include "bench/gpu/gen_rows.h"

namespace zv::bench {
namespace {

__device__ uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A warp per row: normal components, then the row's norm by a warp reduction.
__device__ float Normal(uint64_t h) {  // Box-Muller on one 64-bit hash
  const float u1 = ((h >> 40) + 1) * (1.0f / 16777217.0f);
  const float u2 = ((h & 0xffffff)) * (1.0f / 16777216.0f);
  return sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
}

// Centres do not depend on `seed`: rows and queries made with other seeds
// share them.
constexpr uint64_t kCentreSeed = 0xC3A7E5ull;

__global__ void GenerateKernel(float* rows, uint64_t n, uint32_t dim,
                               uint32_t stride, uint64_t seed,
                               uint32_t clusters, float spread) {
  const uint64_t row =
      (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= n) return;
  float* x = rows + row * stride;
  float sum = 0.f;
  for (uint32_t d = lane; d < stride; d += 32) {
    float v = 0.f;
    if (d < dim) {
      v = Normal(Mix(seed ^ Mix(row * 4096 + d)));
      if (clusters > 0) {
        // index/test_util.h's LatentClustered: unit centre + a displacement
        // in a shared 16-dimensional subspace + a little isotropic noise.
        const float inv = rsqrtf(float(dim));
        const uint64_t c = Mix(seed ^ Mix(row)) % clusters;
        float x = Normal(Mix(kCentreSeed ^ Mix(c * 4096 + d))) * inv;
        for (uint64_t l = 0; l < 16; ++l) {
          const float z = 0.06f * Normal(Mix(seed ^ Mix((row << 8) + l + 7)));
          x += z * Normal(Mix((kCentreSeed + 1) ^ Mix(l * 4096 + d))) * inv;
        }
        v = x + spread * v;
      }
    }
    x[d] = v;
    sum += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float scale = rsqrtf(sum);
  for (uint32_t d = lane; d < dim; d += 32) x[d] *= scale;
}

}  // namespace

int GenerateUnitRows(float* rows, uint64_t n, uint32_t dim, uint32_t stride,
                     uint64_t seed, uint32_t clusters, float spread) {
  const uint64_t threads = n * 32;
  GenerateKernel<<<(threads + 255) / 256, 256>>>(rows, n, dim, stride, seed,
                                                 clusters, spread);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace zv::bench
