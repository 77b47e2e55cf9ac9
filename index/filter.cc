#include "index/filter.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <chrono>

#include "index/distance.h"

namespace zv::index {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

AttributeTable::AttributeTable() { Intern(""); }

uint32_t AttributeTable::Intern(const std::string& s) {
  auto [it, inserted] =
      string_ids_.emplace(s, static_cast<uint32_t>(strings_.size()));
  if (inserted) strings_.push_back(s);
  return it->second;
}

std::optional<uint32_t> AttributeTable::Lookup(const std::string& s) const {
  auto it = string_ids_.find(s);
  if (it == string_ids_.end()) return std::nullopt;
  return it->second;
}

void AttributeTable::Append(const Record& r, bool present) {
  const uint64_t row = ts_.size();
  if (row % 64 == 0) present_.push_back(0);
  if (present) present_.back() |= uint64_t{1} << (row % 64);
  ns_.push_back(Intern(r.ns));
  ts_.push_back(r.timestamp_ms);
  if (r.expires_at_ms > 0) {
    expires_.resize(ts_.size(), 0);
    expires_.back() = r.expires_at_ms;
    expiring_.emplace(r.expires_at_ms, ts_.size() - 1);
  } else if (!expires_.empty()) {
    expires_.push_back(0);
  }
  const size_t first = meta_.size();
  for (const auto& [k, v] : r.metadata)
    meta_.emplace_back(Intern(k), Intern(v));
  std::sort(meta_.begin() + first, meta_.end());
  meta_off_.push_back(meta_.size());
  ids_.append(r.id);
  id_off_.push_back(ids_.size());
}

void AttributeTable::Describe(uint64_t row, bool with_metadata,
                              Record* out) const {
  out->id = std::string(id(row));
  out->ns = ns(row);
  out->timestamp_ms = ts_[row];
  out->expires_at_ms = expires(row);
  if (!with_metadata) return;
  for (uint64_t i = meta_off_[row]; i < meta_off_[row + 1]; ++i) {
    out->metadata.emplace(strings_[meta_[i].first], strings_[meta_[i].second]);
  }
}

CompiledFilter AttributeTable::Compile(const Filter& filter) const {
  CompiledFilter f;
  f.any = filter.empty();
  if (filter.ns) {
    f.ns = Lookup(*filter.ns);
    if (!f.ns) f.impossible = true;
  }
  for (const auto& [k, v] : filter.metadata_equals) {
    auto kid = Lookup(k), vid = Lookup(v);
    if (!kid || !vid) {
      f.impossible = true;
      continue;
    }
    f.metadata.emplace_back(*kid, *vid);
  }
  std::sort(f.metadata.begin(), f.metadata.end());
  f.min_ts = filter.min_timestamp_ms.value_or(INT64_MIN);
  f.max_ts = filter.max_timestamp_ms.value_or(INT64_MAX);
  return f;
}

bool AttributeTable::Matches(uint64_t row, const CompiledFilter& f) const {
  if (!present(row) || f.impossible) return false;
  if (f.now_ms != 0 && IsExpired(expires(row), f.now_ms)) return false;
  if (f.any) return true;
  if (f.ns && ns_[row] != *f.ns) return false;
  if (ts_[row] < f.min_ts || ts_[row] > f.max_ts) return false;
  // Both sorted by key id: one merge pass (keys are unique per row).
  auto it = meta_.begin() + meta_off_[row];
  const auto end = meta_.begin() + meta_off_[row + 1];
  for (const auto& want : f.metadata) {
    while (it != end && it->first < want.first) ++it;
    if (it == end || *it != want) return false;
  }
  return true;
}

size_t AttributeTable::MemoryBytes() const {
  size_t strings = 0;
  for (const auto& s : strings_) strings += s.capacity() + sizeof(s) + 32;
  return strings + ns_.capacity() * 4 + ts_.capacity() * 8 +
         expires_.capacity() * 8 + expiring_.size() * 16 +
         present_.capacity() * 8 + meta_off_.capacity() * 8 +
         meta_.capacity() * 8 + id_off_.capacity() * 8 + ids_.capacity();
}

std::vector<uint64_t> AttributeTable::PopExpired(int64_t now_ms) {
  std::vector<uint64_t> rows;
  while (MayHaveExpired(now_ms)) {
    rows.push_back(expiring_.top().second);
    expiring_.pop();
  }
  return rows;
}

void AttributeTable::RequeueExpired(std::span<const uint64_t> rows) {
  for (uint64_t row : rows) expiring_.emplace(expires(row), row);
}

RowBitmap::RowBitmap(const shm::SegmentView& view, const AttributeTable& table,
                     const CompiledFilter& f, uint64_t limit)
    : RowBitmap(std::min(limit, table.size())) {
  if (f.impossible || limit_ == 0) return;
  table.MatchWords(f, limit_, bits_.data());
  // Tombstoned rows out, a word at a time where an extent starts on a word
  // boundary (the default layout), else row by row.
  for (const shm::RowBlock& b : view.Blocks(limit_)) {
    const uint64_t n = std::min(b.count, limit_ - b.first_row);
    if (b.first_row % 64 == 0) {
      uint64_t* out = &bits_[b.first_row / 64];
      for (uint64_t w = 0; w < (n + 63) / 64; ++w) {
        // The writer sets tombstone bits in place: atomic loads.
        uint64_t dead = __atomic_load_n(&b.tombstones[w], __ATOMIC_ACQUIRE);
        const uint64_t left = n - 64 * w;  // rows of this block in word w
        if (left < 64) dead &= (uint64_t{1} << left) - 1;
        out[w] &= ~dead;
      }
    } else {
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t word =
            __atomic_load_n(&b.tombstones[i / 64], __ATOMIC_ACQUIRE);
        if ((word >> (i % 64)) & 1) {
          const uint64_t r = b.first_row + i;
          bits_[r >> 6] &= ~(uint64_t{1} << (r & 63));
        }
      }
    }
  }
  for (const uint64_t w : bits_) count_ += std::popcount(w);
}

