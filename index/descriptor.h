// The index descriptor ("Flat", "HNSW<M>", "IVF<nlist>,PQ<m>"), parsed in one
// place: a pure function (no FAISS), so the service's request validation and
// the fuzzers use the same rule as the collection that opens the index.
#ifndef ZEROVEC_INDEX_DESCRIPTOR_H_
#define ZEROVEC_INDEX_DESCRIPTOR_H_

#include <cstdint>
#include <string>

#include "base/status.h"

namespace zv::index {

struct IndexKind {
  enum Type { kFlat, kHnsw, kIvfPq } type = kFlat;
  int hnsw_m = 32;
  int nlist = 0;
  int pq_m = 0;
};

// INVALID_ARGUMENT (naming index.descriptor) for an unknown or unfit
// descriptor.
StatusOr<IndexKind> ParseDescriptor(const std::string& descriptor,
                                    uint32_t dim);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_DESCRIPTOR_H_
