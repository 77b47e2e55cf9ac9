#include "service/stats.h"

#include <algorithm>
#include <cmath>

namespace zv::service {

void OpStatsRecorder::Record(std::chrono::nanoseconds latency, bool ok) {
  const double us = std::chrono::duration<double, std::micro>(latency).count();
  std::lock_guard<std::mutex> lock(mu_);
  ++count_;
  if (!ok) ++errors_;
  if (samples_.empty()) return;
  samples_[next_] = us;
  next_ = (next_ + 1) % samples_.size();
  filled_ = std::min(filled_ + 1, samples_.size());
}

OpSnapshot OpStatsRecorder::Snapshot() const {
  OpSnapshot snap;
  std::vector<double> sorted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snap.count = count_;
    snap.errors = errors_;
    sorted.assign(samples_.begin(), samples_.begin() + filled_);
  }
  if (sorted.empty()) return snap;
  std::sort(sorted.begin(), sorted.end());
  // Nearest-rank percentile.
  auto pct = [&](double p) {
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
    return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
  };
  snap.p50_us = pct(50);
  snap.p95_us = pct(95);
  snap.p99_us = pct(99);
  return snap;
}

}  // namespace zv::service
