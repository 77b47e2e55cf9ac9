// Device kernels of the CUDA encoder (cuda_encoder.cu is their only includer):
// fused embedding+LayerNorm, bias+residual+LayerNorm, bias+GELU,
// variable-length attention (tensor-core, plus the fp32 CUDA-core fallback),
// mean/CLS pooling + L2 normalisation.
// embed/-internal. Over 600 lines: one kernel a block; the attention kernels
// are long because they stay fused.
#ifndef ZEROVEC_EMBED_CUDA_KERNELS_CUH_
#define ZEROVEC_EMBED_CUDA_KERNELS_CUH_

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

namespace zv::embed::kernels {

// LayerNorm keeps a row in registers, 32 values a lane: hidden_size <= 1024.
inline constexpr int kMaxHidden = 1024;
inline constexpr int kLnPerLane = kMaxHidden / 32;

// The index in `values` of environment variable `name`'s value: `fallback`
// where it is unset or empty, and where it is none of them (then with a
// warning on stderr that names the valid ones, `hint`).
inline int EnvChoice(const char* name,
                     std::initializer_list<const char*> values, int fallback,
                     const char* hint) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return fallback;
  int i = 0;
  for (const char* v : values) {
    if (std::strcmp(e, v) == 0) return i;
    ++i;
  }
  std::fprintf(stderr, "zerovec: ignoring %s=%s (%s)\n", name, e, hint);
  return fallback;
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// LayerNorm of the row held in v (element lane + 32k), stored as half to out.
__device__ __forceinline__ void WarpLayerNormStore(
    float (&v)[kLnPerLane], int h, const float* gamma, const float* beta,
    float eps, half* out, __nv_fp8_e4m3* out8 = nullptr, float q8 = 1.f) {
  const int lane = threadIdx.x & 31;
  float sum = 0;
#pragma unroll
  for (int k = 0; k < kLnPerLane; ++k)
    if (lane + 32 * k < h) sum += v[k];
  const float mean = WarpSum(sum) / h;
  float var = 0;
#pragma unroll
  for (int k = 0; k < kLnPerLane; ++k)
    if (lane + 32 * k < h) var += (v[k] - mean) * (v[k] - mean);
  const float inv = rsqrtf(WarpSum(var) / h + eps);
#pragma unroll
  for (int k = 0; k < kLnPerLane; ++k) {
    const int i = lane + 32 * k;
    if (i < h) {
      const float y = (v[k] - mean) * inv * gamma[i] + beta[i];
      out[i] = __float2half_rn(y);
      if (out8) out8[i] = __nv_fp8_e4m3(y * q8);  // saturating
    }
  }
}

// One warp per token: word + position + token-type-0 embedding, then LayerNorm.
__global__ void EmbedLayerNormKernel(const int* ids, const int* pos, int tokens,
                                     int h, const float* word,
                                     const float* position, const float* type0,
                                     const float* gamma, const float* beta,
                                     float eps, half* x,
                                     __nv_fp8_e4m3* x8 = nullptr,
                                     float q8 = 1.f) {
  const int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (t >= tokens) return;
  const int lane = threadIdx.x & 31;
  const float* w = word + static_cast<size_t>(ids[t]) * h;
  const float* p = position + static_cast<size_t>(pos[t]) * h;
  float v[kLnPerLane];
#pragma unroll
  for (int k = 0; k < kLnPerLane; ++k) {
    const int i = lane + 32 * k;
    v[k] = i < h ? w[i] + p[i] + type0[i] : 0.f;
  }
  WarpLayerNormStore(v, h, gamma, beta, eps, x + static_cast<size_t>(t) * h,
                     x8 ? x8 + static_cast<size_t>(t) * h : nullptr, q8);
}

// One warp per token: x = LayerNorm(x + y + bias); y is a GEMM output without
// bias.
__global__ void BiasResidualLayerNormKernel(half* x, const half* y, int tokens,
                                            int h, const float* bias,
                                            const float* gamma,
                                            const float* beta, float eps) {
  const int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (t >= tokens) return;
  const int lane = threadIdx.x & 31;
  half* xr = x + static_cast<size_t>(t) * h;
  const half* yr = y + static_cast<size_t>(t) * h;
  float v[kLnPerLane];
#pragma unroll
  for (int k = 0; k < kLnPerLane; ++k) {
    const int i = lane + 32 * k;
    v[k] = i < h ? __half2float(xr[i]) + __half2float(yr[i]) + bias[i] : 0.f;
  }
  WarpLayerNormStore(v, h, gamma, beta, eps, xr);
}

// BiasResidualLayerNormKernel with half2 loads and stores (h even): one warp
// per token, x = LayerNorm(x + y + bias). The fused path's LayerNorm. With
// x8 (the FP8 path) it also writes the row times q8 as e4m3 (saturating), the
// next GEMM's input.
__global__ void BiasResidualLayerNormVecKernel(
    half* x, const half* y, int tokens, int h, const float* bias,
    const float* gamma, const float* beta, float eps,
    __nv_fp8_e4m3* x8 = nullptr, float q8 = 1.f) {
  constexpr int kPairs = kMaxHidden / 64;
  const int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (t >= tokens) return;
  const int lane = threadIdx.x & 31, hp = h / 2;
  half2* xr = reinterpret_cast<half2*>(x + static_cast<size_t>(t) * h);
  const half2* yr =
      reinterpret_cast<const half2*>(y + static_cast<size_t>(t) * h);
  const float2* b2 = reinterpret_cast<const float2*>(bias);
  float2 v[kPairs];
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < kPairs; ++k) {
    const int i = lane + 32 * k;
    v[k] = make_float2(0.f, 0.f);
    if (i < hp) {
      const float2 a = __half22float2(xr[i]), c = __half22float2(yr[i]);
      const float2 bb = b2[i];
      v[k] = make_float2(a.x + c.x + bb.x, a.y + c.y + bb.y);
      sum += v[k].x + v[k].y;
    }
  }
  const float mean = WarpSum(sum) / h;
  float var = 0.f;
#pragma unroll
  for (int k = 0; k < kPairs; ++k) {
    if (lane + 32 * k < hp) {
      const float dx = v[k].x - mean, dy = v[k].y - mean;
      var += dx * dx + dy * dy;
    }
  }
  const float inv = rsqrtf(WarpSum(var) / h + eps);
  const float2* g2 = reinterpret_cast<const float2*>(gamma);
  const float2* be2 = reinterpret_cast<const float2*>(beta);
#pragma unroll
  for (int k = 0; k < kPairs; ++k) {
    const int i = lane + 32 * k;
    if (i < hp) {
      const float2 g = g2[i], be = be2[i];
      const float2 o = make_float2((v[k].x - mean) * inv * g.x + be.x,
                                   (v[k].y - mean) * inv * g.y + be.y);
      xr[i] = __floats2half2_rn(o.x, o.y);
      if (x8) {
        reinterpret_cast<__nv_fp8x2_e4m3*>(x8 + static_cast<size_t>(t) * h)[i] =
            __nv_fp8x2_e4m3(make_float2(o.x * q8, o.y * q8));
      }
    }
  }
}

