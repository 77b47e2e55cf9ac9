#include "service/sweeper.h"

#include <iostream>
#include <utility>

namespace zv::service {

Sweeper::Sweeper(index::Database* db, Compactor* compactor,
                 std::chrono::milliseconds interval, Log log)
    : db_(db),
      compactor_(compactor),
      interval_(interval),
      log_(std::move(log)) {
  if (!log_) {
    log_ = [](const std::string& line) {
      std::cerr << "zerovec: " << line << "\n";
    };
  }
  if (interval_.count() > 0) thread_ = std::thread([this] { Loop(); });
}

Sweeper::~Sweeper() { Stop(); }

void Sweeper::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Sweeper::SweepAll() {
  for (const std::string& name : db_->ListCollections()) {
    auto coll = db_->GetCollection(name);
    if (!coll.ok()) continue;  // dropped meanwhile
    auto swept = (*coll)->SweepExpired(index::NowMs());
    if (!swept.ok()) {
      // A dropped collection answers NOT_FOUND: nothing to say.
      if (swept.status().code() != StatusCode::kNotFound) {
        log_("expiry sweep of collection " + name +
             " failed (retried next sweep): " + swept.status().ToString());
      }
      continue;
    }
    if (*swept > 0) {
      swept_.fetch_add(*swept, std::memory_order_relaxed);
      compactor_->Notify(name);
    }
  }
}

void Sweeper::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!cv_.wait_for(l, interval_, [&] { return stopping_; })) {
    l.unlock();
    SweepAll();
    l.lock();
  }
}

}  // namespace zv::service
