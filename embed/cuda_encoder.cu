// CUDA BERT encoder: cuBLAS fp16 GEMMs with fp32 accumulation and fused kernels
// over packed, unpadded sequences. Pooled rows are stored by the last kernel
// straight into the caller's rows (a registered segment mapping) or into a
// mapped pinned buffer. Small batches replay CUDA graphs (one per padded
// shape); an optional CUDA-event timer reports per-phase GPU time.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "embed/cuda_encoder.h"
#include "embed/cuda_fp8.cuh"
#include "embed/cuda_kernels.cuh"
#include "embed/cuda_util.cuh"

namespace zv::embed {
namespace {

using cuda::DeviceBuffer;
using kernels::AttentionImpl;
using kernels::kMaxHidden;

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
  // The fused path's biases (see FusedBiases): [bq | 0 | 0], out_b + W_o bv,
  // and the FFN-up bias as fp16 for the cuBLASLt epilogue.
  DeviceBuffer<float> q_only_b, out_b_folded;
  DeviceBuffer<half> ffn_in_b_half;
  // The FP8 path (CudaModel::Impl::EnsureFp8): e4m3 weights of the QKV,
  // FFN-up and FFN-down GEMMs and their device scales (Fp8Scale order);
  // ln1_q8 / ln2_q8 multiply the LayerNorm outputs before their e4m3 cast
  // (ln2_q8 is the next layer's QKV input scale; 0 for the last layer).
  DeviceBuffer<__nv_fp8_e4m3> qkv_w8, ffn_in_w8, ffn_out_w8;
  DeviceBuffer<float> scales8;
  float ln1_q8 = 0.f, ln2_q8 = 0.f;
};

// DeviceLayer::scales8: dequantization factors of the FP8 GEMMs' inputs
// (weights w, activations x) and the FFN-up output's quantization factor.
// Each scale sits 16 bytes from the next: cuBLASLt reads scale pointers with
// vector loads on some algorithms, so they get the alignment a fresh
// allocation has (a guess we do not depend on: the FP8 GEMMs are tried once
// per shape before use, LtFp8Gemm::Launch).
enum Fp8Scale {
  kQkvW = 0,
  kQkvX = 4,
  kUpW = 8,
  kUpX = 12,
  kUpOutQ = 16,
  kDownW = 20,
  kDownX = 24,
  kFp8ScaleCount = 28
};

Status UploadBytes(const void* host, size_t bytes, void* dev) {
  ZV_CUDA_CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
  return OkStatus();
}

Status UploadE4m3(const std::vector<float>& w, DeviceBuffer<__nv_fp8_e4m3>& d,
                  float* dequant) {
  std::vector<__nv_fp8_storage_t> q;
  *dequant = cuda::QuantizeE4m3(w, &q);
  ZV_RETURN_IF_ERROR(d.Allocate(q.size()));
  return UploadBytes(q.data(), q.size(), d.get());
}

// The fused path drops the K bias and folds the V bias into the output
// projection's bias. Per query row i (q_i with its bias), keys j:
//   K: s_ij = q_i . (k_j + bk) = q_i . k_j + q_i . bk, and q_i . bk is the
//      same for every j, so softmax_j(s_ij) is unchanged without bk.
//   V: sum_j p_ij (v_j + bv) = sum_j p_ij v_j + bv, since sum_j p_ij = 1;
//      then W_o (ctx_i + bv) + b_o = W_o ctx_i + (b_o + W_o bv).
// q_only = [bq | 0 | 0] (3h); folded = b_o + W_o bv (h), W_o row-major [h][h]
// as the GEMM reads it (y = x W_o^T), summed in double.
void FusedBiases(const LayerWeights& w, int h, std::vector<float>* q_only,
                 std::vector<float>* folded) {
  q_only->assign(3 * size_t(h), 0.f);
  std::copy(w.qkv_b.begin(), w.qkv_b.begin() + h, q_only->begin());
  folded->resize(h);
  for (int n = 0; n < h; ++n) {
    double acc = w.attn_out_b[n];
    for (int k = 0; k < h; ++k) {
      acc += double(w.attn_out_w[size_t(n) * h + k]) * w.qkv_b[2 * h + k];
    }
    (*folded)[n] = static_cast<float>(acc);
  }
}

}  // namespace

