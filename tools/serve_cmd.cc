// zerovec serve: the gRPC server until SIGTERM / SIGINT (then a graceful stop).
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "base/file.h"
#include "cluster/cluster.h"
#include "embed/embedder.h"
#include "index/collection.h"
#include "service/server.h"
#include "service/service_decorator.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace zv::tools {
namespace {

// --gpu-memory BYTES|auto (K/M/G suffixes, powers of 1024), --gpu-device N,
// --gpu-batch-window-us US, --gpu-text-queries auto|device|host.
Status ParseGpuFlags(const Flags& flags, service::GpuServing* gpu) {
  ZV_ASSIGN_OR_RETURN(int64_t v, flags.GetInt("gpu-device", 0, 0, 63));
  gpu->device = static_cast<int>(v);
  ZV_ASSIGN_OR_RETURN(v, flags.GetInt("gpu-batch-window-us",
                                      gpu->batch_window.count(), 0, 100000));
  gpu->batch_window = std::chrono::microseconds(v);
  const std::string text_queries = flags.Get("gpu-text-queries", "auto");
  using TQ = service::GpuServing::TextQueries;
  if (text_queries == "auto") {
    gpu->text_queries = TQ::kAuto;
  } else if (text_queries == "device") {
    gpu->text_queries = TQ::kDevice;
  } else if (text_queries == "host") {
    gpu->text_queries = TQ::kHost;
  } else {
    return InvalidArgumentError(
        "--gpu-text-queries: auto, device or host, not \"" + text_queries +
        "\"");
  }
  if (!flags.Has("gpu-memory")) return OkStatus();
  gpu->enabled = true;
  const std::string text = flags.Get("gpu-memory");
  if (text == "auto") {
    gpu->memory_auto = true;
    return OkStatus();
  }
  uint64_t unit = 1;
  std::string digits = text;
  if (!digits.empty()) {
    const char suffix = static_cast<char>(std::toupper(digits.back()));
    const std::string units = "KMGT";
    if (const size_t at = units.find(suffix); at != std::string::npos) {
      unit = uint64_t{1} << (10 * (at + 1));
      digits.pop_back();
    }
  }
  char* end = nullptr;
  const unsigned long long n = std::strtoull(digits.c_str(), &end, 10);
  if (digits.empty() || *end != '\0' || n == 0 ||
      n > (uint64_t{1} << 50) / unit) {
    return InvalidArgumentError("--gpu-memory: '" + text +
                                "' is not a byte count (e.g. 40G) or auto");
  }
  gpu->memory_bytes = n * unit;
  return OkStatus();
}

// Joins the cluster once the server listens; leaves it before it stops.
class ClusterDecorator final : public service::ServiceDecorator {
 public:
  explicit ClusterDecorator(const cluster::ClusterOptions& options)
      : options_(options) {}
  StatusOr<zerovec::v1::ZeroVec::Service*> Wrap(
      zerovec::v1::ZeroVec::Service* local) override {
    ZV_ASSIGN_OR_RETURN(node_, cluster::ClusterNode::Create(options_, local));
    return node_->service();
  }
  Status Started(int port) override { return node_->Register(port); }
  void Stop() override {
    if (node_) node_->Leave();
  }

