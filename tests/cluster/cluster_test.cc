// Cluster mode end to end (issue 18): a real 3-member etcd on distinct ports,
// three real `zerovec serve --cluster` nodes and one plain `zerovec serve` as
// the reference, all on 127.0.0.1.
//   - a sharded, replicated Flat collection answers exactly what one node
//     holding everything answers (ids and scores of the top k, filters,
//     SearchBatch, Get, after deletes), through any node, IP and L2;
//   - bad configuration is a clear error: no etcd, a duplicate node id, too
//     few nodes for the replication factor, a shard map of a newer format,
//     a stale compare-epoch write;
//   - `zerovec cluster status` shows nodes and shards;
//   - an etcd member SIGKILLed and restarted: the cluster keeps serving;
//   - a node SIGKILLed under a writer and searchers (RF 2): every
//     acknowledged write stays readable, searches keep answering, the dead
//     node is dropped from the shard map, and it can rejoin.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "cluster/etcd_client.h"
#include "cluster/shard_map.h"
#include "tests/cluster/etcd_cluster.h"
#include "tests/faults/fault_util.h"

namespace zv::faults {
namespace {

namespace pb = zerovec::v1;
using namespace std::chrono_literals;

constexpr uint32_t kDim = 16;
constexpr int kNodes = 3;

struct Env {
  std::filesystem::path dir;
  std::unique_ptr<testing::EtcdCluster> etcd;
  std::vector<std::unique_ptr<ServerProcess>> nodes;
  std::unique_ptr<ServerProcess> single;
  std::unique_ptr<cluster::EtcdClient> client;
};
Env* env = nullptr;

std::vector<std::string> NodeFlags(int id, const std::string& endpoints) {
  return {"--cluster",     endpoints, "--node-id",          std::to_string(id),
          "--lease-ttl-s", "2",       "--shard-timeout-ms", "3000"};
}

std::unique_ptr<ServerProcess> StartNode(int id, std::string* error) {
  ServeOptions o;
  o.data_dir = env->dir / ("node" + std::to_string(id));
  o.extra_flags = NodeFlags(id, env->etcd->endpoints());
  return ServerProcess::Start(o, error);
}

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::EtcdBinary().empty()) return;
    env = new Env;
    env->dir = MakeTempDir("cluster");
    std::string error;
    env->etcd =
        std::make_unique<testing::EtcdCluster>(env->dir / "etcd", 3, &error);
    ASSERT_TRUE(error.empty()) << error;
    for (int id = 1; id <= kNodes; ++id) {
      env->nodes.push_back(StartNode(id, &error));
      ASSERT_NE(env->nodes.back(), nullptr) << error;
    }
    ServeOptions o;
    o.data_dir = env->dir / "single";
    env->single = ServerProcess::Start(o, &error);
    ASSERT_NE(env->single, nullptr) << error;
    auto client = cluster::EtcdClient::Connect({env->etcd->endpoints()});
    ASSERT_TRUE(client.ok()) << client.status();
    env->client = std::move(client).value();
  }
  static void TearDownTestSuite() {
    delete env;
    env = nullptr;
  }
  void SetUp() override {
    if (testing::EtcdBinary().empty()) {
      GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server; "
                      "tools/setup.sh installs it): cluster tests skipped";
    }
    ASSERT_NE(env, nullptr);
  }

 public:
  static pb::ZeroVec::Stub* Node(int i) {
    return env->nodes[i % kNodes]->stub();
  }
};

grpc::Status Create(pb::ZeroVec::Stub* stub, const std::string& name,
                    int shards, int rf,
                    pb::Metric metric = pb::METRIC_UNSPECIFIED,
                    const std::string& index = "") {
  pb::CreateCollectionRequest req;
  req.set_name(name);
  req.set_dim(kDim);
  req.set_index(index);
  req.set_metric(metric);
  req.set_shards(shards);
  req.set_replication_factor(rf);
  pb::CreateCollectionResponse resp;
  return stub->CreateCollection(Ctx().get(), req, &resp);
}

