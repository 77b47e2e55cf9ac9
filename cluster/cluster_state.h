// Internal to cluster/: the node's view of the cluster in etcd (live nodes and
// shard maps, cached and kept current by a watch) and the transactions that
// change it.
#ifndef ZEROVEC_CLUSTER_CLUSTER_STATE_H_
#define ZEROVEC_CLUSTER_CLUSTER_STATE_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/etcd_client.h"
#include "cluster/shard_map.h"

namespace zv::cluster {

class ClusterState {
 public:
  // Reads every node and shard map, then watches for changes.
  static StatusOr<std::unique_ptr<ClusterState>> Load(
      std::unique_ptr<EtcdClient> etcd,
      std::function<void(const std::string&)> log);
  ~ClusterState();

  EtcdClient* etcd() { return etcd_.get(); }

  // Creates this node's key under a new lease if no node holds the id, and
  // keeps the lease alive. ALREADY_EXISTS (naming the holder's address) if
  // one does.
  Status Register(const NodeInfo& self, int64_t ttl_s);
  void Leave();

  std::map<int64_t, NodeInfo> Nodes() const;
  // The cached map; nullopt when the collection is not a cluster one; the
  // error when its map is unreadable here (FAILED_PRECONDITION for a newer
  // format).
  StatusOr<std::optional<ShardMap>> Map(const std::string& name) const;
  // True between a successful Register and Leave.
  bool Registered() const;
  // This node's lease while registered, else 0.
  int64_t Lease() const;
  // True once this node's lease went unrenewed for longer than its TTL (etcd
  // unreachable): the rest of the cluster may have dropped it.
  bool Fenced() const;
  // Every cached (readable) map.
  std::vector<ShardMap> Maps() const;
  // Reads the map from etcd (bypassing the cache) and caches it.
  StatusOr<std::optional<ShardMap>> FetchMap(const std::string& name);

  // Stores a new map at epoch 1 if the name is free (ALREADY_EXISTS if not).
  Status CreateMap(const ShardMap& map);
  // Replaces `current` by `next` (its epoch becomes current.epoch + 1) only
  // if etcd still holds `current`: ABORTED if another writer changed it first.
  Status UpdateMap(const ShardMap& current, ShardMap next);
  // Deletes the map if etcd still holds `current` (ABORTED if not).
  Status DeleteMap(const ShardMap& current);

 private:
  ClusterState(std::unique_ptr<EtcdClient> etcd,
               std::function<void(const std::string&)> log)
      : etcd_(std::move(etcd)), log_(std::move(log)) {}
  Status Reload(int64_t* revision);
  void Apply(const std::vector<WatchEvent>& events);

  std::unique_ptr<EtcdClient> etcd_;
  std::function<void(const std::string&)> log_;
  mutable std::mutex mu_;
  std::map<int64_t, NodeInfo> nodes_;
  std::map<std::string, ShardMap> maps_;
  std::map<std::string, Status> unreadable_maps_;
  int64_t ttl_s_ = 0;
  std::unique_ptr<Watcher> watcher_;
  int64_t lease_ = 0;
  std::unique_ptr<LeaseKeeper> keeper_;
};

}  // namespace zv::cluster

#endif  // ZEROVEC_CLUSTER_CLUSTER_STATE_H_
