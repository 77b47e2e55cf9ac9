#include "embed/cpu_pool.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace zv::embed {

struct CpuPool::Job {
  const std::function<void(size_t)>* fn;
  size_t n;
  size_t next = 0;  // next task to claim (mu_)
  size_t done = 0;  // tasks finished (mu_)
  std::condition_variable finished;
};

namespace {

// The cgroup v2 CPU quota in cores, rounded up (a container limited to 16
// cores of a 192-core host sees all 192 in its affinity mask); 0 if none.
int CgroupCores() {
  std::ifstream in("/sys/fs/cgroup/cpu.max");
  std::string quota;
  long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  const long q = std::atol(quota.c_str());
  return q > 0 ? static_cast<int>((q + period - 1) / period) : 0;
}

}  // namespace

int CpuPool::AvailableCores() {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (const int quota = CgroupCores(); quota > 0)
    cores = std::min(cores, quota);
  return std::max(1, cores);
}

CpuPool::CpuPool(int threads)
    : threads_(threads < 1 ? AvailableCores() : threads) {
  for (int i = 0; i < threads_; ++i) workers_.emplace_back([this] { Work(); });
}

CpuPool::~CpuPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

bool CpuPool::Claim(Job* job, size_t* index) {
  if (job->next >= job->n) return false;
  *index = job->next++;
  // The last task claimed: no one else may find the job from here on, so its
  // owner can return as soon as the claimed tasks are done.
  if (job->next == job->n) {
    jobs_.erase(std::find(jobs_.begin(), jobs_.end(), job));
  }
  return true;
}

void CpuPool::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    Job* job = jobs_.front();
    size_t i;
    if (!Claim(job, &i)) continue;
    lock.unlock();
    (*job->fn)(i);
    lock.lock();
    if (++job->done == job->n) job->finished.notify_one();
  }
}

void CpuPool::Run(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  Job job{&fn, n};
  std::unique_lock<std::mutex> lock(mu_);
  jobs_.push_back(&job);
  // Wake only as many workers as there are tasks.
  if (n >= workers_.size()) {
    wake_.notify_all();
  } else {
    for (size_t k = 0; k < n; ++k) wake_.notify_one();
  }
  job.finished.wait(lock, [&] { return job.done == job.n; });
}

}  // namespace zv::embed