// BiasResidualLayerNormVecKernel at a hidden size fixed at compile time (H, a
// multiple of 128): four halves a lane a load (8 bytes; half2 loads needed
// twice as many), the row in H / 32 registers. The generic kernel sizes its
// registers for kMaxHidden (80 a thread), which left 24 of an SM's 64 warps
// resident for these memory-bound rows.
template <int H>
__global__ void __launch_bounds__(128)
    BiasResidualLayerNormFixedKernel(half* x, const half* y, int tokens,
                                     const float* bias, const float* gamma,
                                     const float* beta, float eps,
                                     __nv_fp8_e4m3* x8, float q8) {
  static_assert(H % 128 == 0, "four halves a lane");
  constexpr int kLoads = H / 128;
  const int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (t >= tokens) return;
  const int lane = threadIdx.x & 31;
  uint2* xr = reinterpret_cast<uint2*>(x + static_cast<size_t>(t) * H);
  const uint2* yr =
      reinterpret_cast<const uint2*>(y + static_cast<size_t>(t) * H);
  const float4* b4 = reinterpret_cast<const float4*>(bias);
  uint2 xa[kLoads], ya[kLoads];
#pragma unroll
  for (int k = 0; k < kLoads; ++k) {  // every load issued before any math
    xa[k] = xr[lane + 32 * k];
    ya[k] = yr[lane + 32 * k];
  }
  float v[kLoads][4];
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < kLoads; ++k) {
    const float4 bb = b4[lane + 32 * k];
    const float2 a0 = __half22float2(*reinterpret_cast<const half2*>(&xa[k].x));
    const float2 a1 = __half22float2(*reinterpret_cast<const half2*>(&xa[k].y));
    const float2 c0 = __half22float2(*reinterpret_cast<const half2*>(&ya[k].x));
    const float2 c1 = __half22float2(*reinterpret_cast<const half2*>(&ya[k].y));
    v[k][0] = a0.x + c0.x + bb.x;
    v[k][1] = a0.y + c0.y + bb.y;
    v[k][2] = a1.x + c1.x + bb.z;
    v[k][3] = a1.y + c1.y + bb.w;
    sum += (v[k][0] + v[k][1]) + (v[k][2] + v[k][3]);
  }
  const float mean = WarpSum(sum) / H;
  float var = 0.f;
#pragma unroll
  for (int k = 0; k < kLoads; ++k) {
#pragma unroll
    for (int j = 0; j < 4; ++j) var += (v[k][j] - mean) * (v[k][j] - mean);
  }
  const float inv = rsqrtf(WarpSum(var) / H + eps);
  const float4* g4 = reinterpret_cast<const float4*>(gamma);
  const float4* be4 = reinterpret_cast<const float4*>(beta);
