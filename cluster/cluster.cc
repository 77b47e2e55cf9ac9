// The cluster node: zerovec.v1.ZeroVec in front of the local service, routing
// cluster collections' requests to their shards' replicas. The etcd state is
// in cluster_state.cc, the pure shard-map rules in shard_map.cc.
#include "cluster/cluster.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "cluster/cluster_state.h"
#include "cluster/etcd_client.h"
#include "cluster/shard_map.h"

namespace zv::cluster {
namespace {

namespace pb = zerovec::v1;
using Stub = pb::ZeroVec::Stub;

constexpr char kEpochHeader[] = "x-zerovec-shard-epoch";
// Longest cluster collection name: "<name>--shardNNNN" must stay a valid
// (64-character) local collection name.
constexpr size_t kMaxClusterName = 64 - 11;

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

Status FromGrpc(const grpc::Status& s, const std::string& context) {
  if (s.ok()) return OkStatus();
  return Status(static_cast<StatusCode>(s.error_code()),
                context + ": " + s.error_message());
}

bool IsStaleEpoch(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
         s.error_message().find("shard map epoch") != std::string::npos;
}

// One call to one node: `call(stub, ctx)`.
using Call = std::function<grpc::Status(Stub*, grpc::ClientContext*)>;

class ClusterService final : public pb::ZeroVec::Service {
 public:
  ClusterService(const ClusterOptions& options, pb::ZeroVec::Service* local,
                 std::unique_ptr<ClusterState> state)
      : options_(options), local_(local), state_(std::move(state)) {
    repairer_ = std::thread([this] { RepairLoop(); });
  }
  ~ClusterService() override {
    {
      std::lock_guard<std::mutex> lock(repair_mu_);
      stop_ = true;
    }
    repair_cv_.notify_all();
    repairer_.join();
  }

  ClusterState* state() { return state_.get(); }

  grpc::Status CreateCollection(grpc::ServerContext* ctx,
                                const pb::CreateCollectionRequest* req,
                                pb::CreateCollectionResponse* resp) override {
    if (Internal(ctx) || req->shards() == 0)
      return Local(ctx, req->name(),
                   [&] { return local_->CreateCollection(ctx, req, resp); });
    return ToGrpc(CreateSharded(ctx, *req, resp));
  }

  grpc::Status DropCollection(grpc::ServerContext* ctx,
                              const pb::DropCollectionRequest* req,
                              pb::DropCollectionResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->name(), &map); !s.ok()) return s;
    if (!map)
      return Local(ctx, req->name(),
                   [&] { return local_->DropCollection(ctx, req, resp); });
    return ToGrpc(DropSharded(*map));
  }

  grpc::Status ListCollections(grpc::ServerContext* ctx,
                               const pb::ListCollectionsRequest* req,
                               pb::ListCollectionsResponse* resp) override {
    return local_->ListCollections(ctx, req, resp);
  }

