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

// y[T, N] = beta * y + x[T, K] * w[N, K]^T (torch.nn.Linear without its
// bias). beta 1 adds onto what y holds (a residual) and spares OpenBLAS its
// pass zeroing y.
void MatMulT(const float* x, int t, int k, const std::vector<float>& w, int n,
             float beta, float* y) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, n, k, 1.0f, x, k,
              w.data(), k, beta, y, n);
}

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

CpuEncoder::CpuEncoder(std::shared_ptr<const Checkpoint> checkpoint,
                       std::shared_ptr<CpuPool> pool)
    : ck_(std::move(checkpoint)), pool_(std::move(pool)) {
  if (pool_) UseSingleThreadedBlas();
}

void CpuEncoder::UseSingleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

std::string CpuEncoder::description() const {
  const int threads = pool_ ? pool_->threads() : 1;
  return std::string("cpu (openblas fp32, ") + cpu::KernelIsa() + ", " +
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
  grow(s.ffn, size_t(t) * f);

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

  for (const LayerWeights& l : ck_->layers) {
    // The QKV bias is laid down first and the GEMM accumulates onto it.
    for (int r = 0; r < t; ++r) {
      std::copy(l.qkv_b.begin(), l.qkv_b.end(),
                s.qkv.data() + size_t(r) * 3 * h);
    }
    MatMulT(s.x.data(), t, h, l.qkv_w, 3 * h, 1.0f, s.qkv.data());
    Attention(batch, first, last, s);
    // The output projections accumulate onto the residual stream x itself;
    // their bias goes in with the LayerNorm that follows.
    MatMulT(s.ctx.data(), t, h, l.attn_out_w, h, 1.0f, s.x.data());
    cpu::AddLayerNorm(s.x.data(), nullptr, l.attn_out_b.data(), t, h,
                      l.ln1_g.data(), l.ln1_b.data(), c.layer_norm_eps);
    MatMulT(s.x.data(), t, h, l.ffn_in_w, f, 0.0f, s.ffn.data());
    cpu::BiasGelu(s.ffn.data(), l.ffn_in_b.data(), t, f);
    MatMulT(s.ffn.data(), t, f, l.ffn_out_w, h, 1.0f, s.x.data());
    cpu::AddLayerNorm(s.x.data(), nullptr, l.ffn_out_b.data(), t, h,
                      l.ln2_g.data(), l.ln2_b.data(), c.layer_norm_eps);
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
  const std::vector<size_t> cuts =
      ShardCuts(batch, pool_ ? static_cast<size_t>(pool_->threads()) : 1);
  const size_t shards = cuts.size() - 1;
  if (scratch_.size() < shards) scratch_.resize(shards);
  auto run = [&](size_t j) {
    EncodeShard(batch, cuts[j], cuts[j + 1], rows, scratch_[j]);
  };
  if (pool_) {
    pool_->Run(shards, run);
  } else {
    for (size_t j = 0; j < shards; ++j) run(j);
  }
  return OkStatus();
}

}  // namespace zv::embed
