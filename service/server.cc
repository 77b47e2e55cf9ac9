#include "service/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <cstdio>
#include <mutex>
#include <utility>

#include "embed/embedder.h"
#include "gpusearch/gpu_search.h"
#include "index/collection.h"
#include "service/auth.h"
#include "service/compactor.h"
#include "service/request_router.h"
#include "service/service_decorator.h"
#include "service/sweeper.h"
#include "service/zerovec_service.h"

namespace zv::service {
namespace {

bool TextQueriesOnDevice(const GpuServing& gpu) {
  switch (gpu.text_queries) {
    case GpuServing::TextQueries::kDevice:
      return true;
    case GpuServing::TextQueries::kHost:
      return false;
    case GpuServing::TextQueries::kAuto:
      break;
  }
  return gpu.batch_window.count() == 0;
}

class ServerImpl final : public Server {
 public:
  ServerImpl(const ServerOptions& options, std::unique_ptr<index::Database> db,
             std::unique_ptr<embed::Embedder> embedder)
      : options_(options),
        db_(std::move(db)),
        embedder_(std::move(embedder)),
        auth_(options.auth_token),
        compactor_(db_.get(), options.auto_compaction, options.log),
        sweeper_(db_.get(), &compactor_, options.sweep_interval, options.log),
        coalescer_(options.gpu.batch_window,
                   static_cast<size_t>(options.limits.max_batch)),
        service_(db_.get(), embedder_.get(), options.limits, &auth_,
                 &compactor_, &coalescer_, &sweeper_,
                 TextQueriesOnDevice(options.gpu)) {}

  ~ServerImpl() override {
    Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  Status Listen() {
    zerovec::v1::ZeroVec::Service* front = &service_;
    if (options_.decorator) {
      ZV_ASSIGN_OR_RETURN(front, options_.decorator->Wrap(&service_));
      decorator_ = options_.decorator;
    }
    router_ = std::make_unique<RequestRouter>(front);
    grpc::EnableDefaultHealthCheckService(true);
    // Reflection v1alpha only: Debian's gRPC 1.51 predates the v1 reflection
    // service (grpc 1.57). It describes grpc.health.v1 from
    // //proto:health_descriptor, linked in for that.
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(),
                             &port_);
    ZV_RETURN_IF_ERROR(router_->CheckCoversProto());
    // service_'s handlers, registered through router_ (request parse errors
    // name the field).
    builder.RegisterService(router_.get());
    builder.SetMaxReceiveMessageSize(
        static_cast<int>(options_.limits.max_message_bytes));
    builder.SetMaxSendMessageSize(
        static_cast<int>(options_.limits.max_message_bytes));
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        interceptors;
    interceptors.push_back(MakeAuthInterceptorFactory(&auth_));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) {
      return UnavailableError("listen " + options_.listen +
                              ": cannot bind (address in use or invalid?)");
    }
    // Probes may ask for the service by name as well as for the server ("").
    server_->GetHealthCheckService()->SetServingStatus(
        zerovec::v1::ZeroVec::service_full_name(), true);
    if (decorator_) ZV_RETURN_IF_ERROR(decorator_->Started(port_));
    return OkStatus();
  }

  int port() const override { return port_; }

  std::string embed_device() const override {
    return embedder_ ? embedder_->device_description() : "none (no model)";
  }

  void Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return done_; });
  }

  void Shutdown(std::chrono::system_clock::time_point deadline) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (shutting_down_) {
        done_cv_.wait(lock, [&] { return done_; });
        return;
      }
      shutting_down_ = true;
    }
    if (decorator_) decorator_->Stop();  // e.g. leave the cluster first
    if (server_) {
      server_->GetHealthCheckService()
          ->Shutdown();             // probes now see NOT_SERVING
      server_->Shutdown(deadline);  // in-flight calls finish
      server_->Wait();
    }
    server_.reset();
    sweeper_.Stop();
    compactor_.Stop();  // lets a background compaction finish first
    db_.reset();  // closes collections: all acknowledged writes are on disk
    embedder_.reset();
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    done_cv_.notify_all();
  }

 private:
  ServerOptions options_;
  std::unique_ptr<index::Database> db_;
  std::unique_ptr<embed::Embedder> embedder_;
  BearerAuth auth_;
  Compactor compactor_;
  Sweeper sweeper_;
  SearchCoalescer coalescer_;
  ZeroVecService service_;
  std::shared_ptr<ServiceDecorator> decorator_;  // set once Wrap succeeded
  std::unique_ptr<RequestRouter> router_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool shutting_down_ = false;
  bool done_ = false;
};

void Log(const ServerOptions& options, const std::string& line) {
  if (options.log) {
    options.log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

// --gpu-memory: an explicit budget needs CUDA and the device (the database
// refuses to open without them); "auto" on a host without them logs that GPU
// search is off and serves on the CPU.
Status GpuOptionsOf(const ServerOptions& options,
                    index::GpuSearchOptions* out) {
  const GpuServing& gpu = options.gpu;
  if (!gpu.enabled) return OkStatus();
  if (gpu.batch_window.count() < 0) {
    return InvalidArgumentError("gpu.batch_window: must be >= 0");
  }
  const std::vector<int> devices =
      gpu.devices.empty() ? std::vector<int>{gpu.device} : gpu.devices;
  for (int d : devices) {
    if (gpu.memory_auto &&
        (!gpusearch::BuiltWithCuda() || d >= gpusearch::DeviceCount())) {
      Log(options, std::string("GPU search off (--gpu-memory auto): ") +
                       (gpusearch::BuiltWithCuda()
                            ? "no CUDA device " + std::to_string(d)
                            : "built without CUDA"));
      return OkStatus();
    }
  }
  out->enabled = true;
  out->device = devices[0];
  out->devices = gpu.devices;
  out->memory_bytes = gpu.memory_auto ? 0 : gpu.memory_bytes;
  out->log = options.log;
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  if (options.auth_token && options.auth_token->empty()) {
    return InvalidArgumentError("auth_token: empty token");
  }
  const double fraction = options.auto_compaction.tombstone_fraction;
  if (!(fraction >= 0 && fraction <= 1)) {
    return InvalidArgumentError(
        "auto_compaction.tombstone_fraction: must be in [0, 1]");
  }
  std::unique_ptr<embed::Embedder> embedder;
  if (!options.model_dir.empty()) {
    std::vector<embed::EmbedderOptions> devices;
    if (options.devices.empty()) {
      ZV_ASSIGN_OR_RETURN(embed::EmbedderOptions eo,
                          embed::ParseDevice(options.device));
      devices.push_back(eo);
    } else {
      ZV_ASSIGN_OR_RETURN(devices, embed::ParseDevices(options.devices));
    }
    for (embed::EmbedderOptions& eo : devices) {
      eo.model_dir = options.model_dir;
      eo.cpu_threads = options.cpu_threads;
    }
    auto created = embed::Embedder::CreateMulti(std::move(devices));
    if (!created.ok())
      return created.status().WithContext("model " +
                                          options.model_dir.string());
    embedder = std::move(created).value();
  }
  index::DatabaseOptions db_options;
  db_options.group = options.group;
  ZV_RETURN_IF_ERROR(GpuOptionsOf(options, &db_options.gpu));
  auto db = index::Database::Open(options.data_dir, db_options);
  if (!db.ok())
    return db.status().WithContext("data " + options.data_dir.string());
  auto server = std::make_unique<ServerImpl>(options, std::move(db).value(),
                                             std::move(embedder));
  ZV_RETURN_IF_ERROR(server->Listen());
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace zv::service
