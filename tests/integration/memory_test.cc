// Agent memory through the service (issue 17), against a real server on
// 127.0.0.1: a collection default TTL and per-item expiry on Upsert, Touch,
// the background sweep and automatic compaction, Stats and Describe, recency
// ranking in Search and SearchBatch, and an attached reader under the same
// clock rule.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "index/collection.h"
#include "tests/integration/test_util.h"

namespace zv::testing {
namespace {

namespace pb = zerovec::v1;
constexpr uint32_t kDim = 16;
constexpr int64_t kTtlMs = 3000;
constexpr int64_t kHourMs = 3'600'000;

std::string Id(int i) { return "m-" + std::to_string(i); }

class MemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = MakeTempDir("memory_test");
    service::ServerOptions options;
    options.data_dir = data_;
    options.sweep_interval = std::chrono::milliseconds(100);
    options.auto_compaction.tombstone_fraction = 0.2;
    options.auto_compaction.min_rows = 1;
    options.log = [](const std::string&) {};
    rs_ = StartServer(options);
    ASSERT_NE(rs_.server, nullptr);
    grpc::ClientContext ctx;
    pb::CreateCollectionRequest req;
    req.set_name("mem");
    req.set_dim(kDim);
    req.set_default_ttl_ms(kTtlMs);
    pb::CreateCollectionResponse resp;
    ASSERT_TRUE(rs_.stub->CreateCollection(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.collection().default_ttl_ms(), kTtlMs);
  }

  // Items 0-9 take the default TTL, 10-19 expire in an hour; even ones belong
  // to agent "a", odd ones to "b".
  void Remember() {
    pb::UpsertRequest req;
    req.set_collection("mem");
    const int64_t now = index::NowMs();
    for (int i = 0; i < 20; ++i) {
      pb::Item item = VectorItem(Id(i), VectorFor(Id(i), kDim),
                                 i % 2 ? "agent-b" : "agent-a");
      if (i >= 10) item.set_expires_at_ms(now + kHourMs);
      *req.add_items() = item;
    }
    grpc::ClientContext ctx;
    pb::UpsertResponse resp;
    ASSERT_TRUE(rs_.stub->Upsert(&ctx, req, &resp).ok());
  }

  std::vector<pb::Item> Get(const std::vector<std::string>& ids) {
    grpc::ClientContext ctx;
    pb::GetRequest req;
    req.set_collection("mem");
    for (const auto& id : ids) req.add_ids(id);
    pb::GetResponse resp;
    EXPECT_TRUE(rs_.stub->Get(&ctx, req, &resp).ok());
    return {resp.items().begin(), resp.items().end()};
  }

  grpc::Status Search(int i, pb::SearchResponse* resp,
                      const pb::Recency* recency = nullptr) {
    grpc::ClientContext ctx;
    pb::SearchRequest req;
    req.set_collection("mem");
    req.set_k(3);
    const auto v = VectorFor(Id(i), kDim);
    req.mutable_query()->mutable_vector()->mutable_values()->Add(v.begin(),
                                                                 v.end());
    if (recency) *req.mutable_recency() = *recency;
    return rs_.stub->Search(&ctx, req, resp);
  }

  bool Finds(int i) {
    pb::SearchResponse resp;
    EXPECT_TRUE(Search(i, &resp).ok());
    for (const auto& h : resp.hits()) {
      if (h.id() == Id(i)) return true;
    }
    return false;
  }

  grpc::Status Touch(pb::TouchRequest req, pb::TouchResponse* resp) {
    grpc::ClientContext ctx;
    if (req.collection().empty()) req.set_collection("mem");
    return rs_.stub->Touch(&ctx, req, resp);
  }

  pb::StatsResponse Stats() {
    grpc::ClientContext ctx;
    pb::StatsRequest req;
    req.set_collection("mem");
    pb::StatsResponse resp;
    EXPECT_TRUE(rs_.stub->Stats(&ctx, req, &resp).ok());
    return resp;
  }

