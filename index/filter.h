// Search filters: a compact per-row attribute table (namespace, timestamp,
// metadata, external id) rebuilt from the meta store on open, and
// faiss::IDSelectors over row numbers that combine a filter with the segment's
// tombstones.
#ifndef ZEROVEC_INDEX_FILTER_H_
#define ZEROVEC_INDEX_FILTER_H_

#include <faiss/impl/IDSelector.h>

#include <cstdint>
#include <functional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "index/collection.h"
#include "shm/segment.h"

namespace zv::index {

// A filter translated to interned ids; `impossible` if some value was never
// seen.
struct CompiledFilter {
  bool any = true;  // no conditions
  bool impossible = false;
  std::optional<uint32_t> ns;
  std::vector<std::pair<uint32_t, uint32_t>> metadata;  // (key, value), sorted
  int64_t min_ts = INT64_MIN;
  int64_t max_ts = INT64_MAX;
  // Rows expired at this time (IsExpired) do not match; 0: not checked.
  int64_t now_ms = 0;
};

// Attributes of rows [0, size()), appended in row order. Strings are interned
// so a row costs a few words plus its id bytes. Not thread-safe: the collection
// guards it.
class AttributeTable {
 public:
  AttributeTable();
  // Appends row `size()`; `present` false for a row with no meta entry
  // (orphan).
  void Append(const Record& record, bool present = true);
  void AppendAbsent() { Append(Record(), false); }
  uint64_t size() const { return ts_.size(); }
  bool present(uint64_t row) const {
    return (present_[row >> 6] >> (row & 63)) & 1;
  }
  std::string_view id(uint64_t row) const {
    return std::string_view(ids_).substr(id_off_[row],
                                         id_off_[row + 1] - id_off_[row]);
  }
  const std::string& ns(uint64_t row) const { return strings_[ns_[row]]; }
  int64_t timestamp(uint64_t row) const { return ts_[row]; }
  // 0 when the row never expires.
  int64_t expires(uint64_t row) const {
    return row < expires_.size() ? expires_[row] : 0;
  }
  // False when no row can be expired at `now_ms`, so searches need no
  // expiry check (the common case: nothing expires, or the sweep is done).
  bool MayHaveExpired(int64_t now_ms) const {
    return !expiring_.empty() && expiring_.top().first <= now_ms;
  }
  // Removes and returns the rows that expired by `now_ms` (tombstoned ones
  // too: the caller skips them) from the expiry queue.
  std::vector<uint64_t> PopExpired(int64_t now_ms);
  // Puts rows PopExpired returned back, e.g. after a failed sweep.
  void RequeueExpired(std::span<const uint64_t> rows);
  // Fills id, ns, timestamp (and metadata if asked) of `row`.
  void Describe(uint64_t row, bool with_metadata, Record* out) const;

  CompiledFilter Compile(const Filter& filter) const;
  bool Matches(uint64_t row, const CompiledFilter& f) const;
  // Sets bit (r & 63) of words[r >> 6] for every row r < limit (<= size())
  // matching `f` (words zeroed by the caller). A namespace-only filter (the
  // common agent/session case) compares the namespace column 64 rows a word
  // with no per-row call; any other filter runs Matches per row.
  void MatchWords(const CompiledFilter& f, uint64_t limit,
                  uint64_t* words) const;
  // True if `f` is a namespace and nothing else (MatchWords' fast path).
  static bool NamespaceOnly(const CompiledFilter& f) {
    return f.ns && !f.impossible && f.metadata.empty() &&
           f.min_ts == INT64_MIN && f.max_ts == INT64_MAX && f.now_ms == 0;
  }
  size_t MemoryBytes() const;

 private:
  uint32_t Intern(const std::string& s);
  std::optional<uint32_t> Lookup(const std::string& s) const;

  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> string_ids_;
  std::vector<uint32_t> ns_;
  std::vector<int64_t> ts_;
  // Expiry per row, allocated when the first expiring row arrives, and a
  // min-queue of (expires_at_ms, row) for the rows not yet swept.
  std::vector<int64_t> expires_;
  std::priority_queue<std::pair<int64_t, uint64_t>,
                      std::vector<std::pair<int64_t, uint64_t>>, std::greater<>>
      expiring_;
  // Bit r & 63 of word r >> 6: row r has a meta entry (words, so a namespace
  // filter masks 64 rows at a time).
  std::vector<uint64_t> present_;
  std::vector<uint64_t> meta_off_{0};
  std::vector<std::pair<uint32_t, uint32_t>> meta_;  // per row, sorted by key
  std::vector<uint64_t> id_off_{0};
  std::string ids_;
};

// Live rows of `view` (not tombstoned, with attributes) matching a filter, as a
// bitmap over rows [0, limit), so ANN and exact searches test membership in
// O(1) (the HNSW search reads words() inline, no virtual call). Built a word
// at a time: the filter's matches (AttributeTable::MatchWords), then the
// segment's tombstone words masked out per extent.
class RowBitmap : public faiss::IDSelector {
 public:
  RowBitmap(const shm::SegmentView& view, const AttributeTable& table,
            const CompiledFilter& f, uint64_t limit);
  // The row-at-a-time build (Matches and IsTombstoned per row), kept as the
  // reference the tests compare the word-wise build with.
  static RowBitmap Reference(const shm::SegmentView& view,
                             const AttributeTable& table,
                             const CompiledFilter& f, uint64_t limit);
  bool is_member(idx_t row) const override {
    return row >= 0 && static_cast<uint64_t>(row) < limit_ &&
           ((bits_[row >> 6] >> (row & 63)) & 1);
  }
  uint64_t count() const { return count_; }
  uint64_t limit() const { return limit_; }
  // The bitmap: row r is bit (r & 63) of word r >> 6 (a GPU mask's layout).
  const std::vector<uint64_t>& words() const { return bits_; }
  // Matching rows in increasing order.
  std::vector<int64_t> Rows() const;

 private:
  explicit RowBitmap(uint64_t limit)
      : limit_(limit), bits_((limit + 63) / 64, 0) {}
  uint64_t limit_;
  uint64_t count_ = 0;
  std::vector<uint64_t> bits_;
};

// Live rows only (no filter): tombstones straight from the segment's atomic
// bitmap.
class LiveRows : public faiss::IDSelector {
 public:
  explicit LiveRows(const shm::SegmentView& view) : view_(view) {}
  bool is_member(idx_t row) const override { return !view_.IsTombstoned(row); }

 private:
  const shm::SegmentView& view_;
};

// Live rows not expired at `now` (no filter): checked per candidate, so a
// search between an expiry and its sweep needs no pass over every row.
class LiveUnexpiredRows : public faiss::IDSelector {
 public:
  LiveUnexpiredRows(const shm::SegmentView& view, const AttributeTable& table,
                    int64_t now_ms)
      : view_(view), table_(table), now_ms_(now_ms) {}
  bool is_member(idx_t row) const override {
    return !view_.IsTombstoned(row) &&
           !IsExpired(table_.expires(static_cast<uint64_t>(row)), now_ms_);
  }

 private:
  const shm::SegmentView& view_;
  const AttributeTable& table_;
  int64_t now_ms_;
};

// Shifts block-local ids (what faiss's knn functions pass) to row numbers.
class OffsetSelector : public faiss::IDSelector {
 public:
  OffsetSelector(const faiss::IDSelector* rows, int64_t base)
      : rows_(rows), base_(base) {}
  bool is_member(idx_t i) const override { return rows_->is_member(base_ + i); }

 private:
  const faiss::IDSelector* rows_;
  int64_t base_;
};

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_FILTER_H_
