#include "embed/cpu_encoder.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace zv::embed {
namespace {

// y[T, N] = x[T, K] * w[N, K]^T + b[N]  (torch.nn.Linear).
void Linear(const float* x, int t, int k, const std::vector<float>& w,
            const std::vector<float>& b, int n, float* y) {
  for (int r = 0; r < t; ++r)
    std::copy(b.begin(), b.end(), y + static_cast<size_t>(r) * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, n, k, 1.0f, x, k,
              w.data(), k, 1.0f, y, n);
}

// x[r] = LayerNorm(x[r] + add[r]) for each of t rows of width h.
void AddLayerNorm(float* x, const float* add, int t, int h,
                  const std::vector<float>& g, const std::vector<float>& b,
                  float eps) {
  for (int r = 0; r < t; ++r) {
    float* row = x + static_cast<size_t>(r) * h;
    if (add) {
      const float* a = add + static_cast<size_t>(r) * h;
      for (int i = 0; i < h; ++i) row[i] += a[i];
    }
    double mean = 0, var = 0;
    for (int i = 0; i < h; ++i) mean += row[i];
    mean /= h;
    for (int i = 0; i < h; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= h;
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float m = static_cast<float>(mean);
    for (int i = 0; i < h; ++i) row[i] = (row[i] - m) * inv * g[i] + b[i];
  }
}

void Gelu(float* x, size_t n) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  for (size_t i = 0; i < n; ++i)
    x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

}  // namespace

CpuEncoder::CpuEncoder(std::shared_ptr<const Checkpoint> checkpoint)
    : ck_(std::move(checkpoint)) {}

// Per sequence and head: softmax(Q K^T / sqrt(d)) V at the sequence's own
// length.
void CpuEncoder::Attention(const TokenBatch& batch) {
  const BertConfig& c = ck_->config;
  const int h = c.hidden_size, d = c.head_dim(), ld = 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (size_t s = 0; s < batch.size(); ++s) {
    const int len = batch.length(s);
    const size_t first = batch.offsets[s];
    scores_.resize(std::max(scores_.size(), size_t(len) * len));
    for (int head = 0; head < c.num_heads; ++head) {
      const float* q = qkv_.data() + first * ld + head * d;
      const float* k = q + h;
      const float* v = q + 2 * h;
      float* sc = scores_.data();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, d, scale,
                  q, ld, k, ld, 0.0f, sc, len);
      for (int i = 0; i < len; ++i) {
        float* row = sc + static_cast<size_t>(i) * len;
        const float mx = *std::max_element(row, row + len);
        float sum = 0;
        for (int j = 0; j < len; ++j) sum += (row[j] = std::exp(row[j] - mx));
        const float inv = 1.0f / sum;
        for (int j = 0; j < len; ++j) row[j] *= inv;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, d, len, 1.0f,
                  sc, len, v, ld, 0.0f, ctx_.data() + first * h + head * d, h);
    }
  }
}

Status CpuEncoder::Encode(const TokenBatch& batch,
                          std::span<float* const> rows) {
  const BertConfig& c = ck_->config;
  const int h = c.hidden_size, f = c.intermediate_size;
  const int t = static_cast<int>(batch.ids.size());
  if (rows.size() != batch.size()) {
    return InvalidArgumentError("cpu encoder: rows and batch sizes differ");
  }
  if (t == 0) return OkStatus();
  for (size_t s = 0; s < batch.size(); ++s) {
    if (batch.length(s) < 1 || batch.length(s) > c.max_position_embeddings) {
      return InvalidArgumentError("cpu encoder: sequence length " +
                                  std::to_string(batch.length(s)) +
                                  " out of range");
    }
  }
  x_.resize(static_cast<size_t>(t) * h);
  ctx_.resize(static_cast<size_t>(t) * h);
  tmp_.resize(static_cast<size_t>(t) * h);
  qkv_.resize(static_cast<size_t>(t) * 3 * h);
  ffn_.resize(static_cast<size_t>(t) * f);

  // Embeddings: word + position + token type 0, then LayerNorm.
  for (size_t s = 0; s < batch.size(); ++s) {
    for (int p = 0, i = batch.offsets[s]; i < batch.offsets[s + 1]; ++p, ++i) {
      const int id = batch.ids[i];
      if (id < 0 || id >= c.vocab_size) {
        return InvalidArgumentError("cpu encoder: token id " +
                                    std::to_string(id) +
                                    " outside the vocabulary");
      }
      const float* w =
          ck_->word_embeddings.data() + static_cast<size_t>(id) * h;
      const float* pe =
          ck_->position_embeddings.data() + static_cast<size_t>(p) * h;
      float* out = x_.data() + static_cast<size_t>(i) * h;
      for (int j = 0; j < h; ++j) out[j] = w[j] + pe[j] + ck_->token_type0[j];
    }
  }
  AddLayerNorm(x_.data(), nullptr, t, h, ck_->emb_ln_g, ck_->emb_ln_b,
               c.layer_norm_eps);

  for (const LayerWeights& l : ck_->layers) {
    Linear(x_.data(), t, h, l.qkv_w, l.qkv_b, 3 * h, qkv_.data());
    Attention(batch);
    Linear(ctx_.data(), t, h, l.attn_out_w, l.attn_out_b, h, tmp_.data());
    AddLayerNorm(x_.data(), tmp_.data(), t, h, l.ln1_g, l.ln1_b,
                 c.layer_norm_eps);
    Linear(x_.data(), t, h, l.ffn_in_w, l.ffn_in_b, f, ffn_.data());
    Gelu(ffn_.data(), ffn_.size());
    Linear(ffn_.data(), t, f, l.ffn_out_w, l.ffn_out_b, h, tmp_.data());
    AddLayerNorm(x_.data(), tmp_.data(), t, h, l.ln2_g, l.ln2_b,
                 c.layer_norm_eps);
  }

  // Pooling over every token (the attention mask is all ones: no padding), then
  // L2.
  for (size_t s = 0; s < batch.size(); ++s) {
    float* out = rows[s];
    const int len = batch.length(s);
    const float* first = x_.data() + size_t(batch.offsets[s]) * h;
    if (ck_->pooling == Pooling::kCls) {
      std::copy(first, first + h, out);
    } else {
      std::vector<double> acc(h, 0.0);
      for (int i = 0; i < len; ++i) {
        for (int j = 0; j < h; ++j)
          acc[j] += first[static_cast<size_t>(i) * h + j];
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
  return OkStatus();
}

}  // namespace zv::embed