 private:
  const cluster::ClusterOptions options_;
  std::unique_ptr<cluster::ClusterNode> node_;
};

// --cluster etcd://... --node-id N [--advertise-host H] [--lease-ttl-s N]
// [--shard-timeout-ms N] [--allow-partial-results]
Status ParseClusterFlags(const Flags& flags, service::ServerOptions* options) {
  if (!flags.Has("cluster")) {
    for (const char* f : {"node-id", "advertise-host", "lease-ttl-s",
                          "shard-timeout-ms", "allow-partial-results"}) {
      if (flags.Has(f))
        return InvalidArgumentError(std::string("--") + f +
                                    " needs --cluster etcd://HOST:PORT");
    }
    return OkStatus();
  }
  cluster::ClusterOptions c;
  c.etcd = flags.Get("cluster");
  if (!flags.Has("node-id"))
    return InvalidArgumentError("--cluster needs --node-id N (unique, >= 1)");
  ZV_ASSIGN_OR_RETURN(c.node_id, flags.GetInt("node-id", 0, 1, 1 << 30));
  c.advertise_host = flags.Get("advertise-host", "127.0.0.1");
  ZV_ASSIGN_OR_RETURN(c.lease_ttl_s, flags.GetInt("lease-ttl-s", 10, 1, 3600));
  ZV_ASSIGN_OR_RETURN(const int64_t timeout_ms,
                      flags.GetInt("shard-timeout-ms", 5000, 1, 600000));
  c.shard_timeout = std::chrono::milliseconds(timeout_ms);
  c.allow_partial_results = flags.Has("allow-partial-results");
  c.auth_token = options->auth_token;
  c.log = options->log;
  options->decorator = std::make_shared<ClusterDecorator>(c);
  return OkStatus();
}

Status ParseServeFlags(const Flags& flags, service::ServerOptions* options,
                       std::string* port_file, int64_t* grace_s) {
  options->data_dir = flags.Get("data", kDefaultData);
  options->listen = flags.Get("listen", kDefaultListen);
  options->device = flags.Get("device", "auto");
  ZV_ASSIGN_OR_RETURN(const DeviceChoice devices, ParseDeviceFlags(flags));
  if (devices.from_devices) options->devices = devices.devices_flag;
  ZV_ASSIGN_OR_RETURN(const int64_t threads,
                      flags.GetInt("threads", 0, 0, 4096));
  options->cpu_threads = static_cast<int>(threads);
  ZV_ASSIGN_OR_RETURN(const std::string model, ResolveModelDir(flags));
  options->model_dir = model;  // empty: --model none, vector requests only
  service::Limits& l = options->limits;
  ZV_ASSIGN_OR_RETURN(int64_t v,
                      flags.GetInt("max-batch", l.max_batch, 1, 1 << 20));
  l.max_batch = static_cast<int>(v);
  ZV_ASSIGN_OR_RETURN(v, flags.GetInt("max-k", l.max_k, 1, index::kMaxK));
  l.max_k = static_cast<int>(v);
  ZV_ASSIGN_OR_RETURN(
      v, flags.GetInt("max-text-bytes", l.max_text_bytes, 1, 1 << 26));
  l.max_text_bytes = static_cast<size_t>(v);
  ZV_ASSIGN_OR_RETURN(v, flags.GetInt("max-message-bytes", l.max_message_bytes,
                                      1024, (int64_t{1} << 31) - 1));
  l.max_message_bytes = static_cast<size_t>(v);
  ZV_ASSIGN_OR_RETURN(v, flags.GetInt("max-concurrent-requests",
                                      l.max_concurrent_requests, 1, 1 << 20));
  l.max_concurrent_requests = static_cast<int>(v);
  ZV_ASSIGN_OR_RETURN(*grace_s, flags.GetInt("shutdown-grace-s", 30, 0, 3600));
  service::AutoCompaction& ac = options->auto_compaction;
  ZV_ASSIGN_OR_RETURN(ac.tombstone_fraction,
                      flags.GetDouble("compact-tombstones", 0, 0, 1));
  ZV_ASSIGN_OR_RETURN(
      v, flags.GetInt("compact-min-rows", ac.min_rows, 1, int64_t{1} << 48));
  ac.min_rows = static_cast<uint64_t>(v);
  ZV_ASSIGN_OR_RETURN(
      v, flags.GetInt("sweep-interval-ms", options->sweep_interval.count(), 0,
                      86'400'000));
  options->sweep_interval = std::chrono::milliseconds(v);
  ZV_RETURN_IF_ERROR(ParseGpuFlags(flags, &options->gpu));
  // The search mirrors split over the same GPUs the encoders run on.
  if (const std::vector<int> cuda = devices.CudaDevices();
      devices.from_devices && !cuda.empty()) {
    if (flags.Has("gpu-device") &&
        std::find(cuda.begin(), cuda.end(), options->gpu.device) ==
            cuda.end()) {
      return InvalidArgumentError("--gpu-device " + flags.Get("gpu-device") +
                                  " is not one of --devices " +
                                  devices.devices_flag +
                                  " (give --devices alone: GPU search uses the "
                                  "same devices)");
    }
    options->gpu.device = cuda[0];
    if (cuda.size() > 1) options->gpu.devices = cuda;
  }
  options->log = [](const std::string& line) {
    std::cerr << "zerovec serve: " << line << "\n";
  };
  *port_file = flags.Get("port-file");
  if (flags.Has("group")) {
    ZV_RETURN_IF_ERROR(CheckGroupFlag(flags.Get("group")));
    options->group = flags.Get("group");
  }
  if (flags.Has("auth-token-file")) {
    auto token = ReadSecretFile(flags.Get("auth-token-file"));
    if (!token.ok()) return FailedPreconditionError(token.status().message());
    options->auth_token = *token;
  }
  return ParseClusterFlags(flags, options);
}

}  // namespace

