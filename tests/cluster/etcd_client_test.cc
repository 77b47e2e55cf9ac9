// cluster::EtcdClient against a real one-member etcd on 127.0.0.1.
#include "cluster/etcd_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "base/test_util.h"
#include "tests/cluster/etcd_cluster.h"

namespace zv::cluster {
namespace {

using namespace std::chrono_literals;

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (zv::testing::EtcdBinary().empty()) {
      GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server; "
                      "tools/setup.sh installs it)";
    }
    std::string error;
    etcd_ = std::make_unique<zv::testing::EtcdCluster>(
        zv::testing::MakeTempDir("etcd"), 1, &error);
    ASSERT_TRUE(error.empty()) << error;
    auto client = EtcdClient::Connect({etcd_->endpoints()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
  }

  std::unique_ptr<zv::testing::EtcdCluster> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdClientTest, PutGetRangeDelete) {
  ASSERT_TRUE(client_->Put("/t/a", "1").ok());
  ASSERT_TRUE(client_->Put("/t/b", "2").ok());
  ASSERT_TRUE(client_->Put("/u/c", "3").ok());
  auto a = client_->Get("/t/a");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->value, "1");
  EXPECT_EQ((*a)->version, 1);
  int64_t revision = 0;
  auto range = client_->Range("/t/", true, &revision);
  ASSERT_TRUE(range.ok());
  ASSERT_EQ(range->size(), 2u);
  EXPECT_EQ((*range)[1].key, "/t/b");
  EXPECT_GT(revision, 0);
  ASSERT_TRUE(client_->Delete("/t/a").ok());
  EXPECT_FALSE(client_->Get("/t/a")->has_value());
}

TEST_F(EtcdClientTest, TxnCreateIfAbsentAndCompareValue) {
  const std::vector<Compare> absent = {
      {"/t/node", Compare::Target::kVersion, 0, ""}};
  auto first = client_->Txn(absent, {{TxnOp::Kind::kPut, "/t/node", "x", 0}});
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  auto second = client_->Txn(absent, {{TxnOp::Kind::kPut, "/t/node", "y", 0}});
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);  // present: nothing written
  EXPECT_EQ((*client_->Get("/t/node"))->value, "x");
  // Compare-and-swap on the value: the stale writer loses.
  auto cas = client_->Txn({{"/t/node", Compare::Target::kValue, 0, "x"}},
                          {{TxnOp::Kind::kPut, "/t/node", "z", 0}});
  ASSERT_TRUE(cas.ok());
  EXPECT_TRUE(*cas);
  auto stale = client_->Txn({{"/t/node", Compare::Target::kValue, 0, "x"}},
                            {{TxnOp::Kind::kPut, "/t/node", "w", 0}});
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(*stale);
  EXPECT_EQ((*client_->Get("/t/node"))->value, "z");
}

TEST_F(EtcdClientTest, LeaseExpiresWithoutKeepAliveAndLivesWithIt) {
  auto dying = client_->GrantLease(1);
  auto kept = client_->GrantLease(1);
  ASSERT_TRUE(dying.ok() && kept.ok());
  ASSERT_TRUE(client_->Put("/t/dying", "1", *dying).ok());
  ASSERT_TRUE(client_->Put("/t/kept", "1", *kept).ok());
  std::atomic<bool> lost{false};
  auto keeper = client_->KeepAlive(*kept, 1, [&] { lost = true; });
  std::this_thread::sleep_for(3500ms);
  EXPECT_FALSE(client_->Get("/t/dying")->has_value());
  EXPECT_TRUE(client_->Get("/t/kept")->has_value());
  EXPECT_FALSE(lost);
  ASSERT_TRUE(client_->RevokeLease(*kept).ok());
  EXPECT_FALSE(client_->Get("/t/kept")->has_value());
}

TEST_F(EtcdClientTest, WatchSeesPutsAndDeletesInOrder) {
  int64_t revision = 0;
  ASSERT_TRUE(client_->Range("/w/", true, &revision).ok());
  std::mutex mu;
  std::vector<WatchEvent> seen;
  auto watcher = client_->Watch(
      "/w/", revision + 1,
      [&](const std::vector<WatchEvent>& events) {
        std::lock_guard<std::mutex> lock(mu);
        seen.insert(seen.end(), events.begin(), events.end());
      },
      [](const Status&) {});
  ASSERT_TRUE(client_->Put("/w/a", "1").ok());
  ASSERT_TRUE(client_->Put("/other", "1").ok());
  ASSERT_TRUE(client_->Delete("/w/a").ok());
  for (int i = 0; i < 100; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (seen.size() >= 2) break;
    }
    std::this_thread::sleep_for(50ms);
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_FALSE(seen[0].deleted);
  EXPECT_EQ(seen[0].kv.value, "1");
  EXPECT_TRUE(seen[1].deleted);
}

TEST(EtcdConnectTest, NoEtcdIsAClearError) {
  const int port = zv::testing::FreePort();
  EtcdOptions o;
  o.endpoints = "etcd://127.0.0.1:" + std::to_string(port);
  o.timeout = 2000ms;
  auto client = EtcdClient::Connect(o);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("is etcd running?"),
            std::string::npos)
      << client.status();
}

TEST(EtcdConnectTest, BadEndpointsAreUsageErrors) {
  EXPECT_EQ(EtcdTarget("etcd://").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EtcdTarget("etcd://host").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(*EtcdTarget("etcd://127.0.0.1:1,127.0.0.1:2"),
            "ipv4:127.0.0.1:1,127.0.0.1:2");
  EXPECT_EQ(*EtcdTarget("etcd.local:2379"), "dns:///etcd.local:2379");
}

}  // namespace
}  // namespace zv::cluster
