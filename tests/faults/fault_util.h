// Helpers for fault tests: run `zerovec serve` as a child process (so it can be
// SIGKILLed, resource-limited or fed corrupt files), connect stubs to it, and
// read a process's resident memory from /proc.
#ifndef ZEROVEC_TESTS_FAULTS_FAULT_UTIL_H_
#define ZEROVEC_TESTS_FAULTS_FAULT_UTIL_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/integration/test_util.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace zv::faults {

// Shared with the integration tests: per-test temp dirs and deterministic
// unit vectors keyed by id.
using ::zv::testing::MakeTempDir;
using ::zv::testing::VectorFor;

struct ServeOptions {
  std::filesystem::path data_dir;
  std::vector<std::string>
      extra_flags;  // e.g. {"--max-message-bytes", "65536"}
  // RLIMIT_FSIZE for the server process (bytes); SIGXFSZ is ignored so an
  // over-limit file operation fails with EFBIG instead of killing it.
  std::optional<uint64_t> file_size_limit;
};

// A `zerovec serve --model none` child on 127.0.0.1:0. The destructor SIGKILLs
// it if still running.
class ServerProcess {
 public:
  // Starts the server and waits (up to `timeout`) for its port file. On failure
  // the error holds the server's stderr (with its exit status).
  static std::unique_ptr<ServerProcess> Start(
      const ServeOptions& options, std::string* error,
      std::chrono::seconds timeout = std::chrono::seconds(60));
  ~ServerProcess();

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  zerovec::v1::ZeroVec::Stub* stub() const { return stub_.get(); }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  // A fresh channel + stub (its own TCP connection), connected (waits up to
  // 10 s for it).
  std::unique_ptr<zerovec::v1::ZeroVec::Stub> NewStub() const;

  // SIGKILL and reap. Returns once the process is gone.
  void Kill();
  // SIGTERM, then wait; returns the exit status (as from waitpid).
  int Stop();
  bool Running();
  // Resident set size in KiB (VmRSS from /proc/<pid>/status), -1 if unknown.
  int64_t RssKb() const;
  std::string Log() const;

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  std::filesystem::path log_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<zerovec::v1::ZeroVec::Stub> stub_;
};

// Runs `zerovec serve` on `data_dir` expecting it to fail at start: returns its
// stderr, or "" with *started = true if it served instead (then it is stopped).
std::string ServeExpectingFailure(const std::filesystem::path& data_dir,
                                  bool* started);

std::filesystem::path ZerovecBinary();
int64_t RssKb(pid_t pid);

// Deadline-bounded context (tests must never hang on a dead server).
std::unique_ptr<grpc::ClientContext> Ctx(
    std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

grpc::Status CreateCollection(zerovec::v1::ZeroVec::Stub* stub,
                              const std::string& name, uint32_t dim);
zerovec::v1::CollectionInfo Describe(zerovec::v1::ZeroVec::Stub* stub,
                                     const std::string& name,
                                     grpc::Status* status = nullptr);

}  // namespace zv::faults

#endif  // ZEROVEC_TESTS_FAULTS_FAULT_UTIL_H_