pb::UpsertRequest Batch(const std::string& coll, int from, int n) {
  pb::UpsertRequest req;
  req.set_collection(coll);
  for (int i = from; i < from + n; ++i) {
    const std::string id = "id" + std::to_string(i);
    auto* item = req.add_items();
    *item = testing::VectorItem(id, VectorFor(id, kDim), i % 3 ? "a" : "b");
    (*item->mutable_metadata())["parity"] = i % 2 ? "odd" : "even";
    item->set_timestamp_ms(1000 + i);
  }
  return req;
}

pb::SearchRequest Query(const std::string& coll, int q, int k) {
  pb::SearchRequest req;
  req.set_collection(coll);
  const auto v = VectorFor("q" + std::to_string(q), kDim);
  req.mutable_query()->mutable_vector()->mutable_values()->Add(v.begin(),
                                                               v.end());
  req.set_k(k);
  return req;
}

void ExpectSameHits(const pb::SearchResponse& got,
                    const pb::SearchResponse& want, const std::string& what) {
  ASSERT_EQ(got.hits_size(), want.hits_size()) << what;
  for (int i = 0; i < got.hits_size(); ++i) {
    EXPECT_EQ(got.hits(i).id(), want.hits(i).id()) << what << " rank " << i;
    EXPECT_FLOAT_EQ(got.hits(i).score(), want.hits(i).score()) << what;
    EXPECT_EQ(got.hits(i).namespace_(), want.hits(i).namespace_()) << what;
  }
}

// Searches `coll` through every node and the single server alike.
void ExpectSearchesMatch(const std::string& coll, int queries,
                         const std::function<void(pb::SearchRequest*)>& edit) {
  for (int q = 0; q < queries; ++q) {
    pb::SearchRequest req = Query(coll, q, 10);
    edit(&req);
    pb::SearchResponse got, want;
    ASSERT_TRUE(ClusterTest::Node(q)->Search(Ctx().get(), req, &got).ok());
    ASSERT_TRUE(env->single->stub()->Search(Ctx().get(), req, &want).ok());
    ExpectSameHits(got, want, coll + " query " + std::to_string(q));
    EXPECT_GT(got.hits_size(), 0);
  }
}

void Load(const std::string& coll, int rows) {
  for (int from = 0; from < rows; from += 100) {
    const pb::UpsertRequest req = Batch(coll, from, 100);
    pb::UpsertResponse got, want;
    grpc::Status s =
        ClusterTest::Node(from / 100)->Upsert(Ctx().get(), req, &got);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(got.upserted(), 100u);
    ASSERT_TRUE(env->single->stub()->Upsert(Ctx().get(), req, &want).ok());
  }
}

