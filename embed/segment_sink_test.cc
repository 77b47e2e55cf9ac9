#include "embed/segment_sink.h"

#include <gtest/gtest.h>

#include <cmath>

#include "embed/testing/test_checkpoint.h"

namespace zv::embed {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Embedder> TinyEmbedder() {
  fs::path dir = testing::MakeTempDir("sink_model");
  testing::TinyBertOptions o;
  o.hidden = 64;  // head_dim 32: a shape the CUDA encoder serves too
  o.heads = 2;
  EXPECT_TRUE(testing::WriteTinyBert(dir, o).ok());
  EmbedderOptions opt;
  opt.model_dir = dir;
  auto emb = Embedder::Create(opt);  // kAuto: CUDA where built and present
  EXPECT_TRUE(emb.ok()) << emb.status();
  return emb.ok() ? std::move(emb).value() : nullptr;
}

TEST(SegmentSinkTest, RowsInSegmentMatchPlainBuffer) {
  auto emb = TinyEmbedder();
  ASSERT_TRUE(emb);
  const int dim = emb->info().dim;
  shm::SegmentOptions so;
  so.dim = dim;
  so.rows_per_extent = 8;  // several extents, registered as they appear
  const fs::path seg_dir = testing::MakeTempDir("sink_seg") / "seg";
  auto writer = shm::Writer::Create(seg_dir, so);
  ASSERT_TRUE(writer.ok()) << writer.status();

  std::vector<std::string> texts;
  for (int i = 0; i < 20; ++i)
    texts.push_back("the quick fox " + std::to_string(i));
  std::vector<std::string_view> views(texts.begin(), texts.end());
  {
    SegmentSink sink(*emb, **writer);
    ASSERT_TRUE((*writer)->Reserve(5).ok());
    ASSERT_TRUE(sink.Embed({views.data(), 5}, 0).ok());
    ASSERT_TRUE((*writer)->Commit(5).ok());
    ASSERT_TRUE((*writer)->Reserve(15).ok());  // grows into new extents
    ASSERT_TRUE(sink.Embed({views.data() + 5, 15}, 5).ok());
    ASSERT_TRUE((*writer)->Commit(20).ok());
    // Rows outside [committed, reserved) are refused.
    EXPECT_EQ(sink.Embed({views.data(), 1}, 3).code(), StatusCode::kOutOfRange);
  }
  std::printf("device: %s\n", emb->device_description().c_str());

  std::vector<float> plain(texts.size() * dim);
  std::vector<float*> rows;
  for (size_t i = 0; i < texts.size(); ++i) rows.push_back(&plain[i * dim]);
  ASSERT_TRUE(emb->EmbedInto(views, rows).ok());

  auto reader = shm::Reader::Attach(seg_dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ((*reader)->committed(), 20u);
  const uint32_t stride = (*reader)->info().row_stride;
  for (size_t i = 0; i < texts.size(); ++i) {
    const float* row = (*reader)->Row(i);
    double dot = 0, na = 0, nb = 0;
    for (int j = 0; j < dim; ++j) {
      dot += double{row[j]} * plain[i * dim + j];
      na += double{row[j]} * row[j];
      nb += double{plain[i * dim + j]} * plain[i * dim + j];
    }
    EXPECT_GT(dot / std::sqrt(na * nb), 0.99999) << "row " << i;
    for (uint32_t j = dim; j < stride; ++j) EXPECT_EQ(row[j], 0.f) << "padding";
  }
}

TEST(SegmentSinkTest, DimensionMismatchIsRefused) {
  auto emb = TinyEmbedder();
  ASSERT_TRUE(emb);
  shm::SegmentOptions so;
  so.dim = emb->info().dim + 1;
  auto writer =
      shm::Writer::Create(testing::MakeTempDir("sink_dim") / "seg", so);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Reserve(1).ok());
  std::string_view t = "x";
  const Status s = EmbedIntoSegment(*emb, **writer, {&t, 1}, 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dim"), std::string::npos);
}

}  // namespace
}  // namespace zv::embed
