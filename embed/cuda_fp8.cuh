// The CUDA encoder's FP8 (e4m3) GEMMs (CudaPrecision::kFp8): cuBLASLt matmuls
// with e4m3 inputs, fp32 accumulation and per-tensor scales, plus the host
// side of the scales: weights quantized once at load, activations by static
// bounds derived from the weights (no amax pass, so a pass is deterministic
// and graph-capturable). cuda_encoder.cu is the only includer.
// embed/-internal.
#ifndef ZEROVEC_EMBED_CUDA_FP8_CUH_
#define ZEROVEC_EMBED_CUDA_FP8_CUH_

#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/cuda_check.h"
#include "base/status.h"

namespace zv::embed::cuda {

// Largest finite e4m3 value.
inline constexpr float kE4m3Max = 448.f;

// w (row-major [n][k], fp32) as e4m3 scaled by kE4m3Max / amax(w) (saturating);
// returns the dequantization factor amax / kE4m3Max (1 for an all-zero w).
inline float QuantizeE4m3(const std::vector<float>& w,
                          std::vector<__nv_fp8_storage_t>* out) {
  float amax = 0.f;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  const float q = amax > 0.f ? kE4m3Max / amax : 1.f;
  out->resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    (*out)[i] = __nv_cvt_float_to_fp8(w[i] * q, __NV_SATFINITE, __NV_E4M3);
  }
  return 1.f / q;
}

// Largest |element| a LayerNorm with these gamma/beta can write: the
// normalised row has mean 0 and sum of squares h, so |n_i| <= sqrt(h).
inline float LayerNormElementBound(const std::vector<float>& g,
                                   const std::vector<float>& b) {
  const float r = std::sqrt(static_cast<float>(g.size()));
  float m = 0.f;
  for (size_t i = 0; i < g.size(); ++i) {
    m = std::max(m, std::fabs(g[i]) * r + std::fabs(b[i]));
  }
  return m;
}

// Largest L2 norm of a LayerNorm output row: ||g * n + b|| <= max|g| sqrt(h)
// + ||b||.
inline float LayerNormNormBound(const std::vector<float>& g,
                                const std::vector<float>& b) {
  float gm = 0.f;
  double bb = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    gm = std::max(gm, std::fabs(g[i]));
    bb += double(b[i]) * b[i];
  }
  return gm * std::sqrt(static_cast<float>(g.size())) +
         static_cast<float>(std::sqrt(bb));
}

// Largest |x w_n + b_n| over rows n of w ([n][k]) for ||x|| <= x_norm
// (Cauchy-Schwarz); GELU's output is bounded by it (and by 0.17 below).
inline float LinearBound(const std::vector<float>& w,
                         const std::vector<float>& b, float x_norm) {
  const size_t n = b.size(), k = w.size() / n;
  float m = 0.17f;
  for (size_t r = 0; r < n; ++r) {
    double s = 0;
    for (size_t i = 0; i < k; ++i) s += double(w[r * k + i]) * w[r * k + i];
    m = std::max(m,
                 static_cast<float>(std::sqrt(s)) * x_norm + std::fabs(b[r]));
  }
  return m;
}

// y[t, n] = x[t, k] w[n, k]^T (row-major terms) with x and w in e4m3 and
// per-tensor dequantization factors (device floats) for each, fp32
// accumulation. Output fp16, or e4m3 multiplied by a device scale (the GELU
// variant: bias + GELU in the epilogue, bias fp16); kGeluFp16Out is the GELU
// variant with fp16 output, for a cuBLASLt that has no e4m3-output algorithm
// (the caller then casts). Plans per shape as LtGeluGemm does.
class LtFp8Gemm {
 public:
  enum class Kind { kPlain, kGeluFp8Out, kGeluFp16Out };

  LtFp8Gemm() = default;
  ~LtFp8Gemm() { Destroy(); }
  LtFp8Gemm(const LtFp8Gemm&) = delete;
  LtFp8Gemm& operator=(const LtFp8Gemm&) = delete;

  // fast_accum: CUBLASLT_MATMUL_DESC_FAST_ACCUM (Hopper's FP8 tensor cores
  // accumulate without periodic promotion to fp32: faster, less exact).
  Status Init(void* workspace, size_t workspace_bytes, bool fast_accum) {
    workspace_ = workspace;
    workspace_bytes_ = workspace_bytes;
    fast_accum_ = fast_accum;
    ZV_CUBLAS_CHECK(cublasLtCreate(&lt_));
    return OkStatus();
  }
  void Destroy() {
    for (Plan& p : plans_) Release(p);
    plans_.clear();
    if (lt_) cublasLtDestroy(lt_);
    lt_ = nullptr;
    if (dummy_) cudaFree(dummy_);
    dummy_ = nullptr;
  }

