// SearchCoalescer over a real (CPU) collection: concurrent single-query
// searches gathered into batches answer exactly what each would alone, and a
// caller whose query is invalid fails alone.
#include "service/coalescer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <thread>

#include "index/test_util.h"

namespace zv::service {
namespace {

constexpr uint32_t kDim = 64;
constexpr int kThreads = 16, kRounds = 8;

class CoalescerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = index::Database::Open(index::testing::MakeTempDir("coalescer"));
    ASSERT_TRUE(db.ok());
    db_ = std::move(db).value();
    index::CollectionOptions o;
    o.dim = kDim;
    auto coll = db_->CreateCollection("c", o);
    ASSERT_TRUE(coll.ok());
    coll_ = *coll;
    // Enough rows that one search takes a while on the CPU, so concurrent
    // callers overlap with a running batch.
    const int n = 20000;
    const std::vector<float> v = index::testing::RandomVectors(n, kDim, 7);
    std::vector<index::Record> recs(n);
    for (int i = 0; i < n; ++i) {
      recs[i].id = "id" + std::to_string(i);
      recs[i].ns = i % 2 ? "odd" : "even";
    }
    ASSERT_TRUE(coll_->Upsert(recs, v).ok());
    queries_ = index::testing::RandomVectors(kThreads * kRounds, kDim, 8);
  }

  std::span<const float> Query(int i) const {
    return {queries_.data() + size_t(i) * kDim, kDim};
  }

  // Every thread's searches, through `c`, equal the collection's own answers.
  void RunAndCompare(SearchCoalescer& c, const index::SearchOptions& o) {
    std::vector<std::vector<index::Hit>> got(kThreads * kRounds);
    std::barrier start(kThreads);
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t) {
      pool.emplace_back([&, t] {
        start.arrive_and_wait();
        for (int r = 0; r < kRounds; ++r) {
          const int q = t * kRounds + r;
          auto res = c.Search(coll_, Query(q), 1, o);
          ASSERT_TRUE(res.ok()) << res.status().ToString();
          ASSERT_EQ(res->size(), 1u);
          got[q] = std::move(res->at(0));
        }
      });
    }
    for (auto& th : pool) th.join();
    for (int q = 0; q < kThreads * kRounds; ++q) {
      auto want = coll_->Search(Query(q), o);
      ASSERT_TRUE(want.ok());
      ASSERT_EQ(got[q].size(), want->at(0).size()) << q;
      for (size_t j = 0; j < got[q].size(); ++j) {
        EXPECT_EQ(got[q][j].id, want->at(0)[j].id) << q;
        EXPECT_EQ(got[q][j].score, want->at(0)[j].score) << q;
      }
    }
  }

  std::unique_ptr<index::Database> db_;
  std::shared_ptr<index::Collection> coll_;
  std::vector<float> queries_;
};

TEST_F(CoalescerTest, BatchedAnswersEqualSingleOnes) {
  SearchCoalescer c(std::chrono::milliseconds(50), 1024);
  index::SearchOptions o;
  o.k = 10;
  RunAndCompare(c, o);
  EXPECT_EQ(c.batched_queries(), uint64_t{kThreads * kRounds});
  // 16 callers at once against a search that takes a while: some shared.
  EXPECT_LT(c.batches(), c.batched_queries());
  o.filter.ns = "odd";  // another key: batches of its own
  RunAndCompare(c, o);
}

TEST_F(CoalescerTest, WindowZeroRunsEachAlone) {
  SearchCoalescer c(std::chrono::microseconds(0), 1024);
  index::SearchOptions o;
  o.k = 5;
  RunAndCompare(c, o);
  EXPECT_EQ(c.batches(), 0u);
}

TEST_F(CoalescerTest, InvalidQueryFailsAlone) {
  SearchCoalescer c(std::chrono::milliseconds(20), 1024);
  index::SearchOptions o;
  std::vector<float> bad(Query(0).begin(), Query(0).end());
  bad[3] = std::nanf("");
  std::atomic<int> ok{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t) {
    pool.emplace_back([&, t] {
      if (c.Search(coll_, Query(t), 1, o).ok()) ++ok;
    });
  }
  auto res = c.Search(coll_, bad, 1, o);
  for (auto& th : pool) th.join();
  EXPECT_EQ(res.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ok.load(), 8);
}

}  // namespace
}  // namespace zv::service
