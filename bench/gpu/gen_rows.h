// Random unit rows generated on the device, for gpu_search_bench.
#ifndef ZEROVEC_BENCH_GPU_GEN_ROWS_H_
#define ZEROVEC_BENCH_GPU_GEN_ROWS_H_

#include <cstdint>

namespace zv::bench {

// Fills device memory `rows` (n x stride floats) with unit-length vectors of
// `dim` normal components (a counter hash + Box-Muller, so the same seed gives
// the same rows), zero padding. Queued on the legacy default stream; returns
// the cudaError_t of the launch (0 = success).
int GenerateUnitRows(float* rows, uint64_t n, uint32_t dim, uint32_t stride,
                     uint64_t seed);

}  // namespace zv::bench

#endif  // ZEROVEC_BENCH_GPU_GEN_ROWS_H_
