// zerovec cluster status: the cluster's nodes and shard maps, read from etcd.
#include <iostream>
#include <map>

#include "cluster/etcd_client.h"
#include "cluster/shard_map.h"
#include "tools/commands.h"

namespace zv::tools {
namespace {

void PrintMap(const cluster::ShardMap& map,
              const std::map<int64_t, cluster::NodeInfo>& nodes) {
  std::cout << "collection " << map.name << ": epoch " << map.epoch << ", "
            << map.shards() << " shards, replication " << map.replication_factor
            << ", write quorum "
            << (map.write_quorum ? std::to_string(map.write_quorum)
                                 : std::string("all live"))
            << ", " << map.index << " dim " << map.dim << "\n";
  for (int s = 0; s < map.shards(); ++s) {
    std::cout << "  shard " << s << ": nodes";
    int live = 0;
    for (size_t i = 0; i < map.replicas[s].size(); ++i) {
      const int64_t id = map.replicas[s][i];
      const bool up = nodes.count(id) > 0;
      live += up;
      std::cout << (i ? ", " : " ") << id << (up ? "" : " (down)");
    }
    std::cout << "  [" << live << "/" << map.replicas[s].size() << " live]\n";
  }
}

Status Status_(const Flags& flags) {
  ZV_ASSIGN_OR_RETURN(const std::string endpoints, flags.Require("cluster"));
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
    PrintMap(*map, nodes);
  }
  return OkStatus();
}

}  // namespace

int RunCluster(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "status") {
    return Fail("cluster",
                InvalidArgumentError("expected a subcommand: status"), true);
  }
  auto flags = Flags::Parse({args.begin() + 1, args.end()}, {"cluster"}, {});
  if (!flags.ok()) return Fail("cluster", flags.status(), true);
  if (Status s = Status_(*flags); !s.ok())
    return Fail("cluster", s, IsUsageError(s));
  return 0;
}

}  // namespace zv::tools