#pragma unroll
  for (int k = 0; k < kLoads; ++k) {
    const int i = lane + 32 * k;
    const float4 g = g4[i], be = be4[i];
    const float o0 = (v[k][0] - mean) * inv * g.x + be.x;
    const float o1 = (v[k][1] - mean) * inv * g.y + be.y;
    const float o2 = (v[k][2] - mean) * inv * g.z + be.z;
    const float o3 = (v[k][3] - mean) * inv * g.w + be.w;
    uint2 out;
    *reinterpret_cast<half2*>(&out.x) = __floats2half2_rn(o0, o1);
    *reinterpret_cast<half2*>(&out.y) = __floats2half2_rn(o2, o3);
    xr[i] = out;
    if (x8) {
      reinterpret_cast<__nv_fp8x4_e4m3*>(x8 + static_cast<size_t>(t) * H)[i] =
          __nv_fp8x4_e4m3(make_float4(o0 * q8, o1 * q8, o2 * q8, o3 * q8));
    }
  }
}

// Which bias + residual + LayerNorm kernel the fused path runs: the
// fixed-size one by default (or =fixed) where the hidden size has an instance
// (HasFixedLayerNorm); ZV_CUDA_LAYERNORM=generic picks the kMaxHidden-sized
// kernel (bench/RESULTS.md, 2026-12-07: the fixed one 1.4-5.6 % faster on the
// MiniLM shape, the same within spread on bge-base).
inline bool LayerNormFixedFromEnv() {
  return EnvChoice("ZV_CUDA_LAYERNORM", {"generic", "fixed"}, 1,
                   "fixed or generic") == 1;
}

// Hidden sizes with a fixed-size LayerNorm instance (LaunchFixedLayerNorm).
inline bool HasFixedLayerNorm(int h) {
  return h == 384 || h == 768 || h == 1024;
}

// Launches the fixed-size kernel for h in {384, 768, 1024}; false (nothing
// launched) for another h.
inline bool LaunchFixedLayerNorm(int h, int blocks, int threads,
                                 cudaStream_t stream, half* x, const half* y,
                                 int tokens, const float* bias,
                                 const float* gamma, const float* beta,
                                 float eps, __nv_fp8_e4m3* x8, float q8) {
  auto* kernel = h == 384    ? BiasResidualLayerNormFixedKernel<384>
                 : h == 768  ? BiasResidualLayerNormFixedKernel<768>
                 : h == 1024 ? BiasResidualLayerNormFixedKernel<1024>
                             : nullptr;
  if (kernel == nullptr) return false;
  kernel<<<blocks, threads, 0, stream>>>(x, y, tokens, bias, gamma, beta, eps,
                                         x8, q8);
  return true;
}

// out = e4m3(in * q[0]) (saturating), two elements a thread: the FP8 path's
// cast of the FFN-up output where cuBLASLt cannot write e4m3 itself.
__global__ void CastE4m3Kernel(const half2* in, __nv_fp8x2_e4m3* out,
                               size_t pairs, const float* q) {
  const float s = *q;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < pairs;
       i += size_t{gridDim.x} * blockDim.x) {
    const float2 v = __half22float2(in[i]);
    out[i] = __nv_fp8x2_e4m3(make_float2(v.x * s, v.y * s));
  }
}

// f = gelu(f + bias) with the exact erf form, two elements a thread.
__global__ void BiasGeluKernel(half2* f, size_t pairs, int cols_half,
                               const float2* bias) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < pairs;
       i += size_t{gridDim.x} * blockDim.x) {
    float2 v = __half22float2(f[i]);
    const float2 b = bias[i % cols_half];
    v.x += b.x;
    v.y += b.y;
    v.x = 0.5f * v.x * (1.f + erff(v.x * 0.70710678118654752f));
    v.y = 0.5f * v.y * (1.f + erff(v.y * 0.70710678118654752f));
    f[i] = __floats2half2_rn(v.x, v.y);
  }
}

