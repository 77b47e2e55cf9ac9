// A small etcd v3 client: KV (range, put, delete, txn), leases (grant, revoke,
// keepalive) and watches, over etcd's own gRPC API.
//
// gRPC rather than etcd's JSON gateway: the stubs are generated from the
// .proto files Debian ships with etcd 3.4 (//third_party/etcd), so requests
// are typed and checked at compile time; keepalive and watch are native bidi
// streams (the gateway turns them into chunked HTTP responses and base64 keys);
// and ZeroVec already links gRPC, where the gateway would need an HTTP client
// and a JSON layer on top.
#ifndef ZEROVEC_CLUSTER_ETCD_CLIENT_H_
#define ZEROVEC_CLUSTER_ETCD_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace zv::cluster {

struct EtcdOptions {
  // "etcd://host:port[,host:port...]" (the scheme is optional). Several
  // endpoints (members of one cluster) are balanced over and failed over.
  std::string endpoints;
  // Deadline of each unary call (and of the probe in Connect).
  std::chrono::milliseconds timeout{5000};
};

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;  // writes since creation; 0: absent
  int64_t lease = 0;
};

// One condition of a transaction: the key's version / mod revision / value
// equals the given one (version 0 = the key does not exist).
struct Compare {
  enum class Target { kVersion, kModRevision, kValue };
  std::string key;
  Target target = Target::kVersion;
  int64_t number = 0;  // kVersion, kModRevision
  std::string value;   // kValue
};

// One operation of a transaction's success branch.
struct TxnOp {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;
  int64_t lease = 0;
};

struct WatchEvent {
  bool deleted = false;  // else a put
  KeyValue kv;
};

// Keeps a lease alive on its own thread (a LeaseKeepAlive stream, one ping a
// third of the TTL, reconnecting when a member goes away). Stops on
// destruction.
class LeaseKeeper {
 public:
  virtual ~LeaseKeeper() = default;
  // When etcd last confirmed the lease (the keeper's start before that).
  virtual std::chrono::steady_clock::time_point last_renewed() const = 0;
};

// Delivers the events under a prefix from a revision on, in order, on its own
// thread. Stops on destruction.
class Watcher {
 public:
  virtual ~Watcher() = default;
};

class EtcdClient {
 public:
  // Connects and probes the cluster (a range read within the timeout): no
  // reachable etcd is UNAVAILABLE naming the endpoints.
  static StatusOr<std::unique_ptr<EtcdClient>> Connect(
      const EtcdOptions& options);
  virtual ~EtcdClient() = default;

  virtual const std::string& endpoints() const = 0;

  // Keys equal to `key`, or (prefix = true) starting with it, sorted by key;
  // *revision (if set) gets the store revision they were read at.
  virtual StatusOr<std::vector<KeyValue>> Range(const std::string& key,
                                                bool prefix,
                                                int64_t* revision) = 0;
  virtual StatusOr<std::optional<KeyValue>> Get(const std::string& key) = 0;
  virtual Status Put(const std::string& key, const std::string& value,
                     int64_t lease = 0) = 0;
  virtual Status Delete(const std::string& key) = 0;
  // Applies `ops` atomically if every comparison holds; returns whether they
  // held (false: nothing was written).
  virtual StatusOr<bool> Txn(const std::vector<Compare>& if_all,
                             const std::vector<TxnOp>& ops) = 0;

  // A new lease of `ttl_s` seconds; returns its id.
  virtual StatusOr<int64_t> GrantLease(int64_t ttl_s) = 0;
  virtual Status RevokeLease(int64_t lease) = 0;
  // `on_lost` runs (once, on the keeper's thread) when etcd says the lease
  // has expired.
  virtual std::unique_ptr<LeaseKeeper> KeepAlive(
      int64_t lease, int64_t ttl_s, std::function<void()> on_lost) = 0;

  // Events under `prefix` from `start_revision` on. `on_events` runs on the
  // watcher's thread; `on_error` when the history it needs was compacted
  // away (the caller re-reads and watches again).
  virtual std::unique_ptr<Watcher> Watch(
      const std::string& prefix, int64_t start_revision,
      std::function<void(const std::vector<WatchEvent>&)> on_events,
      std::function<void(const Status&)> on_error) = 0;
};

// "etcd://a:1,b:2" -> the gRPC target ("ipv4:a:1,b:2" for IPv4 literals,
// "dns:///a:1" for one host name). INVALID_ARGUMENT for anything else.
StatusOr<std::string> EtcdTarget(const std::string& endpoints);

}  // namespace zv::cluster

#endif  // ZEROVEC_CLUSTER_ETCD_CLIENT_H_
