#include "embed/cpu_encoder.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "embed/cpu_kernels.h"

namespace zv::embed {
namespace {

// A shard below this many tokens is not split further: smaller GEMMs lose
// more to OpenBLAS's per-call overhead than another core wins back.
constexpr size_t kMinShardTokens = 128;

// Cut points splitting the sequences into at most `max_shards` contiguous
// ranges of about equal token counts: shard j is [cuts[j], cuts[j + 1]).
std::vector<size_t> ShardCuts(const TokenBatch& batch, size_t max_shards) {
  const size_t n = batch.size();
  const size_t tokens = batch.ids.size();
  const size_t shards = std::clamp<size_t>(
      std::min({max_shards, n, tokens / kMinShardTokens}), 1, n);
  std::vector<size_t> cuts{0};
  for (size_t s = 0; s < n && cuts.size() < shards; ++s) {
    const size_t end = static_cast<size_t>(batch.offsets[s + 1]);
    if (end * shards >= cuts.size() * tokens) cuts.push_back(s + 1);
  }
  if (cuts.back() != n) cuts.push_back(n);
  return cuts;
}

}  // namespace

StatusOr<std::shared_ptr<const CpuPackedModel>> CpuEncoder::Pack(
    const Checkpoint& ck, cpu::Precision precision) {
  auto m = std::make_shared<CpuPackedModel>();
  m->precision = precision;
  const int h = ck.config.hidden_size, f = ck.config.intermediate_size;
  try {
    for (const LayerWeights& l : ck.layers) {
      m->layers.push_back({{l.qkv_w, 3 * h, h, precision},
                           {l.attn_out_w, h, h, precision},
                           {l.ffn_in_w, f, h, precision},
                           {l.ffn_out_w, h, f, precision}});
    }
  } catch (const std::exception& e) {
    return InternalError(std::string("cpu encoder: packing ") +
                         cpu::PrecisionName(precision) +
                         " weights for oneDNN failed: " + e.what());
  }
  return std::shared_ptr<const CpuPackedModel>(std::move(m));
}

namespace {

std::shared_ptr<const CpuPackedModel> PackDefault(const Checkpoint& ck) {
  auto m = CpuEncoder::Pack(ck, cpu::DefaultPrecision());
  if (!m.ok()) m = CpuEncoder::Pack(ck, cpu::Precision::kFp32);
  return m.ok() ? *m : nullptr;  // null: Encode reports it
}

}  // namespace

CpuEncoder::CpuEncoder(std::shared_ptr<const Checkpoint> checkpoint,
                       std::shared_ptr<CpuPool> pool,
                       std::shared_ptr<const CpuPackedModel> packed)
    : ck_(std::move(checkpoint)),
      pool_(std::move(pool)),
      packed_(packed ? std::move(packed) : PackDefault(*ck_)) {
  if (pool_) UseSingleThreadedBlas();
}

void CpuEncoder::UseSingleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

std::string CpuEncoder::description() const {
  const int threads = pool_ ? pool_->threads() : 1;
  if (!packed_) return "cpu (no weights: oneDNN failed)";
  return std::string("cpu (onednn ") + cpu::PrecisionName(precision()) +
         " gemm on " + cpu::GemmIsa() + ", " + cpu::KernelIsa() + ", " +
         std::to_string(threads) + (threads == 1 ? " thread)" : " threads)");
}

// Per sequence and head: softmax(Q K^T / sqrt(d)) V at the sequence's own
// length. s.qkv and s.ctx hold the shard's tokens only.
void CpuEncoder::Attention(const TokenBatch& batch, size_t first, size_t last,
                           Scratch& s) const {
  const BertConfig& c = ck_->config;
  const int h = c.hidden_size, d = c.head_dim(), ld = 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const size_t base = batch.offsets[first];
  for (size_t seq = first; seq < last; ++seq) {
    const int len = batch.length(seq);
    const size_t start = batch.offsets[seq] - base;
    if (s.scores.size() < size_t(len) * len) s.scores.resize(size_t(len) * len);
    for (int head = 0; head < c.num_heads; ++head) {
      const float* q = s.qkv.data() + start * ld + head * d;
      const float* k = q + h;
      const float* v = q + 2 * h;
      float* sc = s.scores.data();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, d, scale,
                  q, ld, k, ld, 0.0f, sc, len);
      cpu::Softmax(sc, len, len);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, d, len, 1.0f,
                  sc, len, v, ld, 0.0f, s.ctx.data() + start * h + head * d, h);
    }
  }
}

