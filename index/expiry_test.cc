// Agent memory (issue 17): per-item expiry and a collection default TTL,
// Touch, the sweep and compaction, attached readers under the same clock rule,
// and time-aware ranking.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "index/collection.h"
#include "index/test_util.h"

namespace zv::index {
namespace {

using testing::IdOf;
using testing::MakeTempDir;
using testing::RandomVectors;

constexpr uint32_t kDim = 32;
constexpr int kRows = 300;
// Long enough to upsert, search and attach before it passes on a loaded
// 2-core machine; short enough to wait for.
constexpr int64_t kSoonMs = 3000;

void SleepUntil(int64_t ms) {
  while (NowMs() < ms)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

class ExpiryTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("expiry");
    auto db = Database::Open(dir_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(db).value();
    data_ = RandomVectors(kRows, kDim, 5, true);
  }

  std::shared_ptr<Collection> Create(int64_t default_ttl_ms = 0) {
    CollectionOptions o;
    o.dim = kDim;
    o.index.descriptor = GetParam();
    o.rows_per_extent = 128;
    o.default_ttl_ms = default_ttl_ms;
    auto c = db_->CreateCollection("mem", o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : nullptr;
  }

  // Rows [0, 50) expired already, [50, 100) expire at `soon`, the rest never.
  void UpsertMixed(Collection& c, int64_t soon) {
    std::vector<Record> recs(kRows);
    for (int i = 0; i < kRows; ++i) {
      recs[i].id = IdOf(i);
      recs[i].ns = i % 2 ? "odd" : "even";
      recs[i].timestamp_ms = 1000 + i;
      if (i < 50) recs[i].expires_at_ms = NowMs() - 1;
      if (i >= 50 && i < 100) recs[i].expires_at_ms = soon;
    }
    ASSERT_TRUE(c.Upsert(recs, data_).ok());
  }

  // Whether a search for row i's own vector finds id i (k 5), optionally
  // within its namespace.
  template <typename Searchable>
  bool Finds(const Searchable& c, int i, bool with_filter = false) {
    SearchOptions o;
    o.k = 5;
    if (with_filter) o.filter.ns = i % 2 ? "odd" : "even";
    auto r = c.Search(std::span(data_).subspan(i * kDim, kDim), o);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return false;
    for (const Hit& h : (*r)[0]) {
      if (h.id == IdOf(i)) return true;
    }
    return false;
  }

  bool Gets(const Collection& c, int i) {
    const std::string ids[] = {IdOf(i)};
    auto r = c.Get(ids);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && r->size() == 1;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Database> db_;
  std::vector<float> data_;
};

TEST_P(ExpiryTest, ExpiredRowsAreInvisibleToSearchGetAndAttachedReaders) {
  auto c = Create();
  const int64_t soon = NowMs() + kSoonMs;
  UpsertMixed(*c, soon);
  auto reader = AttachedCollection::Attach(dir_, "mem");
  ASSERT_TRUE(reader.ok()) << reader.status();

  for (int i : {3, 48}) {  // expired at upsert
    EXPECT_FALSE(Finds(*c, i)) << i;
    EXPECT_FALSE(Finds(*c, i, true)) << i;
    EXPECT_FALSE(Finds(**reader, i)) << i;
    EXPECT_FALSE(Gets(*c, i)) << i;
  }
  ASSERT_LT(NowMs(), soon) << "machine too slow for this test's clock";
  for (int i : {50, 77, 99, 100, 250}) {
    EXPECT_TRUE(Finds(*c, i)) << i;
    EXPECT_TRUE(Finds(**reader, i)) << i;
    EXPECT_TRUE(Gets(*c, i)) << i;
  }
  SleepUntil(soon);
  // No sweep has run: the clock rule alone hides them, in both processes'
  // view of the segment, with and without a filter.
  for (int i : {50, 77, 99}) {
    EXPECT_FALSE(Finds(*c, i)) << i;
    EXPECT_FALSE(Finds(*c, i, true)) << i;
    EXPECT_FALSE(Finds(**reader, i)) << i;
    EXPECT_FALSE(Gets(*c, i)) << i;
    auto contains = c->Contains(IdOf(i));
    ASSERT_TRUE(contains.ok());
    EXPECT_FALSE(*contains);
  }
  for (int i : {100, 250}) {
    EXPECT_TRUE(Finds(*c, i)) << i;
    EXPECT_TRUE(Finds(**reader, i)) << i;
  }
}

TEST_P(ExpiryTest, SweepTombstonesThemAndCompactionReclaimsTheSpace) {
  auto c = Create();
  const int64_t soon = NowMs() + 200;
  UpsertMixed(*c, soon);
  SleepUntil(soon);
  auto swept = c->SweepExpired(NowMs());
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(*swept, 100u);
  EXPECT_EQ(c->Describe().tombstones, 100u);
  EXPECT_EQ(c->Describe().expired_swept, 100u);
  swept = c->SweepExpired(NowMs());
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(*swept, 0u);
  auto compacted = c->Compact();
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  EXPECT_EQ(compacted->rows_after, static_cast<uint64_t>(kRows - 100));
  EXPECT_FALSE(Gets(*c, 60));
  EXPECT_TRUE(Finds(*c, 260));
}

TEST_P(ExpiryTest, CompactionDropsExpiredRowsTheSweepHasNotReached) {
  auto c = Create();
  const int64_t soon = NowMs() + 200;
  UpsertMixed(*c, soon);
  SleepUntil(soon);
  auto compacted = c->Compact();
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  EXPECT_EQ(compacted->rows_after, static_cast<uint64_t>(kRows - 100));
  c.reset();
  db_.reset();
  auto db = Database::Open(dir_);
  ASSERT_TRUE(db.ok()) << db.status();
  db_ = std::move(db).value();
  auto reopened = db_->GetCollection("mem");
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->Describe().rows, static_cast<uint64_t>(kRows - 100));
  auto contains = (*reopened)->Contains(IdOf(70));
  ASSERT_TRUE(contains.ok());
  EXPECT_FALSE(*contains);
}

TEST_P(ExpiryTest, TouchRenewsLiveItemsOnly) {
  auto c = Create();
  const int64_t soon = NowMs() + kSoonMs;
  UpsertMixed(*c, soon);
  const std::vector<std::string> ids = {IdOf(3),  IdOf(50),  IdOf(51),
                                        IdOf(51), IdOf(200), "no-such-id"};
  const int64_t later = NowMs() + 3'600'000;
  auto touched = c->Touch(ids, later);
  ASSERT_TRUE(touched.ok()) << touched.status();
  EXPECT_EQ(*touched, 3u);  // 3 expired already, 51 once, the unknown id not
  SleepUntil(soon);
  EXPECT_TRUE(Finds(*c, 50));
  EXPECT_TRUE(Finds(*c, 51));
  EXPECT_FALSE(Finds(*c, 52));
  const std::string id50[] = {IdOf(50)};
  auto got = c->Get(id50);
  ASSERT_TRUE(got.ok() && got->size() == 1);
  EXPECT_EQ((*got)[0].record.expires_at_ms, later);
  EXPECT_EQ((*got)[0].record.timestamp_ms, 1050);  // the item is unchanged
  EXPECT_EQ((*got)[0].vector, std::vector<float>(data_.begin() + 50 * kDim,
                                                 data_.begin() + 51 * kDim));
  // 0 without a default TTL: never expires any more.
  touched = c->Touch(id50, 0);
  ASSERT_TRUE(touched.ok());
  got = c->Get(id50);
  ASSERT_TRUE(got.ok() && got->size() == 1);
  EXPECT_EQ((*got)[0].record.expires_at_ms, 0);
  EXPECT_FALSE(c->Touch(id50, -5).ok());
}

TEST_P(ExpiryTest, DefaultTtlAppliesToUpsertsBulkLoadsAndTouchAndPersists) {
  auto c = Create(/*default_ttl_ms=*/kSoonMs);
  const int64_t before = NowMs();
  std::vector<Record> recs(4);
  for (int i = 0; i < 4; ++i) recs[i].id = IdOf(i);
  recs[3].expires_at_ms = before + 3'600'000;  // its own expiry wins
  ASSERT_TRUE(c->Upsert(recs, std::span(data_).subspan(0, 4 * kDim)).ok());
  {
    auto appender = c->StartBulkAppend();
    ASSERT_TRUE(appender.ok());
    std::vector<Record> bulk(2);
    bulk[0].id = IdOf(4);
    bulk[1].id = IdOf(5);
    auto rows = (*appender)->Reserve(bulk);
    ASSERT_TRUE(rows.ok());
    for (int i = 0; i < 2; ++i) {
      std::copy_n(data_.begin() + (4 + i) * kDim, kDim, rows->rows[i]);
    }
    ASSERT_TRUE((*appender)->Commit(*rows, bulk).ok());
    ASSERT_TRUE((*appender)->Finish().ok());
  }
  const std::string ids[] = {IdOf(0), IdOf(3), IdOf(4)};
  auto got = c->Get(ids);
  ASSERT_TRUE(got.ok() && got->size() == 3);
  EXPECT_GE((*got)[0].record.expires_at_ms, before + kSoonMs);
  EXPECT_LE((*got)[0].record.expires_at_ms, NowMs() + kSoonMs);
  EXPECT_EQ((*got)[1].record.expires_at_ms, before + 3'600'000);
  EXPECT_GE((*got)[2].record.expires_at_ms, before + kSoonMs);

  SleepUntil((*got)[0].record.expires_at_ms);
  SleepUntil((*got)[2].record.expires_at_ms);
  EXPECT_FALSE(Gets(*c, 0));
  EXPECT_FALSE(Gets(*c, 4));
  EXPECT_TRUE(Gets(*c, 3));
  // Touch with 0 renews by the default TTL.
  const std::string id3[] = {IdOf(3)};
  ASSERT_TRUE(c->Touch(id3, 0).ok());
  got = c->Get(id3);
  ASSERT_TRUE(got.ok() && got->size() == 1);
  EXPECT_LE((*got)[0].record.expires_at_ms, NowMs() + kSoonMs);

  c.reset();
  db_.reset();
  auto db = Database::Open(dir_);
  ASSERT_TRUE(db.ok()) << db.status();
  auto reopened = (*db)->GetCollection("mem");
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->Describe().default_ttl_ms, kSoonMs);
}

INSTANTIATE_TEST_SUITE_P(Indexes, ExpiryTest,
                         ::testing::Values("Flat", "HNSW16"));

// ---------------------------------------------------------------------------
// Time-aware ranking

class RecencyTest : public ::testing::Test {
 protected:
  static constexpr int64_t kNow = 1'700'000'000'000;
  static constexpr int64_t kDay = 86'400'000;

