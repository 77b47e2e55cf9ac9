// Helpers shared by the quality tests: the bundled model on the CPU and
// row-major embeddings of a list of texts.
#ifndef ZEROVEC_TESTS_QUALITY_QUALITY_UTIL_H_
#define ZEROVEC_TESTS_QUALITY_QUALITY_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "embed/embedder.h"

namespace zv::quality {

inline constexpr char kModel[] = "models/zerovec-mini";

inline std::unique_ptr<embed::Embedder> CpuEmbedder(
    const char* model = kModel) {
  embed::EmbedderOptions options;
  options.model_dir = model;
  options.device = embed::DevicePreference::kCpu;
  auto embedder = embed::Embedder::Create(options);
  EXPECT_TRUE(embedder.ok()) << embedder.status();
  return embedder.ok() ? std::move(embedder).value() : nullptr;
}

// Row-major texts.size() x dim, L2-normalised by the model's Normalize module.
inline std::vector<float> Embed(embed::Embedder& embedder,
                                const std::vector<std::string>& texts) {
  const int dim = embedder.info().dim;
  std::vector<float> out(texts.size() * dim);
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<float*> rows(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) rows[i] = out.data() + i * dim;
  const Status status = embedder.EmbedInto(views, rows);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

}  // namespace zv::quality

#endif  // ZEROVEC_TESTS_QUALITY_QUALITY_UTIL_H_
