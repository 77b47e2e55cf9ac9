// The expiry sweep (issue 17): a background thread that, every interval,
// tombstones each collection's expired rows (Collection::SweepExpired, the
// delete protocol) and tells the compactor, which reclaims their space once
// its threshold is passed. Searches and Get hide expired rows without it; the
// sweep is what frees them.
#ifndef ZEROVEC_SERVICE_SWEEPER_H_
#define ZEROVEC_SERVICE_SWEEPER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "index/collection.h"
#include "service/compactor.h"

namespace zv::service {

class Sweeper {
 public:
  using Log = std::function<void(const std::string&)>;
  // `db` and `compactor` must outlive this. An interval of 0 disables it.
  Sweeper(index::Database* db, Compactor* compactor,
          std::chrono::milliseconds interval, Log log);
  ~Sweeper();
  Sweeper(const Sweeper&) = delete;
  Sweeper& operator=(const Sweeper&) = delete;

  // Stops the thread after the sweep in progress. Idempotent.
  void Stop();
  // Sweeps every collection once, now, on the calling thread.
  void SweepAll();
  uint64_t swept() const { return swept_.load(std::memory_order_relaxed); }

 private:
  void Loop();

  index::Database* db_;
  Compactor* compactor_;
  const std::chrono::milliseconds interval_;
  Log log_;
  std::atomic<uint64_t> swept_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_SWEEPER_H_
