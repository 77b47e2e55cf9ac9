// Issue 18's kill test: a 3-member etcd, three `zerovec serve --cluster`
// nodes (lease 2 s), a collection of 3 shards with replication factor 2, one
// writer and two searchers, and 20 rounds of: SIGKILL a random node at a
// random moment, wait until the cluster has dropped it and rebuilt every
// shard to two in-sync replicas (snapshot + catch-up on a survivor or on the
// restarted node), restart it, then check that every in-sync replica of
// every shard holds exactly the acknowledged writes. Searches must keep
// answering; their errors (and the writer's) are counted, with how long after
// the kill they happened, and must fall inside the lease-timeout window.
//
// Not tagged tsan: 20 rounds of process restarts under ThreadSanitizer would
// outlast CI's budget on 2 cores; tools/test.sh runs it under ASan.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "cluster/etcd_client.h"
#include "cluster/shard_map.h"
#include "tests/cluster/etcd_cluster.h"
#include "tests/faults/fault_util.h"

namespace zv::faults {
namespace {

namespace pb = zerovec::v1;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kDim = 8;
constexpr int kNodes = 3;
constexpr int kShards = 3;
constexpr int kIds = 1500;  // the writer rewrites these ids over and over
constexpr auto kLease = 2s;
// Errors may happen from a kill until its lease expired and the survivors
// dropped the node (one repair tick later), plus a shard timeout.
constexpr auto kErrorWindow = kLease + 1s + 2s + 2s;

int Rounds() {
  const char* env = std::getenv("ZV_CLUSTER_KILL_ROUNDS");
  return env ? std::atoi(env) : 20;
}

// The last acknowledged operation on an id (the writer retries each batch
// until it is acknowledged, so at a pause every operation is).
struct Acked {
  int64_t seq = 0;
  bool deleted = false;
};

class Cluster {
 public:
  bool Start(std::string* error) {
    dir_ = MakeTempDir("cluster_kill");
    etcd_ = std::make_unique<testing::EtcdCluster>(dir_ / "etcd", 3, error);
    if (!error->empty()) return false;
    for (int id = 1; id <= kNodes; ++id)
      if (!StartNode(id, error)) return false;
    auto client = cluster::EtcdClient::Connect({etcd_->endpoints()});
    if (!client.ok()) {
      *error = client.status().ToString();
      return false;
    }
    client_ = std::move(client).value();
    return true;
  }

  bool StartNode(int id, std::string* error) {
    ServeOptions o;
    o.data_dir = dir_ / ("node" + std::to_string(id));
    o.extra_flags = {"--cluster",          etcd_->endpoints(),
                     "--node-id",          std::to_string(id),
                     "--lease-ttl-s",      "2",
                     "--shard-timeout-ms", "2000"};
    auto node = ServerProcess::Start(o, error);
    if (!node) return false;
    std::shared_ptr<pb::ZeroVec::Stub> stub = node->NewStub();
    std::lock_guard<std::mutex> lock(mu_);
    nodes_[id - 1] = std::move(node);
    stubs_[id - 1] = std::move(stub);
    return true;
  }

  void Kill(int id) {
    std::unique_ptr<ServerProcess> node;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stubs_[id - 1].reset();
      node = std::move(nodes_[id - 1]);
    }
    node->Kill();
  }

  // A stub of a random live node (clients only call live ones).
  std::shared_ptr<pb::ZeroVec::Stub> AnyStub(std::mt19937* rng) {
    std::lock_guard<std::mutex> lock(mu_);
    for (;;) {
      const int i = (*rng)() % kNodes;
      if (stubs_[i]) return stubs_[i];
    }
  }
  std::shared_ptr<pb::ZeroVec::Stub> Stub(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    return stubs_[id - 1];
  }

  cluster::ShardMap Map() {
    auto kv = client_->Get(cluster::CollectionKey("kv"));
    EXPECT_TRUE(kv.ok() && kv->has_value());
    auto map = cluster::ShardMapFromJson((*kv)->value);
    EXPECT_TRUE(map.ok()) << map.status();
    return map.ok() ? *map : cluster::ShardMap{};
  }
  bool Live(int id) {
    auto kv = client_->Get(cluster::NodeKey(id));
    return kv.ok() && kv->has_value();
  }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<testing::EtcdCluster> etcd_;
  std::unique_ptr<cluster::EtcdClient> client_;
  std::mutex mu_;
  std::array<std::unique_ptr<ServerProcess>, kNodes> nodes_;
  std::array<std::shared_ptr<pb::ZeroVec::Stub>, kNodes> stubs_;
};

std::vector<float> Vec(const std::string& id, int64_t seq) {
  return VectorFor(id + "/" + std::to_string(seq), kDim);
}

// Waits until `done()` or `limit`; false on timeout.
bool WaitFor(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(100ms);
  }
  return true;
}

