// The per-worker CUDA encoder (CudaModel::NewCudaEncoder): stream, cuBLAS
// handles, scratch, the graph cache and the phase timer. Included once, by
// cuda_encoder.cu, after CudaModel::Impl and DeviceLayer (which it reads);
// a header only to keep each file short. embed/-internal.
#ifndef ZEROVEC_EMBED_CUDA_LANE_ENCODER_CUH_
#define ZEROVEC_EMBED_CUDA_LANE_ENCODER_CUH_

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "embed/cuda_encoder.h"
#include "embed/cuda_fp8.cuh"
#include "embed/cuda_kernels.cuh"
#include "embed/cuda_util.cuh"

namespace zv::embed {
namespace {

using cuda::DeviceBuffer;
using cuda::GraphCache;
using cuda::LtFp8Gemm;
using cuda::LtGeluGemm;
using cuda::PinnedBuffer;
using kernels::AttentionRows;
using kernels::BiasGeluKernel;
using kernels::BiasResidualLayerNormKernel;
using kernels::BiasResidualLayerNormVecKernel;
using kernels::CastE4m3Kernel;
using kernels::EmbedLayerNormKernel;
using kernels::kPoolThreads;
using kernels::LaunchAttention;
using kernels::PoolNormalizeKernel;

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
// read them; a longer max_len only adds attention blocks that exit at once.
// The attention block size (kernels::AttentionRows) follows the padded shape,
// so a graph and the direct pass of that shape pick the same one.
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
    lt8_.Destroy();
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
    if (Fp8()) {
      ZV_RETURN_IF_ERROR(
          lt8_.Init(workspace_.get(), kWorkspaceBytes, opt_.fp8_fast_accum));
      ZV_RETURN_IF_ERROR(x8_.Allocate(t * h));
      ZV_RETURN_IF_ERROR(ffn8_.Allocate(t * c.intermediate_size));
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
    if (!fp8_note_.empty())
      d += " (fp8 off for some shapes: " + fp8_note_ + ")";
    if (!up_note_.empty()) d += " (fp8 FFN-up: " + up_note_ + ")";
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
  bool Fp8() const { return opt_.precision == CudaPrecision::kFp8; }
  // Under kFp8: whether this GEMM runs in e4m3 (CudaEncoderOptions::fp8_gemms).
  bool Fp8Gemm(int bit) const { return (opt_.fp8_gemms & bit) != 0; }
  // Whether this pass runs layer i's selected GEMMs in e4m3.
  bool Fp8Layer(size_t i) const {
    return fp8_pass_ && i < 64 && ((opt_.fp8_layers >> i) & 1) != 0;
  }
  // The e4m3 copy the LayerNorm before layer i writes where that layer's QKV
  // GEMM reads one (none past the last layer).
  __nv_fp8_e4m3* QkvInput8(size_t i) {
    return i < m_.layers.size() && Fp8Layer(i) &&
                   Fp8Gemm(CudaEncoderOptions::kFp8Qkv)
               ? x8_.get()
               : nullptr;
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
    ZV_RETURN_IF_ERROR(PlanFp8(t));
    EmbedLayerNormKernel<<<row_blocks, 32 * kWarpsPerBlock, 0, stream_>>>(
        in.ids, in.pos, t, h, m_.word.get(), m_.position.get(), m_.type0.get(),
        m_.emb_g.get(), m_.emb_b.get(), c.layer_norm_eps, x_.get(),
        QkvInput8(0), m_.emb_q8);
    ZV_CUDA_CHECK(cudaGetLastError());
    ZV_RETURN_IF_ERROR(Mark(mark, kEmbeddings));
    const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim()));
    for (size_t i = 0; i < m_.layers.size(); ++i) {
      ZV_RETURN_IF_ERROR(Fp8Layer(i) ? EncodeLayerFp8(i, in, scale, mark)
                                     : EncodeLayer(i, in, scale, mark));
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
  Status EncodeLayer(size_t i, const StagedInputs& in, float scale, bool mark) {
    const DeviceLayer& l = m_.layers[i];
    const BertConfig& c = m_.config;
    const int t = in.tokens, h = c.hidden_size, f = c.intermediate_size;
    const bool fused = opt_.fused;
    ZV_RETURN_IF_ERROR(Gemm(x_.get(), l.qkv_w.get(), qkv_.get(), t, 3 * h, h));
    ZV_RETURN_IF_ERROR(Mark(mark, kQkv));
    ZV_RETURN_IF_ERROR(Attention(fused ? l.q_only_b.get() : l.qkv_b.get(), in,
                                 scale, /*kv_bias=*/!fused));
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
    ZV_RETURN_IF_ERROR(LayerNorm(t, l.ffn_out_b.get(), l.ln2_g.get(),
                                 l.ln2_b.get(), QkvInput8(i + 1), l.ln2_q8));
    return Mark(mark, kFfnDownLn);
  }

  // Sets fp8_pass_ (and up_cast_): whether this pass of t tokens runs the
  // FP8 GEMMs. The first pass of a shape plans them and launches each once on
  // this pass's own buffers (outside any capture: a captured shape has run
  // before), because cuBLASLt may refuse at launch what its heuristic
  // offered; the pass writes those buffers afresh afterwards. A shape without
  // a working FP8 algorithm runs in fp16 and description() says why. The
  // FFN-up GEMM writes e4m3 itself (kGeluFp8Out) where cuBLASLt can, else
  // fp16 and a cast kernel follows (up_cast_, also noted).
  Status PlanFp8(int t) {
    fp8_pass_ = false;
    if (!Fp8()) return OkStatus();
    if (auto it = fp8_shapes_.find(t); it != fp8_shapes_.end()) {
      fp8_pass_ = (it->second & 1u) != 0;
      up_cast_ = (it->second & 2u) != 0;
      return OkStatus();
    }
    // A new shape inside a capture (only after the cache was cleared) runs in
    // fp16 rather than capture the trial launches into the graph.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    ZV_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capturing));
    if (capturing != cudaStreamCaptureStatusNone) return OkStatus();
    if (fp8_shapes_.size() >= 256) fp8_shapes_.clear();
    const int h = m_.config.hidden_size, f = m_.config.intermediate_size;
    const DeviceLayer& l0 = m_.layers.front();
    const float* s = l0.scales8.get();
    using Opt = CudaEncoderOptions;
    up_cast_ = false;
    Status up, qkv, down;
    if (Fp8Gemm(Opt::kFp8Up)) {
      // e4m3 output where FFN-down reads e4m3, else fp16.
      const bool e4m3_out = Fp8Gemm(Opt::kFp8Down);
      up = lt8_.Prepare(e4m3_out ? LtFp8Gemm::Kind::kGeluFp8Out
                                 : LtFp8Gemm::Kind::kGeluFp16Out,
                        t, f, h);
      if (up.ok()) up = FfnUpFp8(l0, t);
      if (e4m3_out && up.code() == StatusCode::kUnimplemented) {
        const std::string why = up.message();
        up_cast_ = true;
        up = lt8_.Prepare(LtFp8Gemm::Kind::kGeluFp16Out, t, f, h);
        if (up.ok()) up = FfnUpFp8(l0, t);
        if (up.ok()) up_note_ = why + "; fp16 output and a cast kernel instead";
      }
    }
    if (Fp8Gemm(Opt::kFp8Qkv)) {
      qkv = lt8_.Prepare(LtFp8Gemm::Kind::kPlain, t, 3 * h, h);
      if (qkv.ok()) {
        qkv = lt8_.Run(x8_.get(), s + kQkvX, l0.qkv_w8.get(), s + kQkvW,
                       qkv_.get(), t, 3 * h, h, stream_);
      }
    }
    if (Fp8Gemm(Opt::kFp8Down)) {
      down = lt8_.Prepare(LtFp8Gemm::Kind::kPlain, t, h, f);
      if (down.ok()) {
        down = lt8_.Run(ffn8_.get(), s + kDownX, l0.ffn_out_w8.get(),
                        s + kDownW, tmp_.get(), t, h, f, stream_);
      }
    }
    bool fp8 = true;
    for (const Status& st : {qkv, up, down}) {
      if (st.ok()) continue;
      if (st.code() != StatusCode::kUnimplemented) return st;
      fp8_note_ = st.message();
      fp8 = false;
      break;
    }
    fp8_shapes_[t] = (fp8 ? 1u : 0u) | (up_cast_ ? 2u : 0u);
    fp8_pass_ = fp8;
    return OkStatus();
  }

  // ffn8_ = e4m3(gelu(x8_ W_in^T + b_in) * q): in one GEMM, or a GEMM to
  // ffn_ (fp16) and the cast kernel; where FFN-down runs in fp16, ffn_ alone.
  Status FfnUpFp8(const DeviceLayer& l, int t) {
    const int h = m_.config.hidden_size, f = m_.config.intermediate_size;
    const float* s = l.scales8.get();
    if (!up_cast_ && Fp8Gemm(CudaEncoderOptions::kFp8Down)) {
      return lt8_.RunGelu(x8_.get(), s + kUpX, l.ffn_in_w8.get(), s + kUpW,
                          l.ffn_in_b_half.get(), s + kUpOutQ, ffn8_.get(),
                          ffn_.get(), t, f, h, stream_);
    }
    ZV_RETURN_IF_ERROR(lt8_.RunGelu16(x8_.get(), s + kUpX, l.ffn_in_w8.get(),
                                      s + kUpW, l.ffn_in_b_half.get(),
                                      ffn_.get(), t, f, h, stream_));
    // FFN-down in fp16 reads ffn_ itself.
    if (!Fp8Gemm(CudaEncoderOptions::kFp8Down)) return OkStatus();
    return CastFfnE4m3(t, s);
  }

  // ffn8_ = e4m3(ffn_ * q), q the layer's FFN-up output scale (scales8 s).
  Status CastFfnE4m3(int t, const float* s) {
    const size_t pairs = size_t(t) * m_.config.intermediate_size / 2;
    const int blocks =
        static_cast<int>(std::min<size_t>((pairs + 255) / 256, 4096));
    CastE4m3Kernel<<<blocks, 256, 0, stream_>>>(
        reinterpret_cast<const half2*>(ffn_.get()),
        reinterpret_cast<__nv_fp8x2_e4m3*>(ffn8_.get()), pairs, s + kUpOutQ);
    ZV_CUDA_CHECK(cudaGetLastError());
    return OkStatus();
  }

  // EncodeLayer with the FP8 GEMMs that fp8_gemms selects: x8_ holds x_ in
  // e4m3 (written by the LayerNorm before) where the QKV or FFN-up GEMM reads
  // it, ffn8_ the FFN-up output in e4m3 where the FFN-down GEMM does; the
  // output projection (input: attention's fp16 output) stays fp16, as do the
  // GEMMs not selected.
  Status EncodeLayerFp8(size_t i, const StagedInputs& in, float scale,
                        bool mark) {
    const DeviceLayer& l = m_.layers[i];
    using Opt = CudaEncoderOptions;
    const BertConfig& c = m_.config;
    const int t = in.tokens, h = c.hidden_size, f = c.intermediate_size;
    const float* s = l.scales8.get();
    if (Fp8Gemm(Opt::kFp8Qkv)) {
      ZV_RETURN_IF_ERROR(lt8_.Run(x8_.get(), s + kQkvX, l.qkv_w8.get(),
                                  s + kQkvW, qkv_.get(), t, 3 * h, h, stream_));
    } else {
      ZV_RETURN_IF_ERROR(
          Gemm(x_.get(), l.qkv_w.get(), qkv_.get(), t, 3 * h, h));
    }
    ZV_RETURN_IF_ERROR(Mark(mark, kQkv));
    ZV_RETURN_IF_ERROR(
        Attention(l.q_only_b.get(), in, scale, /*kv_bias=*/false));
    ZV_RETURN_IF_ERROR(Mark(mark, kAttention));
    ZV_RETURN_IF_ERROR(Gemm(ctx_.get(), l.out_w.get(), tmp_.get(), t, h, h));
    ZV_RETURN_IF_ERROR(
        LayerNorm(t, l.out_b_folded.get(), l.ln1_g.get(), l.ln1_b.get(),
                  Fp8Gemm(Opt::kFp8Up) ? x8_.get() : nullptr, l.ln1_q8));
    ZV_RETURN_IF_ERROR(Mark(mark, kOutProjLn));
    if (Fp8Gemm(Opt::kFp8Up)) {
      ZV_RETURN_IF_ERROR(FfnUpFp8(l, t));
    } else {
      ZV_RETURN_IF_ERROR(FfnUp(l, t));
      if (Fp8Gemm(Opt::kFp8Down)) ZV_RETURN_IF_ERROR(CastFfnE4m3(t, s));
    }
    ZV_RETURN_IF_ERROR(Mark(mark, kFfnUpGelu));
    if (Fp8Gemm(Opt::kFp8Down)) {
      ZV_RETURN_IF_ERROR(lt8_.Run(ffn8_.get(), s + kDownX, l.ffn_out_w8.get(),
                                  s + kDownW, tmp_.get(), t, h, f, stream_));
    } else {
      ZV_RETURN_IF_ERROR(
          Gemm(ffn_.get(), l.ffn_out_w.get(), tmp_.get(), t, h, f));
    }
    ZV_RETURN_IF_ERROR(LayerNorm(t, l.ffn_out_b.get(), l.ln2_g.get(),
                                 l.ln2_b.get(), QkvInput8(i + 1), l.ln2_q8));
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

  // x_ = LayerNorm(x_ + tmp_ + bias); with x8 (fused path only) also
  // x8 = e4m3(x_ * q8).
  Status LayerNorm(int t, const float* bias, const float* gamma,
                   const float* beta, __nv_fp8_e4m3* x8 = nullptr,
                   float q8 = 1.f) {
    const BertConfig& c = m_.config;
    const int row_blocks = (t + kWarpsPerBlock - 1) / kWarpsPerBlock;
    const int threads = 32 * kWarpsPerBlock;
    if (!opt_.fused) {
      BiasResidualLayerNormKernel<<<row_blocks, threads, 0, stream_>>>(
          x_.get(), tmp_.get(), t, c.hidden_size, bias, gamma, beta,
          c.layer_norm_eps);
    } else if (!m_.layernorm_fixed ||
               !kernels::LaunchFixedLayerNorm(c.hidden_size, row_blocks,
                                              threads, stream_, x_.get(),
                                              tmp_.get(), t, bias, gamma, beta,
                                              c.layer_norm_eps, x8, q8)) {
      BiasResidualLayerNormVecKernel<<<row_blocks, threads, 0, stream_>>>(
          x_.get(), tmp_.get(), t, c.hidden_size, bias, gamma, beta,
          c.layer_norm_eps, x8, q8);
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

  Status Attention(const float* qkv_b, const StagedInputs& in, float scale,
                   bool kv_bias) {
    const BertConfig& c = m_.config;
    const cudaError_t err = LaunchAttention(
        m_.attention, c.head_dim(), qkv_.get(), qkv_b, in.offsets, in.seqs,
        in.max_len, c.num_heads, c.hidden_size, scale, ctx_.get(), stream_,
        kv_bias, AttentionRows(m_.attention_rows, in.tokens, in.seqs),
        m_.attention_blocks);
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
  LtFp8Gemm lt8_;
  std::string fp8_note_;   // why a shape ran in fp16 under kFp8
  bool fp8_pass_ = false;  // the current pass runs the FP8 GEMMs
  // PlanFp8's verdict per token count: bit 0 fp8_pass_, bit 1 up_cast_.
  std::map<int, unsigned> fp8_shapes_;
  bool up_cast_ = false;  // ... with the FFN-up output cast by a kernel
  std::string up_note_;   // why the FFN-up GEMM cannot write e4m3
  DeviceBuffer<__nv_fp8_e4m3> x8_, ffn8_;
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
}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_CUDA_LANE_ENCODER_CUH_