// Attention over packed variable-length sequences on CUDA cores (fp32): the
// fallback behind ZV_CUDA_ATTENTION=simt; MmaAttentionKernel below is the
// default. Block = (query tile, head,
// sequence); 4 warps x kRows query rows; keys stream through shared memory in
// chunks with an online softmax (fp32). QKV biases are added here, fused away
// from the GEMM.
// Over 80 lines, kept whole: one fused kernel (splitting it into __device__
// helpers is for a change that can be timed and checked on a GPU).
template <int DH>
__global__ void __launch_bounds__(128)
    VarlenAttentionKernel(const half* qkv, const float* qkv_bias,
                          const int* offsets, int h, float scale, half* ctx) {
  constexpr int kWarps = 4, kRows = 4, kTile = kWarps * kRows;
  constexpr int kChunk = DH >= 128 ? 32 : 64, kKeysPerLane = kChunk / 32;
  constexpr int kPer = DH / 32;  // output dims per lane
  __shared__ float q_s[kTile][DH];
  __shared__ float k_s[kChunk]
                      [DH + 1];  // +1: lanes read different keys, no conflicts
  __shared__ float v_s[kChunk][DH];

  const int seq = blockIdx.z, head = blockIdx.y;
  const int start = offsets[seq], len = offsets[seq + 1] - start;
  const int q0 = blockIdx.x * kTile;
  if (q0 >= len) return;  // uniform per block
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int ld = 3 * h, col = head * DH;
  const float* qb = qkv_bias + col;
  const float* kb = qkv_bias + h + col;
  const float* vb = qkv_bias + 2 * h + col;

  for (int idx = tid; idx < kTile * DH; idx += blockDim.x) {
    const int r = idx / DH, e = idx % DH, t = q0 + r;
    q_s[r][e] =
        t < len
            ? (__half2float(qkv[size_t(start + t) * ld + col + e]) + qb[e]) *
                  scale
            : 0.f;
  }
  float m[kRows], l[kRows], acc[kRows][kPer];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int c = 0; c < kPer; ++c) acc[r][c] = 0.f;
  }

  for (int k0 = 0; k0 < len; k0 += kChunk) {
    const int kc = min(kChunk, len - k0);
    __syncthreads();  // q_s written / previous chunk consumed
    for (int idx = tid; idx < kChunk * DH; idx += blockDim.x) {
      const int j = idx / DH, e = idx % DH;
      if (j < kc) {
        const half* row = qkv + size_t(start + k0 + j) * ld + col;
        k_s[j][e] = __half2float(row[h + e]) + kb[e];
        v_s[j][e] = __half2float(row[2 * h + e]) + vb[e];
      }
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int qr = warp * kRows + r;
      if (q0 + qr >= len) continue;  // uniform per warp
      float s[kKeysPerLane], p[kKeysPerLane];
      float local_max = -INFINITY;
#pragma unroll
      for (int kk = 0; kk < kKeysPerLane; ++kk) {
        const int j = lane + 32 * kk;
        s[kk] = -INFINITY;
        if (j < kc) {
          float dot = 0.f;
#pragma unroll
          for (int e = 0; e < DH; ++e) dot += q_s[qr][e] * k_s[j][e];
          s[kk] = dot;
        }
        local_max = fmaxf(local_max, s[kk]);
      }
      const float m_new = fmaxf(m[r], WarpMax(local_max));
      float psum = 0.f;
#pragma unroll
      for (int kk = 0; kk < kKeysPerLane; ++kk) {
        p[kk] = lane + 32 * kk < kc ? __expf(s[kk] - m_new) : 0.f;
        psum += p[kk];
      }
      const float corr = __expf(m[r] - m_new);  // 0 on the first chunk
      l[r] = l[r] * corr + WarpSum(psum);
#pragma unroll
      for (int c = 0; c < kPer; ++c) acc[r][c] *= corr;
#pragma unroll
      for (int kk = 0; kk < kKeysPerLane; ++kk) {
        const int jmax = min(32, kc - 32 * kk);
        for (int j = 0; j < jmax; ++j) {
          const float pj = __shfl_sync(0xffffffffu, p[kk], j);
#pragma unroll
          for (int c = 0; c < kPer; ++c)
            acc[r][c] += pj * v_s[32 * kk + j][lane + 32 * c];
        }
      }
      m[r] = m_new;
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int t = q0 + warp * kRows + r;
    if (t >= len) continue;
    half* out = ctx + size_t(start + t) * h + col;
    const float inv = 1.f / l[r];
#pragma unroll
    for (int c = 0; c < kPer; ++c)
      out[lane + 32 * c] = __float2half_rn(acc[r][c] * inv);
  }
}

// One block per sequence: mean over all its tokens (or the CLS token), optional
// L2 normalisation, stored to out_rows[seq] (a registered host row or mapped
// staging).
constexpr int kPoolThreads = 256;
__global__ void __launch_bounds__(kPoolThreads)
    PoolNormalizeKernel(const half* x, const int* offsets, int h, int cls,
                        int normalize, float* const* out_rows) {
  constexpr int kPer = kMaxHidden / kPoolThreads;
  __shared__ float partial[kPoolThreads / 32];
  const int seq = blockIdx.x, start = offsets[seq];
  const int len = cls ? 1 : offsets[seq + 1] - start;
  float v[kPer];
  float sq = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int d = threadIdx.x + kPoolThreads * k;
    float s = 0.f;
    if (d < h) {
      for (int t = 0; t < len; ++t)
        s += __half2float(x[size_t(start + t) * h + d]);
      s /= len;
    }
    v[k] = s;
    sq += s * s;
  }
  float scale = 1.f;
  if (normalize) {
    sq = WarpSum(sq);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sq;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kPoolThreads / 32; ++w) total += partial[w];
    scale = 1.f / fmaxf(sqrtf(total), 1e-12f);  // torch F.normalize
  }
  float* out = out_rows[seq];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int d = threadIdx.x + kPoolThreads * k;
    if (d < h) out[d] = v[k] * scale;
  }
}

// ---------------------------------------------------------------- tensor-core
// attention, and the one launcher the encoder calls.
//
// MmaAttentionKernel: FlashAttention-2 style. Block = (query tile of 16*W rows,
// head, sequence), W warps of 16 query rows each. Q (bias added, pre-scaled by
// softmax_scale * log2 e, fp16) is loaded once into registers as mma A
// fragments; K and V stream through shared memory in chunks of kKeys keys
// (bias added on the way in, fp16). S = Q K^T and O += P V run on
// mma.sync.m16n8k16 (fp16 in, fp32 accumulate); the online softmax is fp32 in
// registers (exp2), P is reused from the S accumulators as the A operand.
// Needs sm_80+ (compiled for sm_90a here).

