// Cluster mode (issue 18): a node of a ZeroVec cluster coordinated by etcd.
// The one public header of cluster/.
//
// The node registers itself in etcd under a lease, keeps a cache of the live
// nodes and the shard maps (a watch), and stands in front of the node's local
// zerovec.v1.ZeroVec service: a request for a sharded collection is routed to
// the nodes holding its shards (upserts to every live replica of the id's
// shard, searches scattered to one replica of every shard and merged), any
// other request goes to the local service unchanged.
//
// Shards live on their replicas as ordinary local collections
// ("<name>--shard<N>"); nodes call each other through the same public API
// with the metadata "x-zerovec-shard-epoch: <epoch>", which a replica checks
// against the shard map (epoch and membership) before it touches a shard.
#ifndef ZEROVEC_CLUSTER_CLUSTER_H_
#define ZEROVEC_CLUSTER_CLUSTER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace zv::cluster {

struct ClusterOptions {
  // etcd://host:port[,host:port...]
  std::string etcd;
  // This node's id, unique in the cluster (>= 1).
  int64_t node_id = 0;
  // The host other nodes reach this one at; the port is the bound one.
  std::string advertise_host = "127.0.0.1";
  // The node's lease: it leaves the cluster this long after it stops
  // renewing (a crash).
  int64_t lease_ttl_s = 10;
  // Deadline of one call to another node (per shard of a search).
  std::chrono::milliseconds shard_timeout{5000};
  // false: a search missing a shard (no replica answered) fails with
  // UNAVAILABLE; true: it answers from the shards that did.
  bool allow_partial_results = false;
  // Sent to the other nodes when the cluster runs with auth.
  std::optional<std::string> auth_token;
  std::function<void(const std::string&)> log;
};

class ClusterNode {
 public:
  // Connects to etcd (UNAVAILABLE naming the endpoints if none answers) and
  // loads the cluster state. `local` must outlive the node.
  static StatusOr<std::unique_ptr<ClusterNode>> Create(
      const ClusterOptions& options, zerovec::v1::ZeroVec::Service* local);
  virtual ~ClusterNode() = default;

  // The service clients reach.
  virtual zerovec::v1::ZeroVec::Service* service() = 0;
  // Registers the node as advertise_host:port under its lease, created only
  // if no live node has the id (ALREADY_EXISTS naming the holder otherwise),
  // and keeps the lease alive.
  virtual Status Register(int port) = 0;
  // Leaves the cluster (revokes the lease). Idempotent.
  virtual void Leave() = 0;
};

}  // namespace zv::cluster

#endif  // ZEROVEC_CLUSTER_CLUSTER_H_
