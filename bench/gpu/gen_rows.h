// Random unit rows generated on the device, for gpu_search_bench.
#ifndef ZEROVEC_BENCH_GPU_GEN_ROWS_H_
#define ZEROVEC_BENCH_GPU_GEN_ROWS_H_

#include <cstdint>

namespace zv::bench {

// Fills device memory `rows` (n x stride floats) with unit-length vectors of
// `dim` normal components (a counter hash + Box-Muller, so the same seed gives
// the same rows), zero padding. With `clusters` > 0 each row is one of that
// many fixed random unit centres plus a displacement in a shared
// 16-dimensional subspace plus `spread` times its own normal noise, then
// normalised (index/test_util.h's LatentClustered, made on the device) (data
// with neighbourhoods, as embeddings have; uniform rows have none, and no graph
// index reaches high recall on them). Queued on the legacy default stream;
// returns the cudaError_t of the launch (0 = success).
int GenerateUnitRows(float* rows, uint64_t n, uint32_t dim, uint32_t stride,
                     uint64_t seed, uint32_t clusters = 0, float spread = 0.f);

}  // namespace zv::bench

#endif  // ZEROVEC_BENCH_GPU_GEN_ROWS_H_
