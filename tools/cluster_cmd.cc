// zerovec cluster status: the cluster's nodes and shard maps, read from etcd,
// and each replica's rows and lag, asked of its node.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <optional>

#include "cluster/etcd_client.h"
#include "cluster/shard_map.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace zv::tools {
namespace {

namespace pb = zerovec::v1;

// What one node holds of one shard (asked as another node would: the shard
// map's epoch in the metadata), or why not.
struct ReplicaRows {
  std::optional<uint64_t> rows;  // live rows
  std::string error;
};

ReplicaRows AskReplica(const cluster::ShardMap& map, int shard,
                       const cluster::NodeInfo* node,
                       const std::optional<std::string>& token) {
  if (!node) return {std::nullopt, "down"};
  auto stub = pb::ZeroVec::NewStub(
      grpc::CreateChannel(node->address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  ctx.AddMetadata("x-zerovec-shard-epoch", std::to_string(map.epoch));
  if (token) ctx.AddMetadata("authorization", "Bearer " + *token);
  pb::DescribeCollectionRequest req;
  req.set_name(cluster::LocalShardName(map.name, shard));
  pb::CollectionInfo info;
  grpc::Status s = stub->DescribeCollection(&ctx, req, &info);
  if (!s.ok()) return {std::nullopt, s.error_message()};
  return {info.live_rows(), ""};
}

// Per shard: its in-sync replicas and joiners, each with its live rows and
// lag (rows behind the shard's fullest in-sync replica: 0 in a quiet
// cluster; the node counts are read one after another, not at one instant).
void PrintMap(const cluster::ShardMap& map,
              const std::map<int64_t, cluster::NodeInfo>& nodes,
              const std::optional<std::string>& token) {
  std::cout << "collection " << map.name << ": epoch " << map.epoch << ", "
            << map.shards() << " shards, replication " << map.replication_factor
            << ", write quorum "
            << (map.write_quorum ? std::to_string(map.write_quorum)
                                 : std::string("all live"))
            << ", " << map.index << " dim " << map.dim << "\n";
  const auto find = [&](int64_t id) -> const cluster::NodeInfo* {
    auto it = nodes.find(id);
    return it == nodes.end() ? nullptr : &it->second;
  };
  for (int s = 0; s < map.shards(); ++s) {
    std::cout << "  shard " << s << ": nodes";
    int live = 0;
    for (size_t i = 0; i < map.replicas[s].size(); ++i) {
      const int64_t id = map.replicas[s][i];
      const bool up = nodes.count(id) > 0;
      live += up;
      std::cout << (i ? ", " : " ") << id << (up ? "" : " (down)");
    }
    std::cout << "  [" << live << "/" << map.replicas[s].size() << " live";
    if (map.replicas[s].size() < static_cast<size_t>(map.replication_factor))
      std::cout << ", under-replicated";
    std::cout << "]\n";
    std::vector<std::pair<std::string, ReplicaRows>> rows;
    uint64_t most = 0;
    for (int64_t id : map.replicas[s]) {
      rows.push_back({"replica node " + std::to_string(id),
                      AskReplica(map, s, find(id), token)});
      most = std::max(most, rows.back().second.rows.value_or(0));
    }
    for (const cluster::Joiner& j : map.Joining(s)) {
      rows.push_back({"joining node " + std::to_string(j.node) +
                          " (rebuilding since epoch " +
                          std::to_string(j.since) + ")",
                      AskReplica(map, s, find(j.node), token)});
    }
    for (const auto& [who, r] : rows) {
      std::cout << "    " << who << ": ";
      if (r.rows) {
        std::cout << *r.rows << " rows, lag "
                  << (most > *r.rows ? most - *r.rows : 0) << "\n";
      } else {
        std::cout << "rows unknown (" << r.error << ")\n";
      }
    }
  }
}

Status Status_(const Flags& flags) {
  ZV_ASSIGN_OR_RETURN(const std::string endpoints, flags.Require("cluster"));
  std::optional<std::string> token;
  if (flags.Has("auth-token-file")) {
    auto secret = ReadSecretFile(flags.Get("auth-token-file"));
    if (!secret.ok()) return FailedPreconditionError(secret.status().message());
    token = *secret;
  }
  ZV_ASSIGN_OR_RETURN(auto etcd, cluster::EtcdClient::Connect({endpoints}));
  ZV_ASSIGN_OR_RETURN(auto kvs,
                      etcd->Range(cluster::kNodesPrefix, true, nullptr));
  std::map<int64_t, cluster::NodeInfo> nodes;
  for (const auto& kv : kvs) {
    ZV_ASSIGN_OR_RETURN(auto node, cluster::NodeFromJson(kv.value));
    nodes[node.id] = node;
  }
  std::cout << "etcd " << endpoints << "\nnodes (" << nodes.size()
            << " live):\n";
  for (const auto& [id, node] : nodes)
    std::cout << "  node " << id << " at " << node.address << "\n";
  ZV_ASSIGN_OR_RETURN(kvs,
                      etcd->Range(cluster::kCollectionsPrefix, true, nullptr));
  if (kvs.empty()) std::cout << "no sharded collections\n";
  for (const auto& kv : kvs) {
    auto map = cluster::ShardMapFromJson(kv.value);
    if (!map.ok()) {
      std::cout << kv.key << ": " << map.status().message() << "\n";
      continue;
    }
    PrintMap(*map, nodes, token);
  }
  return OkStatus();
}

}  // namespace

int RunCluster(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "status") {
    return Fail("cluster",
                InvalidArgumentError("expected a subcommand: status"), true);
  }
  auto flags = Flags::Parse({args.begin() + 1, args.end()},
                            {"cluster", "auth-token-file"}, {});
  if (!flags.ok()) return Fail("cluster", flags.status(), true);
  if (Status s = Status_(*flags); !s.ok())
    return Fail("cluster", s, IsUsageError(s));
  return 0;
}

}  // namespace zv::tools
