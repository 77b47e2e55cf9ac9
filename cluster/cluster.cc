// The cluster node: zerovec.v1.ZeroVec in front of the local service, routing
// cluster collections' requests to their shards' replicas. The etcd state is
// in cluster_state.cc, the pure shard-map rules in shard_map.cc.
#include "cluster/cluster.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>
#include <utility>
#include <variant>

#include "cluster/cluster_state.h"
#include "cluster/etcd_client.h"
#include "cluster/shard_map.h"

namespace zv::cluster {
namespace {

namespace pb = zerovec::v1;
using Stub = pb::ZeroVec::Stub;

constexpr char kEpochHeader[] = "x-zerovec-shard-epoch";
// On a joiner's calls to itself that copy the snapshot and replay the queued
// writes: the rebuild attempt (Joiner::since) they belong to. Such a write is
// applied, never queued.
constexpr char kRebuildHeader[] = "x-zerovec-rebuild";
// Rows a rebuild copies per Scan page.
constexpr uint32_t kRebuildPage = 256;
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
bool IsStaleEpoch(const Status& s) {
  return s.code() == StatusCode::kFailedPrecondition &&
         s.message().find("shard map epoch") != std::string::npos;
}

// What an internal call does to a shard, which decides who may serve it:
// reads and snapshots only an in-sync replica; writes, descriptions and
// create/drop a joiner too.
enum class Role { kRead, kWrite, kDescribe, kAdmin, kSnapshot };

// A write a joiner holds until its copy of the snapshot is in.
using QueuedWrite =
    std::variant<pb::UpsertRequest, pb::DeleteRequest, pb::TouchRequest>;

// This node's side of one local shard collection.
struct LocalShard {
  // Shared by a write from its epoch check to its end; exclusive for a
  // snapshot's barrier, which raises min_write_epoch: once a rebuild's first
  // Scan passed it, no write of an older map (one that did not reach the
  // joiner) lands here.
  std::shared_mutex write_mu;
  // Taken to acquire write_mu either way, and held by the barrier while it
  // waits: new writes queue behind a waiting barrier (the reader-preferring
  // rwlock alone could starve it under a steady stream of writes).
  std::mutex gate;
  int64_t min_write_epoch = 0;  // written under write_mu held exclusively
  // Joiner side: the rebuild attempt (Joiner::since; 0: none) and, while
  // its snapshot is being copied, the writes that arrived meanwhile, in
  // order.
  std::mutex mu;
  int64_t since = 0;
  bool loading = false;
  std::deque<QueuedWrite> queue;
  int64_t failed = 0;  // the last attempt that failed
  void Reset(int64_t attempt) {
    since = attempt;
    loading = attempt != 0;
    queue.clear();
  }
};

// One call to one node: `call(stub, ctx)`.
using Call = std::function<grpc::Status(Stub*, grpc::ClientContext*)>;

class ClusterService final : public pb::ZeroVec::Service {
 public:
  ClusterService(const ClusterOptions& options, pb::ZeroVec::Service* local,
                 std::unique_ptr<ClusterState> state)
      : options_(options), local_(local), state_(std::move(state)) {
    repairer_ = std::thread([this] { RepairLoop(); });
    rebuilder_ = std::thread([this] { RebuildLoop(); });
  }
  ~ClusterService() override {
    {
      std::lock_guard<std::mutex> lock(repair_mu_);
      stop_ = true;
    }
    repair_cv_.notify_all();
    repairer_.join();
    rebuilder_.join();
  }

  ClusterState* state() { return state_.get(); }

  grpc::Status CreateCollection(grpc::ServerContext* ctx,
                                const pb::CreateCollectionRequest* req,
                                pb::CreateCollectionResponse* resp) override {
    if (Internal(ctx) || req->shards() == 0)
      return Local(ctx, req->name(), Role::kAdmin,
                   [&] { return local_->CreateCollection(ctx, req, resp); });
    return ToGrpc(CreateSharded(ctx, *req, resp));
  }