  grpc::Status DescribeCollection(grpc::ServerContext* ctx,
                                  const pb::DescribeCollectionRequest* req,
                                  pb::CollectionInfo* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->name(), &map); !s.ok()) return s;
    if (!map)
      return Local(ctx, req->name(),
                   [&] { return local_->DescribeCollection(ctx, req, resp); });
    return ToGrpc(DescribeSharded(*map, resp));
  }

  grpc::Status Upsert(grpc::ServerContext* ctx, const pb::UpsertRequest* req,
                      pb::UpsertResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->collection(), &map); !s.ok()) return s;
    if (!map)
      return Local(ctx, req->collection(),
                   [&] { return local_->Upsert(ctx, req, resp); });
    return ToGrpc(UpsertSharded(*map, *req, resp));
  }

  grpc::Status UpsertStream(grpc::ServerContext* ctx,
                            grpc::ServerReader<pb::UpsertRequest>* reader,
                            pb::UpsertResponse* resp) override {
    // Each message is one batch, as on a single server; each is routed on
    // its own (a cluster collection's or a local one's).
    pb::UpsertRequest req;
    while (reader->Read(&req)) {
      pb::UpsertResponse one;
      grpc::Status s = Upsert(ctx, &req, &one);
      if (!s.ok()) return s;
      resp->set_upserted(resp->upserted() + one.upserted());
      resp->set_truncated(resp->truncated() + one.truncated());
    }
    return grpc::Status::OK;
  }

  grpc::Status Search(grpc::ServerContext* ctx, const pb::SearchRequest* req,
                      pb::SearchResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->collection(), &map); !s.ok()) return s;
    if (!map)
      return Local(ctx, req->collection(),
                   [&] { return local_->Search(ctx, req, resp); });
    pb::SearchBatchRequest batch;
    batch.set_collection(req->collection());
    *batch.add_queries() = req->query();
    batch.set_k(req->k());
    *batch.mutable_filter() = req->filter();
    batch.set_include_documents(req->include_documents());
    batch.set_ef_search(req->ef_search());
    *batch.mutable_recency() = req->recency();
    batch.set_mode(req->mode());
    *batch.mutable_fusion() = req->fusion();
    pb::SearchBatchResponse out;
    Status s = SearchSharded(ctx, *map, batch, &out);
    if (s.ok() && out.results_size() == 1) resp->Swap(out.mutable_results(0));
    return ToGrpc(s);
  }

  grpc::Status SearchBatch(grpc::ServerContext* ctx,
                           const pb::SearchBatchRequest* req,
                           pb::SearchBatchResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->collection(), &map); !s.ok()) return s;
    if (!map)
      return Local(ctx, req->collection(),
                   [&] { return local_->SearchBatch(ctx, req, resp); });
    return ToGrpc(SearchSharded(ctx, *map, *req, resp));
  }

  grpc::Status Get(grpc::ServerContext* ctx, const pb::GetRequest* req,
                   pb::GetResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->collection(), &map); !s.ok()) return s;
    if (!map)
      return Local(ctx, req->collection(),
                   [&] { return local_->Get(ctx, req, resp); });
    return ToGrpc(GetSharded(*map, *req, resp));
  }

  grpc::Status Delete(grpc::ServerContext* ctx, const pb::DeleteRequest* req,
                      pb::DeleteResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->collection(), &map); !s.ok()) return s;
    if (!map)
      return Local(ctx, req->collection(),
                   [&] { return local_->Delete(ctx, req, resp); });
    return ToGrpc(ByIdWrite<pb::DeleteRequest, pb::DeleteResponse>(
        *map, *req, &Stub::Delete, [&](const pb::DeleteResponse& r) {
          resp->set_deleted(resp->deleted() + r.deleted());
        }));
  }

  grpc::Status Touch(grpc::ServerContext* ctx, const pb::TouchRequest* req,
                     pb::TouchResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->collection(), &map); !s.ok()) return s;
    if (!map)
      return Local(ctx, req->collection(),
                   [&] { return local_->Touch(ctx, req, resp); });
    return ToGrpc(ByIdWrite<pb::TouchRequest, pb::TouchResponse>(
        *map, *req, &Stub::Touch, [&](const pb::TouchResponse& r) {
          resp->set_touched(resp->touched() + r.touched());
        }));
  }

  grpc::Status Embed(grpc::ServerContext* ctx, const pb::EmbedRequest* req,
                     pb::EmbedResponse* resp) override {
    return local_->Embed(ctx, req, resp);
  }

  grpc::Status Stats(grpc::ServerContext* ctx, const pb::StatsRequest* req,
                     pb::StatsResponse* resp) override {
    return local_->Stats(ctx, req, resp);
  }

  grpc::Status Compact(grpc::ServerContext* ctx, const pb::CompactRequest* req,
                       pb::CompactResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->collection(), &map); !s.ok()) return s;
    if (map) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "collection: compacting a cluster collection is "
                          "not done yet; compact its shards (" +
                              LocalShardName(req->collection(), 0) +
                              ", ...) on each node");
    }
    return Local(ctx, req->collection(),
                 [&] { return local_->Compact(ctx, req, resp); });
  }

 private:
  static bool Internal(grpc::ServerContext* ctx) {
    return ctx->client_metadata().count(kEpochHeader) > 0;
  }

  // *map: the shard map when `name` is a cluster collection and the call is
  // a client's (not another node's, which addresses a local shard). A map
  // this node cannot read (a newer format) is an error, never "not a
  // cluster collection".
  grpc::Status Route(grpc::ServerContext* ctx, const std::string& name,
                     std::optional<ShardMap>* map) {
    if (Internal(ctx)) return grpc::Status::OK;
    auto cached = state_->Map(name);
    if (!cached.ok()) return ToGrpc(cached.status());
    *map = std::move(cached).value();
    return grpc::Status::OK;
  }

  // A call for the local service. From another node, it addresses shard
  // `name` ("<coll>--shardN"): allowed only if the caller's shard map epoch
  // is the current one and this node holds the shard in it.
  grpc::Status Local(grpc::ServerContext* ctx, const std::string& name,
                     const std::function<grpc::Status()>& call) {
    if (!Internal(ctx)) return call();
    const auto it = ctx->client_metadata().find(kEpochHeader);
    const int64_t epoch = std::strtoll(
        std::string(it->second.data(), it->second.size()).c_str(), nullptr, 10);
    Status s = CheckShard(name, epoch);
    return s.ok() ? call() : ToGrpc(s);
  }

  Status CheckShard(const std::string& local_name, int64_t epoch) {
    std::string name;
    int shard = 0;
    if (!ParseLocalShardName(local_name, &name, &shard)) {
      return InvalidArgumentError("collection: \"" + local_name +
                                  "\" is not a shard name");
    }
    if (state_->Fenced()) {
      // Cut off from etcd for longer than the lease: the cluster may have
      // moved on without this node, so it serves no shard.
      return UnavailableError("node " + std::to_string(options_.node_id) +
                              ": lost contact with etcd (lease not renewed "
                              "in time); not serving shards");
    }
    ZV_ASSIGN_OR_RETURN(std::optional<ShardMap> map, state_->Map(name));
    if (!map || map->epoch < epoch) {
      // Our cache lags the caller's (the watch is behind): ask etcd.
      ZV_ASSIGN_OR_RETURN(map, state_->FetchMap(name));
    }
    const std::string node = "node " + std::to_string(options_.node_id);
    if (!map) {
      return NotFoundError(node + ": no cluster collection \"" + name + "\"");
    }
    if (map->epoch != epoch) {
      return FailedPreconditionError(
          node + ": shard map epoch mismatch for \"" + name + "\": request " +
          std::to_string(epoch) + ", etcd " + std::to_string(map->epoch) +
          " (the sender re-reads the map)");
    }
    if (shard >= map->shards() ||
        std::find(map->replicas[shard].begin(), map->replicas[shard].end(),
                  options_.node_id) == map->replicas[shard].end()) {
      return FailedPreconditionError(node + " is not a replica of shard " +
                                     std::to_string(shard) + " of \"" + name +
                                     "\" at epoch " + std::to_string(epoch));
    }
    return OkStatus();
  }

  Stub* StubFor(const std::string& address) {
    std::lock_guard<std::mutex> lock(stubs_mu_);
    auto& stub = stubs_[address];
    if (!stub) {
      stub = pb::ZeroVec::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    }
    return stub.get();
  }

  std::unique_ptr<grpc::ClientContext> PeerContext(int64_t epoch) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() +
                      options_.shard_timeout);
    ctx->AddMetadata(kEpochHeader, std::to_string(epoch));
    if (options_.auth_token)
      ctx->AddMetadata("authorization", "Bearer " + *options_.auth_token);
    return ctx;
  }

  // `call` on node `id` with the map's epoch; a stale-epoch answer re-reads
  // the map once (a replica is ahead of our cache) and retries.
  Status CallNode(ShardMap* map, int64_t id, const Call& call) {
    for (int attempt = 0;; ++attempt) {
      const auto nodes = state_->Nodes();
      const auto node = nodes.find(id);
      if (node == nodes.end()) {
        return UnavailableError("node " + std::to_string(id) + " is not live");
      }
      auto ctx = PeerContext(map->epoch);
      const grpc::Status s = call(StubFor(node->second.address), ctx.get());
      if (attempt == 0 && IsStaleEpoch(s)) {
        ZV_ASSIGN_OR_RETURN(auto fresh, state_->FetchMap(map->name));
        if (fresh && fresh->epoch != map->epoch) {
          *map = *fresh;
          continue;
        }
      }
      return FromGrpc(
          s, "node " + std::to_string(id) + " (" + node->second.address + ")");
    }
  }

  std::vector<int64_t> LiveReplicas(const ShardMap& map, int shard) const {
    const auto nodes = state_->Nodes();
    std::vector<int64_t> live;
    for (int64_t id : map.replicas[shard])
      if (nodes.count(id)) live.push_back(id);
    return live;
  }

  // `call` on one live replica of `shard`, trying the next on failure; this
  // node first when it holds the shard, else round-robin.
  Status CallOneReplica(ShardMap map, int shard, const Call& call) {
    std::vector<int64_t> live = LiveReplicas(map, shard);
    if (live.empty()) return NoReplica(map, shard);
    auto self = std::find(live.begin(), live.end(), options_.node_id);
    size_t start = self != live.end()
                       ? static_cast<size_t>(self - live.begin())
                       : rr_.fetch_add(1, std::memory_order_relaxed);
    Status last;
    for (size_t i = 0; i < live.size(); ++i) {
      last = CallNode(&map, live[(start + i) % live.size()], call);
      if (last.ok()) return last;
      const auto code = last.code();
      // FAILED_PRECONDITION too: a replica that left the shard since our
      // map was read ("not a replica"); the next one may still hold it.
      if (code != StatusCode::kUnavailable &&
          code != StatusCode::kDeadlineExceeded &&
          code != StatusCode::kFailedPrecondition)
        return last;  // the request's own error: another replica says the same
    }
    return last;
  }

  // Keeps the map's replica list of `shard` to the replicas that hold every
  // acknowledged write (an in-sync set): drops `ids` (not live, or failing
  // writes) from it by a compare-epoch transaction, never the last replica.
  // *map becomes the new map.
  Status DropReplicas(ShardMap* map, int shard,
                      const std::vector<int64_t>& ids) {
    for (int attempt = 0; attempt < 8; ++attempt) {
      ShardMap next = *map;
      auto& r = next.replicas[shard];
      for (int64_t id : ids)
        r.erase(std::remove(r.begin(), r.end(), id), r.end());
      if (r.size() == map->replicas[shard].size()) return OkStatus();
      if (r.empty()) return NoReplica(*map, shard);
      Status s = state_->UpdateMap(*map, next);
      if (s.ok()) {
        next.epoch = map->epoch + 1;
        options_.log("cluster: " + map->name + " shard " +
                     std::to_string(shard) + ": replicas now " + NodeList(r) +
                     " (epoch " + std::to_string(next.epoch) + ")");
        *map = std::move(next);
        return OkStatus();
      }
      if (s.code() != StatusCode::kAborted) return s;
      // Another node changed the map first (maybe another shard): re-read.
      ZV_ASSIGN_OR_RETURN(auto fresh, state_->FetchMap(map->name));
      if (!fresh)
        return NotFoundError("collection \"" + map->name + "\" was dropped");
      *map = std::move(*fresh);
    }
    return Status(StatusCode::kAborted, "shard map of \"" + map->name +
                                            "\": too many concurrent changes");
  }

  // `call` on every live replica of `shard` at once; OK once the write quorum
  // (every live replica by default) succeeded. Replicas that are not live
  // are dropped from the shard first, and (with a quorum below every
  // replica) so are those that failed an acknowledged write.
  Status CallAllReplicas(ShardMap map, int shard, const Call& call) {
    std::vector<int64_t> dead;
    std::vector<int64_t> live = LiveReplicas(map, shard);
    if (live.empty()) return NoReplica(map, shard);
    for (int64_t id : map.replicas[shard])
      if (std::find(live.begin(), live.end(), id) == live.end())
        dead.push_back(id);
    if (!dead.empty()) {
      ZV_RETURN_IF_ERROR(DropReplicas(&map, shard, dead));
      live = LiveReplicas(map, shard);
    }
    std::vector<std::future<Status>> results;
    for (int64_t id : live) {
      results.push_back(std::async(std::launch::async, [this, map, id, call] {
        ShardMap m = map;
        return CallNode(&m, id, call);
      }));
    }
    const size_t need = map.write_quorum > 0
                            ? static_cast<size_t>(map.write_quorum)
                            : live.size();
    std::vector<int64_t> failed;
    Status first_error;
    for (size_t i = 0; i < results.size(); ++i) {
      Status s = results[i].get();
      if (s.ok()) continue;
      failed.push_back(live[i]);
      if (first_error.ok()) first_error = s;
    }
    const size_t ok = live.size() - failed.size();
    if (ok >= need && ok > 0) {
      return failed.empty() ? OkStatus() : DropReplicas(&map, shard, failed);
    }
    return first_error.WithContext(
        "shard " + std::to_string(shard) + ": " + std::to_string(ok) + " of " +
        std::to_string(need) + " replicas stored the write");
  }

  static std::string NodeList(const std::vector<int64_t>& ids) {
    std::string s;
    for (int64_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
    return s;
  }

  static Status NoReplica(const ShardMap& map, int shard) {
    return UnavailableError("shard " + std::to_string(shard) + " of \"" +
                            map.name + "\": no live replica (nodes " +
                            NodeList(map.replicas[shard]) + " are down)");
  }

  // True when this node may answer `shard` from its local collection: it is
  // a live replica of it in `map`, and `map` is the current map in etcd as
  // far as this node knows (the same check another node's call would get).
  bool ServesLocally(const ShardMap& map, int shard) {
    if (state_->Fenced()) return false;
    const auto& r = map.replicas[shard];
    if (std::find(r.begin(), r.end(), options_.node_id) == r.end())
      return false;
    auto current = state_->Map(map.name);
    return current.ok() && current->has_value() &&
           (*current)->epoch == map.epoch;
  }

  // Runs `body(shard)` for the given shards in parallel; the first error.
  static Status ForShards(const std::vector<int>& shards,
                          const std::function<Status(int)>& body) {
    if (shards.size() == 1) return body(shards[0]);  // no thread for one
    std::vector<std::future<Status>> results;
    for (int s : shards)
      results.push_back(std::async(std::launch::async, body, s));
    Status first;
    for (auto& f : results) {
      Status s = f.get();
      if (first.ok() && !s.ok()) first = s;
    }
    return first;
  }

  Status CreateSharded(grpc::ServerContext* ctx,
                       const pb::CreateCollectionRequest& req,
                       pb::CreateCollectionResponse* resp);
  Status DropSharded(const ShardMap& map);
  Status DescribeSharded(const ShardMap& map, pb::CollectionInfo* out);
  Status UpsertSharded(const ShardMap& map, const pb::UpsertRequest& req,
                       pb::UpsertResponse* resp);
  Status SearchSharded(grpc::ServerContext* ctx, const ShardMap& map,
                       const pb::SearchBatchRequest& req,
                       pb::SearchBatchResponse* resp);
  Status GetSharded(const ShardMap& map, const pb::GetRequest& req,
                    pb::GetResponse* resp);

  // Delete and Touch: ids grouped by shard, each group written to every live
  // replica of its shard; `add` sums one replica's answer per shard.
  template <typename Req, typename Resp>
  Status ByIdWrite(const ShardMap& map, const Req& req,
                   grpc::Status (Stub::*method)(grpc::ClientContext*,
                                                const Req&, Resp*),
                   const std::function<void(const Resp&)>& add) {
    if (req.ids_size() == 0)
      return InvalidArgumentError("ids: at least one id is required");
    std::map<int, Req> parts;
    for (const std::string& id : req.ids()) {
      const int shard = ShardOf(id, map.shards());
      auto [it, fresh] = parts.try_emplace(shard, req);
      if (fresh) {
        it->second.clear_ids();
        it->second.set_collection(LocalShardName(map.name, shard));
      }
      it->second.add_ids(id);
    }
    std::vector<int> shards;
    for (auto& [s, part] : parts) shards.push_back(s);
    std::mutex mu;
    return ForShards(shards, [&](int shard) {
      Resp first;
      ZV_RETURN_IF_ERROR(
          WriteShard(map, shard, parts.at(shard), method, &first));
      std::lock_guard<std::mutex> lock(mu);
      add(first);
      return OkStatus();
    });
  }

  // `part` written to every live replica of `shard` (write quorum); *first
  // gets one replica's answer.
  template <typename Req, typename Resp>
  Status WriteShard(const ShardMap& map, int shard, const Req& part,
                    grpc::Status (Stub::*method)(grpc::ClientContext*,
                                                 const Req&, Resp*),
                    Resp* first) {
    std::mutex mu;
    bool have = false;
    Call call = [&](Stub* stub, grpc::ClientContext* c) {
      Resp r;
      grpc::Status s = (stub->*method)(c, part, &r);
      if (s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (!have) *first = r;
        have = true;
      }
      return s;
    };
    return CallAllReplicas(map, shard, call);
  }

  // Drops dead nodes from the shard maps soon after their lease expires,
  // not only at the next write to their shards: the live node with the
  // lowest id does it (any may; the compare-epoch transaction keeps two
  // from clashing).
  void RepairLoop() {
    std::unique_lock<std::mutex> lock(repair_mu_);
    while (!repair_cv_.wait_for(lock, std::chrono::seconds(1),
                                [&] { return stop_; })) {
      lock.unlock();
      DropDeadNodes();
      lock.lock();
    }
  }

  void DropDeadNodes() {
    // Only a member does it (not a node refused at start, nor one that left
    // or lost touch with etcd).
    if (!state_->Registered() || state_->Fenced()) return;
    // Live nodes from etcd itself, not the cache: a map fetched directly may
    // be newer than the cached node list.
    auto kvs = state_->etcd()->Range(kNodesPrefix, true, nullptr);
    if (!kvs.ok() || kvs->empty()) return;
    std::set<int64_t> live;
    for (const auto& kv : *kvs) {
      if (auto node = NodeFromJson(kv.value); node.ok()) live.insert(node->id);
    }
    if (live.empty() || *live.begin() != options_.node_id) return;
    for (ShardMap map : state_->Maps()) {
      for (int s = 0; s < map.shards(); ++s) {
        std::vector<int64_t> dead;
        for (int64_t id : map.replicas[s])
          if (!live.count(id)) dead.push_back(id);
        if (dead.empty() || dead.size() == map.replicas[s].size()) continue;
        if (Status st = DropReplicas(&map, s, dead); !st.ok()) {
          options_.log("cluster: dropping dead replicas of " + map.name + ": " +
                       st.ToString());
          break;
        }
      }
    }
  }

  const ClusterOptions options_;
  pb::ZeroVec::Service* local_;
  std::unique_ptr<ClusterState> state_;
  std::mutex repair_mu_;
  std::condition_variable repair_cv_;
  bool stop_ = false;
  std::thread repairer_;
  std::mutex stubs_mu_;
  std::map<std::string, std::unique_ptr<Stub>> stubs_;
  std::atomic<size_t> rr_{0};
};

