// CUDA encoder: agreement with the CPU encoder and the PyTorch reference, the
// segment sink mode, and concurrent submission. Skips where no GPU exists.
// Built only with --config=cuda; on a GPU host, from the bundle:
// tools/bundle.sh --cuda //embed:cuda_encoder_test, there bin/run-test
// cuda_encoder_test.
#include "embed/cuda_encoder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "embed/checkpoint.h"
#include "embed/embedder.h"
#include "embed/segment_sink.h"
#include "embed/testing/test_checkpoint.h"

namespace zv::embed {
namespace {

namespace fs = std::filesystem;

class CudaEncoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaModel::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  }

  static std::unique_ptr<Embedder> Make(
      const fs::path& dir, DevicePreference d,
      GpuPrecision precision = GpuPrecision::kAuto) {
    EmbedderOptions opt;
    opt.model_dir = dir;
    opt.device = d;
    opt.gpu_precision = precision;
    auto emb = Embedder::Create(opt);
    EXPECT_TRUE(emb.ok()) << emb.status();
    return emb.ok() ? std::move(emb).value() : nullptr;
  }

  // Min cosines against the CPU encoder and the PyTorch fp32 reference
  // vectors, each >= 0.999 (the bar, also for FP8).
  void CompareOnReference(const fs::path& model_dir, const fs::path& reference,
                          GpuPrecision precision = GpuPrecision::kAuto) {
    auto refs = testing::ReadReference(reference);
    ASSERT_TRUE(refs.ok()) << refs.status();
    auto gpu = Make(model_dir, DevicePreference::kCuda, precision);
    auto cpu = Make(model_dir, DevicePreference::kCpu);
    ASSERT_TRUE(gpu && cpu);
    std::printf("device: %s\n", gpu->device_description().c_str());
    const int dim = gpu->info().dim;
    const size_t n = refs->size();
    std::vector<std::string_view> texts;
    for (const auto& r : *refs) texts.push_back(r.text);
    std::vector<float> g(n * dim), c(n * dim);
    std::vector<float*> gr, cr;
    for (size_t i = 0; i < n; ++i) {
      gr.push_back(&g[i * dim]);
      cr.push_back(&c[i * dim]);
    }
    ASSERT_TRUE(gpu->EmbedInto(texts, gr).ok());
    ASSERT_TRUE(cpu->EmbedInto(texts, cr).ok());
    double min_gc = 1, min_gr = 1, min_cr = 1;
    for (size_t i = 0; i < n; ++i) {
      const double gc = testing::Cosine(gr[i], cr[i], dim);
      const double gref = testing::Cosine(gr[i], (*refs)[i].vector.data(), dim);
      const double cref = testing::Cosine(cr[i], (*refs)[i].vector.data(), dim);
      min_gc = std::min(min_gc, gc);
      min_gr = std::min(min_gr, gref);
      min_cr = std::min(min_cr, cref);
      EXPECT_GE(gc, 0.999) << i << ": " << texts[i];
      EXPECT_GE(gref, 0.999) << i << ": " << texts[i];
      EXPECT_GE(cref, 0.999) << i << ": " << texts[i];
    }
    std::printf(
        "%s: %zu sentences, min cosine cuda-cpu %.6f, cuda-ref %.6f, cpu-ref "
        "%.6f\n",
        reference.filename().c_str(), n, min_gc, min_gr, min_cr);
  }
};

TEST_F(CudaEncoderTest, ZerovecMiniAgreesWithCpuAndReference) {
  CompareOnReference("models/zerovec-mini",
                     "tests/data/reference/zerovec-mini.jsonl");
}

TEST_F(CudaEncoderTest, ZerovecL6AgreesWithCpuAndReference) {
  if (!std::filesystem::exists("models/zerovec-l6/model.safetensors") ||
      !std::filesystem::exists("tests/data/reference/zerovec-l6.jsonl")) {
    GTEST_SKIP() << "models/zerovec-l6 or its reference vectors are not here";
  }
  CompareOnReference("models/zerovec-l6",
                     "tests/data/reference/zerovec-l6.jsonl");
}

TEST_F(CudaEncoderTest, MiniLmRandomAgreesWithCpuAndReference) {
  auto dir = testing::MakeMiniLmRandom();
  ASSERT_TRUE(dir.ok()) << dir.status();
  CompareOnReference(*dir, "tests/data/reference/minilm_random.jsonl");
}