  // Three items along e0: "old" (similarity 1.0, 10 days old), "recent"
  // (0.9, one hour), "future" (0.5, timestamp after now: age 0).
  std::shared_ptr<Collection> Create(shm::Metric metric) {
    dir_ = MakeTempDir("recency");
    auto db = Database::Open(dir_);
    EXPECT_TRUE(db.ok());
    db_ = std::move(db).value();
    CollectionOptions o;
    o.dim = kDim;
    o.metric = metric;
    auto c = db_->CreateCollection("r", o);
    EXPECT_TRUE(c.ok());
    std::vector<float> v(3 * kDim, 0.0f);
    v[0] = 1.0f;
    v[kDim] = 0.9f, v[kDim + 1] = std::sqrt(1 - 0.81f);
    v[2 * kDim] = 0.5f, v[2 * kDim + 1] = std::sqrt(0.75f);
    std::vector<Record> recs(3);
    recs[0] = {.id = "old", .timestamp_ms = kNow - 10 * kDay};
    recs[1] = {.id = "recent", .timestamp_ms = kNow - 3'600'000};
    recs[2] = {.id = "future", .timestamp_ms = kNow + kDay};
    EXPECT_TRUE((*c)->Upsert(recs, v).ok());
    return *c;
  }

  std::vector<Hit> Search(const Collection& c, std::optional<Recency> r,
                          int k = 3) {
    std::vector<float> q(kDim, 0.0f);
    q[0] = 1.0f;
    SearchOptions o;
    o.k = k;
    o.recency = r;
    auto hits = c.Search(q, o);
    EXPECT_TRUE(hits.ok()) << hits.status();
    return hits.ok() ? (*hits)[0] : std::vector<Hit>();
  }