Status ClusterService::CreateSharded(grpc::ServerContext* ctx,
                                     const pb::CreateCollectionRequest& req,
                                     pb::CreateCollectionResponse* resp) {
  if (req.name().size() > kMaxClusterName) {
    return InvalidArgumentError(
        "name: a cluster collection's name is at most " +
        std::to_string(kMaxClusterName) + " characters (its shards are \"" +
        LocalShardName("<name>", 0) + "\", ...)");
  }
  const int rf = req.replication_factor() == 0 ? 1 : req.replication_factor();
  if (req.shards() < 0 || req.shards() > 1024)
    return InvalidArgumentError("shards: must be in [1, 1024]");
  if (rf < 1 || rf > 16)
    return InvalidArgumentError("replication_factor: must be in [1, 16]");
  if (req.write_quorum() < 0 || req.write_quorum() > rf) {
    return InvalidArgumentError("write_quorum: must be in [0, " +
                                std::to_string(rf) + "] (replication_factor)");
  }
  ShardMap map;
  map.name = req.name();
  map.dim = req.dim();
  if (map.dim == 0) {  // the model's, as on one server
    pb::StatsRequest stats_req;
    pb::StatsResponse stats;
    ZV_RETURN_IF_ERROR(
        FromGrpc(local_->Stats(ctx, &stats_req, &stats), "model dimension"));
    map.dim = stats.model_dim();
  }
  map.metric = req.metric();
  map.index = req.index().empty() ? "Flat" : req.index();
  map.default_ttl_ms = req.default_ttl_ms();
  map.lexical = req.lexical();
  map.replication_factor = rf;
  map.write_quorum = req.write_quorum();
  std::vector<int64_t> ids;
  for (const auto& [id, node] : state_->Nodes()) ids.push_back(id);
  ZV_ASSIGN_OR_RETURN(map.replicas, AssignReplicas(ids, req.shards(), rf));
  ZV_RETURN_IF_ERROR(state_->CreateMap(map));
  std::vector<int> shards;
  for (int s = 0; s < map.shards(); ++s) shards.push_back(s);
  Status created = ForShards(shards, [&](int shard) -> Status {
    pb::CreateCollectionRequest part = req;
    part.set_name(LocalShardName(map.name, shard));
    part.set_dim(map.dim);
    part.clear_shards();
    part.clear_replication_factor();
    part.clear_write_quorum();
    for (int64_t id : map.replicas[shard]) {
      ShardMap m = map;
      ZV_RETURN_IF_ERROR(
          CallNode(&m, id, [&](Stub* stub, grpc::ClientContext* c) {
            pb::CreateCollectionResponse r;
            return stub->CreateCollection(c, part, &r);
          }));
    }
    return OkStatus();
  });
  if (!created.ok()) {
    DropSharded(map).ok();  // best effort: the error below is the answer
    return created;
  }
  return DescribeSharded(map, resp->mutable_collection());
}

