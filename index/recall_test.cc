// Recall@10 of the in-place HNSW and of IVF-PQ against exact search, on 100k
// embedding-like vectors of dim 384, at the default search parameters.
#include <faiss/utils/distances.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "index/collection.h"
#include "index/test_util.h"

namespace zv::index {
namespace {

constexpr uint32_t kDim = 384;
constexpr size_t kRows = 100000, kQueries = 200;
constexpr int kK = 10;

class RecallTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = std::make_unique<std::vector<float>>(
        testing::LatentClustered(kRows, kQueries, kDim, 1000, 16, 2026));
    // Exact reference: faiss brute force on a private copy of the rows.
    truth_ = std::make_unique<std::vector<int64_t>>(kQueries * kK);
    std::vector<float> d(kQueries * kK);
    faiss::knn_inner_product(Queries(), data_->data(), kDim, kQueries, kRows,
                             kK, d.data(), truth_->data());
  }
  static void TearDownTestSuite() {
    data_.reset();
    truth_.reset();
  }
  static const float* Queries() { return data_->data() + kRows * kDim; }

  double Recall(const std::string& descriptor) {
    const auto dir = testing::NewTempDir("recall");
    auto db = Database::Open(dir);
    EXPECT_TRUE(db.ok());
    CollectionOptions o;
    o.dim = kDim;
    o.index.descriptor = descriptor;
    auto c = (*db)->CreateCollection("r", o);
    EXPECT_TRUE(c.ok()) << c.status();
    const auto t0 = std::chrono::steady_clock::now();
    constexpr size_t kBatch = 5000;
    for (size_t first = 0; first < kRows; first += kBatch) {
      std::vector<Record> recs(kBatch);
      for (size_t i = 0; i < kBatch; ++i)
        recs[i].id = std::to_string(first + i);
      EXPECT_TRUE((*c)->Upsert(recs, std::span(*data_).subspan(first * kDim,
                                                               kBatch * kDim))
                      .ok());
    }
    const auto t1 = std::chrono::steady_clock::now();
    SearchOptions so;
    so.k = kK;
    size_t hits = 0;
    for (size_t q = 0; q < kQueries; ++q) {
      auto r = (*c)->Search(std::span(Queries() + q * kDim, kDim), so);
      EXPECT_TRUE(r.ok());
      for (const Hit& h : (*r)[0]) {
        const int64_t row = std::stoll(h.id);
        for (int j = 0; j < kK; ++j) hits += (*truth_)[q * kK + j] == row;
      }
    }
    const auto t2 = std::chrono::steady_clock::now();
    const double recall = static_cast<double>(hits) / (kQueries * kK);
    std::printf(
        "%s: recall@10 = %.4f (build %.1f s, %.3f ms/query single-threaded "
        "client)\n",
        descriptor.c_str(), recall,
        std::chrono::duration<double>(t1 - t0).count(),
        std::chrono::duration<double, std::milli>(t2 - t1).count() / kQueries);
    return recall;
  }

  static std::unique_ptr<std::vector<float>> data_;
  static std::unique_ptr<std::vector<int64_t>> truth_;
};

std::unique_ptr<std::vector<float>> RecallTest::data_;
std::unique_ptr<std::vector<int64_t>> RecallTest::truth_;

TEST_F(RecallTest, HnswAtLeast95Percent) { EXPECT_GE(Recall("HNSW32"), 0.95); }

TEST_F(RecallTest, IvfPqAtLeast80Percent) {
  EXPECT_GE(Recall("IVF1024,PQ48"), 0.80);
}

}  // namespace
}  // namespace zv::index
