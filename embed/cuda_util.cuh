// Host-side helpers of the CUDA encoder (cuda_encoder.cu is their only
// includer): error-checking macros, RAII device/pinned buffers, the cuBLASLt
// GEMM (plain or with a bias+GELU epilogue, optionally tuned), and the bounded
// cache of CUDA graphs. embed/-internal.
#ifndef ZEROVEC_EMBED_CUDA_UTIL_CUH_
#define ZEROVEC_EMBED_CUDA_UTIL_CUH_

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
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

// y[t, n] = x[t, k] w[n, k]^T, or gelu(... + bias[n]) with the GELU_BIAS
// epilogue (row-major terms; fp16 in and out, fp32 accumulation), through
// cublasLtMatmul. Descriptors and the algorithm are kept per shape, so a
// shape's second call (and a graph capture) makes no heuristic query.
//
// Tuning (Init's `tune`): cuBLASLt's heuristic ranks algorithms by a model,
// and at this encoder's shapes (K or N = 384, M from 16 to 10^6 tokens) its
// first pick is often not the fastest. With tuning on, the first call of a
// size class (tokens rounded to half an octave, with n, k and the epilogue)
// outside a graph capture times up to kCandidates of its candidates on the
// caller's own buffers and keeps the fastest; other shapes of the class reuse
// that choice where cuBLASLt accepts it for them (AlgoCheck), else take the
// heuristic's first pick. A capture never tunes (it would record the trials).
class LtGemm {
 public:
  enum class Epilogue { kNone, kGeluBias };

  LtGemm() = default;
  ~LtGemm() { Destroy(); }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  Status Init(void* workspace, size_t workspace_bytes, bool tune) {
    workspace_ = workspace;
    workspace_bytes_ = workspace_bytes;
    tune_ = tune;
    ZV_CUBLAS_CHECK(cublasLtCreate(&lt_));
    if (tune_) {
      ZV_CUDA_CHECK(cudaEventCreate(&start_));
      ZV_CUDA_CHECK(cudaEventCreate(&stop_));
    }
    return OkStatus();
  }
  void Destroy() {
    Clear();
    if (lt_) cublasLtDestroy(lt_);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    lt_ = nullptr;
    start_ = stop_ = nullptr;
  }
  bool ready() const { return lt_ != nullptr; }

