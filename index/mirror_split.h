// How a GPU mirror's rows are split over several devices (issue 19), and how
// the parts' answers are put back together. Pure host arithmetic, so the CPU
// tests pin it down (index/mirror_split_test.cc).
//
// Row stripes dealt round-robin: global row r lies in stripe s = r / S, which
// part s % N holds, at local row (s / N) * S + r % S. Why stripes and not
// ranges: a collection grows at its end, so with ranges every append would
// land on the last GPU (and the first ones' ranges would have to be fixed in
// advance); with stripes appends rotate over the GPUs and the parts never
// differ by more than one stripe. A part's local rows stay in global order,
// so each part is an ordinary append-only GpuMirror. S is a multiple of 64,
// so a stripe is whole words of a row bitmap (masks and tombstones split by
// copying words, never bits).
#ifndef ZEROVEC_INDEX_MIRROR_SPLIT_H_
#define ZEROVEC_INDEX_MIRROR_SPLIT_H_

#include <cstdint>
#include <vector>

#include "index/flat_index.h"  // TopK

namespace zv::index {

// 65,536 rows: large enough that one append of a bulk chunk is a few large
// copies, small enough that parts stay balanced for collections of a few
// hundred thousand rows.
inline constexpr uint64_t kDefaultStripeRows = 65536;

class StripeLayout {
 public:
  // parts >= 1; stripe_rows a positive multiple of 64.
  StripeLayout(int parts, uint64_t stripe_rows)
      : parts_(parts), stripe_(stripe_rows) {}
  int parts() const { return parts_; }
  uint64_t stripe_rows() const { return stripe_; }

  int PartOf(uint64_t row) const {
    return static_cast<int>((row / stripe_) % parts_);
  }
  uint64_t LocalRow(uint64_t row) const {
    return (row / stripe_ / parts_) * stripe_ + row % stripe_;
  }
  uint64_t GlobalRow(int part, uint64_t local) const {
    return ((local / stripe_) * parts_ + part) * stripe_ + local % stripe_;
  }
  // First row past the stripe that holds `row`.
  uint64_t StripeEnd(uint64_t row) const {
    return (row / stripe_ + 1) * stripe_;
  }
  // How many of the global rows [0, total) part `part` holds.
  uint64_t RowsIn(int part, uint64_t total) const;

  // Part `part`'s share of a row bitmap over global rows [0, total) (index::
  // RowBitmap's layout: row r is bit r & 63 of word r >> 6): a bitmap over its
  // local rows [0, RowsIn(part, total)).
  std::vector<uint64_t> PartWords(const uint64_t* words, uint64_t total,
                                  int part) const;

  // Rewrites a part's answer (nq x k, -1 padded) from its local rows to global
  // rows, in place.
  void ToGlobalRows(int part, int64_t* rows, size_t n) const;

 private:
  int parts_;
  uint64_t stripe_;
};

// The host merge of the parts' top-k lists (each nq x k, best first, -1
// padded, rows already global) into `out` (nq x out->k). k-sized lists: a host
// merge costs microseconds, less than any device-side gather would.
void MergePartTops(const std::vector<const TopK*>& parts, TopK* out);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_MIRROR_SPLIT_H_
