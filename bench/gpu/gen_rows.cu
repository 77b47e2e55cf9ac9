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
__global__ void GenerateKernel(float* rows, uint64_t n, uint32_t dim,
                               uint32_t stride, uint64_t seed) {
  const uint64_t row =
      (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= n) return;
  float* x = rows + row * stride;
  float sum = 0.f;
  for (uint32_t d = lane; d < stride; d += 32) {
    float v = 0.f;
    if (d < dim) {
      const uint64_t h = Mix(seed ^ Mix(row * 4096 + d));
      const float u1 = ((h >> 40) + 1) * (1.0f / 16777217.0f);
      const float u2 = ((h & 0xffffff)) * (1.0f / 16777216.0f);
      v = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
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
                     uint64_t seed) {
  const uint64_t threads = n * 32;
  GenerateKernel<<<(threads + 255) / 256, 256>>>(rows, n, dim, stride, seed);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace zv::bench
