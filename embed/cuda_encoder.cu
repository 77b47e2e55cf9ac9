// CUDA BERT encoder: cuBLAS fp16 GEMMs with fp32 accumulation and fused kernels
// over packed, unpadded sequences. Pooled rows are stored by the last kernel
// straight into the caller's rows (a registered segment mapping) or into a
// mapped pinned buffer.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "embed/cuda_encoder.h"
#include "embed/cuda_kernels.cuh"

namespace zv::embed {
namespace {

using kernels::AttentionImpl;
using kernels::BiasGeluKernel;
using kernels::BiasResidualLayerNormKernel;
using kernels::EmbedLayerNormKernel;
using kernels::kMaxHidden;
using kernels::kPoolThreads;
using kernels::LaunchAttention;
using kernels::PoolNormalizeKernel;

#define ZV_CUDA_CHECK(expr)                                         \
  do {                                                              \
    const cudaError_t zv_err_ = (expr);                             \
    if (zv_err_ != cudaSuccess) {                                   \
      return ::zv::InternalError(std::string("cuda: " #expr ": ") + \
                                 cudaGetErrorString(zv_err_));      \
    }                                                               \
  } while (0)

#define ZV_CUBLAS_CHECK(expr)                                         \
  do {                                                                \
    const cublasStatus_t zv_st_ = (expr);                             \
    if (zv_st_ != CUBLAS_STATUS_SUCCESS) {                            \
      return ::zv::InternalError(std::string("cublas: " #expr ": ") + \
                                 cublasGetStatusString(zv_st_));      \
    }                                                                 \
  } while (0)

// ---------------------------------------------------------------- RAII
// wrappers

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    cudaFree(ptr_);
  }  // error ignored: nothing to do in a destructor
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

template <typename T>
Status Upload(const std::vector<float>& host, DeviceBuffer<T>& dev) {
  ZV_RETURN_IF_ERROR(dev.Allocate(host.size()));
  if constexpr (std::is_same_v<T, float>) {
    ZV_CUDA_CHECK(cudaMemcpy(dev.get(), host.data(),
                             host.size() * sizeof(float),
                             cudaMemcpyHostToDevice));
  } else {
    std::vector<half> h(host.size());
    for (size_t i = 0; i < host.size(); ++i) h[i] = __float2half_rn(host[i]);
    ZV_CUDA_CHECK(cudaMemcpy(dev.get(), h.data(), h.size() * sizeof(half),
                             cudaMemcpyHostToDevice));
  }
  return OkStatus();
}

struct DeviceLayer {
  DeviceBuffer<half> qkv_w, out_w, ffn_in_w, ffn_out_w;
  DeviceBuffer<float> qkv_b, out_b, ln1_g, ln1_b, ffn_in_b, ffn_out_b, ln2_g,
      ln2_b;
};

}  // namespace

// ---------------------------------------------------------------- model

struct HostRange {
  char* host = nullptr;
  size_t bytes = 0;
  char* device = nullptr;  // null: registration failed, rows here are staged
  bool device_memory = false;  // host == device: cudaMalloc'd, not pinned
};

struct CudaModel::Impl {
  BertConfig config;
  bool cls = false;
  bool normalize = false;
  int max_tokens = 0;
  // Tensor-core kernel unless ZV_CUDA_ATTENTION=simt (read at Create).
  AttentionImpl attention = AttentionImpl::kMma;
  std::string device_name;
  int ordinal = 0;  // cudaSetDevice before any call: the current device is
                    // per host thread
  DeviceBuffer<float> word, position, type0, emb_g, emb_b;
  std::vector<DeviceLayer> layers;

  mutable std::mutex mu;  // guards ranges and sink_mode
  std::vector<HostRange> ranges;
  std::string sink_mode = "pinned-staging";

