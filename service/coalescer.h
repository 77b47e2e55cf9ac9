// Gathers concurrent searches of one GPU-mirrored collection into GPU batches
// (issue 13): many clients asking one query each then share one GEMM-path
// search instead of queueing one scan each.
//
// Searches with the same collection and options (k, filter, documents,
// ef_search) join an open batch. Its first caller (the leader) runs it at once
// when no batch of that key is running (an idle server adds no latency);
// otherwise it waits up to the window, or until the batch is full, gathering
// the callers that arrive meanwhile. Every caller gets its own rows of the
// result; the batch's status is everyone's, so a caller whose query could fail
// on its own (a non-finite value) never joins one.
#ifndef ZEROVEC_SERVICE_COALESCER_H_
#define ZEROVEC_SERVICE_COALESCER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "index/collection.h"

namespace zv::service {

class SearchCoalescer {
 public:
  // window 0: every search runs on its own. `max_queries`: largest batch.
  SearchCoalescer(std::chrono::microseconds window, size_t max_queries);

  // `queries` is nq x dim, row-major.
  StatusOr<std::vector<std::vector<index::Hit>>> Search(
      const std::shared_ptr<index::Collection>& coll,
      std::span<const float> queries, size_t nq,
      const index::SearchOptions& options);

  // Batches run and the queries they held (for Stats and the bench).
  uint64_t batches() const;
  uint64_t batched_queries() const;

 private:
  struct Batch;
  // Runs `b` (its leader, with mu_ held on entry and exit).
  void Run(std::unique_lock<std::mutex>& l, const std::string& key,
           const std::shared_ptr<index::Collection>& coll,
           const index::SearchOptions& options, Batch& b);

  const std::chrono::microseconds window_;
  const size_t max_queries_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Batch>> open_;  // by key
  std::map<std::string, int> running_;                  // batches per key
  uint64_t batches_ = 0;
  uint64_t batched_queries_ = 0;
};

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_COALESCER_H_
