// Compaction through the service against a real server on 127.0.0.1: the
// Compact RPC (result, errors, auth, Stats), searches answering while it runs,
// an attached reader following it, and the automatic tombstone trigger.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <set>
#include <thread>

#include "index/collection.h"
#include "tests/integration/test_util.h"

namespace zv::testing {
namespace {

namespace pb = zerovec::v1;
using Clock = std::chrono::steady_clock;
constexpr uint32_t kDim = 16;

std::string Id(int i) { return "id-" + std::to_string(i); }

class CompactionTest : public ::testing::Test {
 protected:
  void Start(service::ServerOptions options = {}) {
    data_ = MakeTempDir("compaction_test");
    options.data_dir = data_;
    options.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> l(log_mu_);
      log_.push_back(line);
    };
    rs_ = StartServer(options);
    ASSERT_NE(rs_.server, nullptr);
  }

  void Create(const std::string& name) {
    grpc::ClientContext ctx;
    pb::CreateCollectionRequest req;
    req.set_name(name);
    req.set_dim(kDim);
    pb::CreateCollectionResponse resp;
    ASSERT_TRUE(rs_.stub->CreateCollection(&ctx, req, &resp).ok());
  }

  // Upserts ids [first, first + n) with VectorFor(id), in batches.
  void Fill(const std::string& name, int first, int n) {
    for (int b = first; b < first + n; b += 1000) {
      pb::UpsertRequest req;
      req.set_collection(name);
      for (int i = b; i < std::min(b + 1000, first + n); ++i)
        *req.add_items() = VectorItem(Id(i), VectorFor(Id(i), kDim));
      grpc::ClientContext ctx;
      pb::UpsertResponse resp;
      ASSERT_TRUE(rs_.stub->Upsert(&ctx, req, &resp).ok());
    }
  }

  // Deletes every `step`-th id of [0, n), in batches; returns how many.
  int DeleteEvery(const std::string& name, int n, int step) {
    int total = 0;
    for (int b = 0; b < n; b += 1000 * step) {
      pb::DeleteRequest req;
      req.set_collection(name);
      for (int i = b; i < std::min(b + 1000 * step, n); i += step)
        req.add_ids(Id(i));
      grpc::ClientContext ctx;
      pb::DeleteResponse resp;
      EXPECT_TRUE(rs_.stub->Delete(&ctx, req, &resp).ok());
      EXPECT_EQ(resp.deleted(), static_cast<uint64_t>(req.ids_size()));
      total += req.ids_size();
    }
    return total;
  }

  grpc::Status Compact(const std::string& name, pb::CompactResponse* resp,
                       const std::string& token = "") {
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    pb::CompactRequest req;
    req.set_collection(name);
    return rs_.stub->Compact(&ctx, req, resp);
  }

  pb::CollectionInfo Describe(const std::string& name) {
    grpc::ClientContext ctx;
    pb::DescribeCollectionRequest req;
    req.set_name(name);
    pb::CollectionInfo info;
    EXPECT_TRUE(rs_.stub->DescribeCollection(&ctx, req, &info).ok());
    return info;
  }

  pb::StatsResponse Stats() {
    grpc::ClientContext ctx;
    pb::StatsResponse resp;
    EXPECT_TRUE(rs_.stub->Stats(&ctx, {}, &resp).ok());
    return resp;
  }

  grpc::Status Search(const std::string& name, const std::vector<float>& q,
                      int k, pb::SearchResponse* resp) {
    grpc::ClientContext ctx;
    pb::SearchRequest req;
    req.set_collection(name);
    req.set_k(k);
    req.mutable_query()->mutable_vector()->mutable_values()->Add(q.begin(),
                                                                 q.end());
    return rs_.stub->Search(&ctx, req, resp);
  }

  std::vector<std::string> Logged() {
    std::lock_guard<std::mutex> l(log_mu_);
    return log_;
  }

  // Stops the server before the log it writes to goes away; the lock makes the
  // hand-off from its threads visible to TSan.
  void TearDown() override {
    rs_.stub.reset();
    rs_.channel.reset();
    rs_.server.reset();
    std::lock_guard<std::mutex> l(log_mu_);
    std::vector<std::string>().swap(log_);
  }