  // Device pointers for rows when every row lies in a registered range, else
  // empty.
  std::vector<float*> DeviceRows(std::span<float* const> rows, int dim) const {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<float*> out;
    out.reserve(rows.size());
    for (float* row : rows) {
      const char* p = reinterpret_cast<const char*>(row);
      const HostRange* hit = nullptr;
      for (const HostRange& r : ranges) {
        if (r.device && p >= r.host &&
            p + dim * sizeof(float) <= r.host + r.bytes) {
          hit = &r;
          break;
        }
      }
      if (!hit) return {};
      out.push_back(reinterpret_cast<float*>(hit->device + (p - hit->host)));
    }
    return out;
  }
};

namespace {

// One worker's encoder: its own stream, cuBLAS handle and scratch.
class CudaLaneEncoder : public Encoder {
 public:
  CudaLaneEncoder(std::shared_ptr<CudaModel> owner,
                  const CudaModel::Impl* model)
      : owner_(std::move(owner)), m_(*model) {}
  ~CudaLaneEncoder() override {
    if (stream_) cudaStreamSynchronize(stream_);
    if (blas_) cublasDestroy(blas_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status Init() {
    const BertConfig& c = m_.config;
    const size_t t = m_.max_tokens, h = c.hidden_size;
    ZV_CUDA_CHECK(cudaSetDevice(m_.ordinal));
    ZV_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ZV_CUBLAS_CHECK(cublasCreate(&blas_));
    ZV_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
    ZV_RETURN_IF_ERROR(x_.Allocate(t * h));
    ZV_RETURN_IF_ERROR(qkv_.Allocate(t * 3 * h));
    ZV_RETURN_IF_ERROR(ctx_.Allocate(t * h));
    ZV_RETURN_IF_ERROR(tmp_.Allocate(t * h));
    ZV_RETURN_IF_ERROR(ffn_.Allocate(t * c.intermediate_size));
    // ids[t] pos[t] offsets[t+1] (int32), then row pointers[t] (8-byte
    // aligned).
    in_words_ = 3 * t + 2;
    ZV_RETURN_IF_ERROR(in_host_.Allocate(in_words_ * 4 + t * 8));
    ZV_RETURN_IF_ERROR(in_dev_.Allocate(in_words_ * 4 + t * 8));
    staging_rows_ =
        t / 2 + 1;  // Embedder sequences hold >= 2 tokens ([CLS] [SEP])
    ZV_RETURN_IF_ERROR(staging_.Allocate(staging_rows_ * h));
    return OkStatus();
  }

  std::string description() const override { return owner_->description(); }

  Status Encode(const TokenBatch& batch,
                std::span<float* const> rows) override {
    const BertConfig& c = m_.config;
    const int t = static_cast<int>(batch.ids.size()),
              b = static_cast<int>(batch.size());
    const int h = c.hidden_size;
    if (rows.size() != batch.size()) {
      return InvalidArgumentError("cuda encoder: rows and batch sizes differ");
    }
    if (b == 0) return OkStatus();
    ZV_CUDA_CHECK(cudaSetDevice(m_.ordinal));
    if (t > m_.max_tokens) {
      return InvalidArgumentError("cuda encoder: batch of " +
                                  std::to_string(t) +
                                  " tokens exceeds max_batch_tokens");
    }
    StagedInputs in;
    ZV_RETURN_IF_ERROR(StageInputs(batch, rows, &in));

    const int row_blocks = (t + kWarpsPerBlock - 1) / kWarpsPerBlock;
    EmbedLayerNormKernel<<<row_blocks, 32 * kWarpsPerBlock, 0, stream_>>>(
        in.ids, in.pos, t, h, m_.word.get(), m_.position.get(), m_.type0.get(),
        m_.emb_g.get(), m_.emb_b.get(), c.layer_norm_eps, x_.get());
    ZV_CUDA_CHECK(cudaGetLastError());
    const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim()));
    for (const DeviceLayer& l : m_.layers) {
      ZV_RETURN_IF_ERROR(EncodeLayer(l, t, b, in.offsets, in.max_len, scale));
    }
    PoolNormalizeKernel<<<b, kPoolThreads, 0, stream_>>>(
        x_.get(), in.offsets, h, m_.cls, m_.normalize, in.out_rows);
    ZV_CUDA_CHECK(cudaGetLastError());
    ZV_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (in.staged) {
      for (int s = 0; s < b; ++s) {
        std::memcpy(rows[s], staging_.get() + size_t(s) * h, h * sizeof(float));
      }
    }
    return OkStatus();
  }

 private:
  static constexpr int kWarpsPerBlock = 4;  // row kernels: a warp a row

  // The batch's inputs on the device (in in_dev_), copied there by
  // StageInputs.
  struct StagedInputs {
    const int* ids = nullptr;      // [t] token ids
    const int* pos = nullptr;      // [t] position of each token in its sequence
    const int* offsets = nullptr;  // [b + 1] first token of each sequence
    float* const* out_rows = nullptr;  // [b] where each pooled row goes
    int max_len = 0;                   // longest sequence
    bool staged = false;  // rows go to staging_, copied out after the sync
  };

