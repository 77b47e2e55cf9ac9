#include "cluster/etcd_client.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace zv::cluster {
namespace {

namespace epb = etcdserverpb;

// The end of the range of keys that start with `prefix` (etcd's convention:
// the prefix with its last byte incremented).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    auto& c = reinterpret_cast<unsigned char&>(prefix.back());
    if (c < 0xff) {
      ++c;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

KeyValue FromProto(const mvccpb::KeyValue& kv) {
  return KeyValue{kv.key(),          kv.value(),   kv.create_revision(),
                  kv.mod_revision(), kv.version(), kv.lease()};
}

Status FromGrpc(const grpc::Status& s, const std::string& what,
                const std::string& endpoints) {
  if (s.ok()) return OkStatus();
  const auto code = static_cast<StatusCode>(s.error_code());
  if (code == StatusCode::kUnavailable ||
      code == StatusCode::kDeadlineExceeded) {
    return UnavailableError(
        "etcd " + endpoints + ": " + what +
        ": unreachable (is etcd running?): " + s.error_message());
  }
  return Status(code,
                "etcd " + endpoints + ": " + what + ": " + s.error_message());
}

class LeaseKeeperImpl final : public LeaseKeeper {
 public:
  LeaseKeeperImpl(epb::Lease::Stub* stub, int64_t lease, int64_t ttl_s,
                  std::function<void()> on_lost)
      : stub_(stub), lease_(lease), on_lost_(std::move(on_lost)) {
    period_ =
        std::chrono::milliseconds(std::max<int64_t>(ttl_s * 1000 / 3, 100));
    thread_ = std::thread([this] { Run(); });
  }
  ~LeaseKeeperImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      if (ctx_) ctx_->TryCancel();
    }
    cv_.notify_all();
    thread_.join();
  }

  std::chrono::steady_clock::time_point last_renewed() const override {
    return std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(
            last_renewed_.load(std::memory_order_relaxed)));
  }

 private:
  // One stream until it breaks; returns false when the lease is gone.
  bool RunStream() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return true;
      ctx_ = ctx.get();
    }
    auto stream = stub_->LeaseKeepAlive(ctx.get());
    epb::LeaseKeepAliveRequest req;
    req.set_id(lease_);
    epb::LeaseKeepAliveResponse resp;
    bool alive = true;
    while (stream->Write(req) && stream->Read(&resp)) {
      if (resp.ttl() <= 0) {
        alive = false;
        break;
      }
      last_renewed_.store(
          std::chrono::steady_clock::now().time_since_epoch().count(),
          std::memory_order_relaxed);
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, period_, [&] { return stop_; })) break;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ctx_ = nullptr;
    }
    ctx->TryCancel();
    stream->Finish().ok();
    return alive;
  }

  void Run() {
    for (;;) {
      if (!RunStream()) {
        on_lost_();
        return;
      }
      std::unique_lock<std::mutex> lock(mu_);
      // A broken stream (a member went away): retry soon, on another member.
      if (cv_.wait_for(lock, std::chrono::milliseconds(200),
                       [&] { return stop_; }))
        return;
    }
  }

  epb::Lease::Stub* stub_;
  const int64_t lease_;
  std::function<void()> on_lost_;
  std::chrono::milliseconds period_;
  std::atomic<std::chrono::steady_clock::duration::rep> last_renewed_{
      std::chrono::steady_clock::now().time_since_epoch().count()};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  grpc::ClientContext* ctx_ = nullptr;
  std::thread thread_;
};