  std::mutex log_mu_;
  std::vector<std::string> log_;
  std::filesystem::path data_;
  RunningServer rs_;
};

TEST_F(CompactionTest, RpcDropsTombstonesAndReportsWhatItDid) {
  Start();
  Create("c");
  Fill("c", 0, 300);
  const int deleted = DeleteEvery("c", 300, 3);  // 100
  pb::CollectionInfo before = Describe("c");
  EXPECT_EQ(before.tombstones(), static_cast<uint64_t>(deleted));

  pb::CompactResponse resp;
  ASSERT_TRUE(Compact("c", &resp).ok());
  EXPECT_EQ(resp.rows_before(), 300u);
  EXPECT_EQ(resp.rows_after(), 200u);
  EXPECT_EQ(resp.tombstones_removed(), 100u);
  EXPECT_EQ(resp.generation(), 2u);
  EXPECT_GE(resp.seconds(), 0.0);
  const pb::CollectionInfo after = Describe("c");
  EXPECT_EQ(after.rows(), 200u);
  EXPECT_EQ(after.live_rows(), 200u);
  EXPECT_EQ(after.tombstones(), 0u);
  EXPECT_EQ(after.generation(), 2u);

  // Live ids are still found first by their own vector; deleted ones are gone.
  pb::SearchResponse hits;
  ASSERT_TRUE(Search("c", VectorFor(Id(1), kDim), 1, &hits).ok());
  ASSERT_EQ(hits.hits_size(), 1);
  EXPECT_EQ(hits.hits(0).id(), Id(1));
  ASSERT_TRUE(Search("c", VectorFor(Id(3), kDim), 300, &hits).ok());
  EXPECT_EQ(hits.hits_size(), 200);
  for (const auto& h : hits.hits()) EXPECT_NE(h.id(), Id(3));
  // Writes keep working in the new generation.
  Fill("c", 1000, 5);
  EXPECT_EQ(Describe("c").rows(), 205u);

  // Stats: the compaction counted, tombstones reported per collection.
  pb::StatsResponse stats = Stats();
  EXPECT_EQ(stats.compact().count(), 1u);
  EXPECT_EQ(stats.compact().errors(), 0u);
  EXPECT_EQ(stats.auto_compactions(), 0u);
  ASSERT_EQ(stats.collections_size(), 1);
  EXPECT_EQ(stats.collections(0).tombstones(), 0u);
  EXPECT_EQ(stats.collections(0).generation(), 2u);
  bool logged = false;
  for (const auto& line : Logged())
    logged |= line.find("compacted collection c (requested): 300 -> 200") !=
              std::string::npos;
  EXPECT_TRUE(logged);
}

TEST_F(CompactionTest, RpcErrors) {
  Start();
  pb::CompactResponse resp;
  grpc::Status s = Compact("missing", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("missing"), std::string::npos);
  s = Compact("../bad", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("collection"), std::string::npos);
  pb::StatsResponse stats = Stats();
  EXPECT_EQ(stats.compact().count(), 2u);
  EXPECT_EQ(stats.compact().errors(), 2u);
}

TEST_F(CompactionTest, RpcNeedsTheTokenWhenAuthIsOn) {
  service::ServerOptions options;
  options.auth_token = "s3cret";
  Start(options);
  pb::CompactResponse resp;
  EXPECT_EQ(Compact("c", &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Compact("c", &resp, "wrong").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // With the token it gets past auth to the lookup.
  EXPECT_EQ(Compact("c", &resp, "s3cret").error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// Searches from other clients keep answering, correctly, while a compaction
// runs; none fails and none returns a deleted id.
TEST_F(CompactionTest, SearchesKeepAnsweringDuringCompaction) {
  Start();
  Create("big");
  constexpr int kRows = 30000;
  Fill("big", 0, kRows);
  DeleteEvery("big", kRows, 2);  // even ids deleted

  std::atomic<bool> compacting{false}, stop{false};
  std::atomic<int> during{0}, failures{0};
  std::vector<std::thread> searchers;
  for (int t = 0; t < 3; ++t) {
    searchers.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        const std::string id = Id(2 * ((t * 7919 + i * 31) % (kRows / 2)) + 1);
        pb::SearchResponse resp;
        const bool in = compacting.load();
        grpc::Status s = Search("big", VectorFor(id, kDim), 5, &resp);
        if (!s.ok() || resp.hits_size() != 5 || resp.hits(0).id() != id) {
          failures.fetch_add(1);
          continue;
        }
        for (const auto& h : resp.hits()) {
          const int n = std::stoi(h.id().substr(3));
          if (n % 2 == 0) failures.fetch_add(1);  // a deleted id
        }
        if (in && compacting.load()) during.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  compacting = true;
  pb::CompactResponse resp;
  const grpc::Status s = Compact("big", &resp);
  compacting = false;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop = true;
  for (auto& t : searchers) t.join();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.rows_after(), static_cast<uint64_t>(kRows / 2));
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(during.load(), 0)
      << "no search completed while compacting (" << resp.seconds() << " s)";
  std::printf("%d searches answered during a %.3f s compaction\n",
              during.load(), resp.seconds());
}

// An attached reader (the in-process AttachedCollection a co-located process
// uses) searching across a compaction: before, during and after, every answer
// is a live row with its full stored vector, and afterwards it equals the
// server's.
TEST_F(CompactionTest, AttachedReaderFollowsCompaction) {
  Start();
  Create("att");
  constexpr int kRows = 4000;
  Fill("att", 0, kRows);
  DeleteEvery("att", kRows, 4);
  auto attached = index::AttachedCollection::Attach(data_, "att");
  ASSERT_TRUE(attached.ok()) << attached.status();
  const std::vector<float> q = VectorFor("query", kDim);
  index::SearchOptions so;
  so.k = 10;

  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, bad{0};
  std::thread reader([&] {
    while (!stop.load()) {
      if (!(*attached)->Refresh().ok()) {
        bad.fetch_add(1);
        continue;
      }
      auto r = (*attached)->Search(q, so);
      if (!r.ok() || (*r)[0].size() != 10) {
        bad.fetch_add(1);
        continue;
      }
      for (const index::Hit& h : (*r)[0]) {
        const std::vector<float> v = VectorFor(h.id, kDim);
        float dot = 0;
        for (uint32_t i = 0; i < kDim; ++i) dot += v[i] * q[i];
        if (std::stoi(h.id.substr(3)) % 4 == 0 ||
            std::abs(dot - h.score) > 1e-4)
          bad.fetch_add(1);
      }
      reads.fetch_add(1);
    }
  });
  while (reads.load() < 3)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  pb::CompactResponse resp;
  ASSERT_TRUE(Compact("att", &resp).ok());
  const int after_compaction = reads.load();
  while (reads.load() < after_compaction + 3)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);

  ASSERT_TRUE((*attached)->Refresh().ok());
  const index::CollectionInfo info = (*attached)->Describe();
  EXPECT_EQ(info.generation, 2u);
  EXPECT_EQ(info.rows, static_cast<uint64_t>(kRows - kRows / 4));
  EXPECT_EQ(info.tombstones, 0u);
  auto mine = (*attached)->Search(q, so);
  ASSERT_TRUE(mine.ok());
  pb::SearchResponse server;
  ASSERT_TRUE(Search("att", q, 10, &server).ok());
  ASSERT_EQ((*mine)[0].size(), static_cast<size_t>(server.hits_size()));
  for (int i = 0; i < server.hits_size(); ++i) {
    EXPECT_EQ((*mine)[0][i].id, server.hits(i).id()) << i;
    EXPECT_NEAR((*mine)[0][i].score, server.hits(i).score(), 1e-5) << i;
  }
}

// The background trigger: past the tombstone fraction (and the minimum size)
// the server compacts on its own; below either it leaves the collection alone.
TEST_F(CompactionTest, AutomaticCompactionPastTheThreshold) {
  service::ServerOptions options;
  options.auto_compaction.tombstone_fraction = 0.3;
  options.auto_compaction.min_rows = 100;
  Start(options);
  Create("below");  // 20% tombstoned: stays
  Fill("below", 0, 500);
  DeleteEvery("below", 500, 5);
  Create("tiny");  // under min_rows: stays, however many are deleted
  Fill("tiny", 0, 50);
  DeleteEvery("tiny", 50, 1);
  Create("over");
  Fill("over", 0, 500);
  DeleteEvery("over", 500, 5);  // 20%
  EXPECT_EQ(Describe("over").generation(), 1u);
  // Replacing ids tombstones their old rows too: 200 of 600 rows now.
  pb::UpsertRequest replace;
  replace.set_collection("over");
  for (int i = 1; i < 500; i += 5)
    *replace.add_items() = VectorItem(Id(i), VectorFor(Id(i), kDim));
  grpc::ClientContext ctx;
  pb::UpsertResponse ur;
  ASSERT_TRUE(rs_.stub->Upsert(&ctx, replace, &ur).ok());

  // Stats counts the run once it is logged, after the switch Describe sees.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  pb::StatsResponse stats = Stats();
  while (stats.auto_compactions() == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stats = Stats();
  }
  ASSERT_EQ(stats.auto_compactions(), 1u)
      << "no automatic compaction within 10 s";
  EXPECT_EQ(stats.compact().count(), 1u);
  EXPECT_EQ(stats.compact().errors(), 0u);
  const pb::CollectionInfo info = Describe("over");
  EXPECT_EQ(info.generation(), 2u);
  EXPECT_EQ(info.rows(), 400u);
  EXPECT_EQ(info.tombstones(), 0u);
  pb::SearchResponse hits;
  ASSERT_TRUE(Search("over", VectorFor(Id(1), kDim), 1, &hits).ok());
  EXPECT_EQ(hits.hits(0).id(), Id(1));  // the replaced row survived

  // The others were checked before "over" (one background thread, first
  // notified first).
  EXPECT_EQ(Describe("below").generation(), 1u);
  EXPECT_EQ(Describe("below").tombstones(), 100u);
  EXPECT_EQ(Describe("tiny").generation(), 1u);
  bool logged = false;
  for (const auto& line : Logged())
    logged |=
        line.find("compacted collection over (automatic") != std::string::npos;
  EXPECT_TRUE(logged);
}

}  // namespace
}  // namespace zv::testing
