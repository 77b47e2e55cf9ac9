// CPU encoder against a naive double-precision BERT written independently here,
// and the Embedder (CPU) end to end.
#include "embed/cpu_encoder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "embed/embedder.h"
#include "embed/testing/test_checkpoint.h"

namespace zv::embed {
namespace {

namespace fs = std::filesystem;
using Mat = std::vector<std::vector<double>>;

using testing::Cosine;

Mat Linear(const Mat& x, const std::vector<float>& w, const float* b, int n) {
  Mat y(x.size(), std::vector<double>(n));
  const size_t k = x[0].size();
  for (size_t r = 0; r < x.size(); ++r)
    for (int o = 0; o < n; ++o) {
      double s = b[o];
      for (size_t i = 0; i < k; ++i) s += x[r][i] * w[o * k + i];
      y[r][o] = s;
    }
  return y;
}

void LayerNorm(Mat& x, const std::vector<float>& g, const std::vector<float>& b,
               double eps) {
  for (auto& row : x) {
    double m = 0, v = 0;
    for (double e : row) m += e;
    m /= row.size();
    for (double e : row) v += (e - m) * (e - m);
    v /= row.size();
    for (size_t i = 0; i < row.size(); ++i)
      row[i] = (row[i] - m) / std::sqrt(v + eps) * g[i] + b[i];
  }
}

std::vector<float> NaiveBert(const Checkpoint& ck,
                             const std::vector<int32_t>& ids) {
  const BertConfig& c = ck.config;
  const int h = c.hidden_size, len = static_cast<int>(ids.size()),
            d = c.head_dim();
  Mat x(len, std::vector<double>(h));
  for (int t = 0; t < len; ++t)
    for (int i = 0; i < h; ++i)
      x[t][i] = ck.word_embeddings[ids[t] * h + i] +
                ck.position_embeddings[t * h + i] + ck.token_type0[i];
  LayerNorm(x, ck.emb_ln_g, ck.emb_ln_b, c.layer_norm_eps);
  for (const LayerWeights& l : ck.layers) {
    std::vector<float> wq(l.qkv_w.begin(), l.qkv_w.begin() + h * h);
    std::vector<float> wk(l.qkv_w.begin() + h * h, l.qkv_w.begin() + 2 * h * h);
    std::vector<float> wv(l.qkv_w.begin() + 2 * h * h, l.qkv_w.end());
    Mat q = Linear(x, wq, l.qkv_b.data(), h),
        k = Linear(x, wk, l.qkv_b.data() + h, h),
        v = Linear(x, wv, l.qkv_b.data() + 2 * h, h);
    Mat ctx(len, std::vector<double>(h, 0));
    for (int head = 0; head < c.num_heads; ++head)
      for (int i = 0; i < len; ++i) {
        std::vector<double> p(len);
        double mx = -1e300, sum = 0;
        for (int j = 0; j < len; ++j) {
          double s = 0;
          for (int e = 0; e < d; ++e)
            s += q[i][head * d + e] * k[j][head * d + e];
          p[j] = s / std::sqrt(double(d));
          mx = std::max(mx, p[j]);
        }
        for (auto& e : p) sum += (e = std::exp(e - mx));
        for (int j = 0; j < len; ++j)
          for (int e = 0; e < d; ++e)
            ctx[i][head * d + e] += p[j] / sum * v[j][head * d + e];
      }
    Mat a = Linear(ctx, l.attn_out_w, l.attn_out_b.data(), h);
    for (int t = 0; t < len; ++t)
      for (int i = 0; i < h; ++i) x[t][i] += a[t][i];
    LayerNorm(x, l.ln1_g, l.ln1_b, c.layer_norm_eps);
    Mat f = Linear(x, l.ffn_in_w, l.ffn_in_b.data(), c.intermediate_size);
    for (auto& row : f)
      for (auto& e : row) e = 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)));
    Mat o = Linear(f, l.ffn_out_w, l.ffn_out_b.data(), h);
    for (int t = 0; t < len; ++t)
      for (int i = 0; i < h; ++i) x[t][i] += o[t][i];
    LayerNorm(x, l.ln2_g, l.ln2_b, c.layer_norm_eps);
  }
  std::vector<float> out(h);
  for (int i = 0; i < h; ++i) {
    double s = 0;
    if (ck.pooling == Pooling::kCls) {
      s = x[0][i];
    } else {
      for (int t = 0; t < len; ++t) s += x[t][i];
      s /= len;
    }
    out[i] = static_cast<float>(s);
  }
  return out;
}