TEST_F(ClusterTest, ShardedFlatEqualsOneNode) {
  ASSERT_TRUE(Create(Node(0), "docs", 4, 2).ok());
  ASSERT_TRUE(Create(env->single->stub(), "docs", 0, 0).ok());
  Load("docs", 1200);
  const pb::CollectionInfo info = Describe(Node(2), "docs");
  EXPECT_EQ(info.shards(), 4);
  EXPECT_EQ(info.replication_factor(), 2);
  EXPECT_EQ(info.live_rows(), 1200u);

  ExpectSearchesMatch("docs", 24, [](pb::SearchRequest*) {});
  ExpectSearchesMatch("docs", 12, [](pb::SearchRequest* r) {
    r->mutable_filter()->set_namespace_("a");
    (*r->mutable_filter()->mutable_metadata_equals())["parity"] = "even";
    r->set_include_documents(true);
  });
  ExpectSearchesMatch("docs", 6, [](pb::SearchRequest* r) {
    r->mutable_filter()->set_min_timestamp_ms(1500);
    r->set_k(50);
  });

  pb::SearchBatchRequest batch;
  batch.set_collection("docs");
  batch.set_k(5);
  for (int q = 0; q < 8; ++q)
    *batch.add_queries() = Query("docs", q, 5).query();
  pb::SearchBatchResponse got, want;
  ASSERT_TRUE(Node(1)->SearchBatch(Ctx().get(), batch, &got).ok());
  ASSERT_TRUE(env->single->stub()->SearchBatch(Ctx().get(), batch, &want).ok());
  ASSERT_EQ(got.results_size(), 8);
  for (int q = 0; q < 8; ++q)
    ExpectSameHits(got.results(q), want.results(q),
                   "batch " + std::to_string(q));

  pb::GetRequest get;
  get.set_collection("docs");
  for (const char* id : {"id7", "nope", "id1199", "id0", "id500"})
    get.add_ids(id);
  pb::GetResponse got_items, want_items;
  ASSERT_TRUE(Node(2)->Get(Ctx().get(), get, &got_items).ok());
  ASSERT_TRUE(env->single->stub()->Get(Ctx().get(), get, &want_items).ok());
  ASSERT_EQ(got_items.items_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got_items.items(i).id(), want_items.items(i).id());
    EXPECT_EQ(got_items.items(i).text(), want_items.items(i).text());
  }

  pb::DeleteRequest del;
  del.set_collection("docs");
  for (int i = 0; i < 1200; i += 24) del.add_ids("id" + std::to_string(i));
  pb::DeleteResponse deleted, deleted_single;
  ASSERT_TRUE(Node(0)->Delete(Ctx().get(), del, &deleted).ok());
  ASSERT_TRUE(
      env->single->stub()->Delete(Ctx().get(), del, &deleted_single).ok());
  EXPECT_EQ(deleted.deleted(), deleted_single.deleted());
  EXPECT_EQ(Describe(Node(1), "docs").live_rows(), 1150u);
  ExpectSearchesMatch("docs", 12, [](pb::SearchRequest*) {});
}

// Recall@10 against the exact answer (the single server's Flat "docs", same
// rows): the sharded HNSW collection within 0.01 of one node's HNSW.
TEST_F(ClusterTest, ShardedHnswRecallMatchesOneNode) {
  ASSERT_TRUE(
      Create(Node(2), "hnsw", 3, 1, pb::METRIC_UNSPECIFIED, "HNSW32").ok());
  ASSERT_TRUE(Create(env->single->stub(), "hnsw", 0, 0, pb::METRIC_UNSPECIFIED,
                     "HNSW32")
                  .ok());
  Load("hnsw", 1200);
  pb::DeleteRequest del;
  del.set_collection("hnsw");
  for (int i = 0; i < 1200; i += 24) del.add_ids("id" + std::to_string(i));
  pb::DeleteResponse deleted;
  ASSERT_TRUE(Node(0)->Delete(Ctx().get(), del, &deleted).ok());
  ASSERT_TRUE(env->single->stub()->Delete(Ctx().get(), del, &deleted).ok());
  int cluster_found = 0, single_found = 0, total = 0;
  for (int q = 0; q < 30; ++q) {
    pb::SearchResponse truth, sharded, one;
    ASSERT_TRUE(env->single->stub()
                    ->Search(Ctx().get(), Query("docs", q, 10), &truth)
                    .ok());
    ASSERT_TRUE(
        Node(q)->Search(Ctx().get(), Query("hnsw", q, 10), &sharded).ok());
    ASSERT_TRUE(env->single->stub()
                    ->Search(Ctx().get(), Query("hnsw", q, 10), &one)
                    .ok());
    std::set<std::string> want;
    for (const auto& h : truth.hits()) want.insert(h.id());
    for (const auto& h : sharded.hits()) cluster_found += want.count(h.id());
    for (const auto& h : one.hits()) single_found += want.count(h.id());
    total += truth.hits_size();
  }
  const double cluster_recall = double(cluster_found) / total;
  const double single_recall = double(single_found) / total;
  std::printf("HNSW recall@10: cluster %.4f, one node %.4f\n", cluster_recall,
              single_recall);
  EXPECT_GE(cluster_recall, single_recall - 0.01);
}

TEST_F(ClusterTest, ShardedL2EqualsOneNode) {
  ASSERT_TRUE(Create(Node(1), "l2", 3, 1, pb::METRIC_L2).ok());
  ASSERT_TRUE(Create(env->single->stub(), "l2", 0, 0, pb::METRIC_L2).ok());
  Load("l2", 400);
  ExpectSearchesMatch("l2", 12, [](pb::SearchRequest*) {});
}