  std::filesystem::path data_;
  RunningServer rs_;
};

TEST_F(MemoryTest, ItemsExpireAreRenewedSweptAndCompacted) {
  const int64_t before = index::NowMs();
  Remember();
  auto got = Get({Id(0), Id(12)});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_GE(got[0].expires_at_ms(), before + kTtlMs);
  EXPECT_LE(got[0].expires_at_ms(), index::NowMs() + kTtlMs);
  const int64_t expiry = got[0].expires_at_ms();  // items 0-9: one batch
  EXPECT_GE(got[1].expires_at_ms(), before + kHourMs);

  // Renew 0-2 for an hour; 3 by the default TTL again (neither field set).
  pb::TouchRequest touch;
  for (int i : {0, 1, 2}) touch.add_ids(Id(i));
  touch.add_ids("never-stored");
  touch.set_ttl_ms(kHourMs);
  pb::TouchResponse touched;
  ASSERT_TRUE(Touch(touch, &touched).ok());
  EXPECT_EQ(touched.touched(), 3u);
  got = Get({Id(1)});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_GE(got[0].expires_at_ms(), before + kHourMs);
  EXPECT_EQ(got[0].namespace_(), "agent-b");  // the item itself is unchanged

  pb::TouchRequest both;
  both.add_ids(Id(0));
  both.set_ttl_ms(5);
  both.set_expires_at_ms(index::NowMs() + 5);
  grpc::Status s = Touch(both, &touched);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("ttl_ms"), std::string::npos);
  pb::TouchRequest elsewhere;
  elsewhere.set_collection("nope");
  elsewhere.add_ids(Id(0));
  EXPECT_EQ(Touch(elsewhere, &touched).error_code(),
            grpc::StatusCode::NOT_FOUND);

  auto reader = index::AttachedCollection::Attach(data_, "mem");
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_LT(index::NowMs(), expiry) << "machine too slow";
  EXPECT_TRUE(Finds(5));

  // Past the TTL: 3-9 are gone from Search and Get at once, and the sweep
  // (every 100 ms) deletes them and the compactor rewrites the collection.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (index::NowMs() < expiry)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i : {3, 5, 9}) EXPECT_FALSE(Finds(i)) << i;
  for (int i : {0, 1, 2, 10, 19}) EXPECT_TRUE(Finds(i)) << i;
  EXPECT_TRUE(Get({Id(3), Id(9)}).empty());
  pb::StatsResponse stats;
  while (true) {
    stats = Stats();
    if (stats.expired_swept() >= 7 && stats.auto_compactions() >= 1) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "swept " << stats.expired_swept() << ", compactions "
        << stats.auto_compactions();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(stats.expired_swept(), 7u);
  EXPECT_EQ(stats.touched(), 3u);
  ASSERT_EQ(stats.collections_size(), 1);
  EXPECT_EQ(stats.collections(0).default_ttl_ms(), kTtlMs);
  // Swept and compacted: 13 live items left, no tombstones.
  while (Stats().collections(0).tombstones() != 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(Stats().collections(0).rows(), 13u);

  // The attached reader follows the new generation and agrees.
  ASSERT_TRUE((*reader)->Refresh().ok());
  index::SearchOptions o;
  o.k = 3;
  for (int i : {3, 5, 10}) {
    const auto v = VectorFor(Id(i), kDim);
    auto hits = (*reader)->Search(v, o);
    ASSERT_TRUE(hits.ok()) << hits.status();
    bool found = false;
    for (const auto& h : (*hits)[0]) found |= h.id == Id(i);
    EXPECT_EQ(found, i == 10) << i;
  }
}

TEST_F(MemoryTest, RecencyReranksAndBadParametersAreRejected) {
  // Two items with the same vector: "old" stored ten days ago, "new" now.
  const auto v = VectorFor("same", kDim);
  pb::UpsertRequest up;
  up.set_collection("mem");
  pb::Item old_item = VectorItem("old", v), new_item = VectorItem("new", v);
  const int64_t now = index::NowMs();
  old_item.set_timestamp_ms(now - 10 * 86'400'000LL);
  old_item.set_expires_at_ms(now + kHourMs);
  new_item.set_expires_at_ms(now + kHourMs);
  *up.add_items() = old_item;
  *up.add_items() = new_item;
  grpc::ClientContext uctx;
  pb::UpsertResponse uresp;
  ASSERT_TRUE(rs_.stub->Upsert(&uctx, up, &uresp).ok());

  grpc::ClientContext ctx;
  pb::SearchBatchRequest req;
  req.set_collection("mem");
  req.set_k(2);
  req.add_queries()->mutable_vector()->mutable_values()->Add(v.begin(),
                                                             v.end());
  req.mutable_recency()->set_half_life_ms(86'400'000);
  pb::SearchBatchResponse resp;
  ASSERT_TRUE(rs_.stub->SearchBatch(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.results(0).hits_size(), 2);
  EXPECT_EQ(resp.results(0).hits(0).id(), "new");
  EXPECT_NEAR(resp.results(0).hits(1).score(), std::exp2(-10.0), 1e-3);

  pb::Recency bad;
  bad.set_weight(0.5);  // no half-life
  pb::SearchResponse sresp;
  grpc::Status s = Search(0, &sresp, &bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("recency.half_life_ms"), std::string::npos)
      << s.error_message();
}

}  // namespace
}  // namespace zv::testing