Status ClusterService::DropSharded(const ShardMap& map) {
  std::vector<int> shards;
  for (int s = 0; s < map.shards(); ++s) shards.push_back(s);
  ZV_RETURN_IF_ERROR(ForShards(shards, [&](int shard) -> Status {
    pb::DropCollectionRequest part;
    part.set_name(LocalShardName(map.name, shard));
    for (int64_t id : LiveReplicas(map, shard)) {
      ShardMap m = map;
      Status s = CallNode(&m, id, [&](Stub* stub, grpc::ClientContext* c) {
        pb::DropCollectionResponse r;
        return stub->DropCollection(c, part, &r);
      });
      if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
    }
    return OkStatus();
  }));
  return state_->DeleteMap(map);
}

Status ClusterService::DescribeSharded(const ShardMap& map,
                                       pb::CollectionInfo* out) {
  std::vector<pb::CollectionInfo> infos(map.shards());
  std::vector<int> shards;
  for (int s = 0; s < map.shards(); ++s) shards.push_back(s);
  ZV_RETURN_IF_ERROR(ForShards(shards, [&](int shard) {
    pb::DescribeCollectionRequest part;
    part.set_name(LocalShardName(map.name, shard));
    return CallOneReplica(map, shard, [&](Stub* stub, grpc::ClientContext* c) {
      return stub->DescribeCollection(c, part, &infos[shard]);
    });
  }));
  *out = infos[0];
  out->set_name(map.name);
  for (int s = 1; s < map.shards(); ++s) {
    out->set_rows(out->rows() + infos[s].rows());
    out->set_live_rows(out->live_rows() + infos[s].live_rows());
    out->set_tombstones(out->tombstones() + infos[s].tombstones());
    out->set_truncated_texts(out->truncated_texts() +
                             infos[s].truncated_texts());
    out->set_lexical_documents(out->lexical_documents() +
                               infos[s].lexical_documents());
    out->set_gpu_rows_from_device(out->gpu_rows_from_device() +
                                  infos[s].gpu_rows_from_device());
  }
  out->set_shards(map.shards());
  out->set_replication_factor(map.replication_factor);
  out->set_shard_map_epoch(map.epoch);
  return OkStatus();
}

