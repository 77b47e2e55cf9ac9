// Device kernels of gpu_search.cu: the fused scan + block top-k, the running
// top-k over GEMM score tiles, the merge and the exact finalisation.
//
// Every top-k here works on keys where larger is better (IP: the inner
// product; L2: minus the distance, or 2 q.x - |x|^2 over a GEMM tile) and on
// uint32 row numbers (kNoRow pads). A block keeps per query a shared buffer of
// S candidates, S a power of two: candidates better than the running
// threshold are appended with an atomic; when the next tile could overflow
// the buffer, the block sorts it (bitonic) and keeps the best k, which raises
// the threshold. After the first few tiles almost nothing passes it.
#ifndef ZEROVEC_GPUSEARCH_KERNELS_CUH_
#define ZEROVEC_GPUSEARCH_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace zv::gpusearch::kernels {

constexpr uint32_t kNoRow = 0xFFFFFFFFu;
constexpr int kScanWarps = 8;
constexpr int kScanRowsPerWarp = 4;
constexpr int kScanTile = kScanWarps * kScanRowsPerWarp;  // rows per step
constexpr int kTileThreads = 256;
constexpr int kScoreTile = kTileThreads * 4;  // GEMM scores per step

__host__ __device__ inline int NextPow2(int x) {
  int p = 1;
  while (p < x) p <<= 1;
  return p;
}
// Candidate buffer size for k and `tile` offers per step.
__host__ __device__ inline int BufferSize(int k, int tile) {
  return NextPow2(k + 2 * tile);
}

__device__ inline float NegInf() { return -__int_as_float(0x7f800000); }

struct SharedTopK {
  float* keys;
  uint32_t* rows;
  int* count;
  float* threshold;
};

__device__ inline void Offer(const SharedTopK& t, float key, uint32_t row) {
  if (key > *t.threshold) {
    const int pos = atomicAdd(t.count, 1);
    t.keys[pos] = key;
    t.rows[pos] = row;
  }
}

// Sorts keys[0, n) descending (n a power of two) with the whole block.
__device__ inline void BitonicSortDesc(float* keys, uint32_t* rows, int n) {
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int j = i ^ stride;
        if (j > i) {
          const bool desc = (i & size) == 0;
          const float a = keys[i], b = keys[j];
          if (desc ? a < b : a > b) {
            keys[i] = b;
            keys[j] = a;
            const uint32_t r = rows[i];
            rows[i] = rows[j];
            rows[j] = r;
          }
        }
      }
      __syncthreads();
    }
  }
}

// Keeps the best k of the buffer (sorted, best first, at [0, k)) and updates
// the threshold. Whole block; count must be stable (after a barrier).
__device__ inline void Compact(const SharedTopK& t, int k) {
  const int n = *t.count;
  const int p = NextPow2(n > k ? n : k);
  for (int i = n + threadIdx.x; i < p; i += blockDim.x) {
    t.keys[i] = NegInf();
    t.rows[i] = kNoRow;
  }
  __syncthreads();
  BitonicSortDesc(t.keys, t.rows, p);
  if (threadIdx.x == 0) {
    *t.count = n < k ? n : k;
    *t.threshold = n >= k ? t.keys[k - 1] : NegInf();
  }
  __syncthreads();
}

__device__ inline bool RowLive(uint32_t row, const uint64_t* tomb,
                               const uint64_t* mask, uint64_t mask_rows) {
  if ((tomb[row >> 6] >> (row & 63)) & 1) return false;
  if (mask == nullptr) return true;
  return row < mask_rows && ((mask[row >> 6] >> (row & 63)) & 1);
}

// Shared layout of a kernel keeping `nq` buffers of size S.
__device__ inline SharedTopK SharedSlot(char* smem, int nq, int S, int q) {
  float* keys = reinterpret_cast<float*>(smem);
  uint32_t* rows = reinterpret_cast<uint32_t*>(keys + nq * S);
  int* counts = reinterpret_cast<int*>(rows + nq * S);
  float* thresholds = reinterpret_cast<float*>(counts + nq);
  return {keys + q * S, rows + q * S, counts + q, thresholds + q};
}
__host__ __device__ inline size_t SharedBytes(int nq, int S) {
  return static_cast<size_t>(nq) * (S * 8 + 8);
}

__device__ inline void InitSlots(char* smem, int nq, int S) {
  for (int q = threadIdx.x; q < nq; q += blockDim.x) {
    SharedTopK t = SharedSlot(smem, nq, S, q);
    *t.count = 0;
    *t.threshold = NegInf();
  }
  __syncthreads();
}

// After a step whose offers were all made: compacts the buffers that the next
// step of `tile` offers could overflow. Two barriers keep the decision uniform.
__device__ inline void CompactIfNeeded(char* smem, int nq, int S, int k,
                                       int tile) {
  __syncthreads();
  uint32_t need = 0;
  for (int q = 0; q < nq; ++q) {
    if (*SharedSlot(smem, nq, S, q).count > S - tile) need |= 1u << q;
  }
  __syncthreads();
  for (int q = 0; q < nq; ++q) {
    if (need & (1u << q)) Compact(SharedSlot(smem, nq, S, q), k);
  }
}