RowBitmap RowBitmap::Reference(const shm::SegmentView& view,
                               const AttributeTable& table,
                               const CompiledFilter& f, uint64_t limit) {
  RowBitmap b(std::min(limit, table.size()));
  if (f.impossible) return b;
  for (uint64_t row = 0; row < b.limit_; ++row) {
    if (table.Matches(row, f) && !view.IsTombstoned(row)) {
      b.bits_[row >> 6] |= uint64_t{1} << (row & 63);
      ++b.count_;
    }
  }
  return b;
}

namespace {

// Bit i of words[w] set where ns[64 w + i] == want, for rows [first, limit)
// (first a multiple of 64; the word of `first` on is overwritten).
void NamespaceWordsPortable(const uint32_t* ns, uint32_t want, uint64_t first,
                            uint64_t limit, uint64_t* words) {
  for (uint64_t w = first / 64; w * 64 < limit; ++w) {
    const uint64_t base = w * 64, n = std::min<uint64_t>(64, limit - base);
    uint64_t bits = 0;
    for (uint64_t i = 0; i < n; ++i)
      bits |= static_cast<uint64_t>(ns[base + i] == want) << i;
    words[w] = bits;
  }
}

// The same over `full` whole words.
__attribute__((target("avx512f"))) void NamespaceWordsAvx512(const uint32_t* ns,
                                                             uint32_t want,
                                                             uint64_t full,
                                                             uint64_t* words) {
  const __m512i w = _mm512_set1_epi32(static_cast<int>(want));
  for (uint64_t i = 0; i < full; ++i) {
    const uint32_t* p = ns + 64 * i;
    uint64_t bits = 0;
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(p + 16 * k);
      bits |= static_cast<uint64_t>(_mm512_cmpeq_epi32_mask(v, w)) << (16 * k);
    }
    words[i] = bits;
  }
}

__attribute__((target("avx2"))) void NamespaceWordsAvx2(const uint32_t* ns,
                                                        uint32_t want,
                                                        uint64_t full,
                                                        uint64_t* words) {
  const __m256i w = _mm256_set1_epi32(static_cast<int>(want));
  for (uint64_t i = 0; i < full; ++i) {
    const uint32_t* p = ns + 64 * i;
    uint64_t bits = 0;
    for (int k = 0; k < 8; ++k) {
      const __m256i v =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8 * k));
      const int m =
          _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, w)));
      bits |= static_cast<uint64_t>(static_cast<uint32_t>(m)) << (8 * k);
    }
    words[i] = bits;
  }
}

}  // namespace

void AttributeTable::MatchWords(const CompiledFilter& f, uint64_t limit,
                                uint64_t* words) const {
  if (f.impossible) return;
  if (NamespaceOnly(f)) {
    // Whole words a compare instruction per 16 (AVX-512) or 8 (AVX2) rows:
    // at 1M rows the row-at-a-time loop took ~2 ms of every filtered search
    // (bench/RESULTS.md, issue 21).
    const uint64_t full = limit / 64;
    switch (DetectIsa()) {
      case Isa::kAvx512:
        NamespaceWordsAvx512(ns_.data(), *f.ns, full, words);
        break;
      case Isa::kAvx2:
        NamespaceWordsAvx2(ns_.data(), *f.ns, full, words);
        break;
      default:
        NamespaceWordsPortable(ns_.data(), *f.ns, 0, full * 64, words);
    }
    NamespaceWordsPortable(ns_.data(), *f.ns, full * 64, limit, words);
    // Rows with no meta entry (orphans) never match.
    for (uint64_t w = 0; w * 64 < limit; ++w) words[w] &= present_[w];
    return;
  }
  for (uint64_t row = 0; row < limit; ++row) {
    if (Matches(row, f)) words[row >> 6] |= uint64_t{1} << (row & 63);
  }
}

std::vector<int64_t> RowBitmap::Rows() const {
  std::vector<int64_t> rows;
  rows.reserve(count_);
  for (uint64_t w = 0; w < bits_.size(); ++w) {
    for (uint64_t bits = bits_[w]; bits != 0; bits &= bits - 1) {
      rows.push_back(static_cast<int64_t>(w * 64 + __builtin_ctzll(bits)));
    }
  }
  return rows;
}

}  // namespace zv::index