  // Checks the batch and stages it in pinned memory (one host-to-device copy):
  // ids, positions, offsets, then the output row pointers (8-byte aligned):
  // the caller's rows where the device can write them, else staging_.
  Status StageInputs(const TokenBatch& batch, std::span<float* const> rows,
                     StagedInputs* in) {
    const BertConfig& c = m_.config;
    const int t = static_cast<int>(batch.ids.size()),
              b = static_cast<int>(batch.size());
    int* ids = reinterpret_cast<int*>(in_host_.get());
    int* pos = ids + t;
    int* offsets = pos + t;
    for (int s = 0; s < b; ++s) {
      const int len = batch.length(s);
      if (len < 1 || len > c.max_position_embeddings) {
        return InvalidArgumentError("cuda encoder: sequence length " +
                                    std::to_string(len) + " out of range");
      }
      in->max_len = std::max(in->max_len, len);
      for (int i = 0; i < len; ++i) pos[batch.offsets[s] + i] = i;
    }
    for (int i = 0; i < t; ++i) {
      if (batch.ids[i] < 0 || batch.ids[i] >= c.vocab_size) {
        return InvalidArgumentError("cuda encoder: token id " +
                                    std::to_string(batch.ids[i]) +
                                    " outside the vocabulary");
      }
      ids[i] = batch.ids[i];
    }
    std::memcpy(offsets, batch.offsets.data(), (b + 1) * sizeof(int));
    const size_t ptr_at = (size_t(2 * t + b + 1) * 4 + 7) / 8 * 8;
    float** ptrs = reinterpret_cast<float**>(in_host_.get() + ptr_at);
    const int h = c.hidden_size;
    std::vector<float*> direct = m_.DeviceRows(rows, h);
    in->staged = direct.empty();
    if (in->staged && static_cast<size_t>(b) > staging_rows_) {
      return InvalidArgumentError(
          "cuda encoder: too many sequences in one batch");
    }
    for (int s = 0; s < b; ++s) {
      ptrs[s] = in->staged ? staging_.device() + size_t(s) * h : direct[s];
    }
    ZV_CUDA_CHECK(cudaMemcpyAsync(in_dev_.get(), in_host_.get(), ptr_at + b * 8,
                                  cudaMemcpyHostToDevice, stream_));
    in->ids = reinterpret_cast<const int*>(in_dev_.get());
    in->pos = in->ids + t;
    in->offsets = in->pos + t;
    in->out_rows = reinterpret_cast<float* const*>(in_dev_.get() + ptr_at);
    return OkStatus();
  }

  // One transformer layer over x_ in place: attention block, then FFN block,
  // each closed by bias + residual + LayerNorm.
  Status EncodeLayer(const DeviceLayer& l, int t, int b, const int* d_off,
                     int max_len, float scale) {
    const BertConfig& c = m_.config;
    const int h = c.hidden_size, f = c.intermediate_size;
    const int row_blocks = (t + kWarpsPerBlock - 1) / kWarpsPerBlock;
    ZV_RETURN_IF_ERROR(Gemm(x_.get(), l.qkv_w.get(), qkv_.get(), t, 3 * h, h));
    ZV_RETURN_IF_ERROR(Attention(l.qkv_b.get(), d_off, b, max_len, scale));
    ZV_RETURN_IF_ERROR(Gemm(ctx_.get(), l.out_w.get(), tmp_.get(), t, h, h));
    BiasResidualLayerNormKernel<<<row_blocks, 32 * kWarpsPerBlock, 0,
                                  stream_>>>(x_.get(), tmp_.get(), t, h,
                                             l.out_b.get(), l.ln1_g.get(),
                                             l.ln1_b.get(), c.layer_norm_eps);
    ZV_CUDA_CHECK(cudaGetLastError());
    ZV_RETURN_IF_ERROR(Gemm(x_.get(), l.ffn_in_w.get(), ffn_.get(), t, f, h));
    const size_t pairs = size_t(t) * f / 2;
    const int gelu_blocks =
        static_cast<int>(std::min<size_t>((pairs + 255) / 256, 4096));
    BiasGeluKernel<<<gelu_blocks, 256, 0, stream_>>>(
        reinterpret_cast<half2*>(ffn_.get()), pairs, f / 2,
        reinterpret_cast<const float2*>(l.ffn_in_b.get()));
    ZV_CUDA_CHECK(cudaGetLastError());
    ZV_RETURN_IF_ERROR(
        Gemm(ffn_.get(), l.ffn_out_w.get(), tmp_.get(), t, h, f));
    BiasResidualLayerNormKernel<<<row_blocks, 32 * kWarpsPerBlock, 0,
                                  stream_>>>(x_.get(), tmp_.get(), t, h,
                                             l.ffn_out_b.get(), l.ln2_g.get(),
                                             l.ln2_b.get(), c.layer_norm_eps);
    ZV_CUDA_CHECK(cudaGetLastError());
    return OkStatus();
  }

