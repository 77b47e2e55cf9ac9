// The cluster's state in etcd and the pure functions over it: node records,
// a collection's shard map (shard -> replicas, epoch), shard of an id, and
// the names of the local collections that hold shards. No I/O.
#ifndef ZEROVEC_CLUSTER_SHARD_MAP_H_
#define ZEROVEC_CLUSTER_SHARD_MAP_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
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
// build is refused (FAILED_PRECONDITION), never half-understood. Format 2
// adds joining replicas; a map is written as format 1 until it has had one,
// so a format-1 build keeps reading maps that never needed a rebuild (and
// refuses the others: it would not send writes to the joiners).
inline constexpr int kShardMapFormat = 2;

struct NodeInfo {
  int64_t id = 0;
  std::string address;  // host:port of its zerovec.v1.ZeroVec service
};

// A replica being rebuilt (snapshot + catch-up): it receives every write of
// its shard but serves no read until it joins the in-sync replicas.
struct Joiner {
  int64_t node = 0;
  // The epoch of the map that added it: one rebuild attempt (a node dropped
  // and re-added is a new attempt, whose copy starts again).
  int64_t since = 0;
  // The lease the node was registered under when added: a node that
  // restarted (a new lease) does not continue a rebuild it may have taken
  // writes for before its crash.
  int64_t lease = 0;
  bool operator==(const Joiner&) const = default;
};

struct ShardMap {
  int format = 1;  // written as max(format, 2 if any joiner)
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
  // replicas[s]: the node ids holding shard s, all of them in sync: each
  // holds every acknowledged write of the shard.
  std::vector<std::vector<int64_t>> replicas;
  // joining[s]: replicas of shard s being rebuilt (empty, or one list per
  // shard).
  std::vector<std::vector<Joiner>> joining;

  int shards() const { return static_cast<int>(replicas.size()); }
  // joining[s], or none.
  const std::vector<Joiner>& Joining(int shard) const;
  // The joiner entry of `node` in shard `shard`, or null.
  const Joiner* FindJoiner(int shard, int64_t node) const;
  bool HasReplica(int shard, int64_t node) const;
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

// The live node that should start rebuilding a replica of `shard`, if the
// shard has fewer in-sync plus joining replicas than the replication factor
// and at least one in-sync replica to copy from: among `live` nodes that
// neither hold nor are joining it, the one holding the fewest shards of the
// map (then the lowest id). nullopt when nothing is to be done.
std::optional<int64_t> PickJoiner(const ShardMap& map, int shard,
                                  const std::set<int64_t>& live);

// The local collection holding shard `shard` of `name` on a replica:
// "<name>--shard<N>" (a valid collection name; cluster collection names are
// kept short enough for it).
std::string LocalShardName(const std::string& name, int shard);
// Inverse of LocalShardName; false if `local` is not such a name.
bool ParseLocalShardName(const std::string& local, std::string* name,
                         int* shard);

}  // namespace zv::cluster

#endif  // ZEROVEC_CLUSTER_SHARD_MAP_H_
