// The index's rules for requests, shared by Collection, AttachedCollection and
// the service (which maps a breach to a gRPC code): every check runs before
// any state changes, and each error names the offending field. Pure functions
// (no FAISS, no RocksDB): the //index:rules library, which fuzzers link alone.
#ifndef ZEROVEC_INDEX_VALIDATE_H_
#define ZEROVEC_INDEX_VALIDATE_H_

#include <span>
#include <string>

#include "base/status.h"
#include "index/collection.h"
#include "index/descriptor.h"

namespace zv::index {

// Ids (non-empty, <= kMaxIdBytes, unique in the batch) and metadata keys.
Status ValidateRecords(std::span<const Record> records);
// The id rule: non-empty and at most kMaxIdBytes bytes (UTF-8 is
// CheckUtf8's). Each layer words a breach for its own field.
enum class IdRule { kOk, kEmpty, kTooLong };
IdRule CheckIdRule(std::string_view id);
// A metadata entry: a non-empty UTF-8 key ("<field> has an empty key",
// "<field> key: ...") and a UTF-8 value ("<field>[key]: ...").
Status CheckMetadataEntry(const std::string& field, const std::string& key,
                          const std::string& value);
// A timestamp range, both ends inclusive: min must not be after max.
// INVALID_ARGUMENT naming filter.min_timestamp_ms and filter.max_timestamp_ms.
Status CheckTimestampRange(int64_t min_timestamp_ms, int64_t max_timestamp_ms);
// INVALID_ARGUMENT naming the field for a malformed filter.
Status ValidateFilter(const Filter& filter);
// `values` must be n x dim finite floats; `field` names them in errors.
Status ValidateVectors(std::span<const float> values, size_t n, uint32_t dim,
                       const std::string& field);
// Query shape, finiteness, k and filter.
Status ValidateSearch(std::span<const float> queries, uint32_t dim,
                      const SearchOptions& options);
Status ValidateRecency(const Recency& recency);
// Ids of Get/Delete.
Status ValidateIds(std::span<const std::string> ids);
// The options' dimension, metric, extent size and index descriptor; the
// parsed descriptor on success, so creating the collection parses it once.
StatusOr<IndexKind> ValidateCollectionOptions(const CollectionOptions& options);

// The segment's int64 id of an external id (FNV-1a, non-negative): lets
// reconcile check that a rows entry belongs to the row data it points at.
int64_t HashId(std::string_view id);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_VALIDATE_H_
