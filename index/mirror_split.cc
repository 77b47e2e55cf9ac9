#include "index/mirror_split.h"

#include <algorithm>

namespace zv::index {

uint64_t StripeLayout::RowsIn(int part, uint64_t total) const {
  const uint64_t full = total / stripe_;  // whole stripes
  uint64_t rows = (full / parts_) * stripe_;
  const uint64_t left = full % parts_;  // whole stripes past the last round
  if (static_cast<uint64_t>(part) < left) rows += stripe_;
  if (static_cast<uint64_t>(part) == left) rows += total % stripe_;
  return rows;
}

std::vector<uint64_t> StripeLayout::PartWords(const uint64_t* words,
                                              uint64_t total, int part) const {
  const uint64_t local = RowsIn(part, total);
  std::vector<uint64_t> out((local + 63) / 64, 0);
  const uint64_t stripe_words = stripe_ / 64, total_words = (total + 63) / 64;
  for (uint64_t s = part, l = 0; s * stripe_ < total; s += parts_, ++l) {
    const uint64_t first = s * stripe_words;
    const uint64_t n = std::min(stripe_words, total_words - first);
    std::copy(words + first, words + first + n, out.begin() + l * stripe_words);
  }
  // Bits past `total` in the last word are not rows: clear them.
  if (local % 64 != 0) out.back() &= (uint64_t{1} << (local % 64)) - 1;
  return out;
}

void StripeLayout::ToGlobalRows(int part, int64_t* rows, size_t n) const {
  if (parts_ == 1) return;
  for (size_t i = 0; i < n; ++i) {
    if (rows[i] >= 0) rows[i] = static_cast<int64_t>(GlobalRow(part, rows[i]));
  }
}

void MergePartTops(const std::vector<const TopK*>& parts, TopK* out) {
  for (const TopK* p : parts) out->Merge(p->dist.data(), p->rows.data(), p->k);
}

}  // namespace zv::index