namespace attn {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const half* p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(SmemAddr(p))
      : "memory");
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4],
                                                const half* p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
      "[%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(SmemAddr(p))
      : "memory");
}

// c += a * b, m16n8k16, fp16 inputs, fp32 accumulators.
__device__ __forceinline__ void Mma16816(float (&c)[4], const uint32_t (&a)[4],
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float Exp2(float x) {  // ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t PackHalf2(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);  // lo: the lower column
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Two exp2 in one MUFU op (fp16 in and out; ex2(-inf) = +0). The result is
// the fp16 P operand itself, so only the row sum needs the float values.
__device__ __forceinline__ uint32_t Exp2Half2(uint32_t x) {
  uint32_t y;
  asm("ex2.approx.f16x2 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

__device__ __forceinline__ float SumHalf2(uint32_t x) {
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&x));
  return f.x + f.y;
}

// 16 bytes global -> shared without a register round trip; valid false
// zero-fills the destination (src is not read then, but must be mapped).
__device__ __forceinline__ void CpAsync16(void* dst, const void* src,
                                          bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :
               : "r"(SmemAddr(dst)), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Eight fp16 values at src (16-byte aligned) plus bias, times s, as fp16.
__device__ __forceinline__ uint4 BiasScale8(const half* src,
                                            const float (&b)[8], float s) {
  const uint4 raw = *reinterpret_cast<const uint4*>(src);
  const __half2* in = reinterpret_cast<const __half2*>(&raw);
  uint4 out;
  __half2* o = reinterpret_cast<__half2*>(&out);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(in[i]);
    o[i] = __floats2half2_rn((f.x + b[2 * i]) * s, (f.y + b[2 * i + 1]) * s);
  }
  return out;
}

}  // namespace attn

// qkv: [tokens, 3h] fp16 without bias (Q | K | V, head-major inside each);
// qkv_bias: [3h] fp32; offsets: [batch + 1]; ctx: [tokens, h] fp16.
// q_scale = softmax scale * log2(e). Grid: (ceil(max_len / (16 W)), heads,
// batch), W * 32 threads.
// Over 80 lines, kept whole: one fused kernel (splitting it into __device__
// helpers is for a change that can be timed and checked on a GPU).
// KV_BIAS false: K and V are used without bias (the fused path drops the K
// bias and folds the V bias into the output projection; see cuda_encoder.cu).
// FAST (the default; false under ZV_CUDA_ATTENTION=mma):
// exp2 two at a time in fp16 (the MUFU unit bounds this loop at head_dim 32:
// 64 exps against 32 MMAs a warp and chunk), and, without K/V bias at
// head_dim <= 64, K/V chunks double-buffered by cp.async so the next chunk's
// loads overlap this chunk's math.
// MIN_BLOCKS: blocks an SM must hold (__launch_bounds__; ptxas caps the
// registers to fit, spilling if it must).
template <int DH, int W, bool KV_BIAS, bool FAST, int MIN_BLOCKS = 1>
__global__ void __launch_bounds__(W * 32, MIN_BLOCKS)
    MmaAttentionKernel(const half* __restrict__ qkv,
                       const float* __restrict__ qkv_bias,
                       const int* __restrict__ offsets, int h, float q_scale,
                       half* __restrict__ ctx) {
  constexpr int kThreads = W * 32;
  constexpr int kQ = 16 * W;               // query rows per block
  constexpr int kKeys = W >= 4 ? 64 : 32;  // keys per shared-memory chunk
  constexpr int kLd = DH + 8;              // row stride in halves: +16 bytes,
                                           // ldmatrix rows hit distinct banks
  constexpr int kVecs = DH / 8;            // 16-byte vectors per row
  constexpr int kRowStep = kThreads / kVecs;
  constexpr bool kPipe = FAST && !KV_BIAS && DH <= 64;  // static smem <= 48K
  constexpr int kStages = kPipe ? 2 : 1;
  constexpr int kSmemRows = 2 * kKeys * kStages > kQ ? 2 * kKeys * kStages : kQ;
  static_assert(DH % 16 == 0 && DH <= 128, "head_dim: multiple of 16, <= 128");
  static_assert(
      kThreads % kVecs == 0 && kQ % kRowStep == 0 && kKeys % kRowStep == 0,
      "tile shapes");
  // Stage s: K chunk rows [2s kKeys, (2s+1) kKeys), V chunk the next kKeys;
  // the Q tile uses the same memory before the first chunk.
  __shared__ __align__(16) half smem[kSmemRows * kLd];

  const int seq = blockIdx.z, head = blockIdx.y;
  const int start = offsets[seq], len = offsets[seq + 1] - start;
  const int q0 = blockIdx.x * kQ;
  if (q0 >= len) return;  // uniform per block
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int ld = 3 * h, col = head * DH;
  // This thread always loads the same 16-byte column vector of a row.
  const int cv = tid % kVecs, r0 = tid / kVecs;
  float qb[8], kb[8], vb[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    qb[i] = qkv_bias[col + cv * 8 + i];
    kb[i] = KV_BIAS ? qkv_bias[h + col + cv * 8 + i] : 0.f;
    vb[i] = KV_BIAS ? qkv_bias[2 * h + col + cv * 8 + i] : 0.f;
  }
  const half* const base = qkv + size_t(start) * ld + col + cv * 8;

  // Q tile -> shared -> A fragments (rows past the sequence are zeros).
#pragma unroll
  for (int i = 0; i < kQ / kRowStep; ++i) {
    const int r = r0 + i * kRowStep;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (q0 + r < len)
      v = attn::BiasScale8(base + size_t(q0 + r) * ld, qb, q_scale);
    *reinterpret_cast<uint4*>(&smem[r * kLd + cv * 8]) = v;
  }
  __syncthreads();
  uint32_t qf[DH / 16][4];
#pragma unroll
  for (int ks = 0; ks < DH / 16; ++ks) {
    attn::LdMatrixX4(
        qf[ks],
        &smem[(warp * 16 + (lane & 15)) * kLd + ks * 16 + (lane >> 4) * 8]);
  }

  // Stage `stage`'s K chunk; its V chunk follows kKeys rows on.
  auto stage_keys = [&](int stage) { return smem + stage * 2 * kKeys * kLd; };
  // Chunk k0's K and V rows into stage `stage` by cp.async (rows past the
  // sequence zero-filled: finite in P V; the source clamped to a real row).
  auto issue_chunk = [&](int k0, int stage) {
    half* const sk = stage_keys(stage);
    half* const sv = sk + kKeys * kLd;
#pragma unroll
    for (int i = 0; i < kKeys / kRowStep; ++i) {
      const int r = r0 + i * kRowStep;
      const bool valid = k0 + r < len;
      const half* row = base + size_t(valid ? k0 + r : 0) * ld;
      attn::CpAsync16(&sk[r * kLd + cv * 8], row + h, valid);
      attn::CpAsync16(&sv[r * kLd + cv * 8], row + 2 * h, valid);
    }
    attn::CpAsyncCommit();
  };
  if constexpr (kPipe) {
    __syncthreads();  // every warp's Q fragments read before stage 0 lands
    issue_chunk(0, 0);
  }

  const bool active = q0 + warp * 16 < len;  // uniform per warp
  float o[DH / 8][4];
#pragma unroll
  for (int d = 0; d < DH / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  // Rows lane/4 and lane/4 + 8 of the warp's 16: running max (log2 domain)
  // and this thread's partial row sum (reduced across the quad at the end).
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int k0 = 0; k0 < len; k0 += kKeys) {
    const int kc = min(kKeys, len - k0);
    const int stage = kPipe ? (k0 / kKeys) & 1 : 0;
    half* const sk = stage_keys(stage);
    half* const sv = sk + kKeys * kLd;
    __syncthreads();  // Q fragments read / previous chunk consumed
    if constexpr (kPipe) {
      if (k0 + kKeys < len) {
        issue_chunk(k0 + kKeys, stage ^ 1);
        attn::CpAsyncWait<1>();  // this chunk's group has landed
      } else {
        attn::CpAsyncWait<0>();
      }
    } else {
#pragma unroll
      for (int i = 0; i < kKeys / kRowStep; ++i) {
        const int r = r0 + i * kRowStep;
        uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
        if (r < kc) {  // rows past the sequence stay zero: finite in P V
          const half* row = base + size_t(k0 + r) * ld;
          if constexpr (KV_BIAS) {
            kv = attn::BiasScale8(row + h, kb, 1.f);
            vv = attn::BiasScale8(row + 2 * h, vb, 1.f);
          } else {
            kv = *reinterpret_cast<const uint4*>(row + h);
            vv = *reinterpret_cast<const uint4*>(row + 2 * h);
          }
        }
        *reinterpret_cast<uint4*>(&sk[r * kLd + cv * 8]) = kv;
        *reinterpret_cast<uint4*>(&sv[r * kLd + cv * 8]) = vv;
      }
    }
    __syncthreads();
    if (!active) continue;

    // S = Q K^T for this chunk: kKeys / 8 n-tiles of 8 keys.
    float s[kKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n)
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int np = 0; np < kKeys / 16; ++np) {
      if (np * 16 < kc) {  // uniform; skipped tiles are masked below
#pragma unroll
        for (int ks = 0; ks < DH / 16; ++ks) {
          uint32_t b[4];
          attn::LdMatrixX4(
              b, &sk[(np * 16 + (lane >> 4) * 8 + (lane & 7)) * kLd + ks * 16 +
                     ((lane >> 3) & 1) * 8]);
          attn::Mma16816(s[2 * np], qf[ks], b[0], b[1]);
          attn::Mma16816(s[2 * np + 1], qf[ks], b[2], b[3]);
        }
      }
    }
    // Mask keys past the sequence; online softmax update.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (n * 8 + 2 * (lane & 3) + (i & 1) >= kc) s[n][i] = -INFINITY;
        mx[i >> 1] = fmaxf(mx[i >> 1], s[n][i]);
      }
    }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r]);  // finite: kc >= 1
      corr[r] = attn::Exp2(m[r] - m_new);      // 0 on the first chunk
      m[r] = m_new;
      l[r] *= corr[r];
    }
    // P = exp2(S - m) as fp16 pairs: p[n][r] holds row r's two columns of
    // n-tile n, already the A operand of P V.
    uint32_t p[kKeys / 8][2];
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if constexpr (FAST) {
          p[n][r] = attn::Exp2Half2(
              attn::PackHalf2(s[n][2 * r] - m[r], s[n][2 * r + 1] - m[r]));
          l[r] += attn::SumHalf2(p[n][r]);
        } else {
          const float e0 = attn::Exp2(s[n][2 * r] - m[r]);
          const float e1 = attn::Exp2(s[n][2 * r + 1] - m[r]);
          l[r] += e0;  // in this order: the default kernel's sums unchanged
          l[r] += e1;
          p[n][r] = attn::PackHalf2(e0, e1);
        }
      }
    }