  grpc::Status DropCollection(grpc::ServerContext* ctx,
                              const pb::DropCollectionRequest* req,
                              pb::DropCollectionResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->name(), &map); !s.ok()) return s;
    if (!map)
      return Local(ctx, req->name(), Role::kAdmin,
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
      return Local(ctx, req->name(), Role::kDescribe,
                   [&] { return local_->DescribeCollection(ctx, req, resp); });
    return ToGrpc(DescribeSharded(*map, resp));
  }

  grpc::Status Upsert(grpc::ServerContext* ctx, const pb::UpsertRequest* req,
                      pb::UpsertResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->collection(), &map); !s.ok()) return s;
    if (!map)
      return Local(
          ctx, req->collection(), Role::kWrite,
          [&] { return local_->Upsert(ctx, req, resp); },
          [&] { return QueuedWrite(*req); });
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
      return Local(ctx, req->collection(), Role::kRead,
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
      return Local(ctx, req->collection(), Role::kRead,
                   [&] { return local_->SearchBatch(ctx, req, resp); });
    return ToGrpc(SearchSharded(ctx, *map, *req, resp));
  }

  grpc::Status Get(grpc::ServerContext* ctx, const pb::GetRequest* req,
                   pb::GetResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->collection(), &map); !s.ok()) return s;
    if (!map)
      return Local(ctx, req->collection(), Role::kRead,
                   [&] { return local_->Get(ctx, req, resp); });
    return ToGrpc(GetSharded(*map, *req, resp));
  }

  grpc::Status Delete(grpc::ServerContext* ctx, const pb::DeleteRequest* req,
                      pb::DeleteResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->collection(), &map); !s.ok()) return s;
    if (!map)
      return Local(
          ctx, req->collection(), Role::kWrite,
          [&] { return local_->Delete(ctx, req, resp); },
          [&] { return QueuedWrite(*req); });
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
      return Local(
          ctx, req->collection(), Role::kWrite,
          [&] { return local_->Touch(ctx, req, resp); },
          [&] {
            // Replayed later: a relative expiry becomes the absolute one
            // the in-sync replicas computed now.
            pb::TouchRequest t = *req;
            if (t.ttl_ms() > 0) {
              t.set_expires_at_ms(
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count() +
                  t.ttl_ms());
              t.set_ttl_ms(0);
            }
            return QueuedWrite(std::move(t));
          });
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
    return Local(ctx, req->collection(), Role::kAdmin,
                 [&] { return local_->Compact(ctx, req, resp); });
  }

  grpc::Status Scan(grpc::ServerContext* ctx, const pb::ScanRequest* req,
                    pb::ScanResponse* resp) override {
    std::optional<ShardMap> map;
    if (grpc::Status s = Route(ctx, req->collection(), &map); !s.ok()) return s;
    if (map) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "collection: scanning a cluster collection is not "
                          "done yet; scan its shards (" +
                              LocalShardName(req->collection(), 0) +
                              ", ...) on their nodes");
    }
    return Local(ctx, req->collection(), Role::kSnapshot,
                 [&] { return local_->Scan(ctx, req, resp); });
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
  // is the current one and this node may serve `role` on the shard in it.
  // A write to a shard this node is rebuilding waits in its queue
  // (`queued`) until the snapshot's copy is in (see Rebuild).
  grpc::Status Local(grpc::ServerContext* ctx, const std::string& name,
                     Role role, const std::function<grpc::Status()>& call,
                     const std::function<QueuedWrite()>& queued = nullptr) {
    if (!Internal(ctx)) return call();
    const int64_t epoch = HeaderNumber(ctx, kEpochHeader);
    int64_t since = 0;
    if (role != Role::kWrite && role != Role::kSnapshot) {
      Status s = CheckShard(name, epoch, role, &since);
      return s.ok() ? call() : ToGrpc(s);
    }
    const std::shared_ptr<LocalShard> shard = LocalShardOf(name);
    if (role == Role::kSnapshot) {
      {
        std::lock_guard<std::mutex> gate(shard->gate);
        std::unique_lock<std::shared_mutex> barrier(shard->write_mu);
        if (Status s = CheckShard(name, epoch, role, &since); !s.ok())
          return ToGrpc(s);
        shard->min_write_epoch = std::max(shard->min_write_epoch, epoch);
      }
      return call();
    }
    std::unique_lock<std::mutex> gate(shard->gate);
    std::shared_lock<std::shared_mutex> writing(shard->write_mu);
    gate.unlock();
    Status s = CheckShard(name, epoch, role, &since);
    if (s.ok() && epoch < shard->min_write_epoch) {
      s = FailedPreconditionError(
          "node " + std::to_string(options_.node_id) + ": shard map epoch " +
          std::to_string(epoch) + " of the write is " +
          "older than a rebuild's snapshot of " + name + " (epoch " +
          std::to_string(shard->min_write_epoch) +
          "): the sender re-reads the map");
    }
    if (!s.ok()) return ToGrpc(s);
    if (since == 0) return call();  // an in-sync replica
    const int64_t attempt = HeaderNumber(ctx, kRebuildHeader);
    if (attempt != 0) {  // this node copying its snapshot or replaying
      if (attempt != since) {
        return grpc::Status(grpc::StatusCode::ABORTED,
                            "rebuild of " + name + " superseded");
      }
      return call();
    }
    {
      std::lock_guard<std::mutex> lock(shard->mu);
      if (shard->failed == since) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "rebuild of " + name + " failed here");
      }
      if (shard->since != since) shard->Reset(since);
      if (shard->loading) {
        shard->queue.push_back(queued());
        return grpc::Status::OK;
      }
    }
    return call();
  }

  static int64_t HeaderNumber(grpc::ServerContext* ctx, const char* key) {
    const auto it = ctx->client_metadata().find(key);
    if (it == ctx->client_metadata().end()) return 0;
    return std::strtoll(
        std::string(it->second.data(), it->second.size()).c_str(), nullptr, 10);
  }

  std::shared_ptr<LocalShard> LocalShardOf(const std::string& name) {
    std::lock_guard<std::mutex> lock(local_shards_mu_);
    auto& shard = local_shards_[name];
    if (!shard) shard = std::make_shared<LocalShard>();
    return shard;
  }

  // *since: 0 when this node is an in-sync replica of the shard, else the
  // rebuild attempt it is joining it by (roles that allow a joiner).
  Status CheckShard(const std::string& local_name, int64_t epoch, Role role,
                    int64_t* since) {
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
    *since = 0;
    if (shard < map->shards() && map->HasReplica(shard, options_.node_id))
      return OkStatus();
    const Joiner* joiner = shard < map->shards()
                               ? map->FindJoiner(shard, options_.node_id)
                               : nullptr;
    if (joiner && joiner->lease != state_->Lease()) {
      // Added before this process registered: its predecessor may have
      // taken (queued) writes that died with it. The sender drops the
      // joiner; the coordinator starts a new rebuild.
      return FailedPreconditionError(
          node + " restarted since it began rebuilding shard " +
          std::to_string(shard) + " of \"" + name + "\"");
    }
    if (joiner && role != Role::kRead && role != Role::kSnapshot) {
      *since = joiner->since;
      return OkStatus();
    }
    return FailedPreconditionError(
        node + " is not " + (joiner ? "yet an in-sync" : "a") +
        " replica of shard " + std::to_string(shard) + " of \"" + name +
        "\" at epoch " + std::to_string(epoch));
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

  std::unique_ptr<grpc::ClientContext> PeerContext(int64_t epoch,
                                                   int64_t rebuild) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() +
                      options_.shard_timeout);
    ctx->AddMetadata(kEpochHeader, std::to_string(epoch));
    if (rebuild != 0) ctx->AddMetadata(kRebuildHeader, std::to_string(rebuild));
    if (options_.auth_token)
      ctx->AddMetadata("authorization", "Bearer " + *options_.auth_token);
    return ctx;
  }

  // `call` on node `id` with the map's epoch; a stale-epoch answer re-reads
  // the map once (a replica is ahead of our cache) and retries, unless
  // `retry_stale` is false (a write: its caller resends it to every replica
  // of the new map). `rebuild`: the kRebuildHeader value, 0 for none.
  Status CallNode(ShardMap* map, int64_t id, const Call& call,
                  bool retry_stale = true, int64_t rebuild = 0) {
    for (int attempt = 0;; ++attempt) {
      const auto nodes = state_->Nodes();
      const auto node = nodes.find(id);
      if (node == nodes.end()) {
        return UnavailableError("node " + std::to_string(id) + " is not live");
      }
      auto ctx = PeerContext(map->epoch, rebuild);
      const grpc::Status s = call(StubFor(node->second.address), ctx.get());
      if (retry_stale && attempt == 0 && IsStaleEpoch(s)) {
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

  // Changes the map by a compare-epoch transaction: `edit` gets the current
  // map and answers whether it changed it (false: nothing to do); when
  // another node changed the map first, re-reads it and edits again. *map
  // becomes the map etcd holds after.
  Status ChangeMap(ShardMap* map,
                   const std::function<StatusOr<bool>(ShardMap&)>& edit,
                   const std::string& what) {
    for (int attempt = 0; attempt < 8; ++attempt) {
      ShardMap next = *map;
      next.joining.resize(next.shards());
      ZV_ASSIGN_OR_RETURN(const bool changed, edit(next));
      if (!changed) return OkStatus();
      Status s = state_->UpdateMap(*map, next);
      if (s.ok()) {
        next.epoch = map->epoch + 1;
        options_.log("cluster: " + map->name + ": " + what + " (epoch " +
                     std::to_string(next.epoch) + ")");
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

  // Keeps the map's replica list of `shard` to the replicas that hold every
  // acknowledged write (an in-sync set): drops `ids` (not live, or failing
  // writes) from it, never the last replica.
  Status DropReplicas(ShardMap* map, int shard,
                      const std::vector<int64_t>& ids) {
    return ChangeMap(
        map,
        [&](ShardMap& next) -> StatusOr<bool> {
          auto& r = next.replicas[shard];
          const size_t before = r.size();
          for (int64_t id : ids)
            r.erase(std::remove(r.begin(), r.end(), id), r.end());
          if (r.empty()) return NoReplica(*map, shard);
          return r.size() != before;
        },
        "shard " + std::to_string(shard) + ": dropped replicas " +
            NodeList(ids));
  }

  // Ends the rebuilds of `ids` on `shard` (a joiner that died or missed a
  // write): they leave the joining list; the coordinator starts new ones.
  Status DropJoiners(ShardMap* map, int shard,
                     const std::vector<int64_t>& ids) {
    return ChangeMap(
        map,
        [&](ShardMap& next) -> StatusOr<bool> {
          auto& j = next.joining[shard];
          const size_t before = j.size();
          j.erase(std::remove_if(j.begin(), j.end(),
                                 [&](const Joiner& x) {
                                   return std::count(ids.begin(), ids.end(),
                                                     x.node) > 0;
                                 }),
                  j.end());
          return j.size() != before;
        },
        "shard " + std::to_string(shard) + ": stopped rebuilding on nodes " +
            NodeList(ids));
  }

  // Nodes of `candidates` that are not live.
  std::vector<int64_t> NotLive(const std::vector<int64_t>& candidates) const {
    const auto nodes = state_->Nodes();
    std::vector<int64_t> dead;
    for (int64_t id : candidates)
      if (!nodes.count(id)) dead.push_back(id);
    return dead;
  }

  static std::vector<int64_t> JoinerNodes(const ShardMap& map, int shard) {
    std::vector<int64_t> ids;
    for (const Joiner& j : map.Joining(shard)) ids.push_back(j.node);
    return ids;
  }

  // `call` on every replica of `shard` and `joiner_call` on every joiner, at
  // once and all at one map epoch; OK once the write quorum of replicas
  // (every live one by default) succeeded. Replicas and joiners that are not
  // live are dropped from the shard first; joiners that failed the write
  // are dropped before it is acknowledged (so a joiner that stays has every
  // acknowledged write from its start on), and (with a quorum below every
  // replica) so are replicas that failed it. When a node answers that the
  // map moved on, the write goes again to every node of the new map: a
  // write acknowledged at epoch E reached every replica and joiner of E.
  Status CallAllReplicas(ShardMap map, int shard, const Call& call,
                         const Call& joiner_call) {
    for (int round = 0;; ++round) {
      if (auto dead = NotLive(map.replicas[shard]); !dead.empty()) {
        if (dead.size() == map.replicas[shard].size())
          return NoReplica(map, shard);
        ZV_RETURN_IF_ERROR(DropReplicas(&map, shard, dead));
      }
      if (auto dead = NotLive(JoinerNodes(map, shard)); !dead.empty())
        ZV_RETURN_IF_ERROR(DropJoiners(&map, shard, dead));
      const std::vector<int64_t> live = map.replicas[shard];
      const std::vector<int64_t> joiners = JoinerNodes(map, shard);
      std::vector<std::future<Status>> results;
      for (size_t i = 0; i < live.size() + joiners.size(); ++i) {
        const bool replica = i < live.size();
        const int64_t id = replica ? live[i] : joiners[i - live.size()];
        const Call& c = replica ? call : joiner_call;
        results.push_back(std::async(std::launch::async, [this, map, id, &c] {
          ShardMap m = map;
          return CallNode(&m, id, c, /*retry_stale=*/false);
        }));
      }
      std::vector<Status> got;
      bool stale = false;
      for (auto& f : results) {
        got.push_back(f.get());
        stale = stale || IsStaleEpoch(got.back());
      }
      if (stale && round < 3) {
        ZV_ASSIGN_OR_RETURN(auto fresh, state_->FetchMap(map.name));
        if (!fresh)
          return NotFoundError("collection \"" + map.name + "\" was dropped");
        map = std::move(*fresh);
        continue;
      }
      return FinishWrite(&map, shard, live, joiners, got);
    }
  }

  // The verdict of a write whose answers `got` came from `live` replicas,
  // then `joiners`, in order.
  Status FinishWrite(ShardMap* map, int shard, const std::vector<int64_t>& live,
                     const std::vector<int64_t>& joiners,
                     const std::vector<Status>& got) {
    const size_t need = map->write_quorum > 0
                            ? static_cast<size_t>(map->write_quorum)
                            : live.size();
    std::vector<int64_t> failed, failed_joiners;
    Status first_error;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i].ok()) continue;
      if (i >= live.size()) {
        failed_joiners.push_back(joiners[i - live.size()]);
        continue;
      }
      failed.push_back(live[i]);
      if (first_error.ok()) first_error = got[i];
    }
    const size_t ok = live.size() - failed.size();
    if (ok < need || ok == 0) {
      return first_error.WithContext(
          "shard " + std::to_string(shard) + ": " + std::to_string(ok) +
          " of " + std::to_string(need) + " replicas stored the write");
    }
    if (!failed_joiners.empty())
      ZV_RETURN_IF_ERROR(DropJoiners(map, shard, failed_joiners));
    return failed.empty() ? OkStatus() : DropReplicas(map, shard, failed);
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
    // A joiner's answer counts nothing (it may only have queued the write).
    Call joiner_call = [&](Stub* stub, grpc::ClientContext* c) {
      Resp r;
      return (stub->*method)(c, part, &r);
    };
    return CallAllReplicas(map, shard, call, joiner_call);
  }

  // Keeps the maps repaired: drops dead replicas and joiners soon after
  // their lease expires (not only at the next write to their shards) and
  // starts a rebuild wherever a shard has fewer replicas than its
  // replication factor. The live node with the lowest id does it (any may;
  // the compare-epoch transactions keep two from clashing).
  void RepairLoop() {
    while (!WaitOrStop(std::chrono::seconds(1))) RepairMaps();
  }

  // Rebuilds the replicas the maps say this node is joining, one at a time.
  void RebuildLoop() {
    while (!WaitOrStop(std::chrono::milliseconds(250))) RebuildJoined();
  }

  // True once the service stops; else after `d`.
  bool WaitOrStop(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(repair_mu_);
    return repair_cv_.wait_for(lock, d, [&] { return stop_; });
  }
  bool Stopping() {
    std::lock_guard<std::mutex> lock(repair_mu_);
    return stop_;
  }

  void RepairMaps() {
    // Only a member does it (not a node refused at start, nor one that left
    // or lost touch with etcd).
    if (!state_->Registered() || state_->Fenced()) return;
    // Live nodes from etcd itself, not the cache: a map fetched directly may
    // be newer than the cached node list.
    auto kvs = state_->etcd()->Range(kNodesPrefix, true, nullptr);
    if (!kvs.ok() || kvs->empty()) return;
    std::map<int64_t, int64_t> leases;  // live node -> its lease
    for (const auto& kv : *kvs) {
      if (auto node = NodeFromJson(kv.value); node.ok())
        leases[node->id] = kv.lease;
    }
    if (leases.empty() || leases.begin()->first != options_.node_id) return;
    std::set<int64_t> live;
    for (const auto& [id, lease] : leases) live.insert(id);
    for (ShardMap map : state_->Maps()) {
      for (int s = 0; s < map.shards(); ++s) {
        if (Status st = RepairShard(&map, s, live, leases); !st.ok()) {
          options_.log("cluster: repairing " + map.name + " shard " +
                       std::to_string(s) + ": " + st.ToString());
          break;
        }
      }
    }
  }

  Status RepairShard(ShardMap* map, int s, const std::set<int64_t>& live,
                     const std::map<int64_t, int64_t>& leases) {
    std::vector<int64_t> dead;
    for (int64_t id : map->replicas[s])
      if (!live.count(id)) dead.push_back(id);
    if (!dead.empty() && dead.size() < map->replicas[s].size())
      ZV_RETURN_IF_ERROR(DropReplicas(map, s, dead));
    dead.clear();
    for (const Joiner& j : map->Joining(s)) {
      auto it = leases.find(j.node);
      if (it == leases.end() || it->second != j.lease) dead.push_back(j.node);
    }
    if (!dead.empty()) ZV_RETURN_IF_ERROR(DropJoiners(map, s, dead));
    if (std::none_of(map->replicas[s].begin(), map->replicas[s].end(),
                     [&](int64_t id) { return live.count(id) > 0; }))
      return OkStatus();  // nothing live to copy from: the shard is down
    const std::optional<int64_t> node = PickJoiner(*map, s, live);
    if (!node) return OkStatus();
    return ChangeMap(
        map,
        [&](ShardMap& next) -> StatusOr<bool> {
          if (next.HasReplica(s, *node) || next.FindJoiner(s, *node) ||
              next.replicas[s].size() + next.joining[s].size() >=
                  static_cast<size_t>(next.replication_factor))
            return false;
          next.joining[s].push_back({*node, next.epoch + 1, leases.at(*node)});
          return true;
        },
        "shard " + std::to_string(s) + ": rebuilding a replica on node " +
            std::to_string(*node));
  }

  void RebuildJoined() {
    if (!state_->Registered() || state_->Fenced()) return;
    for (ShardMap map : state_->Maps()) {
      for (int s = 0; s < map.shards() && !Stopping(); ++s) {
        const Joiner* j = map.FindJoiner(s, options_.node_id);
        if (!j) continue;
        const Joiner joiner = *j;
        const auto start = std::chrono::steady_clock::now();
        Status st = joiner.lease == state_->Lease()
                        ? Rebuild(map, s, joiner.since)
                        : DropJoiners(&map, s, {options_.node_id});
        const double secs = std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count();
        options_.log("cluster: " + map.name + " shard " + std::to_string(s) +
                     ": rebuild on node " + std::to_string(options_.node_id) +
                     (st.ok() ? " done" : " failed: " + st.ToString()) + " (" +
                     std::to_string(secs) + " s)");
        break;  // the maps changed: read them again
      }
    }
  }

  Status Rebuild(ShardMap map, int shard, int64_t since);
  Status CopySnapshot(ShardMap* map, int shard, int64_t since);
  Status CatchUp(ShardMap* map, int shard, int64_t since, LocalShard* local);
  Status Replay(ShardMap* map, const QueuedWrite& write, int64_t since);
  Status Join(ShardMap* map, int shard, int64_t since);

  const ClusterOptions options_;
  pb::ZeroVec::Service* local_;
  std::unique_ptr<ClusterState> state_;
  std::mutex repair_mu_;
  std::condition_variable repair_cv_;
  bool stop_ = false;
  std::thread repairer_;
  std::thread rebuilder_;
  std::mutex local_shards_mu_;
  std::map<std::string, std::shared_ptr<LocalShard>> local_shards_;
  std::mutex stubs_mu_;
  std::map<std::string, std::unique_ptr<Stub>> stubs_;
  std::atomic<size_t> rr_{0};
};

// A replacement replica, built on the node that joins the shard (this one):
//   1. its local shard collection is created afresh; writes of the shard
//      that reach it from now on are queued, in order (Local);
//   2. the snapshot: every item of an in-sync replica, read by Scan pages
//      (the first page's call is a barrier there: no write of an older map,
//      one that did not reach this joiner, is applied after it) and upserted
//      here;
//   3. catch-up: the queued writes are replayed in order, then writes apply
//      directly;
//   4. it joins the in-sync replicas by a compare-epoch transaction, only if
//      the map still lists this attempt (a joiner that failed a write was
//      dropped before that write was acknowledged).
// Every acknowledged write thus reached the copy (applied at the source
// before the page of its id was read) or the queue (sent to the joiner), so
// the replica holds every acknowledged write when it joins. Any failure
// ends the attempt (the coordinator starts a new one).
Status ClusterService::Rebuild(ShardMap map, int shard, int64_t since) {
  const std::string name = LocalShardName(map.name, shard);
  const std::shared_ptr<LocalShard> local = LocalShardOf(name);
  {
    std::lock_guard<std::mutex> lock(local->mu);
    if (local->failed == since)
      return DropJoiners(&map, shard, {options_.node_id});
    if (local->since != since) local->Reset(since);
  }
  Status s = CopySnapshot(&map, shard, since);
  if (s.ok()) s = CatchUp(&map, shard, since, local.get());
  if (s.ok()) s = Join(&map, shard, since);
  if (s.ok()) return s;
  {
    // One-shot: writes of this attempt are refused from now on (their
    // senders drop the joiner), as is starting it again.
    std::lock_guard<std::mutex> lock(local->mu);
    local->failed = since;
    if (local->since == since) local->Reset(0);
  }
  DropJoiners(&map, shard, {options_.node_id}).ok();  // best effort
  return s;
}

Status ClusterService::CopySnapshot(ShardMap* map, int shard, int64_t since) {
  const std::string name = LocalShardName(map->name, shard);
  const int64_t self = options_.node_id;
  // A fresh collection: a copy left from when this node last held the shard
  // lacks the writes since.
  pb::DropCollectionRequest drop;
  drop.set_name(name);
  Status s = CallNode(
      map, self,
      [&](Stub* stub, grpc::ClientContext* c) {
        pb::DropCollectionResponse r;
        return stub->DropCollection(c, drop, &r);
      },
      true, since);
  if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  pb::CreateCollectionRequest create;
  create.set_name(name);
  create.set_dim(map->dim);
  create.set_metric(static_cast<pb::Metric>(map->metric));
  create.set_index(map->index);
  create.set_default_ttl_ms(map->default_ttl_ms);
  create.set_lexical(map->lexical);
  ZV_RETURN_IF_ERROR(CallNode(
      map, self,
      [&](Stub* stub, grpc::ClientContext* c) {
        pb::CreateCollectionResponse r;
        return stub->CreateCollection(c, create, &r);
      },
      true, since));
  pb::ScanRequest scan;
  scan.set_collection(name);
  scan.set_limit(kRebuildPage);
  scan.set_include_vectors(true);
  for (;;) {
    if (Stopping()) return UnavailableError("node stopping");
    pb::ScanResponse page;
    ZV_RETURN_IF_ERROR(
        CallOneReplica(*map, shard, [&](Stub* stub, grpc::ClientContext* c) {
          page.Clear();
          return stub->Scan(c, scan, &page);
        }));
    if (page.items_size() > 0) {
      pb::UpsertRequest up;
      up.set_collection(name);
      up.mutable_items()->Swap(page.mutable_items());
      ZV_RETURN_IF_ERROR(CallNode(
          map, self,
          [&](Stub* stub, grpc::ClientContext* c) {
            pb::UpsertResponse r;
            return stub->Upsert(c, up, &r);
          },
          true, since));
    }
    if (page.next_after_id().empty()) return OkStatus();
    scan.set_after_id(page.next_after_id());
  }
}

Status ClusterService::CatchUp(ShardMap* map, int shard, int64_t since,
                               LocalShard* local) {
  for (;;) {
    std::deque<QueuedWrite> batch;
    {
      std::lock_guard<std::mutex> lock(local->mu);
      if (local->since != since)
        return Status(StatusCode::kAborted, "rebuild superseded");
      if (local->queue.empty()) {
        local->loading = false;  // from now on writes apply directly
        return OkStatus();
      }
      batch.swap(local->queue);
    }
    for (const QueuedWrite& w : batch)
      ZV_RETURN_IF_ERROR(Replay(map, w, since));
  }
}

Status ClusterService::Replay(ShardMap* map, const QueuedWrite& write,
                              int64_t since) {
  return CallNode(
      map, options_.node_id,
      [&](Stub* stub, grpc::ClientContext* c) {
        if (auto* up = std::get_if<pb::UpsertRequest>(&write)) {
          pb::UpsertResponse r;
          return stub->Upsert(c, *up, &r);
        }
        if (auto* del = std::get_if<pb::DeleteRequest>(&write)) {
          pb::DeleteResponse r;
          return stub->Delete(c, *del, &r);
        }
        pb::TouchResponse r;
        return stub->Touch(c, std::get<pb::TouchRequest>(write), &r);
      },
      true, since);
}

Status ClusterService::Join(ShardMap* map, int shard, int64_t since) {
  const int64_t self = options_.node_id;
  return ChangeMap(
      map,
      [&](ShardMap& next) -> StatusOr<bool> {
        const Joiner* j = next.FindJoiner(shard, self);
        if (!j || j->since != since) {
          return Status(StatusCode::kAborted,
                        "no longer joining (dropped after a failed write)");
        }
        const Joiner mine = *j;
        auto& list = next.joining[shard];
        list.erase(std::remove(list.begin(), list.end(), mine), list.end());
        if (!next.HasReplica(shard, self)) next.replicas[shard].push_back(self);
        return true;
      },
      "shard " + std::to_string(shard) + ": node " + std::to_string(self) +
          " joined the in-sync replicas");
}

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
    std::vector<int64_t> holders = LiveReplicas(map, shard);
    for (const Joiner& j : map.Joining(shard)) holders.push_back(j.node);
    for (int64_t id : holders) {
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