// FP8 (e4m3) GEMMs: the same bar against the fp32 references, on a trained
// model (zerovec-mini) and the random MiniLM shape.
TEST_F(CudaEncoderTest, Fp8AgreesWithCpuAndReference) {
  CompareOnReference("models/zerovec-mini",
                     "tests/data/reference/zerovec-mini.jsonl",
                     GpuPrecision::kFp8);
  auto dir = testing::MakeMiniLmRandom();
  ASSERT_TRUE(dir.ok()) << dir.status();
  CompareOnReference(*dir, "tests/data/reference/minilm_random.jsonl",
                     GpuPrecision::kFp8);
  if (std::filesystem::exists("models/zerovec-l6/model.safetensors") &&
      std::filesystem::exists("tests/data/reference/zerovec-l6.jsonl")) {
    CompareOnReference("models/zerovec-l6",
                       "tests/data/reference/zerovec-l6.jsonl",
                       GpuPrecision::kFp8);
  }
}

TEST_F(CudaEncoderTest, TinyModelsAgreeWithCpu) {
  // Covers CLS pooling, head_dim 32/64 and BF16 storage without external data.
  struct Case {
    int hidden, heads;
    bool cls;
    const char* dtype;
  };
  for (const Case& k : {Case{64, 2, false, "F32"}, Case{128, 2, true, "BF16"},
                        Case{64, 1, false, "F16"}}) {
    testing::TinyBertOptions o;
    o.hidden = k.hidden;
    o.heads = k.heads;
    o.cls_pooling = k.cls;
    o.dtype = k.dtype;
    o.intermediate = 2 * k.hidden;
    o.max_position = 160;
    const fs::path dir = testing::MakeTempDir("cuda_tiny");
    ASSERT_TRUE(testing::WriteTinyBert(dir, o).ok());
    auto gpu = Make(dir, DevicePreference::kCuda);
    auto cpu = Make(dir, DevicePreference::kCpu);
    ASSERT_TRUE(gpu && cpu);
    std::vector<std::string> texts;
    for (int i = 0; i < 40; ++i) {
      std::string t;
      for (int w = 0; w < i * 3 + 1; ++w)
        t += (w % 3 ? "dog jumps " : "the fox ");
      texts.push_back(t);
    }
    std::vector<std::string_view> views(texts.begin(), texts.end());
    std::vector<float> g(texts.size() * k.hidden), c(texts.size() * k.hidden);
    std::vector<float*> gr, cr;
    for (size_t i = 0; i < texts.size(); ++i) {
      gr.push_back(&g[i * k.hidden]);
      cr.push_back(&c[i * k.hidden]);
    }
    ASSERT_TRUE(gpu->EmbedInto(views, gr).ok());
    ASSERT_TRUE(cpu->EmbedInto(views, cr).ok());
    for (size_t i = 0; i < texts.size(); ++i) {
      EXPECT_GE(testing::Cosine(gr[i], cr[i], k.hidden), 0.999)
          << "hidden " << k.hidden << " text " << i;
    }
  }
}

// Texts of n pairs of words from the tiny vocabulary ("jumps" is two tokens).
std::vector<std::string> TinyTexts(const std::vector<int>& words) {
  std::vector<std::string> texts;
  for (int n : words) {
    std::string t;
    for (int w = 0; w < n; ++w) t += (w % 3 ? "dog jumps " : "the fox ");
    texts.push_back(t);
  }
  return texts;
}

// Minimum cosine between two embedders' rows for texts (one EmbedInto call).
double MinCosine(Embedder& a, Embedder& b,
                 const std::vector<std::string>& texts) {
  const int dim = a.info().dim;
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<float> va(texts.size() * dim), vb(texts.size() * dim);
  std::vector<float*> ra, rb;
  for (size_t i = 0; i < texts.size(); ++i) {
    ra.push_back(&va[i * dim]);
    rb.push_back(&vb[i * dim]);
  }
  EXPECT_TRUE(a.EmbedInto(views, ra).ok());
  EXPECT_TRUE(b.EmbedInto(views, rb).ok());
  double worst = 1;
  for (size_t i = 0; i < texts.size(); ++i) {
    worst = std::min(worst, testing::Cosine(ra[i], rb[i], dim));
  }
  return worst;
}

// The tensor-core attention kernel's tile shapes (1, 2, 4, 8 warps; key chunks
// of 32/64; several query tiles up to 512 tokens) at head_dim 32, 64 and 128,
// each against the CPU encoder. Each group is one call, so one batch whose
// longest sequence picks the tile shape.
TEST_F(CudaEncoderTest, AttentionTileShapesAgreeWithCpu) {
  struct Case {
    int hidden, heads;
  };
  const std::vector<std::vector<int>> groups = {
      {1, 2, 4, 5},                         // 4..15 tokens
      {6, 9, 11},                           // 18..31
      {1, 14, 20, 23},                      // 4..63
      {3, 26, 40, 46, 47},                  // 10..127
      {1, 40, 70, 100, 150, 190, 191, 255}  // 4..511, then truncated to 512
  };
  for (const Case& k : {Case{128, 4}, Case{128, 2}, Case{256, 2}}) {
    testing::TinyBertOptions o;
    o.hidden = k.hidden;
    o.heads = k.heads;
    o.intermediate = 2 * k.hidden;
    o.max_position = 512;
    const fs::path dir = testing::MakeTempDir("cuda_tiles");
    ASSERT_TRUE(testing::WriteTinyBert(dir, o).ok());
    auto gpu = Make(dir, DevicePreference::kCuda);
    auto cpu = Make(dir, DevicePreference::kCpu);
    ASSERT_TRUE(gpu && cpu);
    for (size_t g = 0; g < groups.size(); ++g) {
      const double c = MinCosine(*gpu, *cpu, TinyTexts(groups[g]));
      std::printf("head_dim %d, group %zu: min cosine cuda-cpu %.6f\n",
                  k.hidden / k.heads, g, c);
      EXPECT_GE(c, 0.999) << "head_dim " << k.hidden / k.heads << " group "
                          << g;
    }
  }
}

