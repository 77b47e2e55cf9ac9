// The writer's live HNSW graph (hnsw_live.h): rows inserted a few at a time
// are found by searches running at the same time, a search never reads past
// its row limit, and the frozen graph is a piece that answers the same.
#include "index/hnsw_live.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "index/ann_index.h"
#include "index/test_util.h"

namespace zv::index {
namespace {

constexpr uint32_t kDim = 32;
constexpr uint64_t kRows = 3000;

class LiveGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("live");
    shm::SegmentOptions o;
    o.dim = kDim;
    o.metric = shm::Metric::kL2;
    auto w = shm::Writer::Create(dir_, o);
    ASSERT_TRUE(w.ok()) << w.status();
    writer_ = std::move(w).value();
    data_ = testing::RandomVectors(kRows, kDim, 7);
    ASSERT_TRUE(writer_->Reserve(kRows).ok());
    for (uint64_t r = 0; r < kRows; ++r) {
      float* row = writer_->MutableRow(r);
      std::copy_n(&data_[r * kDim], kDim, row);
      std::fill(row + kDim, row + writer_->info().row_stride, 0.0f);
      writer_->SetId(r, static_cast<int64_t>(r));
    }
    ASSERT_TRUE(writer_->Commit(kRows).ok());
  }
  // The padded query of row r.
  std::vector<float> Query(uint64_t r) const {
    std::vector<float> q(writer_->info().row_stride, 0.0f);
    std::copy_n(&data_[r * kDim], kDim, q.begin());
    return q;
  }
  // Top-1 of row r's own vector among graph rows below `limit`.
  int64_t Top1(const LiveGraph& g, uint64_t r, uint64_t limit,
               uint64_t* covered) const {
    TopK out(1, 1, shm::Metric::kL2);
    const auto q = Query(r);
    *covered = g.Search(*writer_, q.data(), 1, nullptr, 64, limit, &out);
    return out.rows[0];
  }

  std::filesystem::path dir_;
  std::unique_ptr<shm::Writer> writer_;
  std::vector<float> data_;
};

