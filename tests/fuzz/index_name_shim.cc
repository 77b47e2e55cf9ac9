// Link shim for the request-validation fuzzer: service/validation.cc calls
// index::ValidateCollectionName, which lives in index/validate.cc beside
// functions that need FAISS. The fuzzer links the real validate.cc; these two
// definitions only satisfy the references of its other functions, which the
// fuzzer never calls (they abort if it ever does).
#include <cstdlib>

#include "index/ann_index.h"
#include "index/filter.h"

namespace zv::index {

StatusOr<IndexKind> ParseDescriptor(const std::string&, uint32_t) {
  std::abort();
}
Status ValidateFilter(const Filter&) { std::abort(); }

}  // namespace zv::index
