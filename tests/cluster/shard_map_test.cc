// The pure shard-map rules: JSON round trip, newer formats refused, shard of
// an id, replica assignment, local shard names.
#include "cluster/shard_map.h"

#include <gtest/gtest.h>

#include <set>

namespace zv::cluster {
namespace {

TEST(ShardMapTest, JsonRoundTrip) {
  ShardMap m;
  m.name = "docs";
  m.epoch = 7;
  m.dim = 32;
  m.metric = 2;
  m.index = "HNSW32";
  m.replication_factor = 2;
  m.write_quorum = 1;
  m.replicas = {{1, 2}, {2, 3}};
  auto back = ShardMapFromJson(ToJson(m));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ToJson(*back), ToJson(m));
  EXPECT_EQ(back->shards(), 2);
}

// A map stays format 1 (readable by builds before joiners) until it has a
// joiner; from then on it is format 2 and keeps its joiners exactly.
TEST(ShardMapTest, JoinersRoundTripAsFormat2) {
  ShardMap m;
  m.name = "docs";
  m.replication_factor = 2;
  m.replicas = {{1, 2}, {2}};
  EXPECT_EQ(ToJson(m).find("joining"), std::string::npos);
  EXPECT_EQ(ShardMapFromJson(ToJson(m))->format, 1);
  m.joining = {{}, {{3, 9, 77}}};
  auto back = ShardMapFromJson(ToJson(m));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->format, 2);
  ASSERT_NE(back->FindJoiner(1, 3), nullptr);
  EXPECT_EQ(back->FindJoiner(1, 3)->since, 9);
  EXPECT_EQ(back->FindJoiner(1, 3)->lease, 77);
  EXPECT_EQ(back->FindJoiner(0, 3), nullptr);
  EXPECT_EQ(ToJson(*back), ToJson(m));
  // Joined: no joiner left, still format 2 (compare-and-swap needs the same
  // bytes back).
  back->joining[1].clear();
  back->replicas[1].push_back(3);
  auto joined = ShardMapFromJson(ToJson(*back));
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->format, 2);
  EXPECT_EQ(ToJson(*joined), ToJson(*back));
  EXPECT_TRUE(joined->HasReplica(1, 3));
}

TEST(ShardMapTest, PickJoinerTakesTheLeastLoadedFreeNode) {
  ShardMap m;
  m.replication_factor = 2;
  m.replicas = {{1, 2}, {2}, {1}};
  m.joining = {{}, {}, {}};
  EXPECT_EQ(PickJoiner(m, 0, {1, 2, 3}), std::nullopt);  // in sync
  EXPECT_EQ(PickJoiner(m, 1, {1, 2, 3}), 3);             // node 3 holds nothing
  EXPECT_EQ(PickJoiner(m, 1, {1, 2}), 1);
  EXPECT_EQ(PickJoiner(m, 2, {1}), std::nullopt);  // nobody else is live
  m.joining[1] = {{3, 4, 1}};
  EXPECT_EQ(PickJoiner(m, 1, {1, 2, 3}), std::nullopt);  // being rebuilt
  m.replicas[2].clear();                                 // nothing to copy from
  EXPECT_EQ(PickJoiner(m, 2, {1, 2, 3}), std::nullopt);
}

TEST(ShardMapTest, NewerFormatIsRefusedByName) {
  ShardMap m;
  m.name = "future";
  m.format = kShardMapFormat + 1;
  m.replicas = {{1}};
  auto back = ShardMapFromJson(ToJson(m));
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(back.status().message().find("upgrade"), std::string::npos);
  EXPECT_EQ(ShardMapFromJson("{not json").status().code(),
            StatusCode::kDataLoss);
}

TEST(ShardMapTest, ShardOfIsStableAndSpreads) {
  std::vector<int> counts(4);
  for (int i = 0; i < 4000; ++i) {
    const std::string id = "id" + std::to_string(i);
    const int s = ShardOf(id, 4);
    ASSERT_EQ(s, ShardOf(id, 4));
    ++counts[s];
  }
  for (int c : counts) EXPECT_GT(c, 800);
}

TEST(ShardMapTest, AssignReplicasSpreadsDistinctNodes) {
  auto r = AssignReplicas({3, 1, 2}, 4, 2);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 4u);
  std::vector<int> load(4);
  for (const auto& replicas : *r) {
    ASSERT_EQ(replicas.size(), 2u);
    EXPECT_NE(replicas[0], replicas[1]);
    for (int64_t id : replicas) ++load[id];
  }
  EXPECT_EQ(load[1] + load[2] + load[3], 8);
  EXPECT_EQ(AssignReplicas({1, 2}, 4, 3).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(ShardMapTest, LocalShardNames) {
  EXPECT_EQ(LocalShardName("docs", 3), "docs--shard3");
  std::string name;
  int shard = -1;
  ASSERT_TRUE(ParseLocalShardName("my--docs--shard12", &name, &shard));
  EXPECT_EQ(name, "my--docs");
  EXPECT_EQ(shard, 12);
  EXPECT_FALSE(ParseLocalShardName("docs", &name, &shard));
  EXPECT_FALSE(ParseLocalShardName("docs--shardx", &name, &shard));
}

}  // namespace
}  // namespace zv::cluster