#pragma unroll
    for (int d = 0; d < DH / 8; ++d) {
      o[d][0] *= corr[0];
      o[d][1] *= corr[0];
      o[d][2] *= corr[1];
      o[d][3] *= corr[1];
    }
    // O += P V.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      if (kk * 16 < kc) {
        const uint32_t a[4] = {p[2 * kk][0], p[2 * kk][1], p[2 * kk + 1][0],
                               p[2 * kk + 1][1]};
#pragma unroll
        for (int dp = 0; dp < DH / 16; ++dp) {
          uint32_t b[4];
          attn::LdMatrixX4Trans(
              b, &sv[(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kLd +
                     dp * 16 + (lane >> 4) * 8]);
          attn::Mma16816(o[2 * dp], a, b[0], b[1]);
          attn::Mma16816(o[2 * dp + 1], a, b[2], b[3]);
        }
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    l[r] = 1.f / l[r];
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int t = q0 + warp * 16 + (lane >> 2) + 8 * r;
    if (t >= len) continue;
    half* out = ctx + size_t(start + t) * h + col + 2 * (lane & 3);
#pragma unroll
    for (int d = 0; d < DH / 8; ++d) {
      *reinterpret_cast<__half2*>(out + d * 8) =
          __floats2half2_rn(o[d][2 * r] * l[r], o[d][2 * r + 1] * l[r]);
    }
  }
}

