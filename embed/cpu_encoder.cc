#include "embed/cpu_encoder.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include "embed/cpu_kernels.h"

namespace zv::embed {
namespace {

// A shard below this many tokens is not split further: smaller GEMMs lose
// more to OpenBLAS's per-call overhead than another core wins back.
constexpr size_t kMinShardTokens = 128;
// A batch split by rows (CpuEncoder::EncodeSplit) gives each part at least
// this many tokens.
constexpr size_t kMinSplitRows = 16;

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

// softmax(Q K^T / sqrt(d)) V at each sequence's own length, for the
// (sequence, head) pairs k of sequences [first, last) with k % parts == part
// (k = (seq - first) * heads + head). act's rows start at the first's tokens.
void CpuEncoder::Attention(const TokenBatch& batch, size_t first, size_t last,
                           size_t part, size_t parts, Scratch& act,
                           std::vector<float>& scores) const {
  const BertConfig& c = ck_->config;
  const int h = c.hidden_size, d = c.head_dim(), ld = 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const size_t base = batch.offsets[first];
  const size_t pairs = (last - first) * c.num_heads;
  for (size_t k = part; k < pairs; k += parts) {
    const size_t seq = first + k / c.num_heads;
    const int head = static_cast<int>(k % c.num_heads);
    const int len = batch.length(seq);
    const size_t start = batch.offsets[seq] - base;
    if (scores.size() < size_t(len) * len) scores.resize(size_t(len) * len);
    const float* q = act.qkv.data() + start * ld + head * d;
    const float* kk = q + h;
    const float* v = q + 2 * h;
    float* sc = scores.data();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, d, scale, q,
                ld, kk, ld, 0.0f, sc, len);
    cpu::Softmax(sc, len, len);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, d, len, 1.0f,
                sc, len, v, ld, 0.0f, act.ctx.data() + start * h + head * d, h);
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

// The row-local parts of a layer, on rows [r0, r1) of act: Qkv is the QKV
// projection; Tail the rest after attention. The output projections
// accumulate onto the residual stream x itself; their bias goes in with the
// LayerNorm that follows. In bf16 each GEMM's input is rounded to bf16 first
// (the FFN's hidden layer is written as bf16 by its GEMM); the residual
// stream, LayerNorm, softmax and attention stay fp32.
void CpuEncoder::Qkv(size_t layer, Scratch& act, int r0, int r1,
                     cpu::GemmContext& g) const {
  const int h = ck_->config.hidden_size, m = r1 - r0;
  const size_t off = size_t(r0) * h;
  const void* x_in = act.x.data() + off;
  if (precision() == cpu::Precision::kBf16) {
    cpu::ToBf16(act.x.data() + off, size_t(m) * h, act.x16.data() + off);
    x_in = act.x16.data() + off;
  }
  g.Linear(x_in, m, packed_->layers[layer].qkv, ck_->layers[layer].qkv_b.data(),
           cpu::Epilogue::kStore, act.qkv.data() + size_t(r0) * 3 * h);
}

void CpuEncoder::Tail(size_t layer, Scratch& act, int r0, int r1,
                      cpu::GemmContext& g) const {
  const BertConfig& c = ck_->config;
  const LayerWeights& l = ck_->layers[layer];
  const CpuPackedModel::Layer& p = packed_->layers[layer];
  const int h = c.hidden_size, m = r1 - r0;
  const size_t off = size_t(r0) * h, ffn_off = size_t(r0) * c.intermediate_size;
  const bool bf16 = precision() == cpu::Precision::kBf16;
  using cpu::Epilogue;
  float* x = act.x.data() + off;
  const void* ctx_in = act.ctx.data() + off;
  const void* x_in = x;
  void* ffn = act.ffn.data() + ffn_off;
  if (bf16) {
    cpu::ToBf16(act.ctx.data() + off, size_t(m) * h, act.ctx16.data() + off);
    ctx_in = act.ctx16.data() + off;
    x_in = act.x16.data() + off;
    ffn = act.ffn16.data() + ffn_off;
  }
  g.Linear(ctx_in, m, p.attn_out, nullptr, Epilogue::kAccumulate, x);
  cpu::AddLayerNorm(x, nullptr, l.attn_out_b.data(), m, h, l.ln1_g.data(),
                    l.ln1_b.data(), c.layer_norm_eps);
  if (bf16) cpu::ToBf16(x, size_t(m) * h, act.x16.data() + off);
  g.Linear(x_in, m, p.ffn_in, l.ffn_in_b.data(), Epilogue::kGelu, ffn, bf16);
  g.Linear(ffn, m, p.ffn_out, nullptr, Epilogue::kAccumulate, x);
  cpu::AddLayerNorm(x, nullptr, l.ffn_out_b.data(), m, h, l.ln2_g.data(),
                    l.ln2_b.data(), c.layer_norm_eps);
}

// Activations for t tokens.
void CpuEncoder::Grow(Scratch& s, int t) const {
  const int h = ck_->config.hidden_size, f = ck_->config.intermediate_size;
  auto grow = [](auto& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  grow(s.x, size_t(t) * h);
  grow(s.ctx, size_t(t) * h);
  grow(s.qkv, size_t(t) * 3 * h);
  if (precision() == cpu::Precision::kBf16) {
    grow(s.x16, size_t(t) * h);
    grow(s.ctx16, size_t(t) * h);
    grow(s.ffn16, size_t(t) * f);
  } else {
    grow(s.ffn, size_t(t) * f);
  }
}

// Embeddings of sequences [first, last): word + position + token type 0,
// then LayerNorm, into act.x from its row 0.
void CpuEncoder::Embed(const TokenBatch& batch, size_t first, size_t last,
                       Scratch& act) const {
  const BertConfig& c = ck_->config;
  const int h = c.hidden_size;
  const size_t base = batch.offsets[first];
  for (size_t seq = first; seq < last; ++seq) {
    for (int p = 0, i = batch.offsets[seq]; i < batch.offsets[seq + 1];
         ++p, ++i) {
      const float* w = ck_->word_embeddings.data() + size_t(batch.ids[i]) * h;
      const float* pe = ck_->position_embeddings.data() + size_t(p) * h;
      float* out = act.x.data() + (i - base) * h;
      for (int j = 0; j < h; ++j) out[j] = w[j] + pe[j];
    }
  }
  cpu::AddLayerNorm(act.x.data(), nullptr, ck_->token_type0.data(),
                    batch.offsets[last] - base, h, ck_->emb_ln_g.data(),
                    ck_->emb_ln_b.data(), c.layer_norm_eps);
}

void CpuEncoder::EncodeShard(const TokenBatch& batch, size_t first, size_t last,
                             std::span<float* const> rows, Scratch& s) const {
  const int h = ck_->config.hidden_size;
  const size_t base = batch.offsets[first];
  const int t = static_cast<int>(batch.offsets[last] - base);
  Grow(s, t);
  Embed(batch, first, last, s);
  for (size_t i = 0; i < ck_->layers.size(); ++i) {
    Qkv(i, s, 0, t, s.gemm);
    Attention(batch, first, last, 0, 1, s, s.scores);
    Tail(i, s, 0, t, s.gemm);
  }
  // Pooling over every token (the attention mask is all ones: no padding).
  for (size_t seq = first; seq < last; ++seq) {
    Pool(s.x.data() + (batch.offsets[seq] - base) * h, batch.length(seq),
         rows[seq]);
  }
}

// The whole batch as one shard whose steps are split over `parts` pool
// tasks: row blocks for the row-local steps, (sequence, head) pairs for
// attention; two pool rounds a layer. For batches with fewer sequence shards
// than threads (a query: one sequence), which would leave cores idle.
// scratch_[0] holds the activations; scratch_[p] part p's GEMMs and scores.
void CpuEncoder::EncodeSplit(const TokenBatch& batch,
                             std::span<float* const> rows, size_t parts,
                             std::vector<std::string>& errors) {
  const int h = ck_->config.hidden_size;
  const int t = static_cast<int>(batch.ids.size());
  const size_t n = batch.size(), layers = ck_->layers.size();
  Scratch& act = scratch_[0];
  Grow(act, t);
  Embed(batch, 0, n, act);
  auto r = [&](size_t p) { return static_cast<int>(t * p / parts); };
  // Round `step` of the forward on part p: 0 is layer 0's QKV; then per layer
  // attention (odd), its tail plus the next layer's QKV (even).
  auto run = [&](size_t step, size_t p) {
    try {
      if (step % 2 == 1) {
        Attention(batch, 0, n, p, parts, act, scratch_[p].scores);
        return;
      }
      const size_t layer = step / 2;  // the layer whose QKV comes next
      if (layer > 0) Tail(layer - 1, act, r(p), r(p + 1), scratch_[p].gemm);
      if (layer < layers) Qkv(layer, act, r(p), r(p + 1), scratch_[p].gemm);
    } catch (const std::exception& e) {
      errors[p] = e.what();
    }
  };
  for (size_t step = 0; step <= 2 * layers; ++step) {
    pool_->Run(parts, [&](size_t p) { run(step, p); });
  }
  for (size_t seq = 0; seq < n; ++seq) {
    Pool(act.x.data() + size_t(batch.offsets[seq]) * h, batch.length(seq),
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
  const size_t threads = pool_ ? static_cast<size_t>(pool_->threads()) : 1;
  const size_t parts = std::min(threads, batch.ids.size() / kMinSplitRows);
  // oneDNN reports failures (memory, no kernel for a shape) by exception;
  // one must not leave a pool worker.
  std::vector<std::string> errors(std::max(shards, parts));
  if (scratch_.size() < errors.size()) scratch_.resize(errors.size());
  // ZEROVEC_CPU_SPLIT=0 keeps one sequence on one thread (for comparison).
  static const bool split = [] {
    const char* env = std::getenv("ZEROVEC_CPU_SPLIT");
    return env == nullptr || std::string(env) != "0";
  }();
  if (split && shards < threads && parts >= 2) {
    EncodeSplit(batch, rows, parts, errors);
    for (const std::string& e : errors) {
      if (!e.empty()) return InternalError("cpu encoder: " + e);
    }
    return OkStatus();
  }
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