std::shared_ptr<const Checkpoint> Load(const testing::TinyBertOptions& o) {
  fs::path dir = testing::MakeTempDir("cpu");
  EXPECT_TRUE(testing::WriteTinyBert(dir, o).ok());
  auto ck = LoadCheckpoint(dir);
  EXPECT_TRUE(ck.ok()) << ck.status();
  return *ck;
}

// Both GEMM precisions (bf16 only where oneDNN runs it natively: elsewhere
// the embedder refuses it). bf16 rounds every GEMM input, so it is held to the
// bar vectors are held to against PyTorch (0.999), fp32 to 0.99999.
std::vector<cpu::Precision> Precisions() {
  std::vector<cpu::Precision> p = {cpu::Precision::kFp32};
  if (cpu::Bf16Native()) p.push_back(cpu::Precision::kBf16);
  return p;
}

double MinCosine(cpu::Precision p) {
  return p == cpu::Precision::kBf16 ? 0.999 : 0.99999;
}

std::shared_ptr<const CpuPackedModel> PackOrDie(const Checkpoint& ck,
                                                cpu::Precision p) {
  auto m = CpuEncoder::Pack(ck, p);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : nullptr;
}

class CpuEncoderPrecisionTest
    : public ::testing::TestWithParam<cpu::Precision> {};

INSTANTIATE_TEST_SUITE_P(
    Gemm, CpuEncoderPrecisionTest, ::testing::ValuesIn(Precisions()),
    [](const ::testing::TestParamInfo<cpu::Precision>& info) {
      return std::string(cpu::PrecisionName(info.param));
    });

TEST_P(CpuEncoderPrecisionTest, MatchesNaiveReferenceInOnePackedBatch) {
  const cpu::Precision prec = GetParam();
  for (bool cls : {false, true}) {
    testing::TinyBertOptions o;
    o.cls_pooling = cls;
    auto ck = Load(o);
    auto tok = Tokenizer::Create(ck->vocab, ck->tokenizer_options);
    ASSERT_TRUE(tok.ok());
    const std::vector<std::string> texts = {
        "the quick brown fox jumps over the lazy dog", "hello", "",
        "vector search of embedded data, and this is it!", "中国 日本"};
    TokenBatch batch;
    std::vector<std::vector<int32_t>> ids;
    for (const auto& t : texts) {
      ids.push_back(tok->Encode(t));
      batch.Add(ids.back());
    }
    std::vector<std::vector<float>> out(texts.size(), std::vector<float>(32));
    std::vector<float*> rows;
    for (auto& r : out) rows.push_back(r.data());
    CpuEncoder enc(ck, nullptr, PackOrDie(*ck, prec));
    EXPECT_EQ(enc.precision(), prec);
    EXPECT_NE(enc.description().find(cpu::PrecisionName(prec)),
              std::string::npos);
    ASSERT_TRUE(enc.Encode(batch, rows).ok());
    for (size_t i = 0; i < texts.size(); ++i) {
      std::vector<float> want = NaiveBert(*ck, ids[i]);
      EXPECT_GT(Cosine(out[i].data(), want.data(), 32), MinCosine(prec))
          << texts[i];
      double norm = 0;
      for (float v : out[i]) norm += v * v;
      EXPECT_NEAR(norm, 1.0, 1e-5);  // Normalize module present
    }
  }
}