std::string Replicas(const cluster::ShardMap& map) {
  std::string s;
  for (int i = 0; i < map.shards(); ++i) {
    s += " [";
    for (int64_t id : map.replicas[i]) s += std::to_string(id) + " ";
    for (const auto& j : map.Joining(i))
      s += "+" + std::to_string(j.node) + " ";
    s += "]";
  }
  return s;
}

// Every in-sync replica of every shard, asked directly (as another node
// would), holds exactly the acknowledged state of the shard's ids. False
// (nothing checked) when a call failed, e.g. the map moved on meanwhile.
bool ExpectReplicasHold(Cluster& c, const std::map<std::string, Acked>& acked,
                        int round) {
  const cluster::ShardMap map = c.Map();
  for (int s = 0; s < map.shards(); ++s) {
    pb::GetRequest get;
    get.set_collection(cluster::LocalShardName("kv", s));
    for (const auto& [id, a] : acked)
      if (cluster::ShardOf(id, kShards) == s) get.add_ids(id);
    for (int64_t node : map.replicas[s]) {
      auto stub = c.Stub(static_cast<int>(node));
      if (!stub) return false;
      auto ctx = Ctx();
      ctx->AddMetadata("x-zerovec-shard-epoch", std::to_string(map.epoch));
      pb::GetResponse got;
      grpc::Status st = stub->Get(ctx.get(), get, &got);
      if (!st.ok()) {
        std::printf("round %d shard %d node %lld: %s (checking again)\n", round,
                    s, static_cast<long long>(node),
                    st.error_message().c_str());
        return false;
      }
      std::map<std::string, int64_t> versions;
      for (const auto& item : got.items())
        versions[item.id()] = std::stoll(item.metadata().at("seq"));
      int missing = 0, wrong = 0, resurrected = 0;
      for (const std::string& id : get.ids()) {
        const Acked& a = acked.at(id);
        auto it = versions.find(id);
        if (a.deleted) {
          resurrected += it != versions.end();
        } else if (it == versions.end()) {
          ++missing;
        } else {
          wrong += it->second != a.seq;
        }
      }
      EXPECT_EQ(missing + wrong + resurrected, 0)
          << "round " << round << ", shard " << s << ", node " << node << ": "
          << missing << " acknowledged upserts missing, " << wrong
          << " at another version, " << resurrected
          << " acknowledged deletes undone (of " << get.ids_size() << ")";
    }
  }
  return true;
}