// One pass over rows [0, n) for NQ queries; block b scans rows
// [b * per_block, (b + 1) * per_block) and writes its sorted top-k per query to
// out_keys/out_rows[(q * gridDim.x + b) * k + i].
template <int NQ, bool kL2>
__global__ void __launch_bounds__(kScanWarps * 32)
    ScanKernel(const float4* __restrict__ base, int stride4, uint32_t n,
               const float4* __restrict__ queries, const uint64_t* tomb,
               const uint64_t* mask, uint64_t mask_rows, int k, int S,
               uint32_t per_block, float* out_keys, uint32_t* out_rows) {
  extern __shared__ __align__(16) char smem[];
  float4* sq = reinterpret_cast<float4*>(smem);
  char* slots = smem + NQ * stride4 * sizeof(float4);
  for (int i = threadIdx.x; i < NQ * stride4; i += blockDim.x)
    sq[i] = queries[i];
  InitSlots(slots, NQ, S);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const uint64_t begin64 = static_cast<uint64_t>(blockIdx.x) * per_block;
  const uint32_t begin = begin64 < n ? static_cast<uint32_t>(begin64) : n;
  const uint32_t end = n - begin < per_block ? n : begin + per_block;
  for (uint32_t tile = begin; tile < end; tile += kScanTile) {
    float acc[kScanRowsPerWarp][NQ];
    bool live[kScanRowsPerWarp];
    const float4* rowp[kScanRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kScanRowsPerWarp; ++r) {
      const uint32_t row = tile + warp * kScanRowsPerWarp + r;
      live[r] = row < end && RowLive(row, tomb, mask, mask_rows);
      rowp[r] = base + static_cast<size_t>(row) * stride4;
#pragma unroll
      for (int q = 0; q < NQ; ++q) acc[r][q] = 0.f;
    }
    for (int v = lane; v < stride4; v += 32) {
      float4 x[kScanRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kScanRowsPerWarp; ++r) {
        x[r] = live[r] ? __ldcs(rowp[r] + v) : make_float4(0, 0, 0, 0);
      }
#pragma unroll
      for (int q = 0; q < NQ; ++q) {
        const float4 y = sq[q * stride4 + v];
#pragma unroll
        for (int r = 0; r < kScanRowsPerWarp; ++r) {
          if (kL2) {
            const float a = x[r].x - y.x, b = x[r].y - y.y, c = x[r].z - y.z,
                        d = x[r].w - y.w;
            acc[r][q] += a * a + b * b + c * c + d * d;
          } else {
            acc[r][q] +=
                x[r].x * y.x + x[r].y * y.y + x[r].z * y.z + x[r].w * y.w;
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kScanRowsPerWarp; ++r) {
#pragma unroll
      for (int q = 0; q < NQ; ++q) {
        float s = acc[r][q];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
          s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == r * NQ + q && live[r]) {
          Offer(SharedSlot(slots, NQ, S, q), kL2 ? -s : s,
                tile + warp * kScanRowsPerWarp + r);
        }
      }
    }
    CompactIfNeeded(slots, NQ, S, k, kScanTile);
  }
  __syncthreads();
  for (int q = 0; q < NQ; ++q) {
    const SharedTopK t = SharedSlot(slots, NQ, S, q);
    Compact(t, k);
    const size_t o = (static_cast<size_t>(q) * gridDim.x + blockIdx.x) * k;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
      const bool have = i < *t.count;
      out_keys[o + i] = have ? t.keys[i] : NegInf();
      out_rows[o + i] = have ? t.rows[i] : kNoRow;
    }
  }
}

// Running top-k over one GEMM score tile: scores row-major nq x ld (query q's
// scores of rows [row_begin, row_begin + cols) at scores[q * ld]). Block
// (c, q) covers columns [c * chunk, (c + 1) * chunk) and merges them into its
// state, state_keys/rows[(q * gridDim.x + c) * k], kept sorted across tiles.
__global__ void __launch_bounds__(kTileThreads)
    ScoreTileTopKKernel(const float* __restrict__ scores, size_t ld,
                        uint32_t cols, uint32_t row_begin, uint32_t chunk,
                        const float* __restrict__ norms, bool l2,
                        const uint64_t* tomb, const uint64_t* mask,
                        uint64_t mask_rows, int k, int S, float* state_keys,
                        uint32_t* state_rows) {
  extern __shared__ __align__(16) char smem[];
  const SharedTopK t = SharedSlot(smem, 1, S, 0);
  const size_t so =
      (static_cast<size_t>(blockIdx.y) * gridDim.x + blockIdx.x) * k;
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    t.keys[i] = state_keys[so + i];
    t.rows[i] = state_rows[so + i];
  }
  if (threadIdx.x == 0) {
    *t.count = k;
    *t.threshold = state_keys[so + k - 1];
  }
  __syncthreads();
  const float* qs = scores + static_cast<size_t>(blockIdx.y) * ld;
  const uint32_t c0 = blockIdx.x * chunk;
  const uint32_t c1 = min(cols, c0 + chunk);  // c0 may lie past cols
  for (uint32_t step = c0; step < c1; step += kScoreTile) {
    const uint32_t col = step + threadIdx.x * 4;
    float s[4];
    if (col + 3 < c1) {
      const float4 v = __ldcs(reinterpret_cast<const float4*>(qs + col));
      s[0] = v.x, s[1] = v.y, s[2] = v.z, s[3] = v.w;
    } else {
      for (int j = 0; j < 4; ++j) s[j] = col + j < c1 ? qs[col + j] : 0.f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (col + j >= c1) break;
      const uint32_t row = row_begin + col + j;
      const float key = l2 ? 2.f * s[j] - norms[row] : s[j];
      if (key > *t.threshold && RowLive(row, tomb, mask, mask_rows)) {
        Offer(t, key, row);
      }
    }
    CompactIfNeeded(smem, 1, S, k, kScoreTile);
  }
  __syncthreads();
  Compact(t, k);
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    const bool have = i < *t.count;
    state_keys[so + i] = have ? t.keys[i] : NegInf();
    state_rows[so + i] = have ? t.rows[i] : kNoRow;
  }
}