// A batch split into shards across a pool's threads gives each sequence the
// vector it gets alone on one thread, and matches the naive reference.
TEST_P(CpuEncoderPrecisionTest, ShardedBatchMatchesOneThread) {
  const cpu::Precision prec = GetParam();
  auto ck = Load({});
  auto packed = PackOrDie(*ck, prec);
  auto tok = Tokenizer::Create(ck->vocab, ck->tokenizer_options);
  ASSERT_TRUE(tok.ok());
  const char* words[] = {"the",  "quick", "brown", "fox",    "jumps",  "over",
                         "lazy", "dog",   "hello", "vector", "search", "data"};
  TokenBatch batch;
  std::vector<std::vector<int32_t>> ids;
  for (int i = 0; i < 90; ++i) {
    std::string text;
    for (int w = 0; w < 3 + i % 17; ++w)
      text += std::string(words[(i + 5 * w) % 12]) + " ";
    ids.push_back(tok->Encode(text));
    batch.Add(ids.back());
  }
  ASSERT_GT(batch.ids.size(), 4 * 128u);  // enough tokens for several shards
  auto run = [&](std::shared_ptr<CpuPool> pool) {
    std::vector<std::vector<float>> out(ids.size(), std::vector<float>(32));
    std::vector<float*> rows;
    for (auto& r : out) rows.push_back(r.data());
    CpuEncoder enc(ck, pool, packed);
    EXPECT_TRUE(enc.Encode(batch, rows).ok());
    EXPECT_TRUE(enc.Encode(batch, rows).ok());  // scratch reused
    return out;
  };
  const auto one = run(nullptr);
  const auto four = run(std::make_shared<CpuPool>(4));
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_GT(Cosine(one[i].data(), four[i].data(), 32), 0.999999) << i;
    if (i % 10 == 0) {
      std::vector<float> want = NaiveBert(*ck, ids[i]);
      EXPECT_GT(Cosine(four[i].data(), want.data(), 32), MinCosine(prec)) << i;
    }
  }
}

// Too few sequences for a shard a thread: each step is split over the pool by
// rows (and attention by sequence and head), and every sequence gets the
// vector it gets alone on one thread.
TEST_P(CpuEncoderPrecisionTest, SplitSequenceMatchesOneThread) {
  const cpu::Precision prec = GetParam();
  auto ck = Load({});
  auto tok = Tokenizer::Create(ck->vocab, ck->tokenizer_options);
  ASSERT_TRUE(tok.ok());
  auto packed = PackOrDie(*ck, prec);
  std::string text;
  for (int w = 0; w < 60; ++w) text += (w % 3 ? "dog " : "quick fox ");
  for (size_t count : {1, 3}) {
    TokenBatch batch;
    std::vector<std::vector<int32_t>> ids;
    for (size_t i = 0; i < count; ++i) {
      ids.push_back(tok->Encode(text.substr(0, text.size() - 8 * i)));
      batch.Add(ids.back());
    }
    ASSERT_GE(batch.ids.size(), 2 * 16u);  // enough rows for several parts
    auto run = [&](std::shared_ptr<CpuPool> pool) {
      std::vector<std::vector<float>> out(count, std::vector<float>(32));
      std::vector<float*> rows;
      for (auto& r : out) rows.push_back(r.data());
      CpuEncoder enc(ck, pool, packed);
      EXPECT_TRUE(enc.Encode(batch, rows).ok());
      EXPECT_TRUE(enc.Encode(batch, rows).ok());  // scratch reused
      return out;
    };
    const auto one = run(nullptr);
    const auto three = run(std::make_shared<CpuPool>(3));
    for (size_t i = 0; i < count; ++i) {
      EXPECT_GT(Cosine(one[i].data(), three[i].data(), 32), 0.999999) << i;
      std::vector<float> want = NaiveBert(*ck, ids[i]);
      EXPECT_GT(Cosine(three[i].data(), want.data(), 32), MinCosine(prec)) << i;
    }
  }
}