// The tensor-core kernel (default) against the fp32 CUDA-core kernel
// (ZV_CUDA_ATTENTION=simt) on the MiniLM-shaped model, 1 to 512 tokens.
TEST_F(CudaEncoderTest, MmaAttentionMatchesSimtKernel) {
  auto dir = testing::MakeMiniLmRandom();
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto mma = Make(*dir, DevicePreference::kCuda);
  ASSERT_EQ(setenv("ZV_CUDA_ATTENTION", "simt", 1), 0);
  auto simt = Make(*dir, DevicePreference::kCuda);
  unsetenv("ZV_CUDA_ATTENTION");
  ASSERT_TRUE(mma && simt);
  EXPECT_NE(mma->device_description().find("attention=mma"), std::string::npos)
      << mma->device_description();
  EXPECT_NE(simt->device_description().find("attention=simt"),
            std::string::npos)
      << simt->device_description();
  // About 3 tokens a word below: groups of at most ~16, ~32, ~64 tokens, then
  // up to 512 (the longest are truncated).
  const std::vector<std::vector<int>> groups = {
      {1, 3, 4}, {5, 8, 10}, {12, 18, 20}, {2, 30, 90, 120, 170, 300, 600}};
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<int>& words = groups[g];
    std::vector<std::string> texts;
    for (int n : words) {
      std::string t;
      for (int w = 0; w < n; ++w)
        t += " word" + std::to_string((n * 7 + w * 13) % 97) + " and";
      texts.push_back(t);
    }
    const double c = MinCosine(*mma, *simt, texts);
    std::printf("minilm, group %zu (%zu texts): min cosine mma-simt %.7f\n", g,
                texts.size(), c);
    EXPECT_GE(c, 0.9999) << "group " << g;
  }
}

// The attention kernel's name in a device description ("attention=NAME"
// ends at the next space or comma: settings such as " rows=32" follow it).
std::string AttentionNameOf(const std::string& description) {
  const std::string key = "attention=";
  const size_t at = description.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  return description.substr(from, description.find_first_of(" ,", from) - from);
}

// The default tensor-core kernel (fp16 exp2, cp.async double buffering)
// against the plain one (ZV_CUDA_ATTENTION=mma) on the MiniLM and a head_dim
// 64 shape, 1 to 512 tokens: the speed-up must not move the vectors.
TEST_F(CudaEncoderTest, PipelinedAttentionMatchesPlainKernel) {
  auto dir = testing::MakeMiniLmRandom();
  ASSERT_TRUE(dir.ok()) << dir.status();
  testing::TinyBertOptions o;
  o.hidden = 128;
  o.heads = 2;
  o.intermediate = 256;
  o.max_position = 512;
  const fs::path dh64 = testing::MakeTempDir("cuda_dh64");
  ASSERT_TRUE(testing::WriteTinyBert(dh64, o).ok());
  std::vector<std::string> texts;
  for (int n : {1, 3, 9, 14, 22, 40, 90, 170, 300, 600}) {
    std::string t;
    for (int w = 0; w < n; ++w)
      t += " word" + std::to_string((n * 11 + w * 7) % 89) + " or";
    texts.push_back(t);
  }
  for (const fs::path& model : {*dir, dh64}) {
    auto fast = Make(model, DevicePreference::kCuda);
    ASSERT_EQ(setenv("ZV_CUDA_ATTENTION", "mma", 1), 0);
    auto plain = Make(model, DevicePreference::kCuda);
    unsetenv("ZV_CUDA_ATTENTION");
    ASSERT_TRUE(fast && plain);
    EXPECT_EQ(AttentionNameOf(fast->device_description()), "mma-fp16-pipelined")
        << fast->device_description();
    EXPECT_EQ(AttentionNameOf(plain->device_description()), "mma-fp16")
        << plain->device_description();
    const double c = MinCosine(*fast, *plain, texts);
    std::printf("%s: min cosine default(pipelined)-plain %.7f\n", model.c_str(),
                c);
    EXPECT_GE(c, 0.9999) << model;
  }
}

