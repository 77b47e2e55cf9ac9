// Test helper: a real etcd cluster (Debian's etcd-server) of N members on
// 127.0.0.1, each a child process on its own client and peer ports, with its
// data in a temp dir. Members can be SIGKILLed and restarted.
#ifndef ZEROVEC_TESTS_CLUSTER_ETCD_CLUSTER_H_
#define ZEROVEC_TESTS_CLUSTER_ETCD_CLUSTER_H_

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace zv::testing {

// Where etcd is installed; empty when it is not.
std::string EtcdBinary();

// A port that was free a moment ago (bound to 127.0.0.1:0, then closed).
int FreePort();

class EtcdCluster {
 public:
  // Starts `members` members and waits until the cluster answers. On failure
  // *error says why (with the members' logs).
  EtcdCluster(const std::filesystem::path& dir, int members,
              std::string* error);
  ~EtcdCluster();

  // "etcd://127.0.0.1:P1,127.0.0.1:P2,..."
  std::string endpoints() const;
  void Kill(int member);
  // Restarts a killed member on its data dir; false if it does not serve.
  bool Restart(int member);

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };
  pid_t Spawn(const Member& m, bool first_start);
  bool WaitReady(int member);
  std::string Logs() const;

  std::filesystem::path dir_;
  std::vector<Member> members_;
  std::string initial_cluster_;
};

}  // namespace zv::testing

#endif  // ZEROVEC_TESTS_CLUSTER_ETCD_CLUSTER_H_
