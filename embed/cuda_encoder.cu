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
#include "embed/cuda_kernels.cuh"
#include "embed/cuda_util.cuh"

namespace zv::embed {
namespace {

using cuda::DeviceBuffer;
using cuda::GraphCache;
using cuda::LtGeluGemm;
using cuda::PinnedBuffer;
using kernels::AttentionImpl;
using kernels::BiasGeluKernel;
using kernels::BiasResidualLayerNormKernel;
using kernels::BiasResidualLayerNormVecKernel;
using kernels::EmbedLayerNormKernel;
using kernels::kMaxHidden;
using kernels::kPoolThreads;
using kernels::LaunchAttention;
using kernels::PoolNormalizeKernel;

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
};

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

// The phases the timer reports (CudaTimings::phases_ms), in pass order.
enum Phase {
  kEmbeddings,
  kQkv,
  kAttention,
  kOutProjLn,
  kFfnUpGelu,
  kFfnDownLn,
  kPool,
  kPhaseCount
};
constexpr const char* kPhaseNames[kPhaseCount] = {
    "embeddings",  "qkv",         "attention", "out_proj_ln",
    "ffn_up_gelu", "ffn_down_ln", "pool"};

// Small batches are padded to a shape bucket so their graphs are reused:
// tokens to 8 steps an octave (<= 12.5 % padding, at least 16), the longest
// sequence to a power of two (>= 16). Padding tokens are embedded and carried
// through the GEMMs but belong to no sequence, so attention and pooling never
// read them; a longer max_len only adds attention blocks that exit at once
// (the tile width it picks is the same: its thresholds are powers of two).
int RoundUpTokens(int t) {
  if (t <= 16) return 16;
  int top = 1;
  while (top <= t / 2) top *= 2;  // largest power of two <= t
  const int step = std::max(8, top / 8);
  return (t + step - 1) / step * step;
}

int RoundUpLen(int len) {
  int p = 16;
  while (p < len) p *= 2;
  return p;
}

// One worker's encoder: its own stream, cuBLAS handles, scratch and graphs.
class CudaLaneEncoder : public CudaEncoder {
 public:
  CudaLaneEncoder(std::shared_ptr<CudaModel> owner,
                  const CudaModel::Impl* model,
                  const CudaEncoderOptions& options)
      : owner_(std::move(owner)),
        m_(*model),
        opt_(options),
        graphs_(options.max_graphs) {}
  ~CudaLaneEncoder() override {
    if (stream_) cudaStreamSynchronize(stream_);
    graphs_.Clear();
    lt_.Destroy();
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
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
    // An explicit workspace, set after cublasSetStream (which resets it): the
    // same one for direct runs and graph captures; the cuBLASLt GEMM shares it
    // (same stream, so never at the same time).
    ZV_RETURN_IF_ERROR(workspace_.Allocate(kWorkspaceBytes));
    ZV_CUBLAS_CHECK(
        cublasSetWorkspace(blas_, workspace_.get(), kWorkspaceBytes));
    if (opt_.fused) {
      ZV_RETURN_IF_ERROR(lt_.Init(workspace_.get(), kWorkspaceBytes));
    }
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

  std::string description() const override {
    std::string d = owner_->description() + ", " + opt_.ToString();
    if (!graph_note_.empty()) d += " (graphs off: " + graph_note_ + ")";
    if (!lt_note_.empty()) d += " (cublasLt GELU epilogue: " + lt_note_ + ")";
    return d;
  }

  void SetTimer(CudaTimer timer) override { timer_ = timer; }
  CudaTimings LastTimings() const override { return last_; }
  const CudaEncoderOptions& options() const override { return opt_; }

  Status Encode(const TokenBatch& batch,
                std::span<float* const> rows) override {
    const int t = static_cast<int>(batch.ids.size()),
              b = static_cast<int>(batch.size());
    const int h = m_.config.hidden_size;
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
    CudaTimings timings;
    ZV_RETURN_IF_ERROR(RunPass(in, &timings));
    ZV_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ZV_RETURN_IF_ERROR(ReadTimings(&timings));
    last_ = std::move(timings);
    if (in.staged) {
      for (int s = 0; s < b; ++s) {
        std::memcpy(rows[s], staging_.get() + size_t(s) * h, h * sizeof(float));
      }
    }
    return OkStatus();
  }

 private:
  static constexpr int kWarpsPerBlock = 4;  // row kernels: a warp a row
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  // The batch's inputs on the device (in in_dev_), copied there by
  // StageInputs. tokens and max_len are the shape the kernels run: padded for
  // small batches (RoundUpTokens, RoundUpLen).
  struct StagedInputs {
    const int* ids = nullptr;      // [tokens] token ids
    const int* pos = nullptr;      // [tokens] position of each token
    const int* offsets = nullptr;  // [seqs + 1] first token of each sequence
    float* const* out_rows = nullptr;  // [seqs] where each pooled row goes
    int tokens = 0;
    int seqs = 0;
    int max_len = 0;      // longest sequence (rounded up when padded)
    bool staged = false;  // rows go to staging_, copied out after the sync
  };

  bool SmallBatch(int seqs) const {
    return opt_.small_batch > 0 && seqs <= opt_.small_batch;
  }
  bool GraphsOn() const {
    return opt_.graphs && opt_.max_graphs > 0 && graph_note_.empty();
  }

  // Checks the batch and stages it in pinned memory (one host-to-device copy):
  // ids, positions (padding tokens: id 0 at position 0), offsets, then the
  // output row pointers (8-byte aligned): the caller's rows where the device
  // can write them, else staging_.
  Status StageInputs(const TokenBatch& batch, std::span<float* const> rows,
                     StagedInputs* in) {
    const BertConfig& c = m_.config;
    const int t = static_cast<int>(batch.ids.size()),
              b = static_cast<int>(batch.size());
    const bool small = SmallBatch(b);
    const int tp = small ? std::min(RoundUpTokens(t), m_.max_tokens) : t;
    int* ids = reinterpret_cast<int*>(in_host_.get());
    int* pos = ids + tp;
    int* offsets = pos + tp;
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
    for (int i = t; i < tp; ++i) ids[i] = pos[i] = 0;
    if (small) in->max_len = RoundUpLen(in->max_len);
    std::memcpy(offsets, batch.offsets.data(), (b + 1) * sizeof(int));
    const size_t ptr_at = (size_t(2 * tp + b + 1) * 4 + 7) / 8 * 8;
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
    in->pos = in->ids + tp;
    in->offsets = in->pos + tp;
    in->out_rows = reinterpret_cast<float* const*>(in_dev_.get() + ptr_at);
    in->tokens = tp;
    in->seqs = b;
    return OkStatus();
  }

  // The forward pass of the staged batch, replayed from a graph where one
  // fits, between the timer's events when it is on.
  Status RunPass(const StagedInputs& in, CudaTimings* timings) {
    marks_.clear();
    if (timer_ != CudaTimer::kOff) {
      ZV_RETURN_IF_ERROR(EnsureEvents());
      ZV_CUDA_CHECK(cudaEventRecord(start_, stream_));
    }
    const bool phases = timer_ == CudaTimer::kPhases;
    bool replayed = false;
    if (!phases && GraphsOn() && SmallBatch(in.seqs)) {
      ZV_ASSIGN_OR_RETURN(replayed, RunGraph(in));
    }
    if (!replayed) ZV_RETURN_IF_ERROR(Forward(in, phases));
    if (timer_ != CudaTimer::kOff) {
      ZV_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    }
    timings->graph = replayed;
    return OkStatus();
  }

  // Launches the graph of in's shape, capturing it on the shape's second use.
  // false: no graph this time (the caller runs the kernels). A failed capture
  // turns graphs off for this encoder and says why in description().
  StatusOr<bool> RunGraph(const StagedInputs& in) {
    const GraphCache::Key key{in.tokens, in.seqs, in.max_len};
    if (cudaGraphExec_t exec = graphs_.Find(key)) {
      ZV_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
      return true;
    }
    if (!graphs_.SeenBefore(key)) return false;
    const cudaError_t begin =
        cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
    if (begin != cudaSuccess) {
      cudaGetLastError();
      return GraphsFailed(std::string("begin capture: ") +
                          cudaGetErrorString(begin));
    }
    const Status st = Forward(in, /*mark=*/false);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaErrorUnknown;
    if (st.ok() && end == cudaSuccess) {
      inst = cudaGraphInstantiate(&exec, graph, 0);
    }
    if (graph) cudaGraphDestroy(graph);
    if (!st.ok() || end != cudaSuccess || inst != cudaSuccess) {
      cudaGetLastError();  // capture errors are not sticky: clear them
      return GraphsFailed(!st.ok()             ? st.message()
                          : end != cudaSuccess ? cudaGetErrorString(end)
                                               : cudaGetErrorString(inst));
    }
    const cudaError_t launch = cudaGraphLaunch(exec, stream_);
    graphs_.Insert(key, exec);
    ZV_CUDA_CHECK(launch);
    return true;
  }

  // Turns graphs off for this encoder (the pass runs launch by launch).
  bool GraphsFailed(std::string why) {
    graph_note_ = std::move(why);
    std::fprintf(stderr,
                 "zerovec cuda encoder: graph capture failed (%s); running "
                 "without graphs\n",
                 graph_note_.c_str());
    return false;
  }

  // Embeddings, the layers, pooling: every launch of one pass on stream_.
  // mark: record an event after each phase (CudaTimer::kPhases).
  Status Forward(const StagedInputs& in, bool mark) {
    const BertConfig& c = m_.config;
    const int t = in.tokens, h = c.hidden_size;
    const int row_blocks = (t + kWarpsPerBlock - 1) / kWarpsPerBlock;
    EmbedLayerNormKernel<<<row_blocks, 32 * kWarpsPerBlock, 0, stream_>>>(
        in.ids, in.pos, t, h, m_.word.get(), m_.position.get(), m_.type0.get(),
        m_.emb_g.get(), m_.emb_b.get(), c.layer_norm_eps, x_.get());
    ZV_CUDA_CHECK(cudaGetLastError());
    ZV_RETURN_IF_ERROR(Mark(mark, kEmbeddings));
    const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim()));
    for (const DeviceLayer& l : m_.layers) {
      ZV_RETURN_IF_ERROR(EncodeLayer(l, in, scale, mark));
    }
    PoolNormalizeKernel<<<in.seqs, kPoolThreads, 0, stream_>>>(
        x_.get(), in.offsets, h, m_.cls, m_.normalize, in.out_rows);
    ZV_CUDA_CHECK(cudaGetLastError());
    return Mark(mark, kPool);
  }

