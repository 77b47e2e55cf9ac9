// Helpers shared by the segment tests and their child-process helper.
#ifndef ZEROVEC_SHM_SEGMENT_TEST_UTIL_H_
#define ZEROVEC_SHM_SEGMENT_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "shm/segment.h"

namespace zv::shm::testing {

// Row `row` always carries id RowId(row) and values RowValue(id, j): a reader
// can check any row it sees against its id, so a torn or early-published row is
// caught.
inline int64_t RowId(uint64_t row) { return static_cast<int64_t>(row) * 3 + 1; }
inline float RowValue(int64_t id, uint32_t j) {
  return static_cast<float>((id * 7919 + j * 13) % 100003);
}

inline void FillRow(Writer& w, uint64_t row) {
  float* dst = w.MutableRow(row);
  const int64_t id = RowId(row);
  for (uint32_t j = 0; j < w.info().dim; ++j) dst[j] = RowValue(id, j);
  w.SetId(row, id);
}

// Empty string if row is whole and consistent, else what is wrong.
inline std::string CheckRow(const SegmentView& v, uint64_t row) {
  const int64_t id = v.Id(row);
  if (id != RowId(row)) {
    return "row " + std::to_string(row) + ": id " + std::to_string(id) +
           " != " + std::to_string(RowId(row));
  }
  const float* r = v.Row(row);
  for (uint32_t j = 0; j < v.info().row_stride; ++j) {
    const float want = j < v.info().dim ? RowValue(id, j) : 0.0f;
    if (r[j] != want) {
      return "row " + std::to_string(row) + " col " + std::to_string(j) + ": " +
             std::to_string(r[j]) + " != " + std::to_string(want);
    }
  }
  return "";
}

}  // namespace zv::shm::testing

#endif  // ZEROVEC_SHM_SEGMENT_TEST_UTIL_H_
