#include "service/compactor.h"

#include <cstdio>
#include <iostream>
#include <utility>
#include <vector>

namespace zv::service {
namespace {

constexpr auto kRetryAfterFailure = std::chrono::seconds(60);

std::string Fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

}  // namespace

Compactor::Compactor(index::Database* db, const AutoCompaction& options,
                     Log log)
    : db_(db), options_(options), log_(std::move(log)) {
  if (!log_) {
    log_ = [](const std::string& line) {
      std::cerr << "zerovec: " << line << "\n";
    };
  }
  if (options_.tombstone_fraction > 0)
    thread_ = std::thread([this] { Loop(); });
}

Compactor::~Compactor() { Stop(); }

void Compactor::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!stopping_ && thread_.joinable()) {
      // A compaction cannot be interrupted halfway; say why shutdown waits.
      for (const std::string& name : running_)
        log_("waiting for the compaction of collection " + name + " to finish");
    }
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Compactor::Notify(const std::string& name) {
  if (options_.tombstone_fraction <= 0) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_ || !queued_.insert(name).second) return;
    pending_.push_back(name);
  }
  cv_.notify_all();
}

bool Compactor::OverThreshold(const index::CollectionInfo& info) const {
  return options_.tombstone_fraction > 0 && info.tombstones > 0 &&
         info.rows >= options_.min_rows &&
         static_cast<double>(info.tombstones) >=
             options_.tombstone_fraction * static_cast<double>(info.rows);
}

void Compactor::Loop() {
  // Collections may already be over the threshold when the server starts.
  for (const std::string& name : db_->ListCollections()) Notify(name);
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [&] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    const std::string name = std::move(pending_.front());
    pending_.pop_front();
    queued_.erase(name);
    l.unlock();
    MaybeCompact(name);
    l.lock();
  }
}

void Compactor::MaybeCompact(const std::string& name) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = retry_after_.find(name);
    if (it != retry_after_.end()) {
      if (Clock::now() < it->second) return;
      retry_after_.erase(it);
    }
  }
  auto coll = db_->GetCollection(name);
  if (!coll.ok() || !OverThreshold((*coll)->Describe())) return;
  if (!Acquire(name, /*automatic=*/true)) return;
  // Checked again in the slot: a requested compaction may just have run.
  const index::CollectionInfo info = (*coll)->Describe();
  if (OverThreshold(info)) {
    const std::string why = "automatic, " + std::to_string(info.tombstones) +
                            " of " + std::to_string(info.rows) +
                            " rows tombstoned, threshold " +
                            Fixed(options_.tombstone_fraction, 2);
    const auto start = Clock::now();
    auto result = RunAndLog(**coll, why);
    op_stats_.Record(Clock::now() - start, result.ok());
    if (result.ok()) {
      automatic_runs_.fetch_add(1, std::memory_order_relaxed);
    } else {
      std::lock_guard<std::mutex> l(mu_);
      retry_after_[name] = Clock::now() + kRetryAfterFailure;
    }
  }
  Release(name);
}

bool Compactor::Acquire(const std::string& name, bool automatic) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(
      l, [&] { return (automatic && stopping_) || running_.count(name) == 0; });
  if (automatic && stopping_) return false;
  running_.insert(name);
  return true;
}

void Compactor::Release(const std::string& name) {
  {
    std::lock_guard<std::mutex> l(mu_);
    running_.erase(name);
  }
  cv_.notify_all();
}

StatusOr<index::CompactionResult> Compactor::Compact(
    const std::shared_ptr<index::Collection>& coll) {
  Acquire(coll->name(), /*automatic=*/false);
  auto result = RunAndLog(*coll, "requested");
  Release(coll->name());
  return result;
}

StatusOr<index::CompactionResult> Compactor::RunAndLog(index::Collection& coll,
                                                       const std::string& why) {
  auto result = coll.Compact();
  if (!result.ok()) {
    log_("compaction of collection " + coll.name() + " (" + why +
         ") failed: " + result.status().ToString());
    return result;
  }
  log_("compacted collection " + coll.name() + " (" + why +
       "): " + std::to_string(result->rows_before) + " -> " +
       std::to_string(result->rows_after) + " rows, " +
       std::to_string(result->tombstones_removed) +
       " tombstones removed, generation " + std::to_string(result->generation) +
       ", " + Fixed(result->seconds, 3) + " s");
  return result;
}

}  // namespace zv::service