  // One transformer layer over x_ in place: attention block, then FFN block,
  // each closed by bias + residual + LayerNorm. Fused: the attention sees only
  // the Q bias, the output projection's bias carries the V bias (see
  // FusedBiases), the FFN-up GEMM applies bias + GELU in its epilogue.
  Status EncodeLayer(const DeviceLayer& l, const StagedInputs& in, float scale,
                     bool mark) {
    const BertConfig& c = m_.config;
    const int t = in.tokens, h = c.hidden_size, f = c.intermediate_size;
    const bool fused = opt_.fused;
    ZV_RETURN_IF_ERROR(Gemm(x_.get(), l.qkv_w.get(), qkv_.get(), t, 3 * h, h));
    ZV_RETURN_IF_ERROR(Mark(mark, kQkv));
    ZV_RETURN_IF_ERROR(Attention(fused ? l.q_only_b.get() : l.qkv_b.get(),
                                 in.offsets, in.seqs, in.max_len, scale,
                                 /*kv_bias=*/!fused));
    ZV_RETURN_IF_ERROR(Mark(mark, kAttention));
    ZV_RETURN_IF_ERROR(Gemm(ctx_.get(), l.out_w.get(), tmp_.get(), t, h, h));
    ZV_RETURN_IF_ERROR(LayerNorm(t,
                                 fused ? l.out_b_folded.get() : l.out_b.get(),
                                 l.ln1_g.get(), l.ln1_b.get()));
    ZV_RETURN_IF_ERROR(Mark(mark, kOutProjLn));
    ZV_RETURN_IF_ERROR(FfnUp(l, t));
    ZV_RETURN_IF_ERROR(Mark(mark, kFfnUpGelu));
    ZV_RETURN_IF_ERROR(
        Gemm(ffn_.get(), l.ffn_out_w.get(), tmp_.get(), t, h, f));
    ZV_RETURN_IF_ERROR(
        LayerNorm(t, l.ffn_out_b.get(), l.ln2_g.get(), l.ln2_b.get()));
    return Mark(mark, kFfnDownLn);
  }

