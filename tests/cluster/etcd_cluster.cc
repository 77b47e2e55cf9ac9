#include "tests/cluster/etcd_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "cluster/etcd_client.h"

namespace zv::testing {

namespace fs = std::filesystem;

std::string EtcdBinary() {
  for (const char* p : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

EtcdCluster::EtcdCluster(const fs::path& dir, int members, std::string* error)
    : dir_(dir) {
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = "m" + std::to_string(i);
    m.client_port = FreePort();
    m.peer_port = FreePort();
    initial_cluster_ += (i ? "," : "") + m.name +
                        "=http://127.0.0.1:" + std::to_string(m.peer_port);
    members_.push_back(m);
  }
  for (auto& m : members_) m.pid = Spawn(m, true);
  for (int i = 0; i < members; ++i) {
    if (!WaitReady(i)) {
      *error = "etcd did not start: " + Logs();
      return;
    }
  }
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < static_cast<int>(members_.size()); ++i) Kill(i);
}

std::string EtcdCluster::endpoints() const {
  std::string out = "etcd://";
  for (size_t i = 0; i < members_.size(); ++i) {
    out += (i ? ",127.0.0.1:" : "127.0.0.1:") +
           std::to_string(members_[i].client_port);
  }
  return out;
}

pid_t EtcdCluster::Spawn(const Member& m, bool first_start) {
  const std::string client =
      "http://127.0.0.1:" + std::to_string(m.client_port);
  const std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
  std::vector<std::string> args = {EtcdBinary(),
                                   "--name",
                                   m.name,
                                   "--data-dir",
                                   (dir_ / m.name).string(),
                                   "--listen-client-urls",
                                   client,
                                   "--advertise-client-urls",
                                   client,
                                   "--listen-peer-urls",
                                   peer,
                                   "--initial-advertise-peer-urls",
                                   peer,
                                   "--initial-cluster",
                                   initial_cluster_,
                                   "--initial-cluster-state",
                                   first_start ? "new" : "existing",
                                   "--initial-cluster-token",
                                   "zerovec-test",
                                   "--heartbeat-interval",
                                   "50",
                                   "--election-timeout",
                                   "500",
                                   "--log-level",
                                   "warn"};
  const pid_t pid = ::fork();
  if (pid == 0) {
    const fs::path log = dir_ / (m.name + ".log");
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

bool EtcdCluster::WaitReady(int member) {
  cluster::EtcdOptions o;
  o.endpoints = "127.0.0.1:" + std::to_string(members_[member].client_port);
  o.timeout = std::chrono::milliseconds(1000);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    auto client = cluster::EtcdClient::Connect(o);
    // A put needs a leader: the member is part of a working cluster.
    if (client.ok() && (*client)->Put("/zerovec-test/ready", "1").ok())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

void EtcdCluster::Kill(int member) {
  Member& m = members_[member];
  if (m.pid <= 0) return;
  ::kill(m.pid, SIGKILL);
  int status = 0;
  ::waitpid(m.pid, &status, 0);
  m.pid = -1;
}

bool EtcdCluster::Restart(int member) {
  Kill(member);
  members_[member].pid = Spawn(members_[member], false);
  return WaitReady(member);
}

std::string EtcdCluster::Logs() const {
  std::string out;
  for (const auto& m : members_) {
    std::ifstream in(dir_ / (m.name + ".log"));
    std::stringstream ss;
    ss << in.rdbuf();
    out += "[" + m.name + "] " + ss.str().substr(0, 2000) + "\n";
  }
  return out;
}

}  // namespace zv::testing