// One Linear against double precision, for every epilogue, at row counts the
// weights were not packed for (1, 7, 300) and with the output in bf16.
TEST_P(CpuEncoderPrecisionTest, GemmLinearMatchesDouble) {
  const cpu::Precision prec = GetParam();
  const bool bf16 = prec == cpu::Precision::kBf16;
  const int n = 48, k = 40;
  std::vector<float> w(n * k), bias(n);
  for (int i = 0; i < n * k; ++i) w[i] = std::sin(0.37 * i);
  for (int i = 0; i < n; ++i) bias[i] = 0.1f * std::cos(1.3 * i);
  cpu::PackedWeight pw(w, n, k, prec);
  cpu::GemmContext ctx;
  // bf16 has 8 significant bits: relative error ~ 2^-8 per input, a few
  // times that summed over k (plus bf16 output rounding).
  const double tol = bf16 ? 0.06 : 1e-4;
  auto bits = [](float f) {
    uint16_t b;
    cpu::ToBf16(&f, 1, &b);
    uint32_t u = uint32_t{b} << 16;
    float g;
    std::memcpy(&g, &u, sizeof g);
    return g;
  };
  for (int m : {1, 7, 300}) {
    std::vector<float> x(m * k);
    for (int i = 0; i < m * k; ++i) x[i] = std::cos(0.11 * i);
    std::vector<uint16_t> x16(x.size());
    cpu::ToBf16(x.data(), x.size(), x16.data());
    const void* in = bf16 ? static_cast<const void*>(x16.data()) : x.data();
    for (auto e : {cpu::Epilogue::kStore, cpu::Epilogue::kAccumulate,
                   cpu::Epilogue::kGelu}) {
      std::vector<float> y(m * n, 0.5f);
      std::vector<uint16_t> y16(m * n);
      const bool out16 = bf16 && e == cpu::Epilogue::kGelu;
      ctx.Linear(in, m, pw, bias.data(), e,
                 out16 ? static_cast<void*>(y16.data()) : y.data(), out16);
      EXPECT_FALSE(ctx.last_impl().empty());
      for (int r = 0; r < m; ++r) {
        for (int o = 0; o < n; ++o) {
          double s = bias[o];
          for (int i = 0; i < k; ++i) s += double{x[r * k + i]} * w[o * k + i];
          if (e == cpu::Epilogue::kAccumulate) s += 0.5;
          if (e == cpu::Epilogue::kGelu)
            s = 0.5 * s * (1 + std::erf(s / std::sqrt(2.0)));
          double got = y[r * n + o];
          if (out16) {
            uint32_t u = uint32_t{y16[r * n + o]} << 16;
            float f;
            std::memcpy(&f, &u, sizeof f);
            got = f;
          }
          ASSERT_NEAR(got, s, tol * (1 + std::abs(s)))
              << "m " << m << " row " << r << " col " << o << " epilogue "
              << static_cast<int>(e);
        }
      }
    }
  }
  // Round to nearest even: 1 + 2^-8 is a tie (stays 1), 1 + 3 * 2^-8 rounds up.
  EXPECT_EQ(bits(1.0f + 1.0f / 256), 1.0f);
  EXPECT_EQ(bits(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);
  EXPECT_EQ(bits(-2.5f), -2.5f);
}

TEST(CpuPoolTest, RunsEveryTaskOnceFromSeveralCallers) {
  CpuPool pool(3);
  EXPECT_EQ(pool.threads(), 3);
  std::vector<std::atomic<int>> hits(200);
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 20; ++round) {
        pool.Run(50, [&](size_t i) { hits[c * 50 + i].fetch_add(1); });
      }
    });
  }
  for (auto& t : callers) t.join();
  for (auto& h : hits) EXPECT_EQ(h.load(), 20);
  EXPECT_GE(CpuPool::AvailableCores(), 1);
  EXPECT_EQ(CpuPool(0).threads(), CpuPool::AvailableCores());
}

TEST(CpuEncoderTest, RejectsOutOfVocabularyIds) {
  auto ck = Load({});
  CpuEncoder enc(ck);
  TokenBatch batch;
  std::vector<int32_t> ids = {2, 100000, 3};
  batch.Add(ids);
  std::vector<float> out(32);
  float* row = out.data();
  EXPECT_FALSE(enc.Encode(batch, std::span<float* const>(&row, 1)).ok());
}