// ZV_CUDA_ATTENTION_ROWS: every fixed block size gives the default's vectors
// (texts from 1 to 600 tokens: sequences split over several blocks, blocks
// past a short sequence's end; batches of short and of long texts, so the
// default picks each size it has).
TEST_F(CudaEncoderTest, AttentionRowsMatchDefault) {
  auto dir = testing::MakeMiniLmRandom();
  ASSERT_TRUE(dir.ok()) << dir.status();
  std::vector<std::string> texts;
  for (int n : {1, 5, 14, 30, 50, 70, 120, 200, 600, 150, 250, 400}) {
    std::string t;
    for (int w = 0; w < n; ++w)
      t += " word" + std::to_string((n * 13 + w * 5) % 97) + " and";
    texts.push_back(t);
  }
  auto base = Make(*dir, DevicePreference::kCuda);
  ASSERT_TRUE(base);
  EXPECT_EQ(base->device_description().find(" rows="), std::string::npos);
  for (const char* rows : {"128", "64", "32", "16"}) {
    ASSERT_EQ(setenv("ZV_CUDA_ATTENTION_ROWS", rows, 1), 0);
    auto small = Make(*dir, DevicePreference::kCuda);
    unsetenv("ZV_CUDA_ATTENTION_ROWS");
    ASSERT_TRUE(small);
    EXPECT_NE(small->device_description().find(std::string(" rows=") + rows),
              std::string::npos)
        << small->device_description();
    const double c = MinCosine(*small, *base, texts);
    std::printf("rows %s: min cosine against the default %.7f\n", rows, c);
    EXPECT_GE(c, 0.9999) << rows;
  }
  // ZV_CUDA_ATTENTION_BLOCKS=3 (head_dim 32: this model's) computes the same
  // rows with fewer registers.
  ASSERT_EQ(setenv("ZV_CUDA_ATTENTION_BLOCKS", "3", 1), 0);
  auto three = Make(*dir, DevicePreference::kCuda);
  unsetenv("ZV_CUDA_ATTENTION_BLOCKS");
  ASSERT_TRUE(three);
  EXPECT_NE(three->device_description().find(" blocks=3"), std::string::npos)
      << three->device_description();
  const double c3 = MinCosine(*three, *base, texts);
  std::printf("3 blocks an SM: min cosine against the default %.7f\n", c3);
  EXPECT_GE(c3, 0.9999);
}

// The fixed-size LayerNorm kernel (the default at hidden 384, 768, 1024)
// against the generic one (ZV_CUDA_LAYERNORM=generic) and the CPU encoder, at
// each of its sizes and at one without an instance (512: the generic kernel
// runs and the description says so).
TEST_F(CudaEncoderTest, FixedLayerNormMatchesGeneric) {
  for (int hidden : {384, 768, 1024, 512}) {
    testing::TinyBertOptions o;
    o.hidden = hidden;
    o.heads = hidden / 64;
    o.intermediate = 2 * hidden;
    o.max_position = 512;
    const fs::path dir = testing::MakeTempDir("cuda_ln");
    ASSERT_TRUE(testing::WriteTinyBert(dir, o).ok());
    const auto texts = TinyTexts({1, 5, 30, 100, 255});
    auto fixed = Make(dir, DevicePreference::kCuda);
    ASSERT_EQ(setenv("ZV_CUDA_LAYERNORM", "generic", 1), 0);
    auto generic = Make(dir, DevicePreference::kCuda);
    unsetenv("ZV_CUDA_LAYERNORM");
    auto cpu = Make(dir, DevicePreference::kCpu);
    ASSERT_TRUE(fixed && generic && cpu);
    const bool has_fixed = hidden != 512;
    EXPECT_EQ(fixed->device_description().find("layernorm=generic") ==
                  std::string::npos,
              has_fixed)
        << fixed->device_description();
    EXPECT_NE(generic->device_description().find("layernorm=generic"),
              std::string::npos)
        << generic->device_description();
    const double c = MinCosine(*fixed, *generic, texts);
    const double cc = MinCosine(*fixed, *cpu, texts);
    std::printf("hidden %d: min cosine fixed-generic %.7f, fixed-cpu %.7f\n",
                hidden, c, cc);
    EXPECT_GE(c, 0.9999) << hidden;
    EXPECT_GE(cc, 0.999) << hidden;
  }
}

