// The two search paths of GpuMirror (gpu_search.h): the fused scan for a few
// queries and SGEMM + blocked top-k for many, then merge and finalisation.
#include <algorithm>
#include <cstring>
#include <limits>

#include "gpusearch/impl.cuh"
#include "gpusearch/kernels.cuh"

namespace zv::gpusearch {

using namespace detail;  // NOLINT: this module's own internals
namespace k = kernels;

namespace {

// How one search runs: sizes of its launches and of its scratch.
struct Plan {
  bool scan = false;
  // Scan path.
  int grid = 0;
  uint32_t per_block = 0;
  int S = 0;
  size_t smem = 0;
  // GEMM path.
  size_t group = 0;    // queries per GEMM
  uint64_t cols = 0;   // rows per score tile
  int chunks = 0;      // top-k blocks per query and tile
  uint32_t chunk = 0;  // columns per top-k block
  int tile_S = 0;
};

template <int NQ, bool kL2>
void ScanLaunch(const Plan& p, cudaStream_t s, const float* rows, int stride4,
                uint32_t n, const float* q, const uint64_t* tomb,
                const uint64_t* mask, uint64_t mask_rows, int k, float* keys,
                uint32_t* ids) {
  k::ScanKernel<NQ, kL2><<<p.grid, k::kScanWarps * 32, p.smem, s>>>(
      reinterpret_cast<const float4*>(rows), stride4, n,
      reinterpret_cast<const float4*>(q), tomb, mask, mask_rows, k, p.S,
      p.per_block, keys, ids);
}

template <int NQ, bool kL2>
Status ScanSetup(Plan& p, int sms) {
  auto fn = k::ScanKernel<NQ, kL2>;
  if (p.smem > 48 * 1024) {
    ZV_CUDA_CHECK(cudaFuncSetAttribute(
        fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(p.smem)));
  }
  int per_sm = 0;
  ZV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, fn, k::kScanWarps * 32, p.smem));
  if (per_sm == 0) return InternalError("GPU search: scan kernel cannot run");
  p.grid = std::max(1, sms * per_sm);
  return OkStatus();
}

using ScanFn = void (*)(const Plan&, cudaStream_t, const float*, int, uint32_t,
                        const float*, const uint64_t*, const uint64_t*,
                        uint64_t, int, float*, uint32_t*);
using SetupFn = Status (*)(Plan&, int);

template <bool kL2>
std::pair<ScanFn, SetupFn> ScanFor(size_t nq) {
  switch (nq) {
#define ZV_CASE(N) \
  case N:          \
    return {ScanLaunch<N, kL2>, ScanSetup<N, kL2>};
    ZV_CASE(1)
    ZV_CASE(2) ZV_CASE(3) ZV_CASE(4) ZV_CASE(5) ZV_CASE(6) ZV_CASE(7) ZV_CASE(8)
#undef ZV_CASE
  }
  return {nullptr, nullptr};
}
static_assert(kScanMaxQueries == 8, "ScanFor instantiates 1..8 queries");

