// GPU facts for the benchmarks: the cuBLAS GEMM ceiling, the encoder's GEMM
// shapes alone, the device's name and CUDA versions. (Per-phase times of the
// encoder come from the encoder itself: embed/cuda_encoder.h, CudaTimer.)
#ifndef ZEROVEC_BENCH_GPU_GPU_INFO_H_
#define ZEROVEC_BENCH_GPU_GPU_INFO_H_

#include <string>

#include "base/status.h"

namespace zvbench {

// Dense GEMM rate through cublasGemmEx (fp32 accumulation, the encoder's call)
// on random data, n x n x n, median of reps after warm-up; dtype "fp16"/"bf16".
zv::StatusOr<double> GemmTflops(const std::string& dtype, int n, int reps);

// Rate of the encoder's own GEMM shape y[t,n] = x[t,k] w[n,k]^T, fp16.
zv::StatusOr<double> ShapeTflops(int t, int n, int k, int reps);

std::string GpuName();
std::string DriverAndRuntime();

}  // namespace zvbench

#endif  // ZEROVEC_BENCH_GPU_GPU_INFO_H_