// Embeds into a segment in `parent` and returns the sink mode the device
// reports.
std::string SinkRoundTrip(Embedder& emb, const fs::path& parent) {
  const int dim = emb.info().dim;
  shm::SegmentOptions so;
  so.dim = dim;
  so.rows_per_extent = 64;
  const fs::path seg = parent / "seg";
  fs::remove_all(seg);
  auto writer = shm::Writer::Create(seg, so);
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return "";
  std::vector<std::string> texts;
  for (int i = 0; i < 100; ++i)
    texts.push_back("the lazy dog number " + std::to_string(i));
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::string mode;
  {
    SegmentSink sink(emb, **writer);
    EXPECT_TRUE((*writer)->Reserve(100).ok());
    EXPECT_TRUE(sink.Embed(views, 0).ok());
    EXPECT_TRUE((*writer)->Commit(100).ok());
    mode = emb.device_description();
  }
  std::vector<float> plain(100 * dim);
  std::vector<float*> rows;
  for (int i = 0; i < 100; ++i) rows.push_back(&plain[i * dim]);
  EXPECT_TRUE(emb.EmbedInto(views, rows).ok());
  for (int i = 0; i < 100; ++i) {
    EXPECT_GE(testing::Cosine((*writer)->Row(i), rows[i], dim), 0.99999) << i;
  }
  return mode;
}

TEST_F(CudaEncoderTest, SinkModeIsReported) {
  const fs::path dir = testing::MakeTempDir("cuda_sink_model");
  testing::TinyBertOptions o;
  o.hidden = 64;
  o.heads = 2;
  ASSERT_TRUE(testing::WriteTinyBert(dir, o).ok());
  auto emb = Make(dir, DevicePreference::kCuda);
  ASSERT_TRUE(emb);
  // tmpfs (/dev/shm) pages can be pinned; a disk file mapping may refuse.
  std::error_code ec;
  if (fs::is_directory("/dev/shm", ec)) {
    const fs::path shm_dir =
        fs::path("/dev/shm") / ("zv_sink_" + std::to_string(getpid()));
    fs::create_directories(shm_dir);
    const std::string mode = SinkRoundTrip(*emb, shm_dir);
    std::printf("segment on /dev/shm: %s\n", mode.c_str());
    // tmpfs pages can always be pinned: the kernel must store rows in place
    // there.
    EXPECT_NE(mode.find("sink=host-registered"), std::string::npos);
    fs::remove_all(shm_dir);
  }
  const std::string disk =
      SinkRoundTrip(*emb, testing::MakeTempDir("cuda_sink_disk"));
  std::printf("segment on disk tmp: %s\n", disk.c_str());
  EXPECT_NE(disk.find("sink="), std::string::npos);
}

TEST_F(CudaEncoderTest, AutoFallsBackToCpuForUnsupportedShapes) {
  const fs::path dir = testing::MakeTempDir("cuda_hd8");
  ASSERT_TRUE(testing::WriteTinyBert(dir, {}).ok());  // head_dim 8
  EmbedderOptions opt;
  opt.model_dir = dir;
  auto emb = Embedder::Create(opt);
  ASSERT_TRUE(emb.ok()) << emb.status();
  EXPECT_NE((*emb)->device_description().find("cpu"), std::string::npos);
  opt.device = DevicePreference::kCuda;
  EXPECT_EQ(Embedder::Create(opt).status().code(), StatusCode::kUnimplemented);
}

TEST_F(CudaEncoderTest, QueryIsNotStuckBehindIngest) {
  auto dir = testing::MakeMiniLmRandom();
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto emb = Make(*dir, DevicePreference::kCuda);
  ASSERT_TRUE(emb);
  const int dim = emb->info().dim;
  std::vector<std::string> bulk;
  for (int i = 0; i < 8192; ++i) {
    std::string t = "ingest document " + std::to_string(i) + ":";
    for (int w = 0; w < 40; ++w)
      t += " word" + std::to_string((i * 7 + w) % 97);
    bulk.push_back(t);
  }
  std::vector<float> bulk_out(bulk.size() * dim), q(dim), q_ref(dim);
  std::vector<float*> rows;
  for (size_t i = 0; i < bulk.size(); ++i) rows.push_back(&bulk_out[i * dim]);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto big = emb->Submit(bulk, rows);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto tq = Clock::now();
  auto query = emb->Submit({"where is the lazy dog?"}, {q.data()});
  ASSERT_TRUE(query.get().ok());
  const auto tq_done = Clock::now();
  const bool big_done_first =
      big.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  ASSERT_TRUE(big.get().ok());
  const auto t_big = Clock::now();
  auto ms = [](auto d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  std::printf(
      "ingest of %zu texts: %.1f ms; query submitted during it: %.2f ms%s\n",
      bulk.size(), ms(t_big - t0), ms(tq_done - tq),
      big_done_first ? " (ingest finished first)" : "");
  EXPECT_FALSE(big_done_first);
  std::string_view qv = "where is the lazy dog?";
  float* qr = q_ref.data();
  ASSERT_TRUE(emb->EmbedInto({&qv, 1}, {&qr, 1}).ok());
  EXPECT_GE(testing::Cosine(q.data(), q_ref.data(), dim), 0.9999);
}

// ---- the encoder's own levers (CudaEncoderOptions) and timer, driven
// directly.

// Batches of random ids (with [CLS]-like 101 first) of the given lengths.
TokenBatch RandomBatch(const std::vector<int>& lengths, int vocab,
                       unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(1000, vocab - 1);
  TokenBatch b;
  for (int len : lengths) {
    std::vector<int32_t> seq(len);
    for (int i = 0; i < len; ++i) seq[i] = i == 0 ? 101 : id(rng);
    b.Add(seq);
  }
  return b;
}

std::vector<float> EncodeRows(Encoder& enc, const TokenBatch& batch, int dim) {
  std::vector<float> out(batch.size() * dim, NAN);
  std::vector<float*> rows;
  for (size_t i = 0; i < batch.size(); ++i) rows.push_back(&out[i * dim]);
  const Status st = enc.Encode(batch, rows);
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double d = std::fabs(double(a[i]) - b[i]);
    worst = std::isfinite(d) ? std::max(worst, d) : INFINITY;
  }
  return worst;
}

