// The threads the CPU encoder runs on: one pool per Embedder owns the cores it
// was given. Idle workers block on a condition variable (no spinning), and the
// BLAS inside each task runs single-threaded (cpu_encoder.cc), so the process
// never has more busy threads than the pool's size plus its callers.
// embed/-internal.
#ifndef ZEROVEC_EMBED_CPU_POOL_H_
#define ZEROVEC_EMBED_CPU_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zv::embed {

class CpuPool {
 public:
  // Starts `threads` workers; < 1 means AvailableCores(). Tasks run on the
  // workers only, never on Run's caller, so however many threads call Run (an
  // embedder's lanes), at most `threads` tasks compute at once.
  explicit CpuPool(int threads);
  ~CpuPool();
  CpuPool(const CpuPool&) = delete;
  CpuPool& operator=(const CpuPool&) = delete;

  int threads() const { return threads_; }

  // Runs fn(0) .. fn(n - 1) on the workers; returns when all are done.
  // Several threads may call Run at once (their tasks share the workers,
  // first come first served).
  void Run(size_t n, const std::function<void(size_t)>& fn);

  // Cores this process may use: its affinity mask, capped by a cgroup v2 CPU
  // quota (at least 1).
  static int AvailableCores();

 private:
  struct Job;
  void Work();
  // Claims the next task of `job` (mu_ held); false when all are claimed.
  bool Claim(Job* job, size_t* index);

  const int threads_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job*> jobs_;  // jobs with unclaimed tasks, oldest first
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_CPU_POOL_H_