// Mean (or CLS) pooling, then L2 as configured.
void CpuEncoder::Pool(const float* x, int len, float* out) const {
  const int h = ck_->config.hidden_size;
  if (ck_->pooling == Pooling::kCls) {
    std::copy(x, x + h, out);
  } else {
    std::vector<double> acc(h, 0.0);
    for (int i = 0; i < len; ++i) {
      for (int j = 0; j < h; ++j) acc[j] += x[static_cast<size_t>(i) * h + j];
    }
    for (int j = 0; j < h; ++j) out[j] = static_cast<float>(acc[j] / len);
  }
  if (ck_->normalize) {
    double norm = 0;
    for (int j = 0; j < h; ++j) norm += double{out[j]} * out[j];
    // torch.nn.functional.normalize: x / max(||x||, 1e-12).
    const float inv =
        static_cast<float>(1.0 / std::max(std::sqrt(norm), 1e-12));
    for (int j = 0; j < h; ++j) out[j] *= inv;
  }
}

// One encoder layer over the shard's t tokens in s.x. The output projections
// accumulate onto the residual stream x itself; their bias goes in with the
// LayerNorm that follows. In bf16 each GEMM's input is rounded to bf16 first
// (the FFN's hidden layer is written as bf16 by its GEMM); the residual
// stream, LayerNorm, softmax and attention stay fp32.
void CpuEncoder::Layer(const LayerWeights& l, const CpuPackedModel::Layer& p,
                       int t, const TokenBatch& batch, size_t first,
                       size_t last, Scratch& s) const {
  const BertConfig& c = ck_->config;
  const int h = c.hidden_size;
  const bool bf16 = precision() == cpu::Precision::kBf16;
  using cpu::Epilogue;
  const void* x_in = s.x.data();
  if (bf16) {
    cpu::ToBf16(s.x.data(), size_t(t) * h, s.x16.data());
    x_in = s.x16.data();
  }
  s.gemm.Linear(x_in, t, p.qkv, l.qkv_b.data(), Epilogue::kStore, s.qkv.data());
  Attention(batch, first, last, s);
  const void* ctx_in = s.ctx.data();
  if (bf16) {
    cpu::ToBf16(s.ctx.data(), size_t(t) * h, s.ctx16.data());
    ctx_in = s.ctx16.data();
  }
  s.gemm.Linear(ctx_in, t, p.attn_out, nullptr, Epilogue::kAccumulate,
                s.x.data());
  cpu::AddLayerNorm(s.x.data(), nullptr, l.attn_out_b.data(), t, h,
                    l.ln1_g.data(), l.ln1_b.data(), c.layer_norm_eps);
  if (bf16) cpu::ToBf16(s.x.data(), size_t(t) * h, s.x16.data());
  void* ffn = bf16 ? static_cast<void*>(s.ffn16.data()) : s.ffn.data();
  s.gemm.Linear(x_in, t, p.ffn_in, l.ffn_in_b.data(), Epilogue::kGelu, ffn,
                bf16);
  s.gemm.Linear(ffn, t, p.ffn_out, nullptr, Epilogue::kAccumulate, s.x.data());
  cpu::AddLayerNorm(s.x.data(), nullptr, l.ffn_out_b.data(), t, h,
                    l.ln2_g.data(), l.ln2_b.data(), c.layer_norm_eps);
}