Status ClusterService::UpsertSharded(const ShardMap& map,
                                     const pb::UpsertRequest& req,
                                     pb::UpsertResponse* resp) {
  if (req.items_size() == 0)
    return InvalidArgumentError("items: at least one item is required");
  std::map<int, pb::UpsertRequest> parts;
  for (const pb::Item& item : req.items()) {
    const int shard = ShardOf(item.id(), map.shards());
    auto& part = parts[shard];
    part.set_collection(LocalShardName(map.name, shard));
    *part.add_items() = item;
  }
  std::vector<int> shards;
  for (auto& [s, part] : parts) shards.push_back(s);
  std::mutex mu;
  return ForShards(shards, [&](int shard) {
    pb::UpsertResponse first;
    ZV_RETURN_IF_ERROR(
        WriteShard(map, shard, parts.at(shard), &Stub::Upsert, &first));
    std::lock_guard<std::mutex> lock(mu);
    resp->set_upserted(resp->upserted() + first.upserted());
    resp->set_truncated(resp->truncated() + first.truncated());
    return OkStatus();
  });
}

Status ClusterService::SearchSharded(grpc::ServerContext* ctx,
                                     const ShardMap& map,
                                     const pb::SearchBatchRequest& req,
                                     pb::SearchBatchResponse* resp) {
  if (req.mode() == pb::SEARCH_MODE_LEXICAL ||
      req.mode() == pb::SEARCH_MODE_HYBRID) {
    return UnimplementedError(
        "mode: lexical and hybrid search of a cluster collection are not "
        "done yet (BM25 statistics are per shard); use dense");
  }
  std::vector<pb::SearchBatchResponse> answers(map.shards());
  std::vector<Status> errors(map.shards());
  std::vector<int> shards;
  for (int s = 0; s < map.shards(); ++s) shards.push_back(s);
  // Every shard answers its own top k (filters applied there): the global
  // top k is among them.
  ForShards(shards, [&](int shard) {
    pb::SearchBatchRequest part = req;
    part.set_collection(LocalShardName(map.name, shard));
    if (ServesLocally(map, shard)) {
      // This node holds the shard: its local service, without a gRPC hop
      // (the client's context carries the auth it passed).
      const grpc::Status s = local_->SearchBatch(ctx, &part, &answers[shard]);
      if (s.ok()) return OkStatus();
      answers[shard].Clear();  // then the other replicas, as below
    }
    errors[shard] =
        CallOneReplica(map, shard, [&](Stub* stub, grpc::ClientContext* c) {
          return stub->SearchBatch(c, part, &answers[shard]);
        });
    return OkStatus();
  }).ok();
  for (int s = 0; s < map.shards(); ++s) {
    if (errors[s].ok()) continue;
    if (!options_.allow_partial_results) {
      return errors[s].WithContext("shard " + std::to_string(s) + " of \"" +
                                   map.name +
                                   "\" did not answer (partial results are "
                                   "off: serve --allow-partial-results)");
    }
    options_.log("cluster: partial result: shard " + std::to_string(s) +
                 " of " + map.name + ": " + errors[s].message());
  }
  const bool lower_is_better = map.metric == pb::METRIC_L2;
  const size_t k = req.k() == 0 ? 10 : static_cast<size_t>(req.k());
  for (int q = 0; q < req.queries_size(); ++q) {
    std::vector<pb::Hit> hits;
    for (int s = 0; s < map.shards(); ++s) {
      if (!errors[s].ok() || answers[s].results_size() <= q) continue;
      for (const pb::Hit& h : answers[s].results(q).hits()) hits.push_back(h);
    }
    std::sort(hits.begin(), hits.end(),
              [&](const pb::Hit& a, const pb::Hit& b) {
                if (a.score() != b.score())
                  return lower_is_better ? a.score() < b.score()
                                         : a.score() > b.score();
                return a.id() < b.id();
              });
    if (hits.size() > k) hits.resize(k);
    auto* out = resp->add_results();
    for (auto& h : hits) *out->add_hits() = std::move(h);
  }
  return OkStatus();
}

