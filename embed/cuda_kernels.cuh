// Device kernels of the CUDA encoder (cuda_encoder.cu is their only includer):
// fused embedding+LayerNorm, bias+residual+LayerNorm, bias+GELU,
// variable-length attention, mean/CLS pooling + L2 normalisation.
// embed/-internal.
#ifndef ZEROVEC_EMBED_CUDA_KERNELS_CUH_
#define ZEROVEC_EMBED_CUDA_KERNELS_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace zv::embed::kernels {

// LayerNorm keeps a row in registers, 32 values a lane: hidden_size <= 1024.
inline constexpr int kMaxHidden = 1024;
inline constexpr int kLnPerLane = kMaxHidden / 32;

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
__device__ __forceinline__ void WarpLayerNormStore(float (&v)[kLnPerLane],
                                                   int h, const float* gamma,
                                                   const float* beta, float eps,
                                                   half* out) {
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
    if (i < h)
      out[i] = __float2half_rn((v[k] - mean) * inv * gamma[i] + beta[i]);
  }
}

// One warp per token: word + position + token-type-0 embedding, then LayerNorm.
__global__ void EmbedLayerNormKernel(const int* ids, const int* pos, int tokens,
                                     int h, const float* word,
                                     const float* position, const float* type0,
                                     const float* gamma, const float* beta,
                                     float eps, half* x) {
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
  WarpLayerNormStore(v, h, gamma, beta, eps, x + static_cast<size_t>(t) * h);
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

// Attention over packed variable-length sequences. Block = (query tile, head,
// sequence); 4 warps x kRows query rows; keys stream through shared memory in
// chunks with an online softmax (fp32). QKV biases are added here, fused away
// from the GEMM.
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

}  // namespace zv::embed::kernels

#endif  // ZEROVEC_EMBED_CUDA_KERNELS_CUH_