fs::path TinyModelDir() {
  static fs::path dir = [] {
    fs::path d = testing::MakeTempDir("embedder");
    EXPECT_TRUE(testing::WriteTinyBert(d, {}).ok());
    return d;
  }();
  return dir;
}

TEST(EmbedderTest, CpuEmbedIntoAndSubmitAgree) {
  EmbedderOptions opt;
  opt.model_dir = TinyModelDir();
  opt.device = DevicePreference::kCpu;
  opt.max_batch_tokens = 16;  // forces several length buckets
  auto emb = Embedder::Create(opt);
  ASSERT_TRUE(emb.ok()) << emb.status();
  EXPECT_EQ((*emb)->info().dim, 32);
  EXPECT_NE((*emb)->device_description().find("cpu"), std::string::npos);

  std::vector<std::string> texts;
  for (int i = 0; i < 100; ++i) {
    texts.push_back(std::string("the dog ") + std::string(i % 7, 'a') + " is " +
                    std::to_string(i));
  }
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<float> a(texts.size() * 32), b(texts.size() * 32);
  std::vector<float*> ra, rb;
  for (size_t i = 0; i < texts.size(); ++i) {
    ra.push_back(&a[i * 32]);
    rb.push_back(&b[i * 32]);
  }
  ASSERT_TRUE((*emb)->EmbedInto(views, ra).ok());
  // A large job and a small one in flight at once, on separate lanes.
  std::vector<float> q(32);
  auto big = (*emb)->Submit(texts, rb);
  auto small = (*emb)->Submit({texts[3]}, {q.data()});
  ASSERT_TRUE(small.get().ok());
  ASSERT_TRUE(big.get().ok());
  EXPECT_EQ(a, b);
  EXPECT_GT(Cosine(q.data(), &a[3 * 32], 32), 0.999999);
  // Bucketing is invisible: one text alone gives the same row as in a batch.
  std::string_view one = texts[50];
  std::vector<float> alone(32);
  float* row = alone.data();
  ASSERT_TRUE((*emb)->EmbedInto({&one, 1}, {&row, 1}).ok());
  EXPECT_GT(Cosine(alone.data(), &a[50 * 32], 32), 0.999999);
}

TEST(EmbedderTest, ReportsTruncatedTexts) {
  EmbedderOptions opt;
  opt.model_dir = TinyModelDir();
  opt.device = DevicePreference::kCpu;
  auto emb = Embedder::Create(opt);
  ASSERT_TRUE(emb.ok()) << emb.status();
  const int window = (*emb)->info().max_length;
  ASSERT_GT(window, 2);
  std::string fits, longer;
  for (int i = 0; i < window - 2; ++i) fits += "dog ";
  longer = fits + "dog";
  // 300 texts (the bulk lane, tokenized on several threads), every third
  // one over the window.
  std::vector<std::string> texts;
  for (int i = 0; i < 300; ++i) texts.push_back(i % 3 == 0 ? longer : fits);
  std::vector<float> out(texts.size() * 32);
  std::vector<float*> rows;
  for (size_t i = 0; i < texts.size(); ++i) rows.push_back(&out[i * 32]);
  EmbedReport report;
  report.truncated = 12345;  // overwritten
  ASSERT_TRUE((*emb)->Submit(texts, rows, &report).get().ok());
  EXPECT_EQ(report.truncated, 100u);
  // The interactive lane, borrowed texts.
  std::vector<std::string_view> views = {fits, longer, "dog", longer};
  ASSERT_TRUE((*emb)->EmbedInto(views, {rows.data(), 4}, &report).ok());
  EXPECT_EQ(report.truncated, 2u);
  ASSERT_TRUE((*emb)->Submit(views, {rows.data(), 4}, &report).get().ok());
  EXPECT_EQ(report.truncated, 2u);
  // A truncated text embeds as its first window: the same row as a text cut
  // there by hand.
  std::vector<float> a(32), b(32);
  std::string_view cut = longer, whole = fits;
  float* ra = a.data();
  float* rb = b.data();
  ASSERT_TRUE((*emb)->EmbedInto({&cut, 1}, {&ra, 1}).ok());
  ASSERT_TRUE((*emb)->EmbedInto({&whole, 1}, {&rb, 1}).ok());
  EXPECT_GT(Cosine(a.data(), b.data(), 32), 0.999999);
  // A refused call reports nothing.
  report.truncated = 7;
  EXPECT_FALSE((*emb)->EmbedInto(views, {rows.data(), 3}, &report).ok());
  EXPECT_EQ(report.truncated, 0u);
  // Splitting for the window: 2 * (window - 2) + 1 words, one token each,
  // consecutive spans sharing window / 8 of them, make three spans that the
  // embedder takes whole.
  const std::string both = longer + " " + fits;
  const auto spans = (*emb)->SplitToWindows(both, window / 8);
  EXPECT_EQ(spans.size(), 3u);
  ASSERT_LE(spans.size(), 4u);
  ASSERT_TRUE(
      (*emb)->EmbedInto(spans, {rows.data(), spans.size()}, &report).ok());
  EXPECT_EQ(report.truncated, 0u);
  EXPECT_EQ((*emb)->SplitToWindows(fits, window / 8).size(), 1u);
}