  // y[T, N] = x[T, K] * w[N, K]^T in row-major terms (column-major: y^T = w *
  // x^T).
  Status Gemm(const half* x, const half* w, half* y, int t, int n, int k) {
    const float one = 1.f, zero = 0.f;
    ZV_CUBLAS_CHECK(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, n, t, k, &one,
                                 w, CUDA_R_16F, k, x, CUDA_R_16F, k, &zero, y,
                                 CUDA_R_16F, n, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    return OkStatus();
  }

  Status Attention(const float* qkv_b, const int* d_off, int b, int max_len,
                   float scale) {
    const BertConfig& c = m_.config;
    const cudaError_t err = LaunchAttention(
        m_.attention, c.head_dim(), qkv_.get(), qkv_b, d_off, b, max_len,
        c.num_heads, c.hidden_size, scale, ctx_.get(), stream_);
    if (err == cudaErrorInvalidValue) {
      return UnimplementedError("cuda encoder: head_dim must be 32, 64 or 128");
    }
    ZV_CUDA_CHECK(err);
    return OkStatus();
  }

  std::shared_ptr<CudaModel> owner_;  // keeps the weights alive
  const CudaModel::Impl& m_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  DeviceBuffer<half> x_, qkv_, ctx_, tmp_, ffn_;
  size_t in_words_ = 0;
  PinnedBuffer<char> in_host_;
  DeviceBuffer<char> in_dev_;
  PinnedBuffer<float> staging_;
  size_t staging_rows_ = 0;
};

}  // namespace

CudaModel::CudaModel() : impl_(std::make_unique<Impl>()) {}

CudaModel::~CudaModel() {
  for (const HostRange& r : impl_->ranges) {
    if (r.device && !r.device_memory) cudaHostUnregister(r.host);
  }
}

int CudaModel::DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start
                         // clean
    return 0;
  }
  return n;
}

bool CudaModel::DeviceAvailable(int ordinal) {
  return ordinal >= 0 && ordinal < DeviceCount();
}

StatusOr<std::shared_ptr<CudaModel>> CudaModel::Create(
    std::shared_ptr<const Checkpoint> ck, int max_batch_tokens, int ordinal) {
  const BertConfig& c = ck->config;
  if (c.hidden_size > kMaxHidden || c.hidden_size % 32 != 0 ||
      c.intermediate_size % 2 != 0) {
    return UnimplementedError(
        "cuda encoder: hidden_size must be a multiple of 32 up to 1024");
  }
  const int hd = c.head_dim();
  if (hd != 32 && hd != 64 && hd != 128) {
    return UnimplementedError("cuda encoder: head_dim " + std::to_string(hd) +
                              " unsupported (32, 64 or 128)");
  }
  std::shared_ptr<CudaModel> model(new CudaModel());
  Impl& m = *model->impl_;
  m.config = c;
  m.cls = ck->pooling == Pooling::kCls;
  m.normalize = ck->normalize;
  m.max_tokens = std::max(max_batch_tokens, c.max_position_embeddings);
  m.attention = kernels::AttentionImplFromEnv();
  m.ordinal = ordinal;
  ZV_CUDA_CHECK(cudaSetDevice(ordinal));
  cudaDeviceProp prop;
  ZV_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  m.device_name = prop.name;
  ZV_RETURN_IF_ERROR(Upload(ck->word_embeddings, m.word));
  ZV_RETURN_IF_ERROR(Upload(ck->position_embeddings, m.position));
  ZV_RETURN_IF_ERROR(Upload(ck->token_type0, m.type0));
  ZV_RETURN_IF_ERROR(Upload(ck->emb_ln_g, m.emb_g));
  ZV_RETURN_IF_ERROR(Upload(ck->emb_ln_b, m.emb_b));
  m.layers.resize(ck->layers.size());
  for (size_t i = 0; i < ck->layers.size(); ++i) {
    const LayerWeights& w = ck->layers[i];
    DeviceLayer& d = m.layers[i];
    ZV_RETURN_IF_ERROR(Upload(w.qkv_w, d.qkv_w));
    ZV_RETURN_IF_ERROR(Upload(w.qkv_b, d.qkv_b));
    ZV_RETURN_IF_ERROR(Upload(w.attn_out_w, d.out_w));
    ZV_RETURN_IF_ERROR(Upload(w.attn_out_b, d.out_b));
    ZV_RETURN_IF_ERROR(Upload(w.ln1_g, d.ln1_g));
    ZV_RETURN_IF_ERROR(Upload(w.ln1_b, d.ln1_b));
    ZV_RETURN_IF_ERROR(Upload(w.ffn_in_w, d.ffn_in_w));
    ZV_RETURN_IF_ERROR(Upload(w.ffn_in_b, d.ffn_in_b));
    ZV_RETURN_IF_ERROR(Upload(w.ffn_out_w, d.ffn_out_w));
    ZV_RETURN_IF_ERROR(Upload(w.ffn_out_b, d.ffn_out_b));
    ZV_RETURN_IF_ERROR(Upload(w.ln2_g, d.ln2_g));
    ZV_RETURN_IF_ERROR(Upload(w.ln2_b, d.ln2_b));
  }
  return model;
}

StatusOr<std::unique_ptr<Encoder>> CudaModel::NewEncoder() {
  auto enc = std::make_unique<CudaLaneEncoder>(shared_from_this(), impl_.get());
  ZV_RETURN_IF_ERROR(enc->Init());
  return std::unique_ptr<Encoder>(std::move(enc));
}

Status CudaModel::RegisterOutputMemory(void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  char* host = static_cast<char*>(data);
  for (const HostRange& r : impl_->ranges) {
    if (r.host == host) return OkStatus();
  }
  HostRange range{host, bytes, nullptr};
  ZV_CUDA_CHECK(cudaSetDevice(impl_->ordinal));
  const cudaError_t err = cudaHostRegister(
      data, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (err == cudaSuccess) {
    void* dev = nullptr;
    ZV_CUDA_CHECK(cudaHostGetDevicePointer(&dev, data, 0));
    range.device = static_cast<char*>(dev);
    impl_->sink_mode = "host-registered";
  } else {
    cudaGetLastError();  // not sticky; clear it so it is not reported later
    // A file-backed MAP_SHARED mapping may refuse long-term pinning: stage
    // instead.
    impl_->sink_mode = std::string("pinned-staging (cudaHostRegister: ") +
                       cudaGetErrorString(err) + ")";
  }
  impl_->ranges.push_back(range);
  return OkStatus();
}

Status CudaModel::RegisterDeviceOutputMemory(void* device_data, size_t bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  char* p = static_cast<char*>(device_data);
  for (const HostRange& r : impl_->ranges) {
    if (r.host == p) return OkStatus();
  }
  ZV_CUDA_CHECK(cudaSetDevice(impl_->ordinal));
  cudaPointerAttributes attr;
  ZV_CUDA_CHECK(cudaPointerGetAttributes(&attr, device_data));
  if (attr.type != cudaMemoryTypeDevice || attr.device != impl_->ordinal) {
    return InvalidArgumentError(
        "cuda encoder: output memory is not device memory of cuda:" +
        std::to_string(impl_->ordinal));
  }
  impl_->ranges.push_back(HostRange{p, bytes, p, /*device_memory=*/true});
  return OkStatus();
}

void CudaModel::UnregisterOutputMemory(void* data) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& ranges = impl_->ranges;
  for (auto it = ranges.begin(); it != ranges.end(); ++it) {
    if (it->host == data) {
      if (it->device && !it->device_memory) cudaHostUnregister(it->host);
      ranges.erase(it);
      if (std::none_of(ranges.begin(), ranges.end(),
                       [](const HostRange& r) {
                         return r.device != nullptr && !r.device_memory;
                       }) &&
          impl_->sink_mode == "host-registered") {
        impl_->sink_mode = "pinned-staging";
      }
      return;
    }
  }
}

int CudaModel::ordinal() const { return impl_->ordinal; }

std::string CudaModel::SinkMode() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->sink_mode;
}

std::string CudaModel::description() const {
  return "cuda:" + std::to_string(impl_->ordinal) + " " + impl_->device_name +
         " fp16 cuBLAS, attention=" +
         kernels::AttentionImplName(impl_->attention) + ", sink=" + SinkMode();
}

}  // namespace zv::embed