TEST_F(ClusterTest, StatusCommandListsNodesAndShards) {
  const std::string cmd = ZerovecBinary().string() +
                          " cluster status --cluster " +
                          env->etcd->endpoints() + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_NE(out.find("nodes (3 live)"), std::string::npos) << out;
  EXPECT_NE(out.find("collection docs: epoch"), std::string::npos) << out;
  EXPECT_NE(out.find("shard 3: nodes"), std::string::npos) << out;
  // Per replica of "docs" (4 shards, RF 2, quiet since its 1,150 live rows
  // were written): its node, its rows and a lag of 0; the replicas of a
  // shard hold the same rows, the shards together every row once.
  const size_t docs = out.find("collection docs:");
  const std::string section =
      out.substr(docs, out.find("collection ", docs + 1) - docs);
  std::regex line("replica node ([0-9]+): ([0-9]+) rows, lag ([0-9]+)");
  uint64_t rows = 0;
  int replicas = 0;
  for (std::sregex_iterator it(section.begin(), section.end(), line), end;
       it != end; ++it) {
    ++replicas;
    rows += std::stoull((*it)[2]);
    EXPECT_EQ((*it)[3], "0") << it->str();
  }
  EXPECT_EQ(replicas, 8) << section;
  EXPECT_EQ(rows, 2u * 1150u) << section;
}