  // ffn_ = gelu(x_ W_in^T + b_in): one cuBLASLt GEMM with the GELU_BIAS
  // epilogue when fused and cuBLASLt has an algorithm for the shape, else the
  // cuBLAS GEMM and the erf bias+GELU kernel.
  Status FfnUp(const DeviceLayer& l, int t) {
    const BertConfig& c = m_.config;
    const int h = c.hidden_size, f = c.intermediate_size;
    if (opt_.fused) {
      const Status st =
          lt_.Run(x_.get(), l.ffn_in_w.get(), l.ffn_in_b_half.get(), ffn_.get(),
                  t, f, h, stream_);
      if (st.ok()) return OkStatus();
      if (st.code() != StatusCode::kUnimplemented) return st;
      if (lt_note_.empty()) lt_note_ = st.message();
    }
    ZV_RETURN_IF_ERROR(Gemm(x_.get(), l.ffn_in_w.get(), ffn_.get(), t, f, h));
    const size_t pairs = size_t(t) * f / 2;
    const int gelu_blocks =
        static_cast<int>(std::min<size_t>((pairs + 255) / 256, 4096));
    BiasGeluKernel<<<gelu_blocks, 256, 0, stream_>>>(
        reinterpret_cast<half2*>(ffn_.get()), pairs, f / 2,
        reinterpret_cast<const float2*>(l.ffn_in_b.get()));
    ZV_CUDA_CHECK(cudaGetLastError());
    return OkStatus();
  }