  // Unimplemented when cuBLASLt offers no algorithm for the shape (the
  // caller then runs the cuBLAS GEMM, and the bias+GELU kernel).
  Status Run(Epilogue epi, const half* x, const half* w, const half* bias,
             half* y, int t, int n, int k, cudaStream_t stream) {
    Plan* p = nullptr;
    ZV_RETURN_IF_ERROR(Find(epi, t, n, k, &p));
    if (epi == Epilogue::kGeluBias) {
      ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (!p->settled) ZV_RETURN_IF_ERROR(Settle(*p, x, w, y, stream));
    ZV_CUBLAS_CHECK(Launch(*p, p->algo, x, w, y, stream));
    return OkStatus();
  }

  // Size classes tuned so far, and how many of them picked an algorithm
  // other than the heuristic's first.
  int tuned_classes() const { return static_cast<int>(choices_.size()); }
  int changed_classes() const {
    int n = 0;
    for (const Choice& c : choices_) n += c.changed;
    return n;
  }

 private:
  static constexpr int kCandidates = 16;
  static constexpr size_t kMaxPlans = 128;

  struct Plan {
    Epilogue epi = Epilogue::kNone;
    int t = 0, n = 0, k = 0;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool usable = false;
    bool settled = false;  // algo is final (tuned, reused or untuned mode)
  };
  struct Choice {
    Epilogue epi;
    int t_class, n, k;
    cublasLtMatmulAlgo_t algo;
    bool changed;  // not the heuristic's first pick
  };

  // Half octaves: [2^j, 1.5 * 2^j) and [1.5 * 2^j, 2^(j+1)).
  static int SizeClass(int t) {
    int j = 0;
    while ((2 << j) <= t) ++j;
    return 2 * j + (2 * t >= 3 * (1 << j) ? 1 : 0);
  }

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

  cublasStatus_t Launch(const Plan& p, const cublasLtMatmulAlgo_t& algo,
                        const half* x, const half* w, half* y,
                        cudaStream_t stream) {
    const float one = 1.f, zero = 0.f;
    return cublasLtMatmul(lt_, p.op, &one, w, p.a, x, p.b, &zero, y, p.c, y,
                          p.c, &algo, workspace_, workspace_bytes_, stream);
  }

  Status Find(Epilogue epi, int t, int n, int k, Plan** out) {
    for (Plan& p : plans_) {
      if (p.epi == epi && p.t == t && p.n == n && p.k == k) {
        if (!p.usable) return UnimplementedError(why_);
        *out = &p;
        return OkStatus();
      }
    }
    if (plans_.size() >= kMaxPlans) Clear();
    plans_.emplace_back();
    Plan& p = plans_.back();
    p.epi = epi;
    p.t = t;
    p.n = n;
    p.k = k;
    // Any failure to plan (an attribute this cuBLASLt lacks, no algorithm)
    // sends the shape to the caller's fallback.
    const Status made = Make(p);
    if (!made.ok()) {
      p.usable = false;
      why_ = made.message();
    } else if (!p.usable) {
      why_ = std::string(epi == Epilogue::kGeluBias ? "no GELU_BIAS" : "no") +
             " algorithm for " + std::to_string(n) + "x" + std::to_string(t) +
             "x" + std::to_string(k);
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
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (p.epi == Epilogue::kGeluBias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
      const cudaDataType_t bias_type = CUDA_R_16F;
      ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
      ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
          sizeof(bias_type)));
    }
    ZV_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16F, p.k, p.n, p.k));
    ZV_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16F, p.k, p.t, p.k));
    ZV_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16F, p.n, p.t, p.n));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    ZV_RETURN_IF_ERROR(Heuristic(p, 1, &result, &found));
    p.usable = found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    if (!p.usable) return OkStatus();
    p.algo = result.algo;
    p.settled = !tune_;
    if (p.settled) return OkStatus();
    // A size class tuned before: its choice, where valid for this shape.
    for (const Choice& c : choices_) {
      if (c.epi != p.epi || c.t_class != SizeClass(p.t) || c.n != p.n ||
          c.k != p.k) {
        continue;
      }
      cublasLtMatmulHeuristicResult_t check{};
      if (cublasLtMatmulAlgoCheck(lt_, p.op, p.a, p.b, p.c, p.c, &c.algo,
                                  &check) == CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= workspace_bytes_) {
        p.algo = c.algo;
      }
      p.settled = true;
      break;
    }
    return OkStatus();
  }

  // Up to `max` candidates, best first by cuBLASLt's model. NOT_SUPPORTED is
  // no candidate, not an error.
  Status Heuristic(const Plan& p, int max,
                   cublasLtMatmulHeuristicResult_t* results, int* found) {
    *found = 0;
    cublasLtMatmulPreference_t pref = nullptr;
    ZV_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = workspace_bytes_;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.a, p.b, p.c, p.c, pref,
                                          max, results, found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
      *found = 0;
      return OkStatus();
    }
    ZV_CUBLAS_CHECK(st);
    return OkStatus();
  }

  // Times the candidates (outside a capture) and keeps the fastest for the
  // shape and its size class. The trials write y, which the caller's launch
  // overwrites right after.
  Status Settle(Plan& p, const half* x, const half* w, half* y,
                cudaStream_t stream) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    ZV_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    if (capturing != cudaStreamCaptureStatusNone) return OkStatus();
    cublasLtMatmulHeuristicResult_t results[kCandidates];
    int found = 0;
    ZV_RETURN_IF_ERROR(Heuristic(p, kCandidates, results, &found));
    int reps = 0;
    float best_ms = 0.f;
    int best = -1;
    for (int i = 0; i < found; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
      // A candidate cuBLASLt refuses at launch is skipped, not an error.
      if (Launch(p, results[i].algo, x, w, y, stream) !=
          CUBLAS_STATUS_SUCCESS) {
        continue;
      }
      if (reps == 0) {  // enough launches for ~0.2 ms, from the first's time
        ZV_RETURN_IF_ERROR(
            TimeLaunches(p, results[i].algo, x, w, y, stream, 1, &best_ms));
        reps = std::clamp(static_cast<int>(0.2f / std::max(best_ms, 1e-4f)), 3,
                          30);
      }
      float ms = 0.f;
      ZV_RETURN_IF_ERROR(
          TimeLaunches(p, results[i].algo, x, w, y, stream, reps, &ms));
      if (best < 0 || ms < best_ms) {
        best_ms = ms;
        best = i;
      }
    }
    p.settled = true;
    if (best < 0) return OkStatus();  // keep the heuristic's first pick
    const bool changed = best != 0;
    p.algo = results[best].algo;
    choices_.push_back({p.epi, SizeClass(p.t), p.n, p.k, p.algo, changed});
    return OkStatus();
  }

  Status TimeLaunches(const Plan& p, const cublasLtMatmulAlgo_t& algo,
                      const half* x, const half* w, half* y,
                      cudaStream_t stream, int reps, float* ms) {
    ZV_CUDA_CHECK(cudaEventRecord(start_, stream));
    for (int r = 0; r < reps; ++r) {
      ZV_CUBLAS_CHECK(Launch(p, algo, x, w, y, stream));
    }
    ZV_CUDA_CHECK(cudaEventRecord(stop_, stream));
    ZV_CUDA_CHECK(cudaEventSynchronize(stop_));
    ZV_CUDA_CHECK(cudaEventElapsedTime(ms, start_, stop_));
    *ms /= reps;
    return OkStatus();
  }

  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bool tune_ = false;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::vector<Plan> plans_;
  std::vector<Choice> choices_;
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