// Which attention kernel the encoder runs. kMma2 (tensor cores, fp16 exp2,
// cp.async double buffering: 15 % less attention time on texts of 128-512
// tokens, the same within run-to-run spread on short ones; bench/RESULTS.md
// 2026-12-07) unless the environment says ZV_CUDA_ATTENTION=mma (the same
// without those two) or =simt (the fp32 CUDA-core kernel, kept for
// comparison and as a fallback).
enum class AttentionImpl { kMma, kMma2, kSimt };

inline AttentionImpl AttentionImplFromEnv() {
  const char* e = std::getenv("ZV_CUDA_ATTENTION");
  if (e != nullptr && std::strcmp(e, "simt") == 0) return AttentionImpl::kSimt;
  if (e != nullptr && std::strcmp(e, "mma") == 0) return AttentionImpl::kMma;
  return AttentionImpl::kMma2;
}

// ZV_CUDA_ATTENTION_BLOCKS=3: 128-row blocks at head_dim 32 compiled to fit 3
// to an SM (80 registers a thread, 8 bytes spilled, against 119 registers and
// 2 blocks by default), for long texts, where such blocks are the default and
// attention is ~29 % of MiniLM's pass. Opt-in: MiniLM long x4096 on an H100
// took 20.07 ms of attention against 20.18 by default (bench/RESULTS.md,
// 2026-12-07 23:38), within run-to-run spread; other values, and other head
// dims (64: 320 bytes spilled), run the default.
inline int AttentionBlocksFromEnv() {
  return EnvChoice("ZV_CUDA_ATTENTION_BLOCKS", {"1", "3"}, 0, "1 or 3") == 1
             ? 3
             : 1;
}

// Query rows a tensor-core attention block covers at most (16 a warp).
// ZV_CUDA_ATTENTION_ROWS=16, 32, 64 or 128 fixes it; otherwise (0, the
// default; another value is ignored with a warning) AttentionRows picks per
// batch.
inline int AttentionRowsFromEnv() {
  constexpr int kRows[] = {0, 16, 32, 64, 128};
  return kRows[EnvChoice("ZV_CUDA_ATTENTION_ROWS",
                         {"0", "16", "32", "64", "128"}, 0,
                         "16, 32, 64 or 128; 0 = per batch")];
}

// The rows a block covers for a batch of `seqs` sequences and `tokens` tokens
// under `setting` (AttentionRowsFromEnv). Automatic: 32 rows while the mean
// sequence is at most 128 tokens, else 128. A 128-row block over a sequence
// of ~65 tokens leaves 3 of its 8 warps idle, and at 119 registers a thread
// (head_dim 32) only two such blocks fit an SM; 32-row blocks made MiniLM's
// medium x4096 pass 8.6 % faster (attention 4.9 -> 3.0 ms) and bge-base's
// 3.8 %, but long texts (mean 244 tokens) 6 % / 3 % slower, each block
// reading the sequence's K and V again (bench/RESULTS.md, 2026-12-07 17:25).
inline int AttentionRows(int setting, int tokens, int seqs) {
  if (setting > 0) return setting;
  return tokens <= 128 * seqs ? 32 : 128;
}