  // x_ = LayerNorm(x_ + tmp_ + bias).
  Status LayerNorm(int t, const float* bias, const float* gamma,
                   const float* beta) {
    const BertConfig& c = m_.config;
    const int row_blocks = (t + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (opt_.fused) {
      BiasResidualLayerNormVecKernel<<<row_blocks, 32 * kWarpsPerBlock, 0,
                                       stream_>>>(x_.get(), tmp_.get(), t,
                                                  c.hidden_size, bias, gamma,
                                                  beta, c.layer_norm_eps);
    } else {
      BiasResidualLayerNormKernel<<<row_blocks, 32 * kWarpsPerBlock, 0,
                                    stream_>>>(x_.get(), tmp_.get(), t,
                                               c.hidden_size, bias, gamma, beta,
                                               c.layer_norm_eps);
    }
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
                   float scale, bool kv_bias) {
    const BertConfig& c = m_.config;
    const cudaError_t err = LaunchAttention(
        m_.attention, c.head_dim(), qkv_.get(), qkv_b, d_off, b, max_len,
        c.num_heads, c.hidden_size, scale, ctx_.get(), stream_, kv_bias);
    if (err == cudaErrorInvalidValue) {
      return UnimplementedError("cuda encoder: head_dim must be 32, 64 or 128");
    }
    ZV_CUDA_CHECK(err);
    return OkStatus();
  }

  // ---- timer

  // start_, stop_ and one event a phase mark (2 + 5 a layer).
  Status EnsureEvents() {
    if (start_) return OkStatus();
    events_.resize(2 + 5 * m_.layers.size() + 2);
    for (cudaEvent_t& e : events_) ZV_CUDA_CHECK(cudaEventCreate(&e));
    start_ = events_[events_.size() - 2];
    stop_ = events_.back();
    return OkStatus();
  }

  Status Mark(bool mark, Phase phase) {
    if (!mark) return OkStatus();
    if (marks_.size() + 2 >= events_.size()) {
      return InternalError("cuda encoder: more phase marks than events");
    }
    ZV_CUDA_CHECK(cudaEventRecord(events_[marks_.size()], stream_));
    marks_.push_back(phase);
    return OkStatus();
  }

  // After the stream's sync: the total and, with phase marks, each phase's
  // time (from the previous mark, the first from start_).
  Status ReadTimings(CudaTimings* out) {
    if (timer_ == CudaTimer::kOff) return OkStatus();
    float ms = 0;
    ZV_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    out->total_ms = ms;
    if (marks_.empty()) return OkStatus();
    double per[kPhaseCount] = {};
    cudaEvent_t prev = start_;
    for (size_t i = 0; i < marks_.size(); ++i) {
      ZV_CUDA_CHECK(cudaEventElapsedTime(&ms, prev, events_[i]));
      per[marks_[i]] += ms;
      prev = events_[i];
    }
    for (int p = 0; p < kPhaseCount; ++p) {
      out->phases_ms.emplace_back(kPhaseNames[p], per[p]);
    }
    return OkStatus();
  }

  std::shared_ptr<CudaModel> owner_;  // keeps the weights alive
  const CudaModel::Impl& m_;
  const CudaEncoderOptions opt_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  DeviceBuffer<char> workspace_;
  LtGeluGemm lt_;
  std::string lt_note_;  // why the GELU epilogue is not used, if it is not
  GraphCache graphs_;
  std::string graph_note_;  // set when a capture failed: graphs off
  DeviceBuffer<half> x_, qkv_, ctx_, tmp_, ffn_;
  size_t in_words_ = 0;
  PinnedBuffer<char> in_host_;
  DeviceBuffer<char> in_dev_;
  PinnedBuffer<float> staging_;
  size_t staging_rows_ = 0;
  CudaTimer timer_ = CudaTimer::kOff;
  std::vector<cudaEvent_t> events_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::vector<Phase> marks_;
  CudaTimings last_;
};

}  // namespace