  // Makes (or finds) the plan of a shape; Unimplemented when cuBLASLt has no
  // FP8 algorithm for it. Call before a pass (never inside a graph capture).
  Status Prepare(Kind kind, int t, int n, int k) {
    Plan* p = nullptr;
    return Find(kind, t, n, k, &p);
  }

  // kPlain: y (fp16) = (a_scale * b_scale) * x w^T.
  Status Run(const __nv_fp8_e4m3* x, const float* x_scale,
             const __nv_fp8_e4m3* w, const float* w_scale, half* y, int t,
             int n, int k, cudaStream_t stream) {
    Plan* p = nullptr;
    ZV_RETURN_IF_ERROR(Find(Kind::kPlain, t, n, k, &p));
    ZV_RETURN_IF_ERROR(SetScales(*p, w_scale, x_scale, nullptr, nullptr));
    return Launch(*p, w, x, y, y, stream);
  }

  // kGeluFp16Out: y (fp16) = gelu(x_scale w_scale x w^T + bias).
  Status RunGelu16(const __nv_fp8_e4m3* x, const float* x_scale,
                   const __nv_fp8_e4m3* w, const float* w_scale,
                   const half* bias, half* y, int t, int n, int k,
                   cudaStream_t stream) {
    Plan* p = nullptr;
    ZV_RETURN_IF_ERROR(Find(Kind::kGeluFp16Out, t, n, k, &p));
    ZV_RETURN_IF_ERROR(SetScales(*p, w_scale, x_scale, nullptr, bias));
    return Launch(*p, w, x, y, y, stream);
  }

  // kGeluFp8Out: y (e4m3) = y_scale * gelu(x_scale w_scale x w^T + bias).
  // c16 is an fp16 buffer of t x n elements that cuBLASLt may name as C (beta
  // is 0; it is not read).
  Status RunGelu(const __nv_fp8_e4m3* x, const float* x_scale,
                 const __nv_fp8_e4m3* w, const float* w_scale, const half* bias,
                 const float* y_scale, __nv_fp8_e4m3* y, const half* c16, int t,
                 int n, int k, cudaStream_t stream) {
    Plan* p = nullptr;
    ZV_RETURN_IF_ERROR(Find(Kind::kGeluFp8Out, t, n, k, &p));
    ZV_RETURN_IF_ERROR(SetScales(*p, w_scale, x_scale, y_scale, bias));
    return Launch(*p, w, x, c16, y, stream);
  }

 private:
  static constexpr int kMaxCandidates = 8;
  struct Plan {
    Kind kind = Kind::kPlain;
    int t = 0, n = 0, k = 0;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
    // The heuristic's algorithms, best first; `algo` is the first that
    // launched (tried: the launch was attempted). A plain array: nvcc 13.0's
    // front end aborts (internal error) on a std::vector of them here.
    cublasLtMatmulAlgo_t candidates[kMaxCandidates] = {};
    int num_candidates = 0;
    cublasLtMatmulAlgo_t algo{};
    bool tried = false;
    bool usable = false;
    std::string why;
  };
  static constexpr size_t kMaxPlans = 192;

  // One matmul D = A B (+ C, beta 0) with the plan. The first launch of a plan
  // walks its candidates: cuBLASLt can refuse at launch (NOT_SUPPORTED) an
  // algorithm its heuristic offered (the first device run of this path did,
  // for every shape), so a refused one is skipped and, when all are, the
  // shape is marked unusable (Unimplemented; the caller runs it in fp16).
  // Set CUBLASLT_LOG_LEVEL=1 to see cuBLASLt's reason.
  Status Launch(Plan& p, const void* a, const void* b, const void* c, void* d,
                cudaStream_t stream) {
    const float one = 1.f, zero = 0.f;
    if (p.tried) {
      ZV_CUBLAS_CHECK(cublasLtMatmul(lt_, p.op, &one, a, p.a, b, p.b, &zero, c,
                                     p.c, d, p.d, &p.algo, workspace_,
                                     workspace_bytes_, stream));
      return OkStatus();
    }
    p.tried = true;
    cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;
    for (int i = 0; i < p.num_candidates; ++i) {
      const cublasLtMatmulAlgo_t& algo = p.candidates[i];
      last = cublasLtMatmul(lt_, p.op, &one, a, p.a, b, p.b, &zero, c, p.c, d,
                            p.d, &algo, workspace_, workspace_bytes_, stream);
      if (last == CUBLAS_STATUS_SUCCESS) {
        p.algo = algo;
        return OkStatus();
      }
      if (last != CUBLAS_STATUS_NOT_SUPPORTED) break;
    }
    if (last != CUBLAS_STATUS_NOT_SUPPORTED) ZV_CUBLAS_CHECK(last);
    p.usable = false;
    p.why = "cublasLtMatmul refused all " +
            std::to_string(p.num_candidates) + " FP8 algorithms for " +
            std::to_string(p.n) + "x" + std::to_string(p.t) + "x" +
            std::to_string(p.k) + " (NOT_SUPPORTED)";
    return UnimplementedError(p.why);
  }

