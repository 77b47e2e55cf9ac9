// Internals shared by gpu_search.cu (mirror, writer) and search.cu (search
// paths): CUDA/cuBLAS error checks, scratch arenas, search contexts, Impl.
#ifndef ZEROVEC_GPUSEARCH_IMPL_CUH_
#define ZEROVEC_GPUSEARCH_IMPL_CUH_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "gpusearch/gpu_search.h"

namespace zv::gpusearch {
namespace detail {

#define ZV_CUDA_CHECK(expr)                                       \
  do {                                                            \
    const cudaError_t zv_err_ = (expr);                           \
    if (zv_err_ != cudaSuccess) return CudaError(#expr, zv_err_); \
  } while (0)

#define ZV_CUBLAS_CHECK(expr)                                         \
  do {                                                                \
    const cublasStatus_t zv_st_ = (expr);                             \
    if (zv_st_ != CUBLAS_STATUS_SUCCESS) {                            \
      return ::zv::InternalError(std::string("cublas: " #expr ": ") + \
                                 cublasGetStatusString(zv_st_));      \
    }                                                                 \
  } while (0)

inline Status CudaError(const char* what, cudaError_t err) {
  std::string m = std::string("cuda: ") + what + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) return ResourceExhaustedError(m);
  return InternalError(m);
}

constexpr uint64_t kStagingBytes = 64ull << 20;     // per pinned buffer
constexpr uint64_t kScoreTileFloats = 64ull << 20;  // 256 MiB score tile
constexpr size_t kMaxGemmGroup = 4096;              // queries per GEMM group
constexpr int kTargetTileBlocks = 2048;             // blocks per score tile

inline uint64_t Words(uint64_t rows) { return (rows + 63) / 64; }

// A device allocation that only grows (search scratch).
class Arena {
 public:
  ~Arena() { cudaFree(ptr_); }
  Status Reserve(size_t bytes) {
    if (bytes <= size_) return OkStatus();
    cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
    ZV_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    size_ = bytes;
    return OkStatus();
  }
  char* data() const { return static_cast<char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// One search at a time: its stream, cuBLAS handle and scratch.
struct Context {
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;
  cublasHandle_t blas = nullptr;
  Arena scratch;
  void* host = nullptr;  // pinned results
  size_t host_bytes = 0;
  ~Context() {
    if (blas) cublasDestroy(blas);
    if (ready) cudaEventDestroy(ready);
    if (stream) cudaStreamDestroy(stream);
    cudaFreeHost(host);
  }
  Status Init() {
    ZV_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ZV_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    ZV_CUBLAS_CHECK(cublasCreate(&blas));
    ZV_CUBLAS_CHECK(cublasSetStream(blas, stream));
    return OkStatus();
  }
  Status HostReserve(size_t bytes) {
    if (bytes <= host_bytes) return OkStatus();
    cudaFreeHost(host);
    host = nullptr;
    host_bytes = 0;
    ZV_CUDA_CHECK(cudaMallocHost(&host, bytes));
    host_bytes = bytes;
    return OkStatus();
  }
};

// Bump allocation of 256-byte aligned pieces inside a scratch arena.
class Carver {
 public:
  explicit Carver(char* base) : base_(base) {}
  template <typename T>
  T* Take(size_t count) {
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += (count * sizeof(T) + 255) & ~size_t{255};
    return p;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

}  // namespace detail

struct GpuMirror::Impl {
  using Context = detail::Context;
  using Carver = detail::Carver;
  MirrorOptions o;
  int sms = 0;
  std::string device_name;
  // Buffers: replaced only under the exclusive lock of `buffers`.
  mutable std::shared_mutex buffers;
  float* rows = nullptr;
  float* norms = nullptr;
  uint64_t* tomb = nullptr;
  uint64_t capacity = 0;
  std::atomic<uint64_t> count{0};
  uint64_t staged_rows = 0;  // rows written past `count` by StageRows (writer)
  // Writer side.
  std::mutex writer;
  cudaStream_t wstream = nullptr;
  cudaEvent_t wevent = nullptr;
  void* staging[2] = {nullptr, nullptr};
  cudaEvent_t staged[2] = {nullptr, nullptr};
  std::vector<uint64_t> host_tomb;
  // Search contexts not in use, and how many exist (<= the options' cap).
  mutable std::mutex pool_mu;
  mutable std::condition_variable pool_cv;
  mutable std::vector<std::unique_ptr<Context>> pool;
  mutable int contexts = 0;

  ~Impl() {
    cudaSetDevice(o.device);
    pool.clear();
    cudaFree(rows);
    cudaFree(norms);
    cudaFree(tomb);
    for (int i = 0; i < 2; ++i) {
      cudaFreeHost(staging[i]);
      if (staged[i]) cudaEventDestroy(staged[i]);
    }
    if (wevent) cudaEventDestroy(wevent);
    if (wstream) cudaStreamDestroy(wstream);
  }

  Status Grow(uint64_t want);  // writer lock held
  // Host rows into rows [at, at + n) (past count).
  Status CopyIn(const float* host, uint64_t n, uint64_t at);
  Status Publish(uint64_t n);
  StatusOr<std::unique_ptr<Context>> Acquire() const;
  void Release(std::unique_ptr<Context> c) const;
  void Discard(std::unique_ptr<Context> c) const;  // after a failed search
  Status Run(Context& c, const float* dq, size_t nq, int kk,
             const GpuMask* mask, float* dist, int64_t* out) const;
  Status Scan(Context& c, Carver& cv, const float* dq, size_t nq, int kk,
              const uint64_t* mask, uint64_t mask_rows, uint32_t n, float* keys,
              uint32_t* ids) const;
  Status Gemm(Context& c, Carver& cv, const float* dq, size_t nq, int kk,
              const uint64_t* mask, uint64_t mask_rows, uint32_t n, float* keys,
              uint32_t* ids) const;
};

}  // namespace zv::gpusearch

#endif  // ZEROVEC_GPUSEARCH_IMPL_CUH_
