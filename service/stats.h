// Operation counters and latency percentiles over a bounded reservoir of the
// most recent calls (memory stays constant however long the server runs).
#ifndef ZEROVEC_SERVICE_STATS_H_
#define ZEROVEC_SERVICE_STATS_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace zv::service {

struct OpSnapshot {
  uint64_t count = 0;
  uint64_t errors = 0;
  double p50_us = 0, p95_us = 0, p99_us = 0;
};

class OpStatsRecorder {
 public:
  explicit OpStatsRecorder(size_t reservoir = 4096) : samples_(reservoir) {}

  void Record(std::chrono::nanoseconds latency, bool ok);
  OpSnapshot Snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> samples_;  // ring of the latest latencies, microseconds
  size_t next_ = 0;
  size_t filled_ = 0;
  uint64_t count_ = 0;
  uint64_t errors_ = 0;
};

// Times a scope and records it on destruction unless the result says otherwise.
class ScopedOpTimer {
 public:
  explicit ScopedOpTimer(OpStatsRecorder* recorder)
      : recorder_(recorder), start_(std::chrono::steady_clock::now()) {}
  ~ScopedOpTimer() {
    recorder_->Record(std::chrono::steady_clock::now() - start_, ok_);
  }
  void set_ok(bool ok) { ok_ = ok; }

 private:
  OpStatsRecorder* recorder_;
  std::chrono::steady_clock::time_point start_;
  bool ok_ = true;
};

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_STATS_H_