  static void Release(Plan& p) {
    if (p.op) cublasLtMatmulDescDestroy(p.op);
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
    if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  }

  // Scale and bias pointers are attributes: set before every call (a graph
  // capture records the values of its launch).
  Status SetScales(Plan& p, const float* a_scale, const float* b_scale,
                   const float* d_scale, const half* bias) {
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale)));
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof(b_scale)));
    if (p.kind == Kind::kGeluFp8Out) {
      ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          p.op, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &d_scale,
          sizeof(d_scale)));
    }
    if (p.kind != Kind::kPlain) {
      ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    return OkStatus();
  }

  Status Find(Kind kind, int t, int n, int k, Plan** out) {
    for (Plan& p : plans_) {
      if (p.kind == kind && p.t == t && p.n == n && p.k == k) {
        if (!p.usable) return UnimplementedError(p.why);
        *out = &p;
        return OkStatus();
      }
    }
    if (plans_.size() >= kMaxPlans) {
      for (Plan& p : plans_) Release(p);
      plans_.clear();
    }
    plans_.emplace_back();
    Plan& p = plans_.back();
    p.kind = kind;
    p.t = t;
    p.n = n;
    p.k = k;
    const Status made = Make(p);
    if (!made.ok()) {
      p.usable = false;
      p.why = "fp8 gemm plan: " + made.message();
    } else if (!p.usable) {
      p.why = "no FP8 cuBLASLt algorithm for " + std::to_string(n) + "x" +
              std::to_string(t) + "x" + std::to_string(k);
    }
    if (!p.usable) return UnimplementedError(p.why);
    *out = &p;
    return OkStatus();
  }

  // Column-major as LtGeluGemm: D[n, t] = op(A)[n, k] B[k, t], A = w (k x n,
  // transposed: FP8 on Hopper wants the "TN" layout), B = x (k x t).
  Status Make(Plan& p) {
    ZV_CUBLAS_CHECK(
        cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    // Placeholder device pointers for the heuristic: the real ones are set
    // per call (SetScales). Scale pointers must be set for the query to see
    // a scaled FP8 matmul.
    ZV_RETURN_IF_ERROR(SetScales(
        p, DummyScale(), DummyScale(),
        p.kind == Kind::kGeluFp8Out ? DummyScale() : nullptr, nullptr));
    const int8_t fast = fast_accum_ ? 1 : 0;
    ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
    const bool gelu = p.kind != Kind::kPlain;
    const bool fp8_out = p.kind == Kind::kGeluFp8Out;
    if (gelu) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
      const cudaDataType_t bias_type = CUDA_R_16F;
      ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
      ZV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
          sizeof(bias_type)));
    }
    ZV_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, p.k, p.n, p.k));
    ZV_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, p.k, p.t, p.k));
    ZV_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16F, p.n, p.t, p.n));
    ZV_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(
        &p.d, fp8_out ? CUDA_R_8F_E4M3 : CUDA_R_16F, p.n, p.t, p.n));
    // FP8 needs the TN layout and 16-byte leading dimensions: say so plainly
    // instead of letting cuBLASLt refuse without a reason.
    if (p.k % 16 != 0 || p.n % 16 != 0) {
      p.usable = false;
      return OkStatus();
    }
    cublasLtMatmulPreference_t pref = nullptr;
    ZV_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = workspace_bytes_;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    cublasLtMatmulHeuristicResult_t results[kMaxCandidates] = {};
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.a, p.b, p.c, p.d, pref,
                                          kMaxCandidates, results, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_SUCCESS) {
      for (int i = 0; i < found; ++i) {
        if (results[i].state == CUBLAS_STATUS_SUCCESS)
          p.candidates[p.num_candidates++] = results[i].algo;
      }
    }
    p.usable = p.num_candidates > 0;
    if (p.usable) p.algo = p.candidates[0];
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
      ZV_CUBLAS_CHECK(st);
    }
    return OkStatus();
  }

  // A device float for the heuristic query (never read by it).
  const float* DummyScale() {
    if (!dummy_) {
      if (cudaMalloc(&dummy_, sizeof(float)) != cudaSuccess) {
        cudaGetLastError();
        dummy_ = nullptr;
      }
    }
    return static_cast<const float*>(dummy_);
  }

  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  void* dummy_ = nullptr;
  bool fast_accum_ = false;
  std::vector<Plan> plans_;
};

}  // namespace zv::embed::cuda

#endif  // ZEROVEC_EMBED_CUDA_FP8_CUH_