// Same-host attach per node: a co-located process attaches the local shard
// collections read-only (`zerovec attach --data NODE_DIR --collection
// docs--shardN`). One attached replica of every shard, merged by score, gives
// the cluster's own top-k.
TEST_F(ClusterTest, AttachedLocalShardsGiveTheClusterAnswer) {
  auto kv = env->client->Get(cluster::CollectionKey("docs"));
  ASSERT_TRUE(kv.ok() && kv->has_value());
  auto map = cluster::ShardMapFromJson((*kv)->value);
  ASSERT_TRUE(map.ok()) << map.status();
  const int k = 10;
  for (int q = 0; q < 3; ++q) {
    const auto v = VectorFor("q" + std::to_string(q), kDim);
    const std::filesystem::path vector_file =
        env->dir / ("attach_q" + std::to_string(q) + ".txt");
    {
      std::ofstream out(vector_file);
      out << std::setprecision(9);  // the float itself, not a rounding
      for (float x : v) out << x << ' ';
    }
    std::vector<std::pair<float, std::string>> merged;
    for (int shard = 0; shard < map->shards(); ++shard) {
      ASSERT_FALSE(map->replicas[shard].empty());
      const int64_t node =
          map->replicas[shard][q % map->replicas[shard].size()];
      const std::string cmd =
          ZerovecBinary().string() + " attach --json --k " + std::to_string(k) +
          " --data " + (env->dir / ("node" + std::to_string(node))).string() +
          " --collection " + cluster::LocalShardName("docs", shard) +
          " --vector-file " + vector_file.string() + " 2>&1";
      FILE* p = ::popen(cmd.c_str(), "r");
      ASSERT_NE(p, nullptr);
      std::string out;
      char buf[4096];
      while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
      ASSERT_EQ(::pclose(p), 0) << cmd << ": " << out;
      const auto doc = nlohmann::json::parse(out, nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << out;
      ASSERT_FALSE(doc["hits"].empty()) << out;
      for (const auto& h : doc["hits"]) {
        EXPECT_EQ(cluster::ShardOf(h["id"].get<std::string>(), map->shards()),
                  shard)
            << h;
        merged.emplace_back(h["score"].get<float>(),
                            h["id"].get<std::string>());
      }
    }
    std::sort(merged.begin(), merged.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    pb::SearchResponse cluster_hits;
    ASSERT_TRUE(
        Node(q)->Search(Ctx().get(), Query("docs", q, k), &cluster_hits).ok());
    ASSERT_EQ(cluster_hits.hits_size(), k);
    for (int i = 0; i < k; ++i) {
      EXPECT_EQ(merged[i].second, cluster_hits.hits(i).id())
          << "query " << q << " rank " << i;
      EXPECT_FLOAT_EQ(merged[i].first, cluster_hits.hits(i).score());
    }
  }
}

TEST_F(ClusterTest, BadConfigurationIsAClearError) {
  std::string error;
  ServeOptions o;
  o.data_dir = env->dir / "bad";
  o.extra_flags = {"--cluster",
                   "etcd://127.0.0.1:" + std::to_string(testing::FreePort()),
                   "--node-id", "9"};
  EXPECT_EQ(ServerProcess::Start(o, &error), nullptr);
  EXPECT_NE(error.find("is etcd running?"), std::string::npos) << error;

  o.extra_flags = NodeFlags(2, env->etcd->endpoints());  // node 2 is live
  EXPECT_EQ(ServerProcess::Start(o, &error), nullptr);
  EXPECT_NE(error.find("a live node already has this id"), std::string::npos)
      << error;

  o.extra_flags = {"--cluster", env->etcd->endpoints()};
  EXPECT_EQ(ServerProcess::Start(o, &error), nullptr);
  EXPECT_NE(error.find("needs --node-id"), std::string::npos) << error;

  grpc::Status s = Create(Node(0), "toowide", 2, 4);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("replication_factor 4"), std::string::npos);
  s = Create(env->single->stub(), "noshards", 2, 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  s = Create(Node(0), "docs", 2, 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
}

TEST_F(ClusterTest, NewerMapFormatIsRefusedNotGuessed) {
  cluster::ShardMap future;
  future.name = "future";
  future.format = cluster::kShardMapFormat + 1;
  future.dim = kDim;
  future.replicas = {{1}};
  ASSERT_TRUE(
      env->client
          ->Put(cluster::CollectionKey("future"), cluster::ToJson(future))
          .ok());
  grpc::Status s;
  for (int i = 0; i < 50; ++i) {  // the nodes' watches deliver it
    pb::SearchResponse resp;
    s = Node(1)->Search(Ctx().get(), Query("future", 0, 3), &resp);
    if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("upgrade this node"), std::string::npos)
      << s.error_message();
  ASSERT_TRUE(env->client->Delete(cluster::CollectionKey("future")).ok());
}

TEST_F(ClusterTest, MapChangesOnlyByCompareEpoch) {
  // Bump the epoch (same replicas) as another node would: searches keep
  // answering exactly (nodes re-read the map), and a writer still holding
  // the old map loses its compare-and-swap.
  const std::string key = cluster::CollectionKey("docs");
  auto kv = env->client->Get(key);
  ASSERT_TRUE(kv.ok() && kv->has_value());
  auto map = cluster::ShardMapFromJson((*kv)->value);
  ASSERT_TRUE(map.ok());
  cluster::ShardMap next = *map;
  next.epoch = map->epoch + 1;
  using cluster::Compare;
  using cluster::TxnOp;
  auto swapped =
      env->client->Txn({{key, Compare::Target::kValue, 0, (*kv)->value}},
                       {{TxnOp::Kind::kPut, key, cluster::ToJson(next), 0}});
  ASSERT_TRUE(swapped.ok() && *swapped);
  auto stale =
      env->client->Txn({{key, Compare::Target::kValue, 0, (*kv)->value}},
                       {{TxnOp::Kind::kPut, key, cluster::ToJson(next), 0}});
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(*stale);
  ExpectSearchesMatch("docs", 6, [](pb::SearchRequest*) {});
  EXPECT_EQ(Describe(Node(2), "docs").shard_map_epoch(), next.epoch);
}

TEST_F(ClusterTest, EtcdMemberKilledAndRestarted) {
  env->etcd->Kill(0);
  ExpectSearchesMatch("docs", 6, [](pb::SearchRequest*) {});
  pb::UpsertResponse resp;
  pb::UpsertRequest req = Batch("docs", 5000, 10);
  grpc::Status s;
  for (int i = 0; i < 20; ++i) {  // a call may meet the dead member once
    s = Node(0)->Upsert(Ctx().get(), req, &resp);
    if (s.ok()) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(env->etcd->Restart(0));
  ASSERT_TRUE(env->single->stub()->Upsert(Ctx().get(), req, &resp).ok());
  ExpectSearchesMatch("docs", 6, [](pb::SearchRequest*) {});
}

// A writer through node 1 and searchers through nodes 1 and 2 while node 3
// is SIGKILLed at a random moment.
TEST_F(ClusterTest, KilledNodeLosesNoAcknowledgedWrite) {
  ASSERT_TRUE(Create(Node(0), "kv", 3, 2).ok());
  std::mutex mu;
  std::set<std::string> acked;
  std::atomic<bool> stop{false};
  std::atomic<int> write_errors{0}, searches{0}, search_errors{0};
  std::atomic<int> next_id{0};
  std::thread writer([&] {
    auto stub = env->nodes[0]->NewStub();
    while (!stop) {
      const int from = next_id.fetch_add(10);
      pb::UpsertRequest req = Batch("kv", from, 10);
      pb::UpsertResponse resp;
      if (stub->Upsert(Ctx(4000ms).get(), req, &resp).ok()) {
        std::lock_guard<std::mutex> lock(mu);
        for (const auto& item : req.items()) acked.insert(item.id());
      } else {
        ++write_errors;
        std::this_thread::sleep_for(50ms);
      }
    }
  });
  std::vector<std::thread> searchers;
  for (int n = 0; n < 2; ++n) {
    searchers.emplace_back([&, n] {
      auto stub = env->nodes[n]->NewStub();
      for (int q = 0; !stop; ++q) {
        pb::SearchResponse resp;
        if (stub->Search(Ctx(4000ms).get(), Query("kv", q, 5), &resp).ok())
          ++searches;
        else
          ++search_errors;
      }
    });
  }
  std::mt19937 rng(std::random_device{}());
  std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 1200));
  env->nodes[2]->Kill();
  int acked_at_kill = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    acked_at_kill = static_cast<int>(acked.size());
  }
  std::this_thread::sleep_for(5s);  // past the 2 s lease
  stop = true;
  writer.join();
  for (auto& t : searchers) t.join();
  std::printf(
      "kill: %zu writes acknowledged (%d before the kill), %d write "
      "errors, %d searches answered, %d search errors\n",
      acked.size(), acked_at_kill, write_errors.load(), searches.load(),
      search_errors.load());
  EXPECT_GT(static_cast<int>(acked.size()), acked_at_kill)
      << "writes resume once the dead node's lease expires";
  EXPECT_GT(searches.load(), 0);

  // Node 3 is out of every shard it held: of "kv" (written to) and of
  // "docs" (not written to since: dropped by the lowest live node).
  for (const char* coll : {"kv", "docs"}) {
    auto map = cluster::ShardMapFromJson(
        (*env->client->Get(cluster::CollectionKey(coll)))->value);
    ASSERT_TRUE(map.ok());
    for (const auto& replicas : map->replicas) {
      EXPECT_EQ(std::count(replicas.begin(), replicas.end(), 3), 0) << coll;
      EXPECT_FALSE(replicas.empty()) << coll;
    }
  }
  // It rejoins (same id, its lease gone) without serving its stale shards:
  // every acknowledged write is readable through every node.
  std::string error;
  env->nodes[2] = StartNode(3, &error);
  ASSERT_NE(env->nodes[2], nullptr) << error;
  std::vector<std::string> ids(acked.begin(), acked.end());
  for (int n = 0; n < kNodes; ++n) {
    for (size_t from = 0; from < ids.size(); from += 500) {
      pb::GetRequest get;
      get.set_collection("kv");
      for (size_t i = from; i < std::min(ids.size(), from + 500); ++i)
        get.add_ids(ids[i]);
      pb::GetResponse resp;
      grpc::Status s = Node(n)->Get(Ctx().get(), get, &resp);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(resp.items_size(), get.ids_size()) << "through node " << n + 1;
    }
  }
}

}  // namespace
}  // namespace zv::faults
