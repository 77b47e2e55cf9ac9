#include "cluster/cluster_state.h"

#include <utility>

namespace zv::cluster {
namespace {
Status AbortedError(std::string m) {
  return Status(StatusCode::kAborted, std::move(m));
}
}  // namespace

StatusOr<std::unique_ptr<ClusterState>> ClusterState::Load(
    std::unique_ptr<EtcdClient> etcd,
    std::function<void(const std::string&)> log) {
  std::unique_ptr<ClusterState> state(
      new ClusterState(std::move(etcd), std::move(log)));
  int64_t revision = 0;
  ZV_RETURN_IF_ERROR(state->Reload(&revision));
  ClusterState* raw = state.get();
  state->watcher_ = state->etcd_->Watch(
      "/zerovec/", revision + 1,
      [raw](const std::vector<WatchEvent>& events) { raw->Apply(events); },
      [raw](const Status& s) {
        // Requests still fetch a map from etcd when its epoch is newer than
        // the cached one, so a stale cache delays, never misroutes, a change.
        raw->log_("cluster: watch stopped: " + s.ToString());
      });
  return state;
}

ClusterState::~ClusterState() {
  watcher_.reset();
  Leave();
}

Status ClusterState::Reload(int64_t* revision) {
  ZV_ASSIGN_OR_RETURN(auto kvs, etcd_->Range("/zerovec/", true, revision));
  std::vector<WatchEvent> events;
  for (auto& kv : kvs) events.push_back({false, std::move(kv)});
  Apply(events);
  return OkStatus();
}

void ClusterState::Apply(const std::vector<WatchEvent>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const WatchEvent& e : events) {
    const std::string& key = e.kv.key;
    if (key.rfind(kNodesPrefix, 0) == 0) {
      const int64_t id =
          std::strtoll(key.c_str() + sizeof(kNodesPrefix) - 1, nullptr, 10);
      if (e.deleted) {
        nodes_.erase(id);
        log_("cluster: node " + std::to_string(id) + " left");
        continue;
      }
      auto node = NodeFromJson(e.kv.value);
      if (node.ok()) nodes_[id] = *node;
    } else if (key.rfind(kCollectionsPrefix, 0) == 0) {
      const std::string name = key.substr(sizeof(kCollectionsPrefix) - 1);
      auto cached = maps_.find(name);
      if (e.deleted) {
        maps_.erase(name);
        unreadable_maps_.erase(name);
        continue;
      }
      auto map = ShardMapFromJson(e.kv.value);
      // Never back: FetchMap may have cached a newer epoch than an event
      // the watch delivers late.
      if (map.ok() && cached != maps_.end() &&
          cached->second.epoch > map->epoch)
        continue;
      unreadable_maps_.erase(name);
      if (map.ok()) {
        maps_[name] = *map;
      } else {
        maps_.erase(name);
        unreadable_maps_[name] = map.status();
        log_("cluster: " + map.status().message());
      }
    }
  }
}

Status ClusterState::Register(const NodeInfo& self, int64_t ttl_s) {
  ZV_ASSIGN_OR_RETURN(const int64_t lease, etcd_->GrantLease(ttl_s));
  const std::string key = NodeKey(self.id);
  ZV_ASSIGN_OR_RETURN(
      const bool created,
      etcd_->Txn({{key, Compare::Target::kVersion, 0, ""}},
                 {{TxnOp::Kind::kPut, key, ToJson(self), lease}}));
  if (!created) {
    etcd_->RevokeLease(lease).ok();
    std::string holder = "another process";
    if (auto kv = etcd_->Get(key); kv.ok() && kv->has_value()) {
      if (auto node = NodeFromJson((*kv)->value); node.ok())
        holder = node->address;
    }
    return AlreadyExistsError(
        "--node-id " + std::to_string(self.id) +
        ": a live node already has this id (at " + holder +
        "); give each node its own id (it frees up when that node's lease "
        "expires)");
  }
  auto keeper = etcd_->KeepAlive(lease, ttl_s, [this, id = self.id] {
    log_("cluster: lease of node " + std::to_string(id) +
         " expired (etcd unreachable for longer than the lease?); this node "
         "is no longer a member: restart it");
  });
  std::lock_guard<std::mutex> lock(mu_);
  keeper_ = std::move(keeper);
  lease_ = lease;
  ttl_s_ = ttl_s;
  nodes_[self.id] = self;
  return OkStatus();
}

