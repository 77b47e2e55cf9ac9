#include "service/coalescer.h"

#include <cmath>
#include <cstdio>

namespace zv::service {
namespace {

void AppendField(std::string* key, const std::string& s) {
  *key += std::to_string(s.size());
  *key += ':';
  *key += s;
}

// Searches that may share a batch have equal keys.
std::string KeyOf(const index::Collection* coll,
                  const index::SearchOptions& o) {
  char head[96];
  std::snprintf(head, sizeof head, "%p|%d|%d|%d|",
                static_cast<const void*>(coll), o.k, o.ef_search,
                o.include_documents ? 1 : 0);
  std::string key = head;
  const index::Filter& f = o.filter;
  AppendField(&key, f.ns ? "n" + *f.ns : "-");
  for (const auto& [k, v] : f.metadata_equals) {  // std::map: ordered
    AppendField(&key, k);
    AppendField(&key, v);
  }
  key += '|' + (f.min_timestamp_ms ? std::to_string(*f.min_timestamp_ms) : "-");
  key += '|' + (f.max_timestamp_ms ? std::to_string(*f.max_timestamp_ms) : "-");
  return key;
}

bool AllFinite(std::span<const float> v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

}  // namespace

struct SearchCoalescer::Batch {
  std::vector<float> queries;
  size_t nq = 0;
  bool done = false;
  Status status;
  std::vector<std::vector<index::Hit>> results;
  std::condition_variable cv;
};

SearchCoalescer::SearchCoalescer(std::chrono::microseconds window,
                                 size_t max_queries)
    : window_(window), max_queries_(max_queries) {}

StatusOr<std::vector<std::vector<index::Hit>>> SearchCoalescer::Search(
    const std::shared_ptr<index::Collection>& coll,
    std::span<const float> queries, size_t nq,
    const index::SearchOptions& options) {
  if (window_.count() == 0 || nq == 0 || nq >= max_queries_ ||
      !AllFinite(queries)) {
    return coll->Search(queries, options);
  }
  const std::string key = KeyOf(coll.get(), options);
  std::unique_lock<std::mutex> l(mu_);
  std::shared_ptr<Batch>& slot = open_[key];
  const bool leader = !slot || slot->nq + nq > max_queries_;
  if (leader) slot = std::make_shared<Batch>();  // a full one keeps running
  std::shared_ptr<Batch> b = slot;
  const size_t first = b->nq;
  b->queries.insert(b->queries.end(), queries.begin(), queries.end());
  b->nq += nq;
  if (leader) {
    Run(l, key, coll, options, *b);
  } else {
    if (b->nq >= max_queries_) b->cv.notify_all();  // wakes the leader
    b->cv.wait(l, [&] { return b->done; });
  }
  if (!b->status.ok()) return b->status;
  std::vector<std::vector<index::Hit>> mine(nq);
  for (size_t i = 0; i < nq; ++i) mine[i] = std::move(b->results[first + i]);
  return mine;
}

void SearchCoalescer::Run(std::unique_lock<std::mutex>& l,
                          const std::string& key,
                          const std::shared_ptr<index::Collection>& coll,
                          const index::SearchOptions& options, Batch& b) {
  if (running_.count(key)) {  // busy: gather callers while the GPU works
    const auto deadline = std::chrono::steady_clock::now() + window_;
    b.cv.wait_until(l, deadline, [&] {
      return b.nq >= max_queries_ || !running_.count(key);
    });
  }
  auto it = open_.find(key);
  if (it != open_.end() && it->second.get() == &b) open_.erase(it);
  ++running_[key];
  ++batches_;
  batched_queries_ += b.nq;
  l.unlock();
  auto result = coll->Search(b.queries, options);
  l.lock();
  if (--running_[key] == 0) {
    running_.erase(key);
    // The batch gathered meanwhile need not wait out its window.
    auto next = open_.find(key);
    if (next != open_.end()) next->second->cv.notify_all();
  }
  if (result.ok()) {
    b.results = std::move(result).value();
  } else {
    b.status = result.status();
  }
  b.done = true;
  b.cv.notify_all();
}

uint64_t SearchCoalescer::batches() const {
  std::lock_guard<std::mutex> l(mu_);
  return batches_;
}

uint64_t SearchCoalescer::batched_queries() const {
  std::lock_guard<std::mutex> l(mu_);
  return batched_queries_;
}

}  // namespace zv::service