  std::filesystem::path dir_;
  std::unique_ptr<Database> db_;
};

TEST_F(RecencyTest, DecayMultipliesSimilarityByHalfLives) {
  auto c = Create(shm::Metric::kInnerProduct);
  auto plain = Search(*c, std::nullopt);
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain[0].id, "old");

  Recency r{.half_life_ms = kDay, .now_ms = kNow};
  auto hits = Search(*c, r);
  ASSERT_EQ(hits.size(), 3u);
  EXPECT_EQ(hits[0].id, "recent");  // 0.9 x 0.5^(1/24)
  EXPECT_NEAR(hits[0].score, 0.9 * std::exp2(-1.0 / 24), 1e-5);
  EXPECT_EQ(hits[1].id, "future");  // 0.5 x 1
  EXPECT_NEAR(hits[1].score, 0.5, 1e-5);
  EXPECT_EQ(hits[2].id, "old");  // 1.0 x 0.5^10
  EXPECT_NEAR(hits[2].score, std::exp2(-10.0), 1e-6);
  // k applies after the re-ranking.
  auto top1 = Search(*c, r, 1);
  ASSERT_EQ(top1.size(), 1u);
  EXPECT_EQ(top1[0].id, "recent");
  // The candidates are the best by similarity: with one candidate only
  // "old" is re-scored.
  r.candidates = 1;
  top1 = Search(*c, r, 1);
  ASSERT_EQ(top1.size(), 1u);
  EXPECT_EQ(top1[0].id, "old");
}

TEST_F(RecencyTest, AdditiveWeightAndL2AndBadParameters) {
  auto c = Create(shm::Metric::kInnerProduct);
  Recency r{.half_life_ms = kDay, .weight = 0.2, .now_ms = kNow};
  auto hits = Search(*c, r);
  ASSERT_EQ(hits.size(), 3u);
  // recent 0.9 + 0.2 x 0.97 = 1.094 > old 1.0 + 0.2 / 1024 > future 0.7.
  EXPECT_EQ(hits[0].id, "recent");
  EXPECT_NEAR(hits[0].score, 0.9 + 0.2 * std::exp2(-1.0 / 24), 1e-5);
  EXPECT_EQ(hits[1].id, "old");
  EXPECT_EQ(hits[2].id, "future");

  std::vector<float> q(kDim, 0.0f);
  q[0] = 1.0f;
  for (Recency bad : {Recency{.half_life_ms = 0}, Recency{.half_life_ms = -1},
                      Recency{.half_life_ms = 1, .weight = -1},
                      Recency{.half_life_ms = 1, .weight = NAN},
                      Recency{.half_life_ms = 1, .candidates = kMaxK + 1}}) {
    SearchOptions o;
    o.recency = bad;
    auto s = c->Search(q, o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("recency."), std::string::npos)
        << s.status();
  }

  auto l2 = Create(shm::Metric::kL2);
  auto near = Search(*l2, std::nullopt);
  ASSERT_EQ(near.size(), 3u);
  EXPECT_EQ(near[0].id, "old");  // distance 0
  auto decayed = Search(*l2, Recency{.half_life_ms = kDay, .now_ms = kNow});
  ASSERT_EQ(decayed.size(), 3u);
  // Lower stays better: old 0 / 2^-10 = 0, recent 0.2 / 0.97, future 1.0.
  EXPECT_EQ(decayed[0].id, "old");
  EXPECT_EQ(decayed[1].id, "recent");
  EXPECT_NEAR(decayed[1].score, 0.2 / std::exp2(-1.0 / 24), 1e-4);
  EXPECT_EQ(decayed[2].id, "future");
}

}  // namespace
}  // namespace zv::index