Status ClusterService::GetSharded(const ShardMap& map,
                                  const pb::GetRequest& req,
                                  pb::GetResponse* resp) {
  if (req.ids_size() == 0)
    return InvalidArgumentError("ids: at least one id is required");
  std::map<int, pb::GetRequest> parts;
  for (const std::string& id : req.ids()) {
    const int shard = ShardOf(id, map.shards());
    auto& part = parts[shard];
    part.set_collection(LocalShardName(map.name, shard));
    part.set_include_vectors(req.include_vectors());
    part.add_ids(id);
  }
  std::vector<int> shards;
  for (auto& [s, part] : parts) shards.push_back(s);
  std::mutex mu;
  std::map<std::string, pb::Item> found;
  ZV_RETURN_IF_ERROR(ForShards(shards, [&](int shard) {
    pb::GetResponse r;
    ZV_RETURN_IF_ERROR(
        CallOneReplica(map, shard, [&](Stub* stub, grpc::ClientContext* c) {
          return stub->Get(c, parts.at(shard), &r);
        }));
    std::lock_guard<std::mutex> lock(mu);
    for (auto& item : *r.mutable_items()) found[item.id()] = std::move(item);
    return OkStatus();
  }));
  for (const std::string& id : req.ids()) {  // request order, as on one node
    auto it = found.find(id);
    if (it != found.end()) *resp->add_items() = it->second;
  }
  return OkStatus();
}