double MinRowCosine(const std::vector<float>& a, const std::vector<float>& b,
                    int dim) {
  double worst = 1;
  for (size_t r = 0; r * dim < a.size(); ++r) {
    worst = std::min(worst, testing::Cosine(&a[r * dim], &b[r * dim], dim));
  }
  return worst;
}

class CudaEncoderLeversTest : public CudaEncoderTest {
 protected:
  void SetUp() override {
    CudaEncoderTest::SetUp();
    if (IsSkipped()) return;
    auto dir = testing::MakeMiniLmRandom();
    ASSERT_TRUE(dir.ok()) << dir.status();
    auto ck = LoadCheckpoint(*dir);
    ASSERT_TRUE(ck.ok()) << ck.status();
    dim_ = (*ck)->config.hidden_size;
    vocab_ = (*ck)->config.vocab_size;
    auto model = CudaModel::Create(*ck, 16384);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
  }
  std::unique_ptr<CudaEncoder> New(const CudaEncoderOptions& o) {
    auto enc = model_->NewCudaEncoder(o);
    EXPECT_TRUE(enc.ok()) << enc.status();
    return enc.ok() ? std::move(enc).value() : nullptr;
  }
  // Batches of 1 to 40 sequences, 1 to 512 tokens: the levers' tests.
  static const std::vector<std::vector<int>>& MixedBatches() {
    static const std::vector<std::vector<int>> batches = {
        {1}, {9}, {64, 3, 17}, {512, 200, 2, 130}, std::vector<int>(40, 50)};
    return batches;
  }
  std::shared_ptr<CudaModel> model_;
  int dim_ = 0, vocab_ = 0;
};

// Small batches replay captured graphs (from a shape's second use): the same
// vectors, bit for bit, as the same padded shapes run launch by launch, also
// when a replayed shape gets new ids and lengths (inputs are read from the
// fixed staging buffers, not baked into the graph).
TEST_F(CudaEncoderLeversTest, GraphReplayMatchesDirectPass) {
  CudaEncoderOptions direct_opt;
  direct_opt.graphs = false;
  auto graph = New(CudaEncoderOptions{});
  auto direct = New(direct_opt);
  ASSERT_TRUE(graph && direct);
  graph->SetTimer(CudaTimer::kTotal);  // reports whether a graph ran
  const std::vector<std::vector<int>> shapes = {
      {5}, {7}, {12, 30, 3}, {11, 29, 4}, {100, 2, 64, 17, 8, 90, 33, 5}};
  std::vector<int> many;
  for (int i = 0; i < 32; ++i) many.push_back(3 + (i * 37) % 120);
  std::vector<std::vector<int>> all = shapes;
  all.push_back(many);
  int replays = 0;
  for (int round = 0; round < 3; ++round) {
    for (size_t s = 0; s < all.size(); ++s) {
      const TokenBatch b = RandomBatch(all[s], vocab_, 7 * round + s);
      const auto g = EncodeRows(*graph, b, dim_);
      const auto d = EncodeRows(*direct, b, dim_);
      replays += graph->LastTimings().graph;
      EXPECT_EQ(MaxAbsDiff(g, d), 0.0)
          << "round " << round << " shape " << s << ", min cosine "
          << MinRowCosine(g, d, dim_);
      EXPECT_GT(graph->LastTimings().total_ms, 0.0);
    }
  }
  std::printf("graph encoder: %s; %d of %zu passes were graph replays\n",
              graph->description().c_str(), replays, 3 * all.size());
  // {5} and {7} share a padded shape, as do the two 3-sequence batches.
  EXPECT_GE(replays, int(2 * all.size()) - 2) << graph->description();
}