TEST(ClusterKillTest, TwentyKillsLoseNoAcknowledgedWrite) {
  if (testing::EtcdBinary().empty()) {
    GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server; "
                    "tools/setup.sh installs it): cluster tests skipped";
  }
  Cluster c;
  std::string error;
  ASSERT_TRUE(c.Start(&error)) << error;
  {
    pb::CreateCollectionRequest req;
    req.set_name("kv");
    req.set_dim(kDim);
    req.set_shards(kShards);
    req.set_replication_factor(2);
    pb::CreateCollectionResponse resp;
    std::mt19937 rng(1);
    grpc::Status s = c.AnyStub(&rng)->CreateCollection(Ctx().get(), req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  std::mutex mu;
  std::map<std::string, Acked> acked;
  std::atomic<bool> stop{false}, pause{false}, paused{false};
  std::atomic<int64_t> ops{0}, write_errors{0}, searches{0};
  std::mutex errors_mu;
  std::vector<Clock::time_point> error_times;  // searches' and writes'
  std::vector<bool> error_is_search;
  const auto note_error = [&](bool search) {
    std::lock_guard<std::mutex> lock(errors_mu);
    error_times.push_back(Clock::now());
    error_is_search.push_back(search);
  };

  std::thread writer([&] {
    std::mt19937 rng(7);
    for (int64_t seq = 1; !stop; ++seq) {
      if (pause) {
        paused = true;
        while (pause && !stop) std::this_thread::sleep_for(10ms);
        paused = false;
      }
      const bool del = rng() % 10 == 0;
      std::vector<std::string> ids;
      for (int i = 0; i < 10; ++i)
        ids.push_back("id" + std::to_string(rng() % kIds));
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      pb::UpsertRequest up;
      pb::DeleteRequest dl;
      up.set_collection("kv");
      dl.set_collection("kv");
      for (const auto& id : ids) {
        if (del) {
          dl.add_ids(id);
          continue;
        }
        const auto v = Vec(id, seq);
        auto* item = up.add_items();
        *item = testing::VectorItem(id, v, "");
        (*item->mutable_metadata())["seq"] = std::to_string(seq);
      }
      // Until acknowledged: at a pause every operation is.
      while (!stop) {
        grpc::Status s;
        if (del) {
          pb::DeleteResponse r;
          s = c.AnyStub(&rng)->Delete(Ctx(4000ms).get(), dl, &r);
        } else {
          pb::UpsertResponse r;
          s = c.AnyStub(&rng)->Upsert(Ctx(4000ms).get(), up, &r);
        }
        if (s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          for (const auto& id : ids) acked[id] = {seq, del};
          ++ops;
          break;
        }
        ++write_errors;
        note_error(false);
        std::this_thread::sleep_for(50ms);
      }
      std::this_thread::sleep_for(5ms);
    }
  });
  std::vector<std::thread> searchers;
  for (int n = 0; n < 2; ++n) {
    searchers.emplace_back([&, n] {
      std::mt19937 rng(100 + n);
      for (int q = 0; !stop; ++q) {
        pb::SearchRequest req;
        req.set_collection("kv");
        const auto v = VectorFor("q" + std::to_string(q), kDim);
        req.mutable_query()->mutable_vector()->mutable_values()->Add(v.begin(),
                                                                     v.end());
        req.set_k(5);
        pb::SearchResponse resp;
        if (c.AnyStub(&rng)->Search(Ctx(4000ms).get(), req, &resp).ok()) {
          ++searches;
        } else {
          note_error(true);
        }
        std::this_thread::sleep_for(5ms);
      }
    });
  }

  // Every shard has two in-sync replicas, both live, and no joiner.
  const auto full_replication = [&](std::chrono::seconds limit) {
    return WaitFor(
        [&] {
          const auto map = c.Map();
          for (int s = 0; s < map.shards(); ++s) {
            if (map.replicas[s].size() != 2 || !map.Joining(s).empty())
              return false;
            for (int64_t id : map.replicas[s])
              if (!c.Live(static_cast<int>(id))) return false;
          }
          return true;
        },
        limit);
  };
  std::mt19937 rng(std::random_device{}());
  std::vector<Clock::time_point> kills;
  double worst_recovery = 0;
  const int rounds = Rounds();
  for (int round = 0; round < rounds && !HasFatalFailure(); ++round) {
    const int64_t ops_before = ops;
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 1300));
    const int victim = 1 + static_cast<int>(rng() % kNodes);
    kills.push_back(Clock::now());
    c.Kill(victim);
    // The survivors drop it once its lease expired, and rebuild its shards.
    ASSERT_TRUE(WaitFor(
        [&] {
          const auto map = c.Map();
          for (int s = 0; s < map.shards(); ++s) {
            if (map.HasReplica(s, victim) || map.FindJoiner(s, victim))
              return false;
          }
          return !c.Live(victim);
        },
        30s))
        << "round " << round << ": node " << victim << " never dropped"
        << Replicas(c.Map());
    ASSERT_TRUE(c.StartNode(victim, &error)) << "round " << round << error;
    ASSERT_TRUE(full_replication(60s))
        << "round " << round
        << ": not back to 2 replicas a shard:" << Replicas(c.Map());
    const double recovery =
        std::chrono::duration<double>(Clock::now() - kills.back()).count();
    worst_recovery = std::max(worst_recovery, recovery);
    ASSERT_TRUE(WaitFor([&] { return ops > ops_before; }, 30s))
        << "round " << round << ": writes did not resume";
    pause = true;
    ASSERT_TRUE(WaitFor([&] { return paused.load(); }, 30s));
    {
      std::lock_guard<std::mutex> lock(mu);
      bool checked = false;
      for (int attempt = 0; attempt < 5 && !checked; ++attempt)
        checked = full_replication(30s) && ExpectReplicasHold(c, acked, round);
      EXPECT_TRUE(checked) << "round " << round << ": replicas unreadable";
    }
    std::printf("round %2d: killed node %d, full replication after %.1f s:%s\n",
                round, victim, recovery, Replicas(c.Map()).c_str());
    std::fflush(stdout);
    pause = false;
  }
  stop = true;
  pause = false;
  writer.join();
  for (auto& t : searchers) t.join();

  int search_errors = 0, outside = 0;
  double latest = 0;
  for (size_t i = 0; i < error_times.size(); ++i) {
    search_errors += error_is_search[i];
    // Time since the last kill before the error.
    double since = -1;
    for (const auto& k : kills)
      if (k <= error_times[i])
        since = std::chrono::duration<double>(error_times[i] - k).count();
    latest = std::max(latest, since);
    if (since < 0 ||
        since > std::chrono::duration<double>(kErrorWindow).count())
      ++outside;
  }
  std::printf(
      "%zu kills: %lld operations acknowledged, %lld write attempts failed, "
      "%lld searches answered, %d search errors; errors at most %.2f s after "
      "a kill (%d outside the %.0f s window); full replication at most %.1f "
      "s after a kill\n",
      kills.size(), static_cast<long long>(ops.load()),
      static_cast<long long>(write_errors.load()),
      static_cast<long long>(searches.load()), search_errors, latest, outside,
      std::chrono::duration<double>(kErrorWindow).count(), worst_recovery);
  EXPECT_EQ(static_cast<int>(kills.size()), rounds);
  EXPECT_GT(searches.load(), 0);
  EXPECT_EQ(outside, 0) << "errors outside the lease-timeout window";
}

}  // namespace
}  // namespace zv::faults
