// Compactions for the service: on request (the Compact RPC) and in the
// background when a collection's tombstoned fraction passes a threshold. At
// most one compaction runs per collection at a time; automatic ones run one
// after another on a single background thread, so they never take more than
// one core from serving.
#ifndef ZEROVEC_SERVICE_COMPACTOR_H_
#define ZEROVEC_SERVICE_COMPACTOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/status.h"
#include "index/collection.h"
#include "service/server.h"
#include "service/stats.h"

namespace zv::service {

class Compactor {
 public:
  using Log = std::function<void(const std::string&)>;

  // `db` must outlive this. The background thread runs only when
  // `options.tombstone_fraction` > 0; it first checks every collection once.
  Compactor(index::Database* db, const AutoCompaction& options, Log log);
  ~Compactor();
  Compactor(const Compactor&) = delete;
  Compactor& operator=(const Compactor&) = delete;

  // Compacts `coll` now on the calling thread, after any compaction of it
  // already running. Logged; timed in op_stats() by the caller (the RPC).
  StatusOr<index::CompactionResult> Compact(
      const std::shared_ptr<index::Collection>& coll);

  // A write may have tombstoned rows of `name`: have the background thread
  // check it against the threshold. Cheap; a no-op when disabled.
  void Notify(const std::string& name);

  // Stops the background thread, letting a compaction in progress finish.
  // Idempotent. Call before the database closes.
  void Stop();

  // Every compaction (requested and automatic).
  OpStatsRecorder* op_stats() { return &op_stats_; }
  uint64_t automatic_runs() const {
    return automatic_runs_.load(std::memory_order_relaxed);
  }

 private:
  using Clock = std::chrono::steady_clock;

  void Loop();
  bool OverThreshold(const index::CollectionInfo& info) const;
  void MaybeCompact(const std::string& name);
  // Waits for the collection's slot; false if stopping (automatic only).
  bool Acquire(const std::string& name, bool automatic);
  void Release(const std::string& name);
  StatusOr<index::CompactionResult> RunAndLog(index::Collection& coll,
                                              const std::string& why);

  index::Database* db_;
  const AutoCompaction options_;
  Log log_;
  OpStatsRecorder op_stats_;
  std::atomic<uint64_t> automatic_runs_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> running_;  // collections being compacted now
  // To check against the threshold, first notified first (a set beside it
  // keeps each name queued once).
  std::deque<std::string> pending_;
  std::set<std::string> queued_;
  // After a failed automatic compaction (e.g. a full disk) the collection is
  // not retried before this time, so writes do not retrigger it in a loop.
  std::map<std::string, Clock::time_point> retry_after_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_COMPACTOR_H_