// Merges `lists` sorted lists of k candidates per query (query q's at
// in[(q * lists + l) * k]) into its best k at out[q * k].
__global__ void __launch_bounds__(kTileThreads)
    MergeKernel(const float* in_keys, const uint32_t* in_rows, int lists, int k,
                int S, float* out_keys, uint32_t* out_rows) {
  extern __shared__ __align__(16) char smem[];
  const SharedTopK t = SharedSlot(smem, 1, S, 0);
  InitSlots(smem, 1, S);
  const size_t total = static_cast<size_t>(lists) * k;
  const size_t o = static_cast<size_t>(blockIdx.x) * total;
  for (size_t step = 0; step < total; step += blockDim.x) {
    const size_t i = step + threadIdx.x;
    if (i < total && in_rows[o + i] != kNoRow)
      Offer(t, in_keys[o + i], in_rows[o + i]);
    CompactIfNeeded(smem, 1, S, k, blockDim.x);
  }
  __syncthreads();
  Compact(t, k);
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    const bool have = i < *t.count;
    out_keys[static_cast<size_t>(blockIdx.x) * k + i] =
        have ? t.keys[i] : NegInf();
    out_rows[static_cast<size_t>(blockIdx.x) * k + i] =
        have ? t.rows[i] : kNoRow;
  }
}

// Final k per query: optionally recomputes each candidate's score exactly in
// fp32 (a warp per candidate) and re-sorts, then writes metric scores (IP:
// product, L2: squared distance) and int64 rows, -1 / worst padded.
__global__ void __launch_bounds__(kTileThreads)
    FinalizeKernel(const float* keys, const uint32_t* rows, int k, int P,
                   bool recompute, bool l2, const float4* __restrict__ base,
                   int stride4, const float4* __restrict__ queries, float* dist,
                   int64_t* out_rows) {
  extern __shared__ __align__(16) char smem[];
  float* sk = reinterpret_cast<float*>(smem);
  uint32_t* sr = reinterpret_cast<uint32_t*>(sk + P);
  const size_t o = static_cast<size_t>(blockIdx.x) * k;
  for (int i = threadIdx.x; i < P; i += blockDim.x) {
    sk[i] = i < k ? keys[o + i] : NegInf();
    sr[i] = i < k ? rows[o + i] : kNoRow;
  }
  __syncthreads();
  if (recompute) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const float4* q = queries + static_cast<size_t>(blockIdx.x) * stride4;
    for (int i = warp; i < k; i += blockDim.x >> 5) {
      if (sr[i] == kNoRow) continue;
      const float4* x = base + static_cast<size_t>(sr[i]) * stride4;
      float s = 0.f;
      for (int v = lane; v < stride4; v += 32) {
        const float4 a = x[v], b = q[v];
        if (l2) {
          const float d0 = a.x - b.x, d1 = a.y - b.y, d2 = a.z - b.z,
                      d3 = a.w - b.w;
          s += d0 * d0 + d1 * d1 + d2 * d2 + d3 * d3;
        } else {
          s += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
        }
      }
      for (int off = 16; off > 0; off >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, off);
      if (lane == 0) sk[i] = l2 ? -s : s;
    }
    __syncthreads();
    BitonicSortDesc(sk, sr, P);
  }
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    const bool have = sr[i] != kNoRow;
    const float inf = __int_as_float(0x7f800000);
    dist[o + i] = have ? (l2 ? -sk[i] : sk[i]) : (l2 ? inf : -inf);
    out_rows[o + i] = have ? static_cast<int64_t>(sr[i]) : -1;
  }
}

__global__ void FillKernel(float* keys, uint32_t* rows, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    keys[i] = NegInf();
    rows[i] = kNoRow;
  }
}

}  // namespace zv::gpusearch::kernels

#endif  // ZEROVEC_GPUSEARCH_KERNELS_CUH_