CudaModel::CudaModel() : impl_(std::make_unique<Impl>()) {}

CudaModel::~CudaModel() {
  for (const HostRange& r : impl_->ranges) {
    if (r.device) cudaHostUnregister(r.host);
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
  auto enc = std::make_unique<CudaLaneEncoder>(shared_from_this(), impl_.get(),
                                               options);
  ZV_RETURN_IF_ERROR(enc->Init());
  return std::unique_ptr<CudaEncoder>(std::move(enc));
}

StatusOr<std::unique_ptr<Encoder>> CudaModel::NewEncoder() {
  ZV_ASSIGN_OR_RETURN(auto enc, NewCudaEncoder(CudaEncoderOptions::FromEnv()));
  return std::unique_ptr<Encoder>(std::move(enc));
}

CudaEncoderOptions CudaEncoderOptions::FromEnv() {
  CudaEncoderOptions o;
  auto read = [](const char* name, int* value) {
    const char* e = std::getenv(name);
    if (e != nullptr && *e != '\0') *value = std::atoi(e);
  };
  int fused = o.fused ? 1 : 0, graphs = o.graphs ? 1 : 0;
  read("ZV_CUDA_FUSED", &fused);
  read("ZV_CUDA_GRAPHS", &graphs);
  read("ZV_CUDA_SMALL_BATCH", &o.small_batch);
  read("ZV_CUDA_MAX_GRAPHS", &o.max_graphs);
  o.fused = fused != 0;
  o.graphs = graphs != 0;
  return o;
}

std::string CudaEncoderOptions::ToString() const {
  std::string s = fused ? "fused" : "unfused";
  if (small_batch <= 0) return s + ", no small-batch padding or graphs";
  const std::string n = std::to_string(small_batch);
  if (!graphs || max_graphs <= 0) return s + ", padded<=" + n + ", no graphs";
  return s + ", graphs<=" + n + " (" + std::to_string(max_graphs) + " kept)";
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

void CudaModel::UnregisterOutputMemory(void* data) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& ranges = impl_->ranges;
  for (auto it = ranges.begin(); it != ranges.end(); ++it) {
    if (it->host == data) {
      if (it->device) cudaHostUnregister(it->host);
      ranges.erase(it);
      if (std::none_of(
              ranges.begin(), ranges.end(),
              [](const HostRange& r) { return r.device != nullptr; }) &&
          impl_->sink_mode == "host-registered") {
        impl_->sink_mode = "pinned-staging";
      }
      return;
    }
  }
}

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