class WatcherImpl final : public Watcher {
 public:
  WatcherImpl(epb::Watch::Stub* stub, std::string prefix, int64_t revision,
              std::function<void(const std::vector<WatchEvent>&)> on_events,
              std::function<void(const Status&)> on_error)
      : stub_(stub),
        prefix_(std::move(prefix)),
        next_revision_(revision),
        on_events_(std::move(on_events)),
        on_error_(std::move(on_error)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~WatcherImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      if (ctx_) ctx_->TryCancel();
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  // One stream until it breaks; false: stop for good (compacted or stopped).
  bool RunStream() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return false;
      ctx_ = ctx.get();
    }
    auto stream = stub_->Watch(ctx.get());
    epb::WatchRequest req;
    auto* create = req.mutable_create_request();
    create->set_key(prefix_);
    create->set_range_end(PrefixEnd(prefix_));
    create->set_start_revision(next_revision_);
    bool again = stream->Write(req);
    epb::WatchResponse resp;
    while (again && stream->Read(&resp)) {
      if (resp.compact_revision() > 0) {
        on_error_(FailedPreconditionError(
            "etcd watch of " + prefix_ + ": history compacted at revision " +
            std::to_string(resp.compact_revision())));
        again = false;
        break;
      }
      if (resp.events_size() == 0) continue;
      std::vector<WatchEvent> events;
      for (const auto& e : resp.events()) {
        events.push_back(
            {e.type() == mvccpb::Event::DELETE, FromProto(e.kv())});
        next_revision_ = e.kv().mod_revision() + 1;
      }
      on_events_(events);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ctx_ = nullptr;
    }
    ctx->TryCancel();
    stream->Finish().ok();
    return again;
  }

  void Run() {
    while (RunStream()) {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(200),
                       [&] { return stop_; }))
        return;
    }
  }

  epb::Watch::Stub* stub_;
  const std::string prefix_;
  int64_t next_revision_;
  std::function<void(const std::vector<WatchEvent>&)> on_events_;
  std::function<void(const Status&)> on_error_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  grpc::ClientContext* ctx_ = nullptr;
  std::thread thread_;
};

class EtcdClientImpl final : public EtcdClient {
 public:
  EtcdClientImpl(const EtcdOptions& options,
                 std::shared_ptr<grpc::Channel> channel)
      : options_(options),
        channel_(channel),
        kv_(epb::KV::NewStub(channel)),
        lease_(epb::Lease::NewStub(channel)),
        watch_(epb::Watch::NewStub(channel)) {}

  const std::string& endpoints() const override { return options_.endpoints; }

  StatusOr<std::vector<KeyValue>> Range(const std::string& key, bool prefix,
                                        int64_t* revision) override {
    epb::RangeRequest req;
    req.set_key(key);
    if (prefix) req.set_range_end(PrefixEnd(key));
    epb::RangeResponse resp;
    auto ctx = Ctx();
    ZV_RETURN_IF_ERROR(FromGrpc(kv_->Range(ctx.get(), req, &resp),
                                "range " + key, options_.endpoints));
    if (revision) *revision = resp.header().revision();
    std::vector<KeyValue> out;
    for (const auto& kv : resp.kvs()) out.push_back(FromProto(kv));
    return out;
  }

  StatusOr<std::optional<KeyValue>> Get(const std::string& key) override {
    ZV_ASSIGN_OR_RETURN(auto kvs, Range(key, false, nullptr));
    if (kvs.empty()) return std::optional<KeyValue>();
    return std::optional<KeyValue>(std::move(kvs[0]));
  }

  Status Put(const std::string& key, const std::string& value,
             int64_t lease) override {
    epb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    req.set_lease(lease);
    epb::PutResponse resp;
    auto ctx = Ctx();
    return FromGrpc(kv_->Put(ctx.get(), req, &resp), "put " + key,
                    options_.endpoints);
  }

  Status Delete(const std::string& key) override {
    epb::DeleteRangeRequest req;
    req.set_key(key);
    epb::DeleteRangeResponse resp;
    auto ctx = Ctx();
    return FromGrpc(kv_->DeleteRange(ctx.get(), req, &resp), "delete " + key,
                    options_.endpoints);
  }

  StatusOr<bool> Txn(const std::vector<Compare>& if_all,
                     const std::vector<TxnOp>& ops) override {
    epb::TxnRequest req;
    for (const Compare& c : if_all) {
      auto* cmp = req.add_compare();
      cmp->set_key(c.key);
      cmp->set_result(epb::Compare::EQUAL);
      switch (c.target) {
        case Compare::Target::kVersion:
          cmp->set_target(epb::Compare::VERSION);
          cmp->set_version(c.number);
          break;
        case Compare::Target::kModRevision:
          cmp->set_target(epb::Compare::MOD);
          cmp->set_mod_revision(c.number);
          break;
        case Compare::Target::kValue:
          cmp->set_target(epb::Compare::VALUE);
          cmp->set_value(c.value);
          break;
      }
    }
    for (const TxnOp& op : ops) {
      auto* r = req.add_success();
      if (op.kind == TxnOp::Kind::kPut) {
        auto* put = r->mutable_request_put();
        put->set_key(op.key);
        put->set_value(op.value);
        put->set_lease(op.lease);
      } else {
        r->mutable_request_delete_range()->set_key(op.key);
      }
    }
    epb::TxnResponse resp;
    auto ctx = Ctx();
    ZV_RETURN_IF_ERROR(
        FromGrpc(kv_->Txn(ctx.get(), req, &resp), "txn", options_.endpoints));
    return resp.succeeded();
  }