// The precision option reaches the encoder; fp32 and bf16 agree to the bar
// vectors are held to; bf16 is refused where oneDNN would only emulate it.
TEST(EmbedderTest, CpuPrecisionOption) {
  EmbedderOptions opt;
  opt.model_dir = TinyModelDir();
  opt.device = DevicePreference::kCpu;
  opt.cpu_precision = CpuPrecision::kFp32;
  auto fp32 = Embedder::Create(opt);
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  EXPECT_NE((*fp32)->device_description().find("fp32"), std::string::npos);
  opt.cpu_precision = CpuPrecision::kBf16;
  auto bf16 = Embedder::Create(opt);
  if (!cpu::Bf16Native()) {
    EXPECT_EQ(bf16.status().code(), StatusCode::kFailedPrecondition);
    return;
  }
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_NE((*bf16)->device_description().find("bf16"), std::string::npos);
  std::vector<std::string_view> texts = {"the quick brown fox", "hello world",
                                         "vector search of embedded data"};
  std::vector<float> a(texts.size() * 32), b(texts.size() * 32);
  std::vector<float*> ra, rb;
  for (size_t i = 0; i < texts.size(); ++i) {
    ra.push_back(&a[i * 32]);
    rb.push_back(&b[i * 32]);
  }
  ASSERT_TRUE((*fp32)->EmbedInto(texts, ra).ok());
  ASSERT_TRUE((*bf16)->EmbedInto(texts, rb).ok());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_GT(Cosine(ra[i], rb[i], 32), 0.999) << texts[i];
  }
  EXPECT_NE(a, b);  // bf16 did round
}

TEST(EmbedderTest, ArgumentErrors) {
  EmbedderOptions opt;
  opt.model_dir = TinyModelDir();
  opt.device = DevicePreference::kCpu;
  auto emb = Embedder::Create(opt);
  ASSERT_TRUE(emb.ok());
  std::string_view t = "x";
  EXPECT_EQ((*emb)->EmbedInto({&t, 1}, {}).code(),
            StatusCode::kInvalidArgument);
  float* null_row = nullptr;
  EXPECT_EQ((*emb)->EmbedInto({&t, 1}, {&null_row, 1}).code(),
            StatusCode::kInvalidArgument);
  opt.model_dir = "/nonexistent";
  EXPECT_FALSE(Embedder::Create(opt).ok());
#ifndef ZEROVEC_WITH_CUDA
  opt.model_dir = TinyModelDir();
  opt.device = DevicePreference::kCuda;
  EXPECT_EQ(Embedder::Create(opt).status().code(),
            StatusCode::kFailedPrecondition);
#endif
}

}  // namespace
}  // namespace zv::embed