inline const char* AttentionImplName(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::kSimt:
      return "simt-fp32";
    case AttentionImpl::kMma2:
      return "mma-fp16-pipelined";
    default:
      return "mma-fp16";
  }
}

// One attention launch's arguments (LaunchAttention's, passed down the
// tensor-core launchers below).
struct AttentionArgs {
  const half* qkv;
  const float* qkv_bias;
  const int* offsets;
  int batch, max_len, heads, h;
  int max_rows;    // query rows a block covers at most (AttentionRows)
  int min_blocks;  // AttentionBlocksFromEnv's
  float scale;
  half* ctx;
  cudaStream_t stream;
  bool kv_bias;
};

template <int DH, int W, bool FAST, int MIN_BLOCKS = 1>
inline cudaError_t LaunchMmaAttention(const AttentionArgs& a) {
  const dim3 grid((a.max_len + 16 * W - 1) / (16 * W), a.heads, a.batch);
  const float q_scale = a.scale * 1.4426950408889634f;
  auto* kernel = a.kv_bias ? MmaAttentionKernel<DH, W, true, FAST, MIN_BLOCKS>
                           : MmaAttentionKernel<DH, W, false, FAST, MIN_BLOCKS>;
  kernel<<<grid, 32 * W, 0, a.stream>>>(a.qkv, a.qkv_bias, a.offsets, a.h,
                                        q_scale, a.ctx);
  return cudaGetLastError();
}

template <int DH, bool FAST>
inline cudaError_t LaunchMmaAttentionDh(const AttentionArgs& a) {
  // One block covers the longest sequence up to max_rows tokens; max_rows / 16
  // warps beyond.
  const int rows = std::min(a.max_len, a.max_rows);
  if (rows <= 16) return LaunchMmaAttention<DH, 1, FAST>(a);
  if (rows <= 32) return LaunchMmaAttention<DH, 2, FAST>(a);
  if (rows <= 64) return LaunchMmaAttention<DH, 4, FAST>(a);
  if constexpr (DH == 32) {
    if (a.min_blocks == 3) return LaunchMmaAttention<DH, 8, FAST, 3>(a);
  }
  return LaunchMmaAttention<DH, 8, FAST>(a);
}

template <bool FAST>
inline cudaError_t LaunchMmaAttentionFor(int head_dim, const AttentionArgs& a) {
  switch (head_dim) {
    case 32:
      return LaunchMmaAttentionDh<32, FAST>(a);
    case 64:
      return LaunchMmaAttentionDh<64, FAST>(a);
    default:
      return LaunchMmaAttentionDh<128, FAST>(a);
  }
}

// ctx = softmax(Q K^T * scale) V per head over each sequence of the packed
// batch. Returns cudaErrorInvalidValue for an unsupported head_dim, else the
// launch's error. kv_bias false: the K and V parts of qkv_bias must be zeros
// (the tensor-core kernel then skips them; the fp32 one adds the zeros).
// max_rows: AttentionRows'; min_blocks: AttentionBlocksFromEnv's (both for
// the tensor-core kernels only).
inline cudaError_t LaunchAttention(AttentionImpl impl, int head_dim,
                                   const half* qkv, const float* qkv_bias,
                                   const int* offsets, int batch, int max_len,
                                   int heads, int h, float scale, half* ctx,
                                   cudaStream_t stream, bool kv_bias = true,
                                   int max_rows = 128, int min_blocks = 1) {
  if (impl != AttentionImpl::kSimt &&
      (head_dim == 32 || head_dim == 64 || head_dim == 128)) {
    const AttentionArgs args{qkv,   qkv_bias, offsets,  batch,      max_len,
                             heads, h,        max_rows, min_blocks, scale,
                             ctx,   stream,   kv_bias};
    return impl == AttentionImpl::kMma2
               ? LaunchMmaAttentionFor<true>(head_dim, args)
               : LaunchMmaAttentionFor<false>(head_dim, args);
  }
  // Fallback: the fp32 CUDA-core kernel (embed/cuda_kernels.cuh).
  const dim3 grid((max_len + 15) / 16, heads, batch);
  switch (head_dim) {
    case 32:
      VarlenAttentionKernel<32>
          <<<grid, 128, 0, stream>>>(qkv, qkv_bias, offsets, h, scale, ctx);
      break;
    case 64:
      VarlenAttentionKernel<64>
          <<<grid, 128, 0, stream>>>(qkv, qkv_bias, offsets, h, scale, ctx);
      break;
    case 128:
      VarlenAttentionKernel<128>
          <<<grid, 128, 0, stream>>>(qkv, qkv_bias, offsets, h, scale, ctx);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace zv::embed::kernels

#endif  // ZEROVEC_EMBED_CUDA_KERNELS_CUH_