class ClusterNodeImpl final : public ClusterNode {
 public:
  ClusterNodeImpl(const ClusterOptions& options,
                  std::unique_ptr<ClusterService> service)
      : options_(options), service_(std::move(service)) {}
  ~ClusterNodeImpl() override { Leave(); }

  pb::ZeroVec::Service* service() override { return service_.get(); }

  Status Register(int port) override {
    NodeInfo self{options_.node_id,
                  options_.advertise_host + ":" + std::to_string(port)};
    ZV_RETURN_IF_ERROR(service_->state()->Register(self, options_.lease_ttl_s));
    options_.log("cluster: node " + std::to_string(self.id) + " at " +
                 self.address + " joined (etcd " + options_.etcd + ", lease " +
                 std::to_string(options_.lease_ttl_s) + " s)");
    return OkStatus();
  }

  void Leave() override { service_->state()->Leave(); }

 private:
  const ClusterOptions options_;
  std::unique_ptr<ClusterService> service_;
};

}  // namespace

StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Create(
    const ClusterOptions& options, pb::ZeroVec::Service* local) {
  if (options.node_id < 1)
    return InvalidArgumentError("--node-id: must be >= 1");
  if (options.lease_ttl_s < 1)
    return InvalidArgumentError("--lease-ttl-s: must be >= 1");
  ClusterOptions o = options;
  if (!o.log) o.log = [](const std::string&) {};
  EtcdOptions eo;
  eo.endpoints = o.etcd;
  ZV_ASSIGN_OR_RETURN(auto etcd, EtcdClient::Connect(eo));
  ZV_ASSIGN_OR_RETURN(auto state, ClusterState::Load(std::move(etcd), o.log));
  return std::unique_ptr<ClusterNode>(std::make_unique<ClusterNodeImpl>(
      o, std::make_unique<ClusterService>(o, local, std::move(state))));
}

}  // namespace zv::cluster