// ---------------------------------------------------------------- model

struct HostRange {
  char* host = nullptr;
  size_t bytes = 0;
  char* device = nullptr;  // null: registration failed, rows here are staged
  bool device_memory = false;  // host == device: cudaMalloc'd, not pinned
  // cudaHostRegister'd by this model (not by another model of the process
  // that registered the same range first, issue 19): unregistered by it.
  bool pinned_here = false;
};

struct CudaModel::Impl {
  BertConfig config;
  bool cls = false;
  bool normalize = false;
  int max_tokens = 0;
  // The pipelined tensor-core kernel unless ZV_CUDA_ATTENTION=mma or =simt
  // (read at Create).
  AttentionImpl attention = AttentionImpl::kMma2;
  // ZV_CUDA_ATTENTION_ROWS, 0 = per batch (kernels::AttentionRows; read at
  // Create).
  int attention_rows = 0;
  int attention_blocks = 1;  // ZV_CUDA_ATTENTION_BLOCKS (read at Create)
  // The fixed-size bias + residual + LayerNorm kernel (hidden 384, 768,
  // 1024; on an H100 MiniLM-shape passes 1.4-5.6 % faster than with the
  // generic kernel, bge-base within spread), unless ZV_CUDA_LAYERNORM=generic
  // (read at Create).
  bool layernorm_fixed = false;
  std::string device_name;
  int ordinal = 0;  // cudaSetDevice before any call: the current device is
                    // per host thread
  DeviceBuffer<float> word, position, type0, emb_g, emb_b;
  std::vector<DeviceLayer> layers;

  // The FP8 weights are made on the first FP8 encoder's request, from the
  // checkpoint kept here (the embedder keeps it too).
  std::shared_ptr<const Checkpoint> checkpoint;
  std::mutex fp8_mu;
  bool fp8_ready = false;
  float emb_q8 = 0.f;  // the embedding LayerNorm's e4m3 output scale

  Status EnsureFp8() {
    std::lock_guard<std::mutex> lock(fp8_mu);
    if (fp8_ready) return OkStatus();
    ZV_CUDA_CHECK(cudaSetDevice(ordinal));
    const Checkpoint& ck = *checkpoint;
    // Static activation bounds (cuda_fp8.cuh), 10 % headroom for the fp16 and
    // e4m3 rounding of the inputs they are derived from.
    constexpr float kMargin = 1.1f;
    auto quant = [](float bound) { return cuda::kE4m3Max / bound; };
    float in_bound =
        kMargin * cuda::LayerNormElementBound(ck.emb_ln_g, ck.emb_ln_b);
    emb_q8 = quant(in_bound);
    for (size_t i = 0; i < layers.size(); ++i) {
      const LayerWeights& w = ck.layers[i];
      DeviceLayer& d = layers[i];
      float s[kFp8ScaleCount] = {};
      ZV_RETURN_IF_ERROR(UploadE4m3(w.qkv_w, d.qkv_w8, &s[kQkvW]));
      ZV_RETURN_IF_ERROR(UploadE4m3(w.ffn_in_w, d.ffn_in_w8, &s[kUpW]));
      ZV_RETURN_IF_ERROR(UploadE4m3(w.ffn_out_w, d.ffn_out_w8, &s[kDownW]));
      s[kQkvX] = 1.f / quant(in_bound);
      const float ln1_bound =
          kMargin * cuda::LayerNormElementBound(w.ln1_g, w.ln1_b);
      d.ln1_q8 = quant(ln1_bound);
      s[kUpX] = 1.f / d.ln1_q8;
      const float up_bound =
          kMargin * cuda::LinearBound(
                        w.ffn_in_w, w.ffn_in_b,
                        kMargin * cuda::LayerNormNormBound(w.ln1_g, w.ln1_b));
      s[kUpOutQ] = quant(up_bound);
      s[kDownX] = 1.f / s[kUpOutQ];
      in_bound = kMargin * cuda::LayerNormElementBound(w.ln2_g, w.ln2_b);
      d.ln2_q8 = i + 1 < layers.size() ? quant(in_bound) : 0.f;
      ZV_RETURN_IF_ERROR(d.scales8.Allocate(kFp8ScaleCount));
      ZV_RETURN_IF_ERROR(UploadBytes(s, sizeof(s), d.scales8.get()));
    }
    fp8_ready = true;
    return OkStatus();
  }

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

}  // namespace zv::embed