int RunServe(const std::vector<std::string>& args) {
  auto flags = Flags::Parse(args,
                            {"data",
                             "listen",
                             "model",
                             "device",
                             "devices",
                             "auth-token-file",
                             "port-file",
                             "max-batch",
                             "max-k",
                             "max-text-bytes",
                             "max-message-bytes",
                             "max-concurrent-requests",
                             "shutdown-grace-s",
                             "compact-tombstones",
                             "compact-min-rows",
                             "group",
                             "threads",
                             "gpu-memory",
                             "gpu-device",
                             "gpu-batch-window-us",
                             "gpu-text-queries",
                             "sweep-interval-ms",
                             "cluster",
                             "node-id",
                             "advertise-host",
                             "lease-ttl-s",
                             "shard-timeout-ms"},
                            {"allow-partial-results"});
  if (!flags.ok()) return Fail("serve", flags.status(), true);
  service::ServerOptions options;
  std::string port_file;
  int64_t grace_s = 30;
  if (Status s = ParseServeFlags(*flags, &options, &port_file, &grace_s);
      !s.ok()) {
    return Fail("serve", s, IsUsageError(s));
  }

  // Block the stop signals in every thread (gRPC's inherit the mask) and take
  // them synchronously below.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  // Under a file-size limit (ulimit -f), growing a file past it must be an
  // EFBIG error for the request, not SIGXFSZ killing the server.
  signal(SIGXFSZ, SIG_IGN);
  // Owner-only files: RocksDB creates its WAL, SSTs and logs (which hold the
  // documents) with 0666 & ~umask, so a default umask of 022 would let any
  // local user read them. Segment files set their own modes. With --group,
  // the group reads too (027).
  umask(options.group ? 027 : 077);

  auto server = service::Server::Start(options);
  if (!server.ok()) return Fail("serve", server.status(), false);
  const int port = (*server)->port();
  if (!port_file.empty()) {
    // Not synced: a port is stale after a reboot anyway; the rename alone
    // keeps a watcher from reading half a file.
    const Status written = WriteFileAtomically(
        port_file, std::to_string(port) + "\n", {.sync = false});
    if (!written.ok()) return Fail("serve", written, false);
  }
  std::cerr << "zerovec serve: listening on port " << port << " ("
            << options.listen << "), data " << options.data_dir.string()
            << ", model "
            << (options.model_dir.empty() ? "none" : options.model_dir.string())
            << (options.auth_token ? ", auth on" : "") << "\n";
  if (options.auto_compaction.tombstone_fraction > 0) {
    std::cerr << "zerovec serve: compacting collections of at least "
              << options.auto_compaction.min_rows << " rows once "
              << options.auto_compaction.tombstone_fraction
              << " of them are tombstoned\n";
  }
  std::cerr << "zerovec serve: device " << (*server)->embed_device() << "\n";

  int sig = 0;
  sigwait(&stop, &sig);
  std::cerr << "zerovec serve: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
            << ", finishing in-flight requests (up to " << grace_s << " s)\n";
  (*server)->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(grace_s));
  server->reset();
  std::cerr << "zerovec serve: stopped\n";
  return 0;
}

}  // namespace zv::tools
