// The ZeroVec gRPC server: zerovec.v1.ZeroVec over index/ and embed/, plus the
// standard grpc.health.v1 health service and server reflection. The one public
// header of service/.
#ifndef ZEROVEC_SERVICE_SERVER_H_
#define ZEROVEC_SERVICE_SERVER_H_

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "index/collection.h"

namespace zv::service {

// Request limits; a request over one answers RESOURCE_EXHAUSTED (or
// INVALID_ARGUMENT for a malformed request) and changes nothing.
struct Limits {
  int max_batch = 1024;           // items / ids / queries / texts per request
  int max_k = index::kMaxK;       // hits per query
  size_t max_text_bytes = 32768;  // one document or query text
  size_t max_message_bytes = 64 << 20;  // one received message
  int max_concurrent_requests = 256;    // in flight at once, over all RPCs
};

// Background compaction: a collection is compacted once this fraction of its
// rows is tombstoned (deleted or replaced).
struct AutoCompaction {
  double tombstone_fraction = 0;  // (0, 1]; 0 disables
  // Collections with fewer committed rows are left alone: compacting a tiny
  // collection after every few deletes would be churn for nothing.
  uint64_t min_rows = 1000;
};

// GPU search (issue 13; index::GpuSearchOptions): collections that fit the
// budget are mirrored in device memory and searched there, exactly.
struct GpuServing {
  bool enabled = false;
  // true: `memory_bytes` was "auto" (80 % of the free device memory once the
  // model is loaded), and a host without CUDA or a GPU serves on the CPU with
  // a log line. false: without them the server refuses to start.
  bool memory_auto = false;
  uint64_t memory_bytes = 0;
  int device = 0;
  // Several devices (serve --devices, issue 19): each mirror split over them
  // (index::GpuSearchOptions::devices); empty: `device` alone.
  std::vector<int> devices;
  // Concurrent searches of one mirrored collection with the same k and filter
  // wait up to this long to run as one GPU batch (only while a batch of
  // theirs is running). 0: each runs on its own.
  std::chrono::microseconds batch_window{500};
  // Text queries on a mirrored collection, with the encoder on the mirror's
  // device: kDevice embeds them into device memory and searches them from
  // there, one request at a time; kHost embeds them to the host and searches
  // them like vector queries, coalesced. kAuto: kDevice when coalescing is off
  // (batch_window 0), else kHost (measured on an H200, bench/RESULTS.md: with
  // coalescing the host way serves 1.25-1.29x the QPS from 16 clients up; at
  // one client they are equal).
  enum class TextQueries { kAuto, kDevice, kHost };
  TextQueries text_queries = TextQueries::kAuto;
};

// service/service_decorator.h (cluster mode).
class ServiceDecorator;

struct ServerOptions {
  std::filesystem::path data_dir = "./zerovec-data";
  // host:port; port 0 picks a free port (see Server::port()).
  std::string listen = "127.0.0.1:50051";
  // Checkpoint folder of the embedding model. Empty: no model, so only vector
  // requests are served (text requests answer FAILED_PRECONDITION).
  std::filesystem::path model_dir;
  // "auto", "cpu", "cuda" or "cuda:N" (embed::ParseDevice). auto: CUDA when
  // this build has it and a GPU is present, else the CPU.
  std::string device = "auto";
  // Set: one encoder per device of this list (embed::ParseDevices: "all",
  // "cuda:0,cuda:1", ...), requests spread over them; `device` is unused.
  std::string devices;
  // Threads of the CPU encoder (embed::EmbedderOptions::cpu_threads); 0: all
  // cores this process may use.
  int cpu_threads = 0;
  // When set, every RPC but health needs "authorization: Bearer <token>".
  std::optional<std::string> auth_token;
  // Shares the data dir with this Unix group (index::DatabaseOptions::group).
  std::optional<std::string> group;
  Limits limits;
  AutoCompaction auto_compaction;
  // How often expired items are swept (deleted, then compacted away); 0: no
  // sweep (expired items stay hidden until a compaction drops them).
  std::chrono::milliseconds sweep_interval{1000};
  GpuServing gpu;
  // Receives the server's log lines (compactions); unset: stderr.
  std::function<void(const std::string&)> log;
  // Set: stands in front of the local service (cluster mode:
  // service/service_decorator.h). Kept out of this header's includes so
  // that code needing only the options (validation, fuzzers) needs no gRPC
  // stubs.
  std::shared_ptr<ServiceDecorator> decorator;
};

class Server {
 public:
  // Opens the data directory, loads the model, and starts listening.
  static StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);

  virtual ~Server() = default;

  // The bound TCP port (the chosen one when listen asked for port 0).
  virtual int port() const = 0;
  // Where text is embedded, e.g. "cuda:0 NVIDIA H200 fp16 ..., sink=..." or
  // "cpu (openblas ...)"; Stats reports the same.
  virtual std::string embed_device() const = 0;
  // Blocks until Shutdown() has completed.
  virtual void Wait() = 0;
  // Stops accepting calls, lets in-flight calls finish until `deadline` (then
  // cancels them), and closes the collections. Idempotent; thread-safe.
  virtual void Shutdown(std::chrono::system_clock::time_point deadline) = 0;
};

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_SERVER_H_