uint64_t Ceil(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

StatusOr<std::unique_ptr<Context>> GpuMirror::Impl::Acquire() const {
  {
    std::unique_lock lock(pool_mu);
    const int cap = std::max(1, o.max_concurrent_searches);
    pool_cv.wait(lock, [&] { return !pool.empty() || contexts < cap; });
    if (!pool.empty()) {
      auto c = std::move(pool.back());
      pool.pop_back();
      return c;
    }
    ++contexts;  // made below, outside the lock
  }
  auto c = std::make_unique<Context>();
  Status s = c->Init();
  if (!s.ok()) {
    Discard(std::move(c));
    return s;
  }
  return c;
}

void GpuMirror::Impl::Release(std::unique_ptr<Context> c) const {
  {
    std::lock_guard lock(pool_mu);
    pool.push_back(std::move(c));
  }
  pool_cv.notify_one();
}

void GpuMirror::Impl::Discard(std::unique_ptr<Context> c) const {
  c.reset();
  {
    std::lock_guard lock(pool_mu);
    --contexts;
  }
  pool_cv.notify_one();
}

Status GpuMirror::Impl::Scan(Context& c, Carver& cv, const float* dq, size_t nq,
                             int kk, const uint64_t* mask, uint64_t mask_rows,
                             uint32_t n, float* keys, uint32_t* ids) const {
  const bool l2 = o.metric == shm::Metric::kL2;
  auto [launch, setup] = l2 ? ScanFor<true>(nq) : ScanFor<false>(nq);
  Plan p;
  p.S = k::BufferSize(kk, k::kScanTile);
  p.smem = nq * o.row_stride * 4 + k::SharedBytes(int(nq), p.S);
  ZV_RETURN_IF_ERROR(setup(p, sms));
  p.grid = int(std::min<uint64_t>(p.grid, Ceil(n, k::kScanTile)));
  p.per_block = uint32_t(Ceil(n, p.grid));
  float* cand_keys = cv.Take<float>(nq * p.grid * size_t(kk));
  uint32_t* cand_ids = cv.Take<uint32_t>(nq * p.grid * size_t(kk));
  launch(p, c.stream, rows, o.row_stride / 4, n, dq, tomb, mask, mask_rows, kk,
         cand_keys, cand_ids);
  ZV_CUDA_CHECK(cudaGetLastError());
  const int S = k::BufferSize(kk, k::kTileThreads);
  k::MergeKernel<<<nq, k::kTileThreads, k::SharedBytes(1, S), c.stream>>>(
      cand_keys, cand_ids, p.grid, kk, S, keys, ids);
  ZV_CUDA_CHECK(cudaGetLastError());
  return OkStatus();
}

Status GpuMirror::Impl::Gemm(Context& c, Carver& cv, const float* dq, size_t nq,
                             int kk, const uint64_t* mask, uint64_t mask_rows,
                             uint32_t n, float* keys, uint32_t* ids) const {
  const bool l2 = o.metric == shm::Metric::kL2;
  const size_t group = std::min(nq, kMaxGemmGroup);
  uint64_t cols = std::clamp<uint64_t>(kScoreTileFloats / group, 4096, 1 << 20);
  cols = std::min<uint64_t>(cols & ~uint64_t{255}, Ceil(n, 4) * 4);
  const int chunks = int(std::clamp<uint64_t>(Ceil(kTargetTileBlocks, group), 1,
                                              Ceil(cols, k::kScoreTile)));
  const uint32_t chunk = uint32_t(Ceil(Ceil(cols, chunks), 4) * 4);
  const int tile_S = k::BufferSize(kk, k::kScoreTile);
  const size_t tile_smem = k::SharedBytes(1, tile_S);
  if (tile_smem > 48 * 1024) {
    ZV_CUDA_CHECK(cudaFuncSetAttribute(
        k::ScoreTileTopKKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
        int(tile_smem)));
  }
  float* scores = cv.Take<float>(group * cols);
  float* state_keys = cv.Take<float>(group * chunks * size_t(kk));
  uint32_t* state_ids = cv.Take<uint32_t>(group * chunks * size_t(kk));
  const float one = 1.f, zero = 0.f;
  const int merge_S = k::BufferSize(kk, k::kTileThreads);
  for (size_t g0 = 0; g0 < nq; g0 += group) {
    const size_t g = std::min(group, nq - g0);
    const float* q = dq + g0 * o.row_stride;
    const size_t state = g * chunks * size_t(kk);
    k::FillKernel<<<int(std::min<size_t>(Ceil(state, 256), 4096)), 256, 0,
                    c.stream>>>(state_keys, state_ids, state);
    ZV_CUDA_CHECK(cudaGetLastError());
    for (uint64_t r0 = 0; r0 < n; r0 += cols) {
      const uint64_t m = std::min<uint64_t>(cols, n - r0);
      // Column-major: scores(cols x g) = rows_block^T (cols x d) * q (d x g).
      ZV_CUBLAS_CHECK(cublasSgemm(
          c.blas, CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(g), int(o.row_stride),
          &one, rows + r0 * o.row_stride, int(o.row_stride), q,
          int(o.row_stride), &zero, scores, int(cols)));
      k::ScoreTileTopKKernel<<<dim3(chunks, unsigned(g)), k::kTileThreads,
                               tile_smem, c.stream>>>(
          scores, cols, uint32_t(m), uint32_t(r0), chunk, norms, l2, tomb, mask,
          mask_rows, kk, tile_S, state_keys, state_ids);
      ZV_CUDA_CHECK(cudaGetLastError());
    }
    k::MergeKernel<<<unsigned(g), k::kTileThreads, k::SharedBytes(1, merge_S),
                     c.stream>>>(state_keys, state_ids, chunks, kk, merge_S,
                                 keys + g0 * kk, ids + g0 * kk);
    ZV_CUDA_CHECK(cudaGetLastError());
  }
  return OkStatus();
}

Status GpuMirror::Impl::Run(Context& c, const float* dq, size_t nq, int kk,
                            const GpuMask* mask, float* dist,
                            int64_t* out) const {
  const uint64_t n = count.load();
  const size_t out_n = nq * size_t(kk);
  ZV_RETURN_IF_ERROR(c.HostReserve(out_n * 12));
  Carver cv(c.scratch.data() +
            ((nq * size_t(o.row_stride) * 4 + 255) & ~size_t{255}));
  float* keys = cv.Take<float>(out_n);
  uint32_t* ids = cv.Take<uint32_t>(out_n);
  float* d_dist = cv.Take<float>(out_n);
  int64_t* d_rows = cv.Take<int64_t>(out_n);
  const uint64_t* mw =
      mask ? static_cast<const uint64_t*>(mask->device_words()) : nullptr;
  const uint64_t mrows = mask ? mask->rows() : 0;
  const bool scan = nq <= kScanMaxQueries;
  if (n == 0) {
    k::FillKernel<<<int(Ceil(out_n, 256)), 256, 0, c.stream>>>(keys, ids,
                                                               out_n);
  } else if (scan) {
    ZV_RETURN_IF_ERROR(
        Scan(c, cv, dq, nq, kk, mw, mrows, uint32_t(n), keys, ids));
  } else {
    ZV_RETURN_IF_ERROR(
        Gemm(c, cv, dq, nq, kk, mw, mrows, uint32_t(n), keys, ids));
  }
  const int P = k::NextPow2(kk);
  // The scan's keys are exact already; GEMM keys are re-computed in fp32.
  k::FinalizeKernel<<<unsigned(nq), k::kTileThreads, size_t(P) * 8, c.stream>>>(
      keys, ids, kk, P, !scan && n > 0, o.metric == shm::Metric::kL2,
      reinterpret_cast<const float4*>(rows), o.row_stride / 4,
      reinterpret_cast<const float4*>(dq), d_dist, d_rows);
  ZV_CUDA_CHECK(cudaGetLastError());
  char* host = static_cast<char*>(c.host);
  ZV_CUDA_CHECK(cudaMemcpyAsync(host, d_dist, out_n * 4, cudaMemcpyDeviceToHost,
                                c.stream));
  ZV_CUDA_CHECK(cudaMemcpyAsync(host + out_n * 4, d_rows, out_n * 8,
                                cudaMemcpyDeviceToHost, c.stream));
  ZV_CUDA_CHECK(cudaStreamSynchronize(c.stream));
  std::memcpy(dist, host, out_n * 4);
  std::memcpy(out, host + out_n * 4, out_n * 8);
  return OkStatus();
}

namespace {

// Upper bound of the scratch one search needs (see Scan, Gemm and Run).
size_t ScratchBytes(size_t nq, int k, uint32_t stride, int sms) {
  const size_t out_n = nq * size_t(k);
  size_t bytes = nq * size_t(stride) * 4 + out_n * 20 + 8 * 256;
  if (nq <= kScanMaxQueries) {
    // At most 32 blocks an SM (2048 threads / 256).
    bytes += nq * size_t(sms) * 8 * k * 8 + 512;
  } else {
    const size_t group = std::min(nq, kMaxGemmGroup);
    bytes += group *
             std::clamp<uint64_t>(kScoreTileFloats / group, 4096, 1 << 20) * 4;
    bytes +=
        group * std::max<size_t>(Ceil(kTargetTileBlocks, group), 1) * k * 8;
    bytes += 768;
  }
  return bytes;
}

// Both entry points: queries on the host (cuda_stream unused) or on the
// device after work on cuda_stream.
Status SearchQueries(const GpuMirror::Impl& impl, const void* queries,
                     bool on_host, size_t nq, int k, const GpuMask* mask,
                     void* cuda_stream, float* dist, int64_t* rows) {
  const MirrorOptions& options_ = impl.o;
  const GpuMirror::Impl* impl_ = &impl;
  if (k <= 0 || k > kMaxK) {
    return InvalidArgumentError("GPU search: k must be in [1, " +
                                std::to_string(kMaxK) + "]");
  }
  if (nq == 0) return OkStatus();
  if (mask != nullptr && mask->device() != options_.device) {
    return InvalidArgumentError("GPU search: mask of another device");
  }
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  ZV_ASSIGN_OR_RETURN(std::unique_ptr<Context> c, impl_->Acquire());
  Status st = [&]() -> Status {
    std::shared_lock lock(impl_->buffers);
    ZV_RETURN_IF_ERROR(c->scratch.Reserve(
        ScratchBytes(nq, k, options_.row_stride, impl_->sms)));
    const size_t qbytes = nq * size_t(options_.row_stride) * 4;
    float* dq = reinterpret_cast<float*>(c->scratch.data());
    if (on_host) {
      ZV_CUDA_CHECK(cudaMemcpyAsync(dq, queries, qbytes, cudaMemcpyHostToDevice,
                                    c->stream));
    } else {
      ZV_CUDA_CHECK(
          cudaEventRecord(c->ready, static_cast<cudaStream_t>(cuda_stream)));
      ZV_CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ready, 0));
      ZV_CUDA_CHECK(cudaMemcpyAsync(dq, queries, qbytes,
                                    cudaMemcpyDeviceToDevice, c->stream));
    }
    return impl_->Run(*c, dq, nq, k, mask, dist, rows);
  }();
  if (st.ok()) {
    impl_->Release(std::move(c));
  } else {
    // A failed stream may hold queued work; drop the context with it.
    cudaStreamSynchronize(c->stream);
    cudaGetLastError();
    impl_->Discard(std::move(c));
  }
  return st;
}

}  // namespace

Status GpuMirror::Search(const float* queries, size_t nq, int k,
                         const GpuMask* mask, float* dist,
                         int64_t* rows) const {
  return SearchQueries(*impl_, queries, true, nq, k, mask, nullptr, dist, rows);
}

Status GpuMirror::SearchDevice(const void* device_queries, size_t nq, int k,
                               const GpuMask* mask, void* cuda_stream,
                               float* dist, int64_t* rows) const {
  return SearchQueries(*impl_, device_queries, false, nq, k, mask, cuda_stream,
                       dist, rows);
}

}  // namespace zv::gpusearch
