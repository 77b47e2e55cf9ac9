// See mirror.h. The launch sequence below is copied from
// embed/cuda_encoder.cu (CudaLaneEncoder::Encode, Gemm, Attention); keep the
// two in step (the bench compares their outputs).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/gpu/mirror.h"

// The encoder's kernels, verbatim, in a namespace of their own: the header
// defines non-inline __global__ functions, and cuda_encoder.o (linked into
// the same program) holds the same names in zv::embed::kernels.
namespace zvmirror {
#include "embed/cuda_kernels.cuh"
}

namespace zvbench {
namespace k = zvmirror::zv::embed::kernels;
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

// Teardown where no Status can be returned (a destructor): say what failed.
void WarnIfError(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    std::fprintf(stderr, "mirror: %s: %s\n", what, cudaGetErrorString(e));
}
void WarnIfError(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    std::fprintf(stderr, "mirror: %s: %s\n", what, cublasGetStatusString(s));
}

template <typename T>
Status UploadAs(const std::vector<float>& host, T** dev) {
  MB_CUDA(cudaMalloc(reinterpret_cast<void**>(dev), host.size() * sizeof(T)));
  if constexpr (std::is_same_v<T, float>) {
    MB_CUDA(
        cudaMemcpy(*dev, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
  } else {
    std::vector<half> h(host.size());
    for (size_t i = 0; i < host.size(); ++i) h[i] = __float2half_rn(host[i]);
    MB_CUDA(cudaMemcpy(*dev, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  }
  return OkStatus();
}

struct Layer {
  half *qkv_w, *out_w, *ffn_in_w, *ffn_out_w;
  float *qkv_b, *out_b, *ln1_g, *ln1_b, *ffn_in_b, *ffn_out_b, *ln2_g, *ln2_b;
};

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

struct Mirror::Impl {
  zv::embed::BertConfig c;
  bool cls = false, normalize = false;
  int max_tokens = 0, max_seqs = 0;
  float *word, *position, *type0, *emb_g, *emb_b;
  std::vector<Layer> layers;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  half *x, *qkv, *ctx, *tmp, *ffn;
  char* in_host = nullptr;  // pinned: ids, pos, offsets, row pointers
  char* in_dev = nullptr;
  size_t in_bytes = 0;
  float* out_host = nullptr;  // mapped pinned rows
  float* out_dev = nullptr;
  int t = 0, b = 0, max_len = 0;
  k::AttentionImpl attention = k::AttentionImplFromEnv();
  std::vector<cudaEvent_t> events;

  ~Impl() {
    if (stream)
      WarnIfError(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    for (auto e : events) WarnIfError(cudaEventDestroy(e), "cudaEventDestroy");
    if (blas) WarnIfError(cublasDestroy(blas), "cublasDestroy");
    if (stream) WarnIfError(cudaStreamDestroy(stream), "cudaStreamDestroy");
    // Weights and buffers are freed with the process (bench only).
  }

  Status Gemm(const half* xin, const half* w, half* y, int t_, int n, int kk) {
    const float one = 1.f, zero = 0.f;
    MB_BLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, t_, kk, &one, w,
                         CUDA_R_16F, kk, xin, CUDA_R_16F, kk, &zero, y,
                         CUDA_R_16F, n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
    return OkStatus();
  }

  Status Attention(const float* qkv_b, const int* d_off, float scale) {
    // The encoder's launcher (same kernel choice, same env switch).
    MB_CUDA(k::LaunchAttention(attention, c.head_dim(), qkv, qkv_b, d_off, b,
                               max_len, c.num_heads, c.hidden_size, scale, ctx,
                               stream));
    return OkStatus();
  }
};

Mirror::Mirror() : impl_(std::make_unique<Impl>()) {}
Mirror::~Mirror() = default;

StatusOr<std::unique_ptr<Mirror>> Mirror::Create(
    const zv::embed::Checkpoint& ck, int max_tokens, int max_seqs) {
  std::unique_ptr<Mirror> m(new Mirror());
  Impl& I = *m->impl_;
  I.c = ck.config;
  I.cls = ck.pooling == zv::embed::Pooling::kCls;
  I.normalize = ck.normalize;
  I.max_tokens = max_tokens;
  I.max_seqs = max_seqs;
  ZV_RETURN_IF_ERROR(UploadAs(ck.word_embeddings, &I.word));
  ZV_RETURN_IF_ERROR(UploadAs(ck.position_embeddings, &I.position));
  ZV_RETURN_IF_ERROR(UploadAs(ck.token_type0, &I.type0));
  ZV_RETURN_IF_ERROR(UploadAs(ck.emb_ln_g, &I.emb_g));
  ZV_RETURN_IF_ERROR(UploadAs(ck.emb_ln_b, &I.emb_b));
  for (const auto& w : ck.layers) {
    Layer d;
    ZV_RETURN_IF_ERROR(UploadAs(w.qkv_w, &d.qkv_w));
    ZV_RETURN_IF_ERROR(UploadAs(w.qkv_b, &d.qkv_b));
    ZV_RETURN_IF_ERROR(UploadAs(w.attn_out_w, &d.out_w));
    ZV_RETURN_IF_ERROR(UploadAs(w.attn_out_b, &d.out_b));
    ZV_RETURN_IF_ERROR(UploadAs(w.ln1_g, &d.ln1_g));
    ZV_RETURN_IF_ERROR(UploadAs(w.ln1_b, &d.ln1_b));
    ZV_RETURN_IF_ERROR(UploadAs(w.ffn_in_w, &d.ffn_in_w));
    ZV_RETURN_IF_ERROR(UploadAs(w.ffn_in_b, &d.ffn_in_b));
    ZV_RETURN_IF_ERROR(UploadAs(w.ffn_out_w, &d.ffn_out_w));
    ZV_RETURN_IF_ERROR(UploadAs(w.ffn_out_b, &d.ffn_out_b));
    ZV_RETURN_IF_ERROR(UploadAs(w.ln2_g, &d.ln2_g));
    ZV_RETURN_IF_ERROR(UploadAs(w.ln2_b, &d.ln2_b));
    I.layers.push_back(d);
  }
  const size_t t = max_tokens, h = I.c.hidden_size;
  MB_CUDA(cudaStreamCreateWithFlags(&I.stream, cudaStreamNonBlocking));
  MB_BLAS(cublasCreate(&I.blas));
  MB_BLAS(cublasSetStream(I.blas, I.stream));
  MB_CUDA(cudaMalloc(&I.x, t * h * 2));
  MB_CUDA(cudaMalloc(&I.qkv, t * 3 * h * 2));
  MB_CUDA(cudaMalloc(&I.ctx, t * h * 2));
  MB_CUDA(cudaMalloc(&I.tmp, t * h * 2));
  MB_CUDA(cudaMalloc(&I.ffn, t * I.c.intermediate_size * 2));
  I.in_bytes = (3 * t + 2) * 4 + size_t(max_seqs) * 8 + 8;
  MB_CUDA(cudaHostAlloc(&I.in_host, I.in_bytes, cudaHostAllocDefault));
  MB_CUDA(cudaMalloc(&I.in_dev, I.in_bytes));
  MB_CUDA(cudaHostAlloc(&I.out_host, size_t(max_seqs) * h * 4,
                        cudaHostAllocMapped));
  MB_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&I.out_dev),
                                   I.out_host, 0));
  I.events.resize(2 + 12 * I.layers.size() + 8);
  for (auto& e : I.events) MB_CUDA(cudaEventCreate(&e));
  return m;
}

const float* Mirror::rows() const { return impl_->out_host; }

Status Mirror::Prepare(const zv::embed::TokenBatch& batch) {
  Impl& I = *impl_;
  I.t = static_cast<int>(batch.ids.size());
  I.b = static_cast<int>(batch.size());
  if (I.t > I.max_tokens || I.b > I.max_seqs)
    return InternalError("batch too big");
  int* ids = reinterpret_cast<int*>(I.in_host);
  int* pos = ids + I.t;
  int* off = pos + I.t;
  I.max_len = 0;
  for (int s = 0; s < I.b; ++s) {
    const int len = batch.length(s);
    I.max_len = std::max(I.max_len, len);
    for (int i = 0; i < len; ++i) pos[batch.offsets[s] + i] = i;
  }
  std::memcpy(ids, batch.ids.data(), I.t * 4);
  std::memcpy(off, batch.offsets.data(), (I.b + 1) * 4);
  const size_t ptr_at = (size_t(2 * I.t + I.b + 1) * 4 + 7) / 8 * 8;
  float** ptrs = reinterpret_cast<float**>(I.in_host + ptr_at);
  for (int s = 0; s < I.b; ++s)
    ptrs[s] = I.out_dev + size_t(s) * I.c.hidden_size;
  I.in_bytes = ptr_at + I.b * 8;
  MB_CUDA(cudaMemcpyAsync(I.in_dev, I.in_host, I.in_bytes,
                          cudaMemcpyHostToDevice, I.stream));
  MB_CUDA(cudaStreamSynchronize(I.stream));
  return OkStatus();
}

StatusOr<double> Mirror::Run(bool with_h2d, PhaseMs* phases) {
  Impl& I = *impl_;
  const auto& c = I.c;
  const int t = I.t, b = I.b, h = c.hidden_size, f = c.intermediate_size;
  const size_t ptr_at = (size_t(2 * t + b + 1) * 4 + 7) / 8 * 8;
  const int* d_ids = reinterpret_cast<const int*>(I.in_dev);
  const int* d_pos = d_ids + t;
  const int* d_off = d_pos + t;
  float* const* d_ptrs = reinterpret_cast<float* const*>(I.in_dev + ptr_at);
  std::vector<std::pair<std::string, int>>
      marks;  // phase name, event index after it
  int ev = 0;
  auto mark = [&](const char* name) -> Status {
    if (!phases) return OkStatus();
    MB_CUDA(cudaEventRecord(I.events[++ev], I.stream));
    marks.emplace_back(name, ev);
    return OkStatus();
  };
  MB_CUDA(cudaEventRecord(I.events[0], I.stream));
  if (with_h2d) {
    MB_CUDA(cudaMemcpyAsync(I.in_dev, I.in_host, I.in_bytes,
                            cudaMemcpyHostToDevice, I.stream));
    ZV_RETURN_IF_ERROR(mark("h2d_inputs"));
  }
  const int wpb = 4;
  const int row_blocks = (t + wpb - 1) / wpb;
  k::EmbedLayerNormKernel<<<row_blocks, 32 * wpb, 0, I.stream>>>(
      d_ids, d_pos, t, h, I.word, I.position, I.type0, I.emb_g, I.emb_b,
      c.layer_norm_eps, I.x);
  MB_CUDA(cudaGetLastError());
  ZV_RETURN_IF_ERROR(mark("embed_layernorm"));
  const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim()));
  for (const Layer& l : I.layers) {
    ZV_RETURN_IF_ERROR(I.Gemm(I.x, l.qkv_w, I.qkv, t, 3 * h, h));
    ZV_RETURN_IF_ERROR(mark("gemm_qkv"));
    ZV_RETURN_IF_ERROR(I.Attention(l.qkv_b, d_off, scale));
    ZV_RETURN_IF_ERROR(mark("attention"));
    ZV_RETURN_IF_ERROR(I.Gemm(I.ctx, l.out_w, I.tmp, t, h, h));
    ZV_RETURN_IF_ERROR(mark("gemm_attn_out"));
    k::BiasResidualLayerNormKernel<<<row_blocks, 32 * wpb, 0, I.stream>>>(
        I.x, I.tmp, t, h, l.out_b, l.ln1_g, l.ln1_b, c.layer_norm_eps);
    MB_CUDA(cudaGetLastError());
    ZV_RETURN_IF_ERROR(mark("bias_residual_layernorm"));
    ZV_RETURN_IF_ERROR(I.Gemm(I.x, l.ffn_in_w, I.ffn, t, f, h));
    ZV_RETURN_IF_ERROR(mark("gemm_ffn_in"));
    const size_t pairs = size_t(t) * f / 2;
    const int gelu_blocks =
        static_cast<int>(std::min<size_t>((pairs + 255) / 256, 4096));
    k::BiasGeluKernel<<<gelu_blocks, 256, 0, I.stream>>>(
        reinterpret_cast<half2*>(I.ffn), pairs, f / 2,
        reinterpret_cast<const float2*>(l.ffn_in_b));
    MB_CUDA(cudaGetLastError());
    ZV_RETURN_IF_ERROR(mark("bias_gelu"));
    ZV_RETURN_IF_ERROR(I.Gemm(I.ffn, l.ffn_out_w, I.tmp, t, h, f));
    ZV_RETURN_IF_ERROR(mark("gemm_ffn_out"));
    k::BiasResidualLayerNormKernel<<<row_blocks, 32 * wpb, 0, I.stream>>>(
        I.x, I.tmp, t, h, l.ffn_out_b, l.ln2_g, l.ln2_b, c.layer_norm_eps);
    MB_CUDA(cudaGetLastError());
    ZV_RETURN_IF_ERROR(mark("bias_residual_layernorm"));
  }
  k::PoolNormalizeKernel<<<b, k::kPoolThreads, 0, I.stream>>>(
      I.x, d_off, h, I.cls, I.normalize, d_ptrs);
  MB_CUDA(cudaGetLastError());
  ZV_RETURN_IF_ERROR(mark("pool_normalize_to_host"));
  const int last = ++ev;
  MB_CUDA(cudaEventRecord(I.events[last], I.stream));
  MB_CUDA(cudaEventSynchronize(I.events[last]));
  float total = 0;
  MB_CUDA(cudaEventElapsedTime(&total, I.events[0], I.events[last]));
  if (phases) {
    int prev = 0;
    for (const auto& [name, e] : marks) {
      float ms = 0;
      MB_CUDA(cudaEventElapsedTime(&ms, I.events[prev], I.events[e]));
      (*phases)[name] += ms;
      prev = e;
    }
  }
  return double(total);
}

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
