// See gpu_info.h.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/gpu/gpu_info.h"

namespace zvbench {
using zv::InternalError;
using zv::OkStatus;
using zv::Status;
using zv::StatusOr;

#define MB_CUDA(expr)                                                         \
  do {                                                                        \
    const cudaError_t e_ = (expr);                                            \
    if (e_ != cudaSuccess)                                                    \
      return InternalError(std::string(#expr ": ") + cudaGetErrorString(e_)); \
  } while (0)
#define MB_BLAS(expr)                                  \
  do {                                                 \
    const cublasStatus_t s_ = (expr);                  \
    if (s_ != CUBLAS_STATUS_SUCCESS)                   \
      return InternalError(std::string(#expr ": ") +   \
                           cublasGetStatusString(s_)); \
  } while (0)

namespace {

// Fills with a hash of the index in [-1, 1): never zeros (zeros run faster).
template <typename T>
__global__ void FillRandom(T* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    p[i] = T(float(x & 0xFFFF) / 32768.f - 1.f);
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

StatusOr<double> GemmTflops(const std::string& dtype, int n, int reps) {
  const bool bf = dtype == "bf16";
  const cudaDataType_t ty = bf ? CUDA_R_16BF : CUDA_R_16F;
  void *a, *bm, *cm;
  const size_t elems = size_t(n) * n;
  MB_CUDA(cudaMalloc(&a, elems * 2));
  MB_CUDA(cudaMalloc(&bm, elems * 2));
  MB_CUDA(cudaMalloc(&cm, elems * 2));
  if (bf) {
    FillRandom<<<4096, 256>>>(static_cast<__nv_bfloat16*>(a), elems, 1u);
    FillRandom<<<4096, 256>>>(static_cast<__nv_bfloat16*>(bm), elems, 2u);
  } else {
    FillRandom<<<4096, 256>>>(static_cast<half*>(a), elems, 1u);
    FillRandom<<<4096, 256>>>(static_cast<half*>(bm), elems, 2u);
  }
  MB_CUDA(cudaGetLastError());
  cublasHandle_t h;
  MB_BLAS(cublasCreate(&h));
  cudaEvent_t e0, e1;
  MB_CUDA(cudaEventCreate(&e0));
  MB_CUDA(cudaEventCreate(&e1));
  const float one = 1.f, zero = 0.f;
  std::vector<double> ms;
  for (int r = 0; r < reps + 3; ++r) {
    MB_CUDA(cudaEventRecord(e0));
    MB_BLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, ty, n,
                         bm, ty, n, &zero, cm, ty, n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
    MB_CUDA(cudaEventRecord(e1));
    MB_CUDA(cudaEventSynchronize(e1));
    float x = 0;
    MB_CUDA(cudaEventElapsedTime(&x, e0, e1));
    if (r >= 3) ms.push_back(x);
  }
  MB_BLAS(cublasDestroy(h));
  MB_CUDA(cudaFree(a));
  MB_CUDA(cudaFree(bm));
  MB_CUDA(cudaFree(cm));
  MB_CUDA(cudaEventDestroy(e0));
  MB_CUDA(cudaEventDestroy(e1));
  return 2.0 * n * double(n) * n / (Median(ms) / 1e3) / 1e12;
}

StatusOr<double> ShapeTflops(int t, int n, int kk, int reps) {
  half *x, *w, *y;
  MB_CUDA(cudaMalloc(&x, size_t(t) * kk * 2));
  MB_CUDA(cudaMalloc(&w, size_t(n) * kk * 2));
  MB_CUDA(cudaMalloc(&y, size_t(t) * n * 2));
  FillRandom<<<4096, 256>>>(x, size_t(t) * kk, 3u);
  FillRandom<<<4096, 256>>>(w, size_t(n) * kk, 4u);
  MB_CUDA(cudaGetLastError());
  cublasHandle_t h;
  MB_BLAS(cublasCreate(&h));
  cudaEvent_t e0, e1;
  MB_CUDA(cudaEventCreate(&e0));
  MB_CUDA(cudaEventCreate(&e1));
  const float one = 1.f, zero = 0.f;
  std::vector<double> ms;
  for (int r = 0; r < reps + 3; ++r) {
    MB_CUDA(cudaEventRecord(e0));
    MB_BLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, t, kk, &one, w,
                         CUDA_R_16F, kk, x, CUDA_R_16F, kk, &zero, y,
                         CUDA_R_16F, n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
    MB_CUDA(cudaEventRecord(e1));
    MB_CUDA(cudaEventSynchronize(e1));
    float v = 0;
    MB_CUDA(cudaEventElapsedTime(&v, e0, e1));
    if (r >= 3) ms.push_back(v);
  }
  MB_BLAS(cublasDestroy(h));
  MB_CUDA(cudaFree(x));
  MB_CUDA(cudaFree(w));
  MB_CUDA(cudaFree(y));
  MB_CUDA(cudaEventDestroy(e0));
  MB_CUDA(cudaEventDestroy(e1));
  return 2.0 * t * double(n) * kk / (Median(ms) / 1e3) / 1e12;
}

std::string GpuName() {
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "?";
  return std::string(p.name) + ", " + std::to_string(p.multiProcessorCount) +
         " SMs, cc " + std::to_string(p.major) + "." + std::to_string(p.minor);
}

std::string DriverAndRuntime() {
  int d = 0, r = 0;
  if (cudaDriverGetVersion(&d) != cudaSuccess ||
      cudaRuntimeGetVersion(&r) != cudaSuccess) {
    return "?";
  }
  return "driver API " + std::to_string(d / 1000) + "." +
         std::to_string(d % 1000 / 10) + ", runtime " +
         std::to_string(r / 1000) + "." + std::to_string(r % 1000 / 10);
}

}  // namespace zvbench