  StatusOr<int64_t> GrantLease(int64_t ttl_s) override {
    epb::LeaseGrantRequest req;
    req.set_ttl(ttl_s);
    epb::LeaseGrantResponse resp;
    auto ctx = Ctx();
    ZV_RETURN_IF_ERROR(FromGrpc(lease_->LeaseGrant(ctx.get(), req, &resp),
                                "lease grant", options_.endpoints));
    if (!resp.error().empty()) {
      return UnavailableError("etcd lease grant: " + resp.error());
    }
    return resp.id();
  }

  Status RevokeLease(int64_t lease) override {
    epb::LeaseRevokeRequest req;
    req.set_id(lease);
    epb::LeaseRevokeResponse resp;
    auto ctx = Ctx();
    return FromGrpc(lease_->LeaseRevoke(ctx.get(), req, &resp), "lease revoke",
                    options_.endpoints);
  }

  std::unique_ptr<LeaseKeeper> KeepAlive(
      int64_t lease, int64_t ttl_s, std::function<void()> on_lost) override {
    return std::make_unique<LeaseKeeperImpl>(lease_.get(), lease, ttl_s,
                                             std::move(on_lost));
  }

  std::unique_ptr<Watcher> Watch(
      const std::string& prefix, int64_t start_revision,
      std::function<void(const std::vector<WatchEvent>&)> on_events,
      std::function<void(const Status&)> on_error) override {
    return std::make_unique<WatcherImpl>(watch_.get(), prefix, start_revision,
                                         std::move(on_events),
                                         std::move(on_error));
  }

 private:
  std::unique_ptr<grpc::ClientContext> Ctx() const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + options_.timeout);
    return ctx;
  }

  const EtcdOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<epb::KV::Stub> kv_;
  std::unique_ptr<epb::Lease::Stub> lease_;
  std::unique_ptr<epb::Watch::Stub> watch_;
};

bool IsIpv4(const std::string& host) {
  in_addr addr;
  return inet_pton(AF_INET, host.c_str(), &addr) == 1;
}

}  // namespace

StatusOr<std::string> EtcdTarget(const std::string& endpoints) {
  std::string list = endpoints;
  if (list.rfind("etcd://", 0) == 0) list = list.substr(7);
  std::vector<std::string> parts;
  std::stringstream ss(list);
  for (std::string part; std::getline(ss, part, ',');) {
    const size_t colon = part.rfind(':');
    if (part.empty() || colon == std::string::npos || colon == 0 ||
        colon + 1 == part.size()) {
      return InvalidArgumentError("--cluster: '" + part + "' in '" + endpoints +
                                  "' is not host:port");
    }
    parts.push_back(part);
  }
  if (parts.empty()) {
    return InvalidArgumentError("--cluster: no endpoints in '" + endpoints +
                                "' (etcd://host:port[,host:port...])");
  }
  bool all_ipv4 = true;
  for (const auto& p : parts) all_ipv4 &= IsIpv4(p.substr(0, p.rfind(':')));
  if (all_ipv4) {
    std::string target = "ipv4:";
    for (size_t i = 0; i < parts.size(); ++i)
      target += (i ? "," : "") + parts[i];
    return target;
  }
  if (parts.size() == 1) return "dns:///" + parts[0];
  return InvalidArgumentError(
      "--cluster: several endpoints must be IPv4 addresses, got '" + endpoints +
      "'");
}

StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(
    const EtcdOptions& options) {
  ZV_ASSIGN_OR_RETURN(const std::string target, EtcdTarget(options.endpoints));
  grpc::ChannelArguments args;
  // Spread calls over the members and skip a dead one: any member serves
  // (followers forward writes to the leader).
  args.SetLoadBalancingPolicyName("round_robin");
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args);
  auto client = std::make_unique<EtcdClientImpl>(options, channel);
  ZV_RETURN_IF_ERROR(
      client->Get("/zerovec/version").status().WithContext("connect"));
  return std::unique_ptr<EtcdClient>(std::move(client));
}

}  // namespace zv::cluster