void ClusterState::Leave() {
  std::unique_ptr<LeaseKeeper> keeper;
  int64_t lease = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    keeper = std::move(keeper_);
    std::swap(lease, lease_);
  }
  keeper.reset();
  if (lease != 0) etcd_->RevokeLease(lease).ok();
}

int64_t ClusterState::Lease() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lease_;
}

std::map<int64_t, NodeInfo> ClusterState::Nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_;
}

StatusOr<std::optional<ShardMap>> ClusterState::Map(
    const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto bad = unreadable_maps_.find(name); bad != unreadable_maps_.end())
    return bad->second;
  auto it = maps_.find(name);
  if (it == maps_.end()) return std::optional<ShardMap>();
  return std::optional<ShardMap>(it->second);
}

StatusOr<std::optional<ShardMap>> ClusterState::FetchMap(
    const std::string& name) {
  ZV_ASSIGN_OR_RETURN(auto kv, etcd_->Get(CollectionKey(name)));
  std::lock_guard<std::mutex> lock(mu_);
  if (!kv.has_value()) {
    maps_.erase(name);
    return std::optional<ShardMap>();
  }
  ZV_ASSIGN_OR_RETURN(ShardMap map, ShardMapFromJson(kv->value));
  auto& cached = maps_[name];
  if (cached.epoch <= map.epoch) cached = map;
  return std::optional<ShardMap>(map);
}

std::vector<ShardMap> ClusterState::Maps() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ShardMap> out;
  for (const auto& [name, map] : maps_) out.push_back(map);
  return out;
}

bool ClusterState::Registered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keeper_ != nullptr;
}

bool ClusterState::Fenced() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!keeper_) return false;
  return std::chrono::steady_clock::now() - keeper_->last_renewed() >
         std::chrono::seconds(ttl_s_);
}

Status ClusterState::CreateMap(const ShardMap& map) {
  const std::string key = CollectionKey(map.name);
  ZV_ASSIGN_OR_RETURN(const bool created,
                      etcd_->Txn({{key, Compare::Target::kVersion, 0, ""}},
                                 {{TxnOp::Kind::kPut, key, ToJson(map), 0}}));
  if (!created) {
    return AlreadyExistsError("name: a cluster collection named \"" + map.name +
                              "\" already exists");
  }
  std::lock_guard<std::mutex> lock(mu_);
  maps_[map.name] = map;
  return OkStatus();
}

Status ClusterState::UpdateMap(const ShardMap& current, ShardMap next) {
  next.epoch = current.epoch + 1;
  const std::string key = CollectionKey(current.name);
  // The stored value holds the epoch: comparing it is comparing the epoch
  // (and everything else), so two writers from one epoch cannot both win.
  ZV_ASSIGN_OR_RETURN(
      const bool swapped,
      etcd_->Txn({{key, Compare::Target::kValue, 0, ToJson(current)}},
                 {{TxnOp::Kind::kPut, key, ToJson(next), 0}}));
  if (!swapped) {
    return AbortedError("shard map of \"" + current.name +
                        "\" changed since epoch " +
                        std::to_string(current.epoch) +
                        " (another node updated it): re-read and retry");
  }
  std::lock_guard<std::mutex> lock(mu_);
  maps_[current.name] = next;
  return OkStatus();
}

Status ClusterState::DeleteMap(const ShardMap& current) {
  const std::string key = CollectionKey(current.name);
  ZV_ASSIGN_OR_RETURN(
      const bool deleted,
      etcd_->Txn({{key, Compare::Target::kValue, 0, ToJson(current)}},
                 {{TxnOp::Kind::kDelete, key, "", 0}}));
  if (!deleted) {
    return AbortedError("shard map of \"" + current.name +
                        "\" changed since epoch " +
                        std::to_string(current.epoch) + ": re-read and retry");
  }
  std::lock_guard<std::mutex> lock(mu_);
  maps_.erase(current.name);
  return OkStatus();
}

}  // namespace zv::cluster
