// Host-side helpers of the CUDA encoder (cuda_encoder.cu is their only
// includer): error-checking macros, RAII device/pinned buffers, the cuBLASLt
// GEMM with a bias(+GELU) epilogue, and the bounded cache of CUDA graphs.
// embed/-internal.
#ifndef ZEROVEC_EMBED_CUDA_UTIL_CUH_
#define ZEROVEC_EMBED_CUDA_UTIL_CUH_

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/cuda_check.h"
#include "base/status.h"

namespace zv::embed::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { cudaFree(ptr_); }  // error ignored: nothing to do here
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)) {}

  Status Allocate(size_t n) {
    ZV_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T)));
    return OkStatus();
  }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

// Page-locked host memory, mapped into the device address space.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  Status Allocate(size_t n) {
    ZV_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T),
                                cudaHostAllocMapped));
    ZV_CUDA_CHECK(
        cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_), ptr_, 0));
    return OkStatus();
  }
  T* get() const { return ptr_; }
  T* device() const { return dev_; }

 private:
  T* ptr_ = nullptr;
  T* dev_ = nullptr;
};

// y[t, n] = gelu(x[t, k] w[n, k]^T + bias[n]) (row-major terms; fp16 in and
// out, fp32 accumulation) through cublasLtMatmul with the GELU_BIAS epilogue.
// Descriptors and the heuristic's algorithm are kept per shape, so a shape's
// second call (and a graph capture) makes no heuristic query.
class LtGeluGemm {
 public:
  LtGeluGemm() = default;
  ~LtGeluGemm() { Clear(); }
  LtGeluGemm(const LtGeluGemm&) = delete;
  LtGeluGemm& operator=(const LtGeluGemm&) = delete;

  Status Init(void* workspace, size_t workspace_bytes) {
    workspace_ = workspace;
    workspace_bytes_ = workspace_bytes;
    ZV_CUBLAS_CHECK(cublasLtCreate(&lt_));
    return OkStatus();
  }
  void Destroy() {
    Clear();
    if (lt_) cublasLtDestroy(lt_);
    lt_ = nullptr;
  }

  // Unimplemented when cuBLASLt offers no algorithm for the shape (the
  // caller then runs the GEMM and the bias+GELU kernel separately).
  Status Run(const half* x, const half* w, const half* bias, half* y, int t,
             int n, int k, cudaStream_t stream) {
    Plan* p = nullptr;
    ZV_RETURN_IF_ERROR(Find(t, n, k, &p));
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    const float one = 1.f, zero = 0.f;
    ZV_CUBLAS_CHECK(cublasLtMatmul(lt_, p->op, &one, w, p->a, x, p->b, &zero, y,
                                   p->c, y, p->c, &p->algo, workspace_,
                                   workspace_bytes_, stream));
    return OkStatus();
  }

 private:
  struct Plan {
    int t = 0, n = 0, k = 0;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool usable = false;
  };
  static constexpr size_t kMaxPlans = 128;

  void Clear() {
    for (Plan& p : plans_) Release(p);
    plans_.clear();
  }
  static void Release(Plan& p) {
    if (p.op) cublasLtMatmulDescDestroy(p.op);
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  }

  Status Find(int t, int n, int k, Plan** out) {
    for (Plan& p : plans_) {
      if (p.t == t && p.n == n && p.k == k) {
        if (!p.usable) return UnimplementedError(why_);
        *out = &p;
        return OkStatus();
      }
    }
    if (plans_.size() >= kMaxPlans) Clear();
    plans_.emplace_back();
    Plan& p = plans_.back();
    p.t = t;
    p.n = n;
    p.k = k;
    // Any failure to plan (an attribute this cuBLASLt lacks, no algorithm)
    // sends the shape to the separate-kernel path.
    const Status made = Make(p);
    if (!made.ok()) {
      p.usable = false;
      why_ = made.message();
    } else if (!p.usable) {
      why_ = "no GELU_BIAS algorithm for " + std::to_string(n) + "x" +
             std::to_string(t) + "x" + std::to_string(k);
    }
    if (!p.usable) return UnimplementedError(why_);
    *out = &p;
    return OkStatus();
  }

