// Abusive clients: streams abandoned mid-UpsertStream (cancelled or connection
// dropped), deadlines that expire before or during a call, and messages over
// --max-message-bytes. The server answers each with a status (never dies),
// keeps serving a well-behaved client meanwhile, and its RSS stays bounded
// across repeated rounds (measured from /proc/<pid>/status).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

#include "tests/faults/fault_util.h"

namespace zv::faults {
namespace {

namespace pb = zerovec::v1;
constexpr uint32_t kDim = 64;
constexpr int kMaxMessage = 1 << 20;

pb::UpsertRequest Batch(const std::string& prefix, int n) {
  pb::UpsertRequest req;
  req.set_collection("abuse");
  for (int i = 0; i < n; ++i) {
    pb::Item* item = req.add_items();
    item->set_id(prefix + std::to_string(i));
    const auto v = VectorFor(item->id(), kDim);
    item->mutable_vector()->Add(v.begin(), v.end());
    item->set_text("doc " + item->id());
  }
  return req;
}

// One round of abuse from `threads` clients, each on its own connection.
void AbuseRound(const ServerProcess& server, int round) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      auto stub = server.NewStub();
      for (int i = 0; i < 4; ++i) {
        const std::string tag = "r" + std::to_string(round) + "t" +
                                std::to_string(t) + "i" + std::to_string(i) +
                                "-";
        switch ((t + i) % 4) {
          case 0: {  // stream abandoned mid-way: cancelled without WritesDone
            grpc::ClientContext ctx;
            pb::UpsertResponse resp;
            auto writer = stub->UpsertStream(&ctx, &resp);
            for (int m = 0; m < 3; ++m)
              writer->Write(Batch(tag + std::to_string(m) + "-", 20));
            ctx.TryCancel();
            EXPECT_FALSE(writer->Finish().ok());
            break;
          }
          case 1: {  // stream whose connection goes away (stub and channel
                     // dropped)
            auto own = server.NewStub();
            auto ctx = std::make_unique<grpc::ClientContext>();
            pb::UpsertResponse resp;
            auto writer = own->UpsertStream(ctx.get(), &resp);
            writer->Write(Batch(tag, 50));
            ctx->TryCancel();
            writer.reset();
            own.reset();
            break;
          }
          case 2: {  // deadlines: already expired, and tight on a big batch
                     // search
            pb::SearchBatchRequest req;
            req.set_collection("abuse");
            req.set_k(100);
            for (int q = 0; q < 256; ++q) {
              const auto v = VectorFor(tag + std::to_string(q), kDim);
              req.add_queries()->mutable_vector()->mutable_values()->Add(
                  v.begin(), v.end());
            }
            pb::SearchBatchResponse resp;
            grpc::Status s = stub->SearchBatch(
                Ctx(std::chrono::milliseconds(0)).get(), req, &resp);
            EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
            s = stub->SearchBatch(Ctx(std::chrono::milliseconds(2)).get(), req,
                                  &resp);
            EXPECT_TRUE(s.ok() ||
                        s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
                << s.error_code() << ": " << s.error_message();
            break;
          }
          case 3: {  // oversized: a 2 MiB Upsert against a 1 MiB limit, unary
                     // and streamed
            pb::UpsertRequest big = Batch(tag, 1);
            big.mutable_items(0)->mutable_text()->assign(2 << 20, 'x');
            pb::UpsertResponse resp;
            grpc::Status s = stub->Upsert(Ctx().get(), big, &resp);
            EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
                << s.error_message();
            auto ctx = Ctx();
            auto writer = stub->UpsertStream(ctx.get(), &resp);
            writer->Write(Batch(tag + "ok-", 5));
            writer->Write(big);
            writer->WritesDone();
            s = writer->Finish();
            EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
                << s.error_message();
            break;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST(AbuseTest, ServerSurvivesAbuseWithBoundedMemory) {
  ServeOptions so;
  so.data_dir = MakeTempDir("abuse_test") / "data";
  so.extra_flags = {"--max-message-bytes", std::to_string(kMaxMessage)};
  std::string error;
  auto server = ServerProcess::Start(so, &error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_TRUE(CreateCollection(server->stub(), "abuse", kDim).ok());
  pb::UpsertResponse up;
  ASSERT_TRUE(
      server->stub()->Upsert(Ctx().get(), Batch("base-", 1000), &up).ok());

  // A well-behaved client searches throughout; every call must succeed.
  std::atomic<bool> stop{false};
  std::atomic<int> good_ok{0}, good_failed{0};
  std::string last_failure;
  std::thread good([&] {
    auto stub = server->NewStub();
    const auto q = VectorFor("base-7", kDim);
    while (!stop) {
      pb::SearchRequest req;
      req.set_collection("abuse");
      req.mutable_query()->mutable_vector()->mutable_values()->Add(q.begin(),
                                                                   q.end());
      req.set_k(5);
      pb::SearchResponse resp;
      grpc::Status s =
          stub->Search(Ctx(std::chrono::milliseconds(5000)).get(), req, &resp);
      if (s.ok() && resp.hits_size() > 0 && resp.hits(0).id() == "base-7") {
        ++good_ok;
      } else {
        ++good_failed;
        last_failure = s.error_message();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });

  std::vector<int64_t> rss;
  // ZV_ABUSE_ROUNDS overrides (to watch the RSS series over a longer run).
  // 36: on a loaded 2-core machine the pools reach their working size only
  // after ~13 rounds (series of 48 rounds plateau at 260-300 MiB), so with 24
  // the "middle third" was still warm-up and the check failed without a leak.
  const int kRounds = std::getenv("ZV_ABUSE_ROUNDS")
                          ? std::atoi(std::getenv("ZV_ABUSE_ROUNDS"))
                          : 36;
  for (int round = 0; round < kRounds; ++round) {
    AbuseRound(*server, round);
    ASSERT_TRUE(server->Running())
        << "server died in round " << round << ": " << server->Log();
    rss.push_back(server->RssKb());
  }
  stop = true;
  good.join();
  EXPECT_GT(good_ok.load(), 0);
  EXPECT_EQ(good_failed.load(), 0)
      << "the well-behaved client failed: " << last_failure;
  // Bounded memory: after a warm-up third (malloc arenas and gRPC pools grow
  // to their working size), the peak of the last third is not above the peak
  // of the middle one (the abandoned streams' partial batches are real rows
  // and add a little).
  std::string series;
  for (int64_t r : rss) series += std::to_string(r / 1024) + " MiB ";
  std::cerr << "abuse test: server RSS per round: " << series << "\n";
  RecordProperty("rss_kb_series", series);
  ASSERT_GE(kRounds, 6);
  const int64_t early = *std::max_element(rss.begin() + kRounds / 3,
                                          rss.begin() + 2 * kRounds / 3);
  const int64_t late =
      *std::max_element(rss.begin() + 2 * kRounds / 3, rss.end());
  // Tolerance: 32 MiB or a fifth of the middle peak. The plateau itself moves
  // by +-30 MiB round to round (malloc arenas, gRPC pools; same on the code
  // before the live index), while a per-round leak of 5 MiB adds 60 over the
  // last third.
  const int64_t tolerance = std::max<int64_t>(32 * 1024, early / 5);
  EXPECT_LT(late - early, tolerance) << "RSS keeps growing: " << series;
  // And it still serves a normal write and read.
  ASSERT_TRUE(
      server->stub()->Upsert(Ctx().get(), Batch("after-", 10), &up).ok());
  const auto info = Describe(server->stub(), "abuse");
  EXPECT_GE(info.live_rows(), 1010u);
}

}  // namespace
}  // namespace zv::faults