// The fused path (cuBLASLt bias+GELU epilogue in its tanh form, K bias
// dropped, V bias folded, vectorised LayerNorm) against the old kernels, and
// padding of small batches against none.
TEST_F(CudaEncoderLeversTest, FusedPathMatchesOldPath) {
  CudaEncoderOptions old_opt;
  old_opt.fused = false;
  old_opt.small_batch = 0;
  auto fused = New(CudaEncoderOptions{});
  auto old = New(old_opt);
  ASSERT_TRUE(fused && old);
  std::printf("fused: %s\nold: %s\n", fused->description().c_str(),
              old->description().c_str());
  for (const std::vector<int>& lens : MixedBatches()) {
    const TokenBatch b = RandomBatch(lens, vocab_, lens.size());
    const double c = MinRowCosine(EncodeRows(*fused, b, dim_),
                                  EncodeRows(*old, b, dim_), dim_);
    std::printf("%zu sequences, longest %d: min cosine fused-old %.7f\n",
                lens.size(), *std::max_element(lens.begin(), lens.end()), c);
    EXPECT_GE(c, 0.9999);
  }
  // The GELU epilogue was used for every shape (no fallback noted).
  EXPECT_EQ(fused->description().find("cublasLt GELU epilogue:"),
            std::string::npos)
      << fused->description();
}

// The FP8 path against fp16 on batches from 1 to 40 sequences (no shape may
// fall back to fp16), and its graph replays against its direct passes.
TEST_F(CudaEncoderLeversTest, Fp8PathMatchesFp16) {
  CudaEncoderOptions fp8_opt;
  fp8_opt.precision = CudaPrecision::kFp8;
  CudaEncoderOptions fp8_direct_opt = fp8_opt;
  fp8_direct_opt.graphs = false;
  auto fp8 = New(fp8_opt);
  auto fp8_direct = New(fp8_direct_opt);
  auto fp16 = New(CudaEncoderOptions{});
  ASSERT_TRUE(fp8 && fp8_direct && fp16);
  std::printf("fp8: %s\n", fp8->description().c_str());
  fp8->SetTimer(CudaTimer::kTotal);
  int replays = 0;
  for (int round = 0; round < 2; ++round) {
    for (const std::vector<int>& lens : MixedBatches()) {
      const TokenBatch b = RandomBatch(lens, vocab_, lens.size());
      const auto r8 = EncodeRows(*fp8, b, dim_);
      replays += fp8->LastTimings().graph;
      const double c = MinRowCosine(r8, EncodeRows(*fp16, b, dim_), dim_);
      std::printf("%zu sequences, longest %d: min cosine fp8-fp16 %.7f\n",
                  lens.size(), *std::max_element(lens.begin(), lens.end()), c);
      EXPECT_GE(c, 0.999);
      EXPECT_EQ(MaxAbsDiff(r8, EncodeRows(*fp8_direct, b, dim_)), 0.0);
    }
  }
  EXPECT_GE(replays, 3);  // round 2's small batches replay graphs
  EXPECT_EQ(fp8->description().find("fp8 off"), std::string::npos)
      << fp8->description();
  fp8->SetTimer(CudaTimer::kPhases);
  EncodeRows(*fp8, RandomBatch(std::vector<int>(64, 100), vocab_, 5), dim_);
  EXPECT_EQ(fp8->LastTimings().phases_ms.size(), 7u);
  // FP8 needs the fused path.
  fp8_opt.fused = false;
  EXPECT_FALSE(model_->NewCudaEncoder(fp8_opt).ok());
}

// Each subset of FP8 GEMMs (the others in fp16) against fp16, with graph
// replays against direct passes (all three printed beside them). The
// parsers are tested in cuda_options_test.
TEST_F(CudaEncoderLeversTest, Fp8GemmSubsetsMatchFp16) {
  using O = CudaEncoderOptions;
  auto fp16 = New(O{});
  ASSERT_TRUE(fp16);
  const auto& batches = MixedBatches();
  auto worst = [&](int gemms, bool graphs) {
    O o;
    o.precision = CudaPrecision::kFp8;
    o.fp8_gemms = gemms;
    o.graphs = graphs;
    auto enc = New(o);
    EXPECT_TRUE(enc);
    if (!enc) return std::pair{0.0, 1.0};
    EXPECT_EQ(enc->description().find("fp8 off"), std::string::npos)
        << enc->description();
    double c = 1, diff = 0;
    for (int round = 0; round < 2; ++round) {  // round 2 replays graphs
      for (size_t i = 0; i < batches.size(); ++i) {
        const TokenBatch b = RandomBatch(batches[i], vocab_, i);
        const auto r = EncodeRows(*enc, b, dim_);
        c = std::min(c, MinRowCosine(r, EncodeRows(*fp16, b, dim_), dim_));
        if (graphs && round == 1) {
          O d = o;
          d.graphs = false;
          auto direct = New(d);
          if (direct)
            diff = std::max(diff, MaxAbsDiff(r, EncodeRows(*direct, b, dim_)));
        }
      }
    }
    return std::pair{c, diff};
  };
  const double all = worst(O::kFp8Qkv | O::kFp8Up | O::kFp8Down, false).first;
  for (int gemms = 1; gemms < 7; ++gemms) {
    const auto [c, diff] = worst(gemms, true);
    std::printf("fp8 GEMMs %s: min cosine against fp16 %.7f (all three %.7f)\n",
                Fp8GemmsName(gemms).c_str(), c, all);
    EXPECT_GE(c, 0.999) << Fp8GemmsName(gemms);
    EXPECT_EQ(diff, 0.0) << Fp8GemmsName(gemms);
  }
}

