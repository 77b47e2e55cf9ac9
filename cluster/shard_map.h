// The cluster's state in etcd and the pure functions over it: node records,
// a collection's shard map (shard -> replicas, epoch), shard of an id, and
// the names of the local collections that hold shards. No I/O.
#ifndef ZEROVEC_CLUSTER_SHARD_MAP_H_
#define ZEROVEC_CLUSTER_SHARD_MAP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace zv::cluster {

// Keys in etcd:
//   /zerovec/nodes/<id>         NodeInfo JSON, under the node's lease
//   /zerovec/collections/<name> ShardMap JSON, changed only by transactions
//                               that compare its epoch (its stored value)
inline constexpr char kNodesPrefix[] = "/zerovec/nodes/";
inline constexpr char kCollectionsPrefix[] = "/zerovec/collections/";

// The newest shard map format this build reads; a map written by a newer
// build is refused (FAILED_PRECONDITION), never half-understood.
inline constexpr int kShardMapFormat = 1;

struct NodeInfo {
  int64_t id = 0;
  std::string address;  // host:port of its zerovec.v1.ZeroVec service
};

struct ShardMap {
  int format = kShardMapFormat;
  std::string name;
  int64_t epoch = 1;  // bumped by every change of the map
  // The collection's options, as CreateCollection gave them.
  uint32_t dim = 0;
  int metric = 0;  // zerovec.v1.Metric
  std::string index;
  int64_t default_ttl_ms = 0;
  bool lexical = false;
  int replication_factor = 1;
  // Replicas that must have a write before it is acknowledged; 0: every live
  // replica of the shard.
  int write_quorum = 0;
  // replicas[s]: the node ids holding shard s.
  std::vector<std::vector<int64_t>> replicas;

  int shards() const { return static_cast<int>(replicas.size()); }
};

std::string NodeKey(int64_t id);
std::string CollectionKey(const std::string& name);
std::string ToJson(const NodeInfo& node);
StatusOr<NodeInfo> NodeFromJson(const std::string& json);
std::string ToJson(const ShardMap& map);
// FAILED_PRECONDITION for a format newer than kShardMapFormat.
StatusOr<ShardMap> ShardMapFromJson(const std::string& json);

// The shard an id belongs to: FNV-1a 64 of its bytes mod `shards`. Fixed for
// the collection's life (the shard count never changes), so ids keep their
// shard.
int ShardOf(const std::string& id, int shards);

// Replicas for `shards` shards over the live `node_ids` (sorted), spreading
// shards round-robin: shard s gets nodes s, s+1, ... s+rf-1 (mod n).
// FAILED_PRECONDITION when there are fewer nodes than rf.
StatusOr<std::vector<std::vector<int64_t>>> AssignReplicas(
    std::vector<int64_t> node_ids, int shards, int replication_factor);

// The local collection holding shard `shard` of `name` on a replica:
// "<name>--shard<N>" (a valid collection name; cluster collection names are
// kept short enough for it).
std::string LocalShardName(const std::string& name, int shard);
// Inverse of LocalShardName; false if `local` is not such a name.
bool ParseLocalShardName(const std::string& local, std::string* name,
                         int* shard);

}  // namespace zv::cluster

#endif  // ZEROVEC_CLUSTER_SHARD_MAP_H_
