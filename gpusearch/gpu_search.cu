// GpuMirror on CUDA: device buffers, the writer path (pinned staging, norms,
// tombstones) and the public entry points; the search paths are in search.cu.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "gpusearch/impl.cuh"

namespace zv::gpusearch {

using namespace detail;  // NOLINT: this module's own internals

namespace {

// Row numbers are uint32 on the device; 0xFFFFFFFF pads top-k lists.
constexpr uint64_t kRowLimit = 0xFFFFFFFFull;

// Squared norms of rows [begin, end), a warp per row.
__global__ void NormsKernel(const float4* base, int stride4, uint64_t begin,
                            uint64_t end, float* norms) {
  const uint64_t row =
      begin +
      (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= end) return;
  const float4* x = base + row * stride4;
  float s = 0.f;
  for (int v = lane; v < stride4; v += 32) {
    const float4 a = x[v];
    s += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
  }
  for (int off = 16; off > 0; off >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) norms[row] = s;
}

}  // namespace

bool BuiltWithCuda() { return true; }

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

StatusOr<DeviceMemory> QueryDeviceMemory(int device) {
  if (device < 0 || device >= DeviceCount()) {
    return UnavailableError("no CUDA device " + std::to_string(device));
  }
  ZV_CUDA_CHECK(cudaSetDevice(device));
  size_t free_b = 0, total_b = 0;
  ZV_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return DeviceMemory{free_b, total_b};
}

uint64_t MirrorBytesFor(uint64_t rows, uint32_t row_stride) {
  return rows * row_stride * 4 + rows * 4 + Words(rows) * 8;
}

uint64_t SearchScratchBytes(uint32_t row_stride, size_t max_batch) {
  const uint64_t group = std::min(max_batch, kMaxGemmGroup);
  const uint64_t cand =
      group * kTargetTileBlocks * 8ull * kMaxK / 64 + max_batch * kMaxK * 16ull;
  return max_batch * row_stride * 4ull + kScoreTileFloats * 4 + cand +
         (64ull << 20);
}

// ------------------------------------------------------------ writer side

Status GpuMirror::Impl::Grow(uint64_t want) {
  if (want <= capacity) return OkStatus();
  if (want >= kRowLimit) {
    return InvalidArgumentError("GPU mirror: more than 2^32-1 rows");
  }
  uint64_t cap = std::max<uint64_t>({want, capacity + capacity / 2, 1024});
  cap = std::min<uint64_t>(cap, kRowLimit - 1);
  float* new_rows = nullptr;
  float* new_norms = nullptr;
  uint64_t* new_tomb = nullptr;
  auto fail = [&](Status s) {
    cudaFree(new_rows);
    cudaFree(new_norms);
    cudaFree(new_tomb);
    return s.WithContext("GPU mirror: growing to " + std::to_string(cap) +
                         " rows");
  };
  const size_t row_bytes = size_t{o.row_stride} * 4;
  cudaError_t e = cudaMalloc(&new_rows, cap * row_bytes);
  if (e == cudaSuccess) e = cudaMalloc(&new_norms, cap * 4);
  if (e == cudaSuccess) e = cudaMalloc(&new_tomb, Words(cap) * 8);
  if (e == cudaSuccess)
    e = cudaMemsetAsync(new_tomb, 0, Words(cap) * 8, wstream);
  if (e != cudaSuccess) return fail(CudaError("cudaMalloc", e));
  // Searches hold `buffers` shared while they run: wait for them, then swap.
  std::unique_lock lock(buffers);
  const uint64_t n = count.load() + staged_rows;  // staged rows move along
  if (n > 0) {
    e = cudaMemcpyAsync(new_rows, rows, n * row_bytes, cudaMemcpyDeviceToDevice,
                        wstream);
    if (e == cudaSuccess) {
      e = cudaMemcpyAsync(new_norms, norms, n * 4, cudaMemcpyDeviceToDevice,
                          wstream);
    }
    if (e == cudaSuccess) {
      e = cudaMemcpyAsync(new_tomb, tomb, Words(n) * 8,
                          cudaMemcpyDeviceToDevice, wstream);
    }
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(wstream);
  if (e != cudaSuccess) return fail(CudaError("copying the mirror", e));
  cudaFree(rows);
  cudaFree(norms);
  cudaFree(tomb);
  rows = new_rows;
  norms = new_norms;
  tomb = new_tomb;
  capacity = cap;
  host_tomb.resize(Words(cap), 0);
  return OkStatus();
}

// Norms of the rows just copied to [count, count + n), then publication.
Status GpuMirror::Impl::Publish(uint64_t n) {
  const uint64_t begin = count.load();
  if (n > 0) {
    const uint64_t threads = n * 32;
    NormsKernel<<<(threads + 255) / 256, 256, 0, wstream>>>(
        reinterpret_cast<const float4*>(rows), o.row_stride / 4, begin,
        begin + n, norms);
    ZV_CUDA_CHECK(cudaGetLastError());
  }
  ZV_CUDA_CHECK(cudaStreamSynchronize(wstream));
  count.store(begin + n);
  return OkStatus();
}

// Host rows to the device through two pinned buffers, so the memcpy into one
// overlaps the DMA out of the other.
Status GpuMirror::Impl::CopyIn(const float* host, uint64_t n, uint64_t at) {
  for (int i = 0; i < 2; ++i) {
    if (staging[i] == nullptr) {
      ZV_CUDA_CHECK(cudaMallocHost(&staging[i], kStagingBytes));
      ZV_CUDA_CHECK(
          cudaEventCreateWithFlags(&staged[i], cudaEventDisableTiming));
    }
  }
  const size_t row_bytes = size_t{o.row_stride} * 4;
  const uint64_t per_copy = kStagingBytes / row_bytes;
  const char* src = reinterpret_cast<const char*>(host);
  char* dst = reinterpret_cast<char*>(rows) + at * row_bytes;
  int which = 0;
  for (uint64_t done = 0; done < n; done += per_copy, which ^= 1) {
    const size_t bytes = std::min(per_copy, n - done) * row_bytes;
    ZV_CUDA_CHECK(cudaEventSynchronize(staged[which]));
    std::memcpy(staging[which], src + done * row_bytes, bytes);
    ZV_CUDA_CHECK(cudaMemcpyAsync(dst + done * row_bytes, staging[which], bytes,
                                  cudaMemcpyHostToDevice, wstream));
    ZV_CUDA_CHECK(cudaEventRecord(staged[which], wstream));
  }
  return OkStatus();
}

// ------------------------------------------------------------ public API

StatusOr<std::unique_ptr<GpuMirror>> GpuMirror::Create(const MirrorOptions& o) {
  if (o.dim == 0 || o.row_stride < o.dim || o.row_stride % 4 != 0) {
    return InvalidArgumentError(
        "GPU mirror: need 0 < dim <= row_stride, row_stride a multiple of 4");
  }
  if (DeviceCount() == 0) {
    return UnavailableError("GPU search: no CUDA device");
  }
  if (o.device < 0 || o.device >= DeviceCount()) {
    return UnavailableError("GPU search: no CUDA device " +
                            std::to_string(o.device));
  }
  ZV_CUDA_CHECK(cudaSetDevice(o.device));
  auto impl = std::make_unique<Impl>();
  impl->o = o;
  cudaDeviceProp prop;
  ZV_CUDA_CHECK(cudaGetDeviceProperties(&prop, o.device));
  impl->sms = prop.multiProcessorCount;
  impl->device_name = prop.name;
  ZV_CUDA_CHECK(
      cudaStreamCreateWithFlags(&impl->wstream, cudaStreamNonBlocking));
  ZV_CUDA_CHECK(
      cudaEventCreateWithFlags(&impl->wevent, cudaEventDisableTiming));
  ZV_RETURN_IF_ERROR(impl->Grow(std::max<uint64_t>(o.capacity_rows, 1)));
  ZV_CUDA_CHECK(cudaStreamSynchronize(impl->wstream));
  return std::unique_ptr<GpuMirror>(new GpuMirror(o, std::move(impl)));
}

GpuMirror::GpuMirror(const MirrorOptions& o, std::unique_ptr<Impl> impl)
    : options_(o), impl_(std::move(impl)) {}
GpuMirror::~GpuMirror() = default;

GpuMask::~GpuMask() {
  cudaSetDevice(device_);
  cudaFree(words_);
}

Status GpuMirror::AppendHost(const float* host_rows, uint64_t n) {
  std::lock_guard w(impl_->writer);
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  impl_->staged_rows = 0;
  ZV_RETURN_IF_ERROR(impl_->Grow(impl_->count.load() + n));
  ZV_RETURN_IF_ERROR(impl_->CopyIn(host_rows, n, impl_->count.load()));
  return impl_->Publish(n);
}

Status GpuMirror::AppendDevice(const void* device_rows, uint64_t n,
                               void* cuda_stream) {
  std::lock_guard w(impl_->writer);
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  impl_->staged_rows = 0;
  ZV_RETURN_IF_ERROR(impl_->Grow(impl_->count.load() + n));
  ZV_CUDA_CHECK(
      cudaEventRecord(impl_->wevent, static_cast<cudaStream_t>(cuda_stream)));
  ZV_CUDA_CHECK(cudaStreamWaitEvent(impl_->wstream, impl_->wevent, 0));
  const size_t row_bytes = size_t{options_.row_stride} * 4;
  ZV_CUDA_CHECK(cudaMemcpyAsync(
      reinterpret_cast<char*>(impl_->rows) + impl_->count.load() * row_bytes,
      device_rows, n * row_bytes, cudaMemcpyDeviceToDevice, impl_->wstream));
  return impl_->Publish(n);
}

Status GpuMirror::Reserve(uint64_t rows) {
  std::lock_guard w(impl_->writer);
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  return impl_->Grow(rows);
}

StatusOr<float*> GpuMirror::StageRows(uint64_t n) {
  std::lock_guard w(impl_->writer);
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  impl_->staged_rows = 0;
  const uint64_t first = impl_->count.load();
  ZV_RETURN_IF_ERROR(impl_->Grow(first + n));
  const size_t row_bytes = size_t{options_.row_stride} * 4;
  float* base = impl_->rows + first * options_.row_stride;
  ZV_CUDA_CHECK(cudaMemsetAsync(base, 0, n * row_bytes, impl_->wstream));
  ZV_CUDA_CHECK(cudaStreamSynchronize(impl_->wstream));
  impl_->staged_rows = n;
  return base;
}

Status GpuMirror::WriteStaged(uint64_t offset, const float* host_rows,
                              uint64_t n) {
  std::lock_guard w(impl_->writer);
  if (offset + n > impl_->staged_rows) {
    return OutOfRangeError("GPU mirror: write past the staged rows");
  }
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  ZV_RETURN_IF_ERROR(impl_->CopyIn(host_rows, n, impl_->count.load() + offset));
  ZV_CUDA_CHECK(cudaStreamSynchronize(impl_->wstream));
  return OkStatus();
}

Status GpuMirror::ReadStaged(uint64_t offset, uint64_t n,
                             float* host_rows) const {
  std::lock_guard w(impl_->writer);
  if (offset + n > impl_->staged_rows) {
    return OutOfRangeError("GPU mirror: read past the staged rows");
  }
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  const size_t row_bytes = size_t{options_.row_stride} * 4;
  ZV_CUDA_CHECK(cudaMemcpyAsync(
      host_rows,
      impl_->rows + (impl_->count.load() + offset) * options_.row_stride,
      n * row_bytes, cudaMemcpyDeviceToHost, impl_->wstream));
  ZV_CUDA_CHECK(cudaStreamSynchronize(impl_->wstream));
  return OkStatus();
}

Status GpuMirror::CommitStaged(uint64_t n) {
  std::lock_guard w(impl_->writer);
  if (n > impl_->staged_rows) {
    return OutOfRangeError("GPU mirror: commit of " + std::to_string(n) +
                           " rows, " + std::to_string(impl_->staged_rows) +
                           " staged");
  }
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  impl_->staged_rows = 0;
  return impl_->Publish(n);
}

StatusOr<std::unique_ptr<DeviceQueryBuffer>> DeviceQueryBuffer::Create(
    int device, uint64_t rows, uint32_t row_stride) {
  if (device < 0 || device >= DeviceCount()) {
    return UnavailableError("no CUDA device " + std::to_string(device));
  }
  ZV_CUDA_CHECK(cudaSetDevice(device));
  const size_t bytes = std::max<uint64_t>(rows, 1) * row_stride * 4;
  void* p = nullptr;
  ZV_CUDA_CHECK(cudaMalloc(&p, bytes));
  std::unique_ptr<DeviceQueryBuffer> b(
      new DeviceQueryBuffer(static_cast<float*>(p), rows, row_stride, device));
  ZV_CUDA_CHECK(cudaMemset(p, 0, bytes));
  return b;
}

DeviceQueryBuffer::~DeviceQueryBuffer() {
  cudaSetDevice(device_);
  cudaFree(data_);
}

Status DeviceQueryBuffer::ToHost(uint64_t n, uint32_t dim, float* host) const {
  if (n > rows_ || dim > row_stride_) {
    return OutOfRangeError("device query buffer: read past its rows");
  }
  ZV_CUDA_CHECK(cudaSetDevice(device_));
  ZV_CUDA_CHECK(cudaMemcpy2D(host, dim * 4, data_, size_t{row_stride_} * 4,
                             dim * 4, n, cudaMemcpyDeviceToHost));
  return OkStatus();
}

Status GpuMirror::Tombstone(uint64_t row) {
  std::lock_guard w(impl_->writer);
  if (row >= impl_->count.load()) {
    return OutOfRangeError("GPU mirror: tombstone of row " +
                           std::to_string(row) + " past the end");
  }
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  uint64_t& word = impl_->host_tomb[row >> 6];
  word |= uint64_t{1} << (row & 63);
  // One 8-byte store: a concurrent search reads the old or the new word.
  ZV_CUDA_CHECK(cudaMemcpyAsync(impl_->tomb + (row >> 6), &word, 8,
                                cudaMemcpyHostToDevice, impl_->wstream));
  ZV_CUDA_CHECK(cudaStreamSynchronize(impl_->wstream));
  return OkStatus();
}

Status GpuMirror::SetTombstones(const uint64_t* words, uint64_t nrows) {
  std::lock_guard w(impl_->writer);
  if (nrows > impl_->count.load()) {
    return OutOfRangeError("GPU mirror: tombstone bitmap past the end");
  }
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  std::vector<uint64_t>& shadow = impl_->host_tomb;
  std::copy(words, words + nrows / 64, shadow.begin());
  if (nrows % 64 != 0) {
    const uint64_t low = (uint64_t{1} << (nrows % 64)) - 1;
    uint64_t& last = shadow[nrows / 64];
    last = (last & ~low) | (words[nrows / 64] & low);
  }
  ZV_CUDA_CHECK(cudaMemcpyAsync(impl_->tomb, shadow.data(), Words(nrows) * 8,
                                cudaMemcpyHostToDevice, impl_->wstream));
  ZV_CUDA_CHECK(cudaStreamSynchronize(impl_->wstream));
  return OkStatus();
}

StatusOr<std::unique_ptr<GpuMask>> GpuMirror::UploadMask(const uint64_t* words,
                                                         uint64_t nrows) const {
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  void* dev = nullptr;
  const size_t bytes = std::max<uint64_t>(Words(nrows), 1) * 8;
  ZV_CUDA_CHECK(cudaMalloc(&dev, bytes));
  std::unique_ptr<GpuMask> mask(new GpuMask(dev, nrows, options_.device));
  ZV_CUDA_CHECK(cudaMemset(dev, 0, bytes));
  if (nrows > 0) {
    ZV_CUDA_CHECK(
        cudaMemcpy(dev, words, Words(nrows) * 8, cudaMemcpyHostToDevice));
  }
  return mask;
}

Status GpuMirror::Reset() {
  std::lock_guard w(impl_->writer);
  ZV_CUDA_CHECK(cudaSetDevice(options_.device));
  std::unique_lock lock(impl_->buffers);
  ZV_CUDA_CHECK(cudaMemsetAsync(impl_->tomb, 0, Words(impl_->capacity) * 8,
                                impl_->wstream));
  ZV_CUDA_CHECK(cudaStreamSynchronize(impl_->wstream));
  std::fill(impl_->host_tomb.begin(), impl_->host_tomb.end(), 0);
  impl_->count.store(0);
  impl_->staged_rows = 0;
  return OkStatus();
}

uint64_t GpuMirror::rows() const { return impl_->count.load(); }
uint64_t GpuMirror::capacity_rows() const {
  std::shared_lock lock(impl_->buffers);
  return impl_->capacity;
}
uint64_t GpuMirror::device_bytes() const {
  return MirrorBytesFor(capacity_rows(), options_.row_stride);
}

std::string GpuMirror::description() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "cuda:%d %s, %llu rows x %u, %s, %.2f GiB",
                options_.device, impl_->device_name.c_str(),
                static_cast<unsigned long long>(rows()), options_.dim,
                options_.metric == shm::Metric::kL2 ? "L2" : "IP",
                device_bytes() / double(1ull << 30));
  return buf;
}

}  // namespace zv::gpusearch