// The per-worker encoder (needs Impl and DeviceLayer above).
#include "embed/cuda_lane_encoder.cuh"  // NOLINT(build/include)

namespace zv::embed {

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
  m.attention_rows = kernels::AttentionRowsFromEnv();
  m.attention_blocks = kernels::AttentionBlocksFromEnv();
  m.layernorm_fixed = kernels::LayerNormFixedFromEnv() &&
                      kernels::HasFixedLayerNorm(c.hidden_size);
  m.ordinal = ordinal;
  m.checkpoint = ck;
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
    std::vector<float> q_only, folded;
    FusedBiases(w, c.hidden_size, &q_only, &folded);
    ZV_RETURN_IF_ERROR(Upload(q_only, d.q_only_b));
    ZV_RETURN_IF_ERROR(Upload(folded, d.out_b_folded));
    ZV_RETURN_IF_ERROR(Upload(w.ffn_in_b, d.ffn_in_b_half));
  }
  return model;
}

StatusOr<std::unique_ptr<CudaEncoder>> CudaModel::NewCudaEncoder(
    const CudaEncoderOptions& options) {
  if (options.precision == CudaPrecision::kFp8) {
    if (!options.fused) {
      return InvalidArgumentError(
          "cuda encoder: fp8 needs the fused path (ZV_CUDA_FUSED=1)");
    }
    ZV_RETURN_IF_ERROR(impl_->EnsureFp8());
  }
  auto enc = std::make_unique<CudaLaneEncoder>(shared_from_this(), impl_.get(),
                                               options);
  ZV_RETURN_IF_ERROR(enc->Init());
  return std::unique_ptr<CudaEncoder>(std::move(enc));
}

StatusOr<std::unique_ptr<Encoder>> CudaModel::NewEncoder() {
  ZV_ASSIGN_OR_RETURN(auto enc, NewCudaEncoder(CudaEncoderOptions::FromEnv()));
  return std::unique_ptr<Encoder>(std::move(enc));
}

StatusOr<std::unique_ptr<Encoder>> CudaModel::NewEncoder(
    CudaPrecision precision) {
  CudaEncoderOptions o = CudaEncoderOptions::FromEnv();
  o.precision = precision;
  ZV_ASSIGN_OR_RETURN(auto enc, NewCudaEncoder(o));
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
  cudaError_t err = cudaHostRegister(
      data, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  range.pinned_here = err == cudaSuccess;
  if (err == cudaErrorHostMemoryAlreadyRegistered) {
    // Another encoder of this process (one per GPU) pinned it, portably:
    // this device maps it too.
    cudaGetLastError();
    err = cudaSuccess;
  }
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
      if (it->pinned_here) cudaHostUnregister(it->host);
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
         " cuBLAS, attention=" + kernels::AttentionImplName(impl_->attention) +
         (impl_->attention_rows == 0
              ? ""
              : " rows=" + std::to_string(impl_->attention_rows)) +
         (impl_->attention_blocks == 1
              ? ""
              : " blocks=" + std::to_string(impl_->attention_blocks)) +
         (impl_->layernorm_fixed ? "" : " layernorm=generic") +
         ", sink=" + SinkMode();
}

}  // namespace zv::embed
