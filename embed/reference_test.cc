// CPU encoder against vectors computed with PyTorch/transformers from the same
// checkpoints (tests/data/reference/*.jsonl). Fails when the data is missing.
#include <gtest/gtest.h>

#include <filesystem>

#include "embed/cpu_gemm.h"
#include "embed/embedder.h"
#include "embed/testing/test_checkpoint.h"

namespace zv::embed {
namespace {

namespace fs = std::filesystem;

void ExpectMatchesAt(const fs::path& model_dir, const fs::path& reference,
                     CpuPrecision precision) {
  auto refs = testing::ReadReference(reference);
  ASSERT_TRUE(refs.ok()) << refs.status();
  ASSERT_FALSE(refs->empty());
  EmbedderOptions opt;
  opt.model_dir = model_dir;
  opt.device = DevicePreference::kCpu;
  opt.cpu_precision = precision;
  auto emb = Embedder::Create(opt);
  ASSERT_TRUE(emb.ok()) << emb.status();
  const int dim = (*emb)->info().dim;
  std::vector<std::string_view> texts;
  std::vector<float> out(refs->size() * dim);
  std::vector<float*> rows;
  for (size_t i = 0; i < refs->size(); ++i) {
    texts.push_back((*refs)[i].text);
    rows.push_back(&out[i * dim]);
    ASSERT_EQ((*refs)[i].vector.size(), static_cast<size_t>(dim));
  }
  ASSERT_TRUE((*emb)->EmbedInto(texts, rows).ok());
  double worst = 1;
  for (size_t i = 0; i < refs->size(); ++i) {
    const double cos = testing::Cosine(rows[i], (*refs)[i].vector.data(), dim);
    worst = std::min(worst, cos);
    EXPECT_GE(cos, 0.999) << "sentence " << i << ": " << texts[i];
  }
  std::printf("%s: %zu sentences, min cosine CPU (%s) vs reference %.6f\n",
              reference.filename().c_str(), refs->size(),
              (*emb)->device_description().c_str(), worst);
}

// Each CPU GEMM precision (bf16 where this CPU runs it natively) against the
// same fp32 PyTorch vectors.
std::vector<CpuPrecision> Precisions() {
  std::vector<CpuPrecision> p = {CpuPrecision::kFp32};
  if (cpu::Bf16Native()) p.push_back(CpuPrecision::kBf16);
  return p;
}

void ExpectMatchesReference(const fs::path& model_dir,
                            const fs::path& reference) {
  for (CpuPrecision p : Precisions()) {
    SCOPED_TRACE(p == CpuPrecision::kBf16 ? "bf16" : "fp32");
    ExpectMatchesAt(model_dir, reference, p);
  }
}

TEST(ReferenceTest, ZerovecMiniMatchesPytorch) {
  ExpectMatchesReference("models/zerovec-mini",
                         "tests/data/reference/zerovec-mini.jsonl");
}

// The issue-20 model, when its folder and reference vectors are here (both
// git-ignored until it becomes the default; tools/model/device_l6.sh writes
// them).
TEST(ReferenceTest, ZerovecL6MatchesPytorch) {
  if (!fs::exists("models/zerovec-l6/model.safetensors") ||
      !fs::exists("tests/data/reference/zerovec-l6.jsonl")) {
    GTEST_SKIP() << "models/zerovec-l6 or its reference vectors are not here";
  }
  ExpectMatchesReference("models/zerovec-l6",
                         "tests/data/reference/zerovec-l6.jsonl");
}

TEST(ReferenceTest, MiniLmRandomMatchesPytorch) {
  auto dir = testing::MakeMiniLmRandom();
  ASSERT_TRUE(dir.ok()) << dir.status();
  ExpectMatchesReference(*dir, "tests/data/reference/minilm_random.jsonl");
}

}  // namespace
}  // namespace zv::embed