TEST_F(LiveGraphTest, SearchesFindRowsInsertedWhileTheyRun) {
  LiveGraph g(writer_->info(), 16, kHnswEfConstruction, /*begin=*/1000);
  const RowTable rows(*writer_, kRows);
  std::atomic<bool> done{false};
  std::atomic<int> searches{0}, wrong{0};
  std::thread searcher([&] {
    uint64_t covered = 0;
    while (!done.load()) {
      const uint64_t end = g.searchable();
      if (end == g.begin()) continue;
      const uint64_t r = end - 1;  // a published row
      const int64_t top = Top1(g, r, kRows, &covered);
      if (covered < end || covered > g.end() || top < 1000 ||
          top >= static_cast<int64_t>(covered))
        ++wrong;
      ++searches;
    }
  });
  while (g.end() < kRows) {
    // Rows are contiguous only within an extent (extents grow geometrically).
    const uint64_t n =
        std::min<uint64_t>({16, kRows - g.end(), rows.ContiguousFrom(g.end())});
    const Status s = g.Insert(rows, n, /*publish=*/g.end() + n == kRows);
    if (!s.ok()) {
      ADD_FAILURE() << s;
      break;
    }
  }
  done = true;
  searcher.join();
  EXPECT_GT(searches.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(g.size(), kRows - 1000);
  EXPECT_EQ(g.searchable(), kRows);  // published once the rows ran out

  // Every row finds itself; rows before the graph never appear.
  int found = 0;
  uint64_t covered = 0;
  for (uint64_t r = 1000; r < kRows; ++r)
    found += Top1(g, r, kRows, &covered) == static_cast<int64_t>(r);
  EXPECT_EQ(covered, kRows);
  EXPECT_GE(found, (kRows - 1000) * 98 / 100);
  EXPECT_EQ(Top1(g, 10, kRows, &covered) < 1000, false);

  // A limit inside the graph: nothing at or past it is returned or read.
  for (uint64_t r = 2500; r < 2600; ++r) {
    const int64_t top = Top1(g, r, 2000, &covered);
    EXPECT_LE(covered, 2000u);
    EXPECT_LT(top, 2000);
  }

  // Frozen, it is a piece over the same rows with the same answers.
  auto piece = g.Freeze(dir_, 1);
  ASSERT_TRUE(piece.ok()) << piece.status();
  EXPECT_EQ((*piece)->begin(), 1000u);
  EXPECT_EQ((*piece)->end(), kRows);
  int same = 0;
  for (uint64_t r = 1000; r < kRows; r += 7) {
    float d;
    int64_t top;
    const auto q = Query(r);
    (*piece)->Search(*writer_, q.data(), 1, 64, nullptr, &d, &top);
    same += top == Top1(g, r, kRows, &covered);
  }
  EXPECT_EQ(same, static_cast<int>((kRows - 1000 + 6) / 7));

  // A batch (spread over threads) answers each query as a search of it alone.
  constexpr size_t kBatch = 64;
  const size_t stride = writer_->info().row_stride;
  std::vector<float> batch(kBatch * stride);
  for (size_t i = 0; i < kBatch; ++i) {
    const auto q = Query(1000 + 23 * i);
    std::copy(q.begin(), q.end(), batch.begin() + i * stride);
  }
  TopK all(kBatch, 5, shm::Metric::kL2);
  EXPECT_EQ(g.Search(*writer_, batch.data(), kBatch, nullptr, 64, kRows, &all),
            kRows);
  for (size_t i = 0; i < kBatch; ++i) {
    TopK one(1, 5, shm::Metric::kL2);
    g.Search(*writer_, batch.data() + i * stride, 1, nullptr, 64, kRows, &one);
    for (int j = 0; j < 5; ++j) {
      EXPECT_EQ(all.rows[i * 5 + j], one.rows[j]) << "query " << i;
    }
  }
}

TEST_F(LiveGraphTest, InsertRefusesRowsTheTableDoesNotHold) {
  LiveGraph g(writer_->info(), 16, kHnswEfConstruction, 0);
  const RowTable few(*writer_, 10);
  EXPECT_TRUE(g.Insert(few, 10).ok());
  EXPECT_EQ(g.Insert(few, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.end(), 10u);
}

// Writes wait while the rows past the live graph exceed max_backlog, and get
// UNAVAILABLE (nothing written) when the wait times out.
TEST(HnswAdmissionTest, WritesWaitForABacklogAndTimeOut) {
  const auto dir = testing::MakeTempDir("admit");
  shm::SegmentOptions so;
  so.dim = kDim;
  auto w = shm::Writer::Create(dir, so);
  ASSERT_TRUE(w.ok()) << w.status();
  PieceOptions po;
  po.max_backlog = 10;
  SetPieceOptions(po);
  auto index = OpenHnswIndex(16, **w, dir);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_TRUE((*index)->AdmitWrite(std::chrono::milliseconds(0)).ok());
  const auto data = testing::RandomVectors(kRows, kDim, 9);
  ASSERT_TRUE((*w)->Reserve(kRows).ok());
  for (uint64_t r = 0; r < kRows; ++r) {
    float* row = (*w)->MutableRow(r);
    std::copy_n(&data[r * kDim], kDim, row);
    std::fill(row + kDim, row + (*w)->info().row_stride, 0.0f);
  }
  ASSERT_TRUE((*w)->Commit(kRows).ok());
  ASSERT_TRUE((*index)->Update(kRows).ok());
  // 3,000 rows behind: no inserter catches up in a millisecond.
  const Status late = (*index)->AdmitWrite(std::chrono::milliseconds(1));
  EXPECT_EQ(late.code(), StatusCode::kUnavailable) << late;
  EXPECT_NE(late.message().find("rows behind"), std::string::npos) << late;
  EXPECT_TRUE((*index)->AdmitWrite(std::chrono::minutes(5)).ok());
  SetPieceOptions(PieceOptions{});
}

}  // namespace
}  // namespace zv::index
