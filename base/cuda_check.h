// CUDA and cuBLAS return codes as zv::Status (every CUDA call is checked):
// ZV_CUDA_CHECK(expr) / ZV_CUBLAS_CHECK(expr) return from the enclosing
// function with the call, its error text and RESOURCE_EXHAUSTED for an
// allocation failure (INTERNAL otherwise). For .cu/.cuh files only (nvcc
// genrules list this header in their srcs); plain C++ never includes CUDA.
#ifndef ZEROVEC_BASE_CUDA_CHECK_H_
#define ZEROVEC_BASE_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "base/status.h"

namespace zv {

inline Status CudaError(const char* what, cudaError_t err) {
  std::string m = std::string("cuda: ") + what + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) return ResourceExhaustedError(m);
  return InternalError(m);
}

}  // namespace zv

#define ZV_CUDA_CHECK(expr)                                             \
  do {                                                                  \
    const cudaError_t zv_err_ = (expr);                                 \
    if (zv_err_ != cudaSuccess) return ::zv::CudaError(#expr, zv_err_); \
  } while (0)

#define ZV_CUBLAS_CHECK(expr)                                         \
  do {                                                                \
    const cublasStatus_t zv_st_ = (expr);                             \
    if (zv_st_ != CUBLAS_STATUS_SUCCESS) {                            \
      return ::zv::InternalError(std::string("cublas: " #expr ": ") + \
                                 cublasGetStatusString(zv_st_));      \
    }                                                                 \
  } while (0)

#endif  // ZEROVEC_BASE_CUDA_CHECK_H_