  // Column-major: D[n, t] = op(A)[n, k] B[k, t], A = w stored k x n (ld k)
  // and transposed, B = x stored k x t (ld k), D ld n; the bias runs along
  // D's rows (n), i.e. one value per output feature.
  Status Make(Plan& p) {
    ZV_CUBLAS_CHECK(
        cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
    const cudaDataType_t bias_type = CUDA_R_16F;
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
        sizeof(bias_type)));
    ZV_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16F, p.k, p.n, p.k));
    ZV_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16F, p.k, p.t, p.k));
    ZV_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16F, p.n, p.t, p.n));
    cublasLtMatmulPreference_t pref = nullptr;
    ZV_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = workspace_bytes_;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.a, p.b, p.c, p.c, pref,
                                          1, &result, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    // NOT_SUPPORTED or no result: this shape takes the separate-kernel path.
    p.usable = st == CUBLAS_STATUS_SUCCESS && found > 0 &&
               result.state == CUBLAS_STATUS_SUCCESS;
    if (p.usable) p.algo = result.algo;
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
      ZV_CUBLAS_CHECK(st);
    }
    return OkStatus();
  }

  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::vector<Plan> plans_;
  std::string why_;  // the last planning failure
};

// Instantiated CUDA graphs by batch shape, least recently used dropped beyond
// `capacity`. A shape is captured on its second use (the first runs the
// kernels directly: it loads modules and makes the GEMM plans outside any
// capture, and a shape seen once is not worth a capture).
class GraphCache {
 public:
  struct Key {
    int tokens = 0, seqs = 0, max_len = 0;
    bool operator==(const Key&) const = default;
  };

  explicit GraphCache(int capacity = 0) : capacity_(capacity) {}
  ~GraphCache() { Clear(); }
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;
  void set_capacity(int c) { capacity_ = c; }

  // The graph of `key`, or null.
  cudaGraphExec_t Find(const Key& key) {
    for (Entry& e : entries_) {
      if (e.key == key) {
        e.last_use = ++clock_;
        return e.exec;
      }
    }
    return nullptr;
  }
  // Records a use of a shape with no graph; true when it was seen before.
  bool SeenBefore(const Key& key) {
    for (const Key& k : seen_) {
      if (k == key) return true;
    }
    if (seen_.size() >= 4 * static_cast<size_t>(capacity_) + 16) {
      seen_.erase(seen_.begin());
    }
    seen_.push_back(key);
    return false;
  }
  // Takes ownership of exec, dropping the least recently used graph if full.
  void Insert(const Key& key, cudaGraphExec_t exec) {
    if (capacity_ <= 0) {
      cudaGraphExecDestroy(exec);
      return;
    }
    if (entries_.size() >= static_cast<size_t>(capacity_)) {
      size_t lru = 0;
      for (size_t i = 1; i < entries_.size(); ++i) {
        if (entries_[i].last_use < entries_[lru].last_use) lru = i;
      }
      cudaGraphExecDestroy(entries_[lru].exec);
      entries_.erase(entries_.begin() + lru);
    }
    entries_.push_back({key, exec, ++clock_});
  }
  size_t size() const { return entries_.size(); }
  void Clear() {
    for (Entry& e : entries_) cudaGraphExecDestroy(e.exec);
    entries_.clear();
  }

 private:
  struct Entry {
    Key key;
    cudaGraphExec_t exec = nullptr;
    uint64_t last_use = 0;
  };
  int capacity_ = 0;
  uint64_t clock_ = 0;
  std::vector<Entry> entries_;
  std::vector<Key> seen_;
};

}  // namespace zv::embed::cuda

#endif  // ZEROVEC_EMBED_CUDA_UTIL_CUH_
