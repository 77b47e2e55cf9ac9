#include "tests/faults/fault_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace zv::faults {

namespace fs = std::filesystem;
namespace pb = zerovec::v1;

fs::path ZerovecBinary() {
  for (const char* candidate : {"tools/zerovec", "../tools/zerovec"}) {
    if (fs::exists(candidate)) return fs::absolute(candidate);
  }
  return "tools/zerovec";
}

int64_t RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

namespace {

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::unique_ptr<ServerProcess> ServerProcess::Start(
    const ServeOptions& options, std::string* error,
    std::chrono::seconds timeout) {
  static int counter = 0;
  const fs::path stem =
      options.data_dir.parent_path() / (options.data_dir.filename().string() +
                                        ".serve" + std::to_string(counter++));
  const fs::path port_file = stem.string() + ".port";
  std::unique_ptr<ServerProcess> p(new ServerProcess());
  p->log_ = stem.string() + ".log";
  fs::remove(port_file);

  std::vector<std::string> args = {ZerovecBinary().string(),
                                   "serve",
                                   "--data",
                                   options.data_dir.string(),
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--model",
                                   "none",
                                   "--port-file",
                                   port_file.string(),
                                   "--shutdown-grace-s",
                                   "5"};
  args.insert(args.end(), options.extra_flags.begin(),
              options.extra_flags.end());
  const pid_t pid = ::fork();
  if (pid < 0) {
    *error = "fork failed";
    return nullptr;
  }
  if (pid == 0) {
    const int fd = ::open(p->log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 2);
      ::dup2(fd, 1);
    }
    // Under ASan, a small quarantine so RSS measures the server, not freed
    // memory ASan holds back (no effect on other builds).
    std::string asan =
        std::getenv("ASAN_OPTIONS") ? std::getenv("ASAN_OPTIONS") : "";
    asan += std::string(asan.empty() ? "" : ":") + "quarantine_size_mb=8";
    ::setenv("ASAN_OPTIONS", asan.c_str(), 1);
    if (options.file_size_limit) {
      ::signal(SIGXFSZ, SIG_IGN);  // ignored dispositions survive exec
      struct rlimit rl;
      rl.rlim_cur = rl.rlim_max = *options.file_size_limit;
      ::setrlimit(RLIMIT_FSIZE, &rl);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  p->pid_ = pid;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(port_file)) {
      std::ifstream(port_file) >> p->port_;
      if (p->port_ > 0) break;
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      p->pid_ = -1;
      *error = "zerovec serve exited (status " + std::to_string(status) +
               "): " + ReadFile(p->log_);
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (p->port_ <= 0) {
    *error =
        "zerovec serve: no port file within the timeout: " + ReadFile(p->log_);
    return nullptr;  // destructor kills it
  }
  p->channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(p->port_),
                                    grpc::InsecureChannelCredentials());
  p->stub_ = pb::ZeroVec::NewStub(p->channel_);
  return p;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) Kill();
}

std::unique_ptr<pb::ZeroVec::Stub> ServerProcess::NewStub() const {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);  // its own connection
  auto channel =
      grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_),
                                grpc::InsecureChannelCredentials(), args);
  // A fresh connection's first attempt can fail on a loaded machine (CI saw
  // UNAVAILABLE "failed to connect" from a live server under ASan), and a call
  // then fails at once. Callers test what the server answers, not the connect,
  // so wait (bounded) for the channel to be ready; gRPC retries meanwhile.
  channel->WaitForConnected(std::chrono::system_clock::now() +
                            std::chrono::seconds(10));
  return pb::ZeroVec::NewStub(channel);
}

void ServerProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

int ServerProcess::Stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

bool ServerProcess::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

int64_t ServerProcess::RssKb() const {
  return pid_ > 0 ? faults::RssKb(pid_) : -1;
}

std::string ServerProcess::Log() const { return ReadFile(log_); }

std::string ServeExpectingFailure(const fs::path& data_dir, bool* started) {
  ServeOptions o;
  o.data_dir = data_dir;
  std::string error;
  auto server = ServerProcess::Start(o, &error);
  *started = server != nullptr;
  if (server) server->Stop();
  return error;
}

std::unique_ptr<grpc::ClientContext> Ctx(std::chrono::milliseconds timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  return ctx;
}

grpc::Status CreateCollection(pb::ZeroVec::Stub* stub, const std::string& name,
                              uint32_t dim) {
  pb::CreateCollectionRequest req;
  req.set_name(name);
  req.set_dim(dim);
  pb::CreateCollectionResponse resp;
  return stub->CreateCollection(Ctx().get(), req, &resp);
}

pb::CollectionInfo Describe(pb::ZeroVec::Stub* stub, const std::string& name,
                            grpc::Status* status) {
  pb::DescribeCollectionRequest req;
  req.set_name(name);
  pb::CollectionInfo info;
  grpc::Status s = stub->DescribeCollection(Ctx().get(), req, &info);
  if (status) *status = s;
  return info;
}

}  // namespace zv::faults