// FP8 in some layers only (the others in fp16): against fp16, graph replays
// against direct passes; naming no layer of the model gives the fp16 vectors
// bit for bit.
TEST_F(CudaEncoderLeversTest, Fp8LayersMatchFp16) {
  using O = CudaEncoderOptions;
  auto fp16 = New(O{});
  ASSERT_TRUE(fp16);
  const auto& batches = MixedBatches();
  for (const char* layers : {"3-5", "0,2,4", "0", "40"}) {
    auto bits = ParseFp8Layers(layers);
    ASSERT_TRUE(bits.ok()) << bits.status();
    O o;
    o.precision = CudaPrecision::kFp8;
    o.fp8_layers = *bits;
    O d = o;
    d.graphs = false;
    auto enc = New(o);
    auto direct = New(d);
    ASSERT_TRUE(enc && direct);
    EXPECT_NE(enc->description().find(std::string("fp8 layers: ") + layers),
              std::string::npos)
        << enc->description();
    double c = 1, replay_diff = 0, fp16_diff = 0;
    for (int round = 0; round < 2; ++round) {  // round 2 replays graphs
      for (size_t i = 0; i < batches.size(); ++i) {
        const TokenBatch b = RandomBatch(batches[i], vocab_, i);
        const auto r = EncodeRows(*enc, b, dim_);
        const auto r16 = EncodeRows(*fp16, b, dim_);
        c = std::min(c, MinRowCosine(r, r16, dim_));
        fp16_diff = std::max(fp16_diff, MaxAbsDiff(r, r16));
        replay_diff =
            std::max(replay_diff, MaxAbsDiff(r, EncodeRows(*direct, b, dim_)));
      }
    }
    std::printf("fp8 layers %s: min cosine against fp16 %.7f\n", layers, c);
    EXPECT_GE(c, 0.999) << layers;
    EXPECT_EQ(replay_diff, 0.0) << layers;
    if (std::string(layers) == "40") {
      EXPECT_EQ(fp16_diff, 0.0);  // the model has 6 layers
    } else {
      EXPECT_GT(fp16_diff, 0.0) << layers;
    }
  }
}

// The phase timer: seven phases that add up to the total, results unchanged
// by timing, and nothing reported with the timer off.
TEST_F(CudaEncoderLeversTest, PhaseTimerSumsToTotal) {
  auto enc = New(CudaEncoderOptions{});
  ASSERT_TRUE(enc);
  std::vector<int> lens;
  for (int i = 0; i < 64; ++i) lens.push_back(20 + (i * 53) % 200);
  const TokenBatch b = RandomBatch(lens, vocab_, 3);
  const auto plain = EncodeRows(*enc, b, dim_);
  EXPECT_EQ(enc->LastTimings().total_ms, 0.0);
  EXPECT_TRUE(enc->LastTimings().phases_ms.empty());
  enc->SetTimer(CudaTimer::kPhases);
  const auto timed = EncodeRows(*enc, b, dim_);
  EXPECT_EQ(MaxAbsDiff(plain, timed), 0.0);
  const CudaTimings t = enc->LastTimings();
  ASSERT_EQ(t.phases_ms.size(), 7u);
  EXPECT_FALSE(t.graph);
  double sum = 0;
  std::string line;
  for (const auto& [name, ms] : t.phases_ms) {
    EXPECT_GT(ms, 0.0) << name;
    sum += ms;
    line += " " + name + " " + std::to_string(ms);
  }
  std::printf("phases (ms):%s; sum %.4f, total %.4f\n", line.c_str(), sum,
              t.total_ms);
  EXPECT_GT(t.total_ms, 0.0);
  EXPECT_LT(t.total_ms, 10000.0);
  EXPECT_LE(sum, t.total_ms * 1.001 + 1e-3);
  EXPECT_GE(sum, t.total_ms * 0.9);
  EXPECT_EQ(t.phases_ms.front().first, "embeddings");
  EXPECT_EQ(t.phases_ms.back().first, "pool");
}

}  // namespace
}  // namespace zv::embed