void CpuEncoder::EncodeShard(const TokenBatch& batch, size_t first, size_t last,
                             std::span<float* const> rows, Scratch& s) const {
  const BertConfig& c = ck_->config;
  const int h = c.hidden_size, f = c.intermediate_size;
  const size_t base = batch.offsets[first];
  const int t = static_cast<int>(batch.offsets[last] - base);
  auto grow = [](std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  grow(s.x, size_t(t) * h);
  grow(s.ctx, size_t(t) * h);
  grow(s.qkv, size_t(t) * 3 * h);
  if (precision() == cpu::Precision::kBf16) {
    auto grow16 = [](std::vector<uint16_t>& v, size_t n) {
      if (v.size() < n) v.resize(n);
    };
    grow16(s.x16, size_t(t) * h);
    grow16(s.ctx16, size_t(t) * h);
    grow16(s.ffn16, size_t(t) * f);
  } else {
    grow(s.ffn, size_t(t) * f);
  }

  // Embeddings: word + position + token type 0, then LayerNorm.
  for (size_t seq = first; seq < last; ++seq) {
    for (int p = 0, i = batch.offsets[seq]; i < batch.offsets[seq + 1];
         ++p, ++i) {
      const float* w = ck_->word_embeddings.data() + size_t(batch.ids[i]) * h;
      const float* pe = ck_->position_embeddings.data() + size_t(p) * h;
      float* out = s.x.data() + (i - base) * h;
      for (int j = 0; j < h; ++j) out[j] = w[j] + pe[j];
    }
  }
  cpu::AddLayerNorm(s.x.data(), nullptr, ck_->token_type0.data(), t, h,
                    ck_->emb_ln_g.data(), ck_->emb_ln_b.data(),
                    c.layer_norm_eps);

  for (size_t i = 0; i < ck_->layers.size(); ++i) {
    Layer(ck_->layers[i], packed_->layers[i], t, batch, first, last, s);
  }

  // Pooling over every token (the attention mask is all ones: no padding).
  for (size_t seq = first; seq < last; ++seq) {
    Pool(s.x.data() + (batch.offsets[seq] - base) * h, batch.length(seq),
         rows[seq]);
  }
}

Status CpuEncoder::Encode(const TokenBatch& batch,
                          std::span<float* const> rows) {
  const BertConfig& c = ck_->config;
  if (rows.size() != batch.size()) {
    return InvalidArgumentError("cpu encoder: rows and batch sizes differ");
  }
  if (batch.ids.empty()) return OkStatus();
  for (size_t s = 0; s < batch.size(); ++s) {
    if (batch.length(s) < 1 || batch.length(s) > c.max_position_embeddings) {
      return InvalidArgumentError("cpu encoder: sequence length " +
                                  std::to_string(batch.length(s)) +
                                  " out of range");
    }
  }
  for (const int32_t id : batch.ids) {
    if (id < 0 || id >= c.vocab_size) {
      return InvalidArgumentError("cpu encoder: token id " +
                                  std::to_string(id) +
                                  " outside the vocabulary");
    }
  }
  if (!packed_) {
    return InternalError("cpu encoder: oneDNN could not pack the weights");
  }
  const std::vector<size_t> cuts =
      ShardCuts(batch, pool_ ? static_cast<size_t>(pool_->threads()) : 1);
  const size_t shards = cuts.size() - 1;
  if (scratch_.size() < shards) scratch_.resize(shards);
  // oneDNN reports failures (memory, no kernel for a shape) by exception;
  // one must not leave a pool worker.
  std::vector<std::string> errors(shards);
  auto run = [&](size_t j) {
    try {
      EncodeShard(batch, cuts[j], cuts[j + 1], rows, scratch_[j]);
    } catch (const std::exception& e) {
      errors[j] = e.what();
    }
  };
  if (pool_) {
    pool_->Run(shards, run);
  } else {
    for (size_t j = 0; j < shards; ++j) run(j);
  }
  for (const std::string& e : errors) {
    if (!e.empty()) return InternalError("cpu encoder: " + e);
  }
  return OkStatus();
}

}  // namespace zv::embed
