// 16 client threads mix upserts and searches against one server for a bounded
// time: no errors, no lost acknowledged ids, exact final count; then a graceful
// shutdown while clients are still writing loses nothing acknowledged.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "tests/integration/test_util.h"

namespace zv::testing {
namespace {

namespace pb = zerovec::v1;
constexpr uint32_t kDim = 16;
constexpr int kThreads = 16;
constexpr int kBatch = 8;

void CreateCollection(pb::ZeroVec::Stub* stub, const std::string& name) {
  grpc::ClientContext ctx;
  pb::CreateCollectionRequest req;
  req.set_name(name);
  req.set_dim(kDim);
  pb::CreateCollectionResponse resp;
  ASSERT_TRUE(stub->CreateCollection(&ctx, req, &resp).ok());
}

// What a call racing a server shutdown may answer (it was never acknowledged).
bool ShutdownError(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::CANCELLED;
}

struct Acked {
  std::mutex mu;
  std::set<std::string> ids;
};

// One client: alternates an upsert of kBatch new ids and a search of one of its
// own acknowledged ids (which must come back first) until `stop`.
void Client(pb::ZeroVec::Stub* stub, int t, const std::atomic<bool>& stop,
            Acked* acked, std::atomic<int>* errors,
            std::atomic<int>* searches) {
  std::vector<std::string> mine;
  for (int round = 0; !stop.load(); ++round) {
    pb::UpsertRequest req;
    req.set_collection("load");
    std::vector<std::string> ids;
    for (int i = 0; i < kBatch; ++i) {
      ids.push_back("t" + std::to_string(t) + "-" +
                    std::to_string(round * kBatch + i));
      *req.add_items() = VectorItem(ids.back(), VectorFor(ids.back(), kDim));
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    pb::UpsertResponse resp;
    grpc::Status s = stub->Upsert(&ctx, req, &resp);
    if (!s.ok()) {
      if (!stop.load() || !ShutdownError(s)) {
        ADD_FAILURE() << "upsert: " << s.error_code() << " "
                      << s.error_message();
        errors->fetch_add(1);
      }
      return;
    }
    {
      std::lock_guard<std::mutex> lock(acked->mu);
      acked->ids.insert(ids.begin(), ids.end());
    }
    mine.insert(mine.end(), ids.begin(), ids.end());

    const std::string& probe = mine[(round * 7919) % mine.size()];
    const auto v = VectorFor(probe, kDim);
    grpc::ClientContext sctx;
    pb::SearchRequest sreq;
    sreq.set_collection("load");
    sreq.set_k(3);
    sreq.mutable_query()->mutable_vector()->mutable_values()->Add(v.begin(),
                                                                  v.end());
    pb::SearchResponse sresp;
    s = stub->Search(&sctx, sreq, &sresp);
    if (!s.ok()) {
      if (!stop.load() || !ShutdownError(s)) {
        ADD_FAILURE() << "search: " << s.error_message();
        errors->fetch_add(1);
      }
      return;
    }
    searches->fetch_add(1);
    if (sresp.hits_size() == 0 || sresp.hits(0).id() != probe) {
      ADD_FAILURE() << "acknowledged id " << probe << " not found first";
      errors->fetch_add(1);
    }
  }
}

uint64_t LiveRows(pb::ZeroVec::Stub* stub) {
  grpc::ClientContext ctx;
  pb::DescribeCollectionRequest req;
  req.set_name("load");
  pb::CollectionInfo info;
  EXPECT_TRUE(stub->DescribeCollection(&ctx, req, &info).ok());
  return info.live_rows();
}

void ExpectAllPresent(pb::ZeroVec::Stub* stub,
                      const std::set<std::string>& ids) {
  std::vector<std::string> all(ids.begin(), ids.end());
  for (size_t i = 0; i < all.size(); i += 1000) {
    grpc::ClientContext ctx;
    pb::GetRequest req;
    req.set_collection("load");
    for (size_t j = i; j < std::min(all.size(), i + 1000); ++j)
      req.add_ids(all[j]);
    pb::GetResponse resp;
    ASSERT_TRUE(stub->Get(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.items_size(), req.ids_size()) << "acknowledged ids missing";
  }
}

void RunClients(RunningServer& rs, std::chrono::milliseconds duration,
                bool shutdown_midway, Acked* acked, int* searches_out) {
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0}, searches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(Client, rs.stub.get(), t, std::cref(stop), acked,
                         &errors, &searches);
  }
  std::this_thread::sleep_for(duration);
  if (shutdown_midway) {
    // Stop while clients are still writing: in-flight calls finish, later ones
    // fail UNAVAILABLE; nothing acknowledged may be lost.
    stop = true;
    rs.server->Shutdown(std::chrono::system_clock::now() +
                        std::chrono::seconds(10));
  }
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  *searches_out = searches.load();
}

TEST(ConcurrencyTest, MixedUpsertsAndSearchesLoseNothing) {
  service::ServerOptions options;
  options.data_dir = MakeTempDir("concurrency_test");
  RunningServer rs = StartServer(options);
  ASSERT_NE(rs.server, nullptr);
  CreateCollection(rs.stub.get(), "load");

  Acked acked;
  int searches = 0;
  RunClients(rs, std::chrono::seconds(4), false, &acked, &searches);
  EXPECT_GT(searches, 100);
  EXPECT_EQ(LiveRows(rs.stub.get()), acked.ids.size());
  ExpectAllPresent(rs.stub.get(), acked.ids);

  // Second round ends in a graceful shutdown under load; a restarted server on
  // the same data directory has every acknowledged id and nothing else.
  RunClients(rs, std::chrono::seconds(1), true, &acked, &searches);
  rs.server.reset();
  RunningServer again = StartServer(options);
  ASSERT_NE(again.server, nullptr);
  EXPECT_EQ(LiveRows(again.stub.get()), acked.ids.size());
  ExpectAllPresent(again.stub.get(), acked.ids);
  std::printf("acknowledged %zu ids, %d searches\n", acked.ids.size(),
              searches);
}

}  // namespace
}  // namespace zv::testing
