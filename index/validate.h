// Request validation shared by Collection and AttachedCollection: every check
// runs before any state changes, and each error names the offending field.
#ifndef ZEROVEC_INDEX_VALIDATE_H_
#define ZEROVEC_INDEX_VALIDATE_H_

#include <span>
#include <string>

#include "base/status.h"
#include "index/collection.h"

namespace zv::index {

// Ids (non-empty, <= kMaxIdBytes, unique in the batch) and metadata keys.
Status ValidateRecords(std::span<const Record> records);
// `values` must be n x dim finite floats; `field` names them in errors.
Status ValidateVectors(std::span<const float> values, size_t n, uint32_t dim,
                       const std::string& field);
// Query shape, finiteness, k and filter.
Status ValidateSearch(std::span<const float> queries, uint32_t dim,
                      const SearchOptions& options);
Status ValidateRecency(const Recency& recency);
// Ids of Get/Delete.
Status ValidateIds(std::span<const std::string> ids);
Status ValidateCollectionOptions(const CollectionOptions& options);

// The segment's int64 id of an external id (FNV-1a, non-negative): lets
// reconcile check that a rows entry belongs to the row data it points at.
int64_t HashId(std::string_view id);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_VALIDATE_H_
