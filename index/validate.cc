#include "index/validate.h"

#include <cmath>
#include <unordered_set>

#include "index/text_rules.h"

namespace zv::index {

Status ValidateCollectionName(const std::string& name) {
  if (name.empty() || name.size() > 64) {
    return InvalidArgumentError(
        "collection name must be 1..64 characters, got " +
        std::to_string(name.size()));
  }
  if (name[0] == '-')
    return InvalidArgumentError("collection name must not start with '-'");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) {
      return InvalidArgumentError(
          "collection name '" + name +
          "': only [A-Za-z0-9_-] allowed (no '/', '.', spaces)");
    }
  }
  return OkStatus();
}

StatusOr<IndexKind> ValidateCollectionOptions(
    const CollectionOptions& options) {
  if (options.dim == 0 || options.dim > shm::kMaxDim) {
    return InvalidArgumentError("options.dim must be in [1, " +
                                std::to_string(shm::kMaxDim) + "], got " +
                                std::to_string(options.dim));
  }
  if (options.metric != shm::Metric::kInnerProduct &&
      options.metric != shm::Metric::kL2) {
    return InvalidArgumentError("options.metric: unknown metric");
  }
  if (options.rows_per_extent == 0 ||
      options.rows_per_extent > shm::kMaxRowsPerExtent) {
    return InvalidArgumentError("options.rows_per_extent must be in [1, 2^24]");
  }
  if (options.default_ttl_ms < 0) {
    return InvalidArgumentError("options.default_ttl_ms must be >= 0, got " +
                                std::to_string(options.default_ttl_ms));
  }
  return ParseDescriptor(options.index.descriptor, options.dim);
}

IdRule CheckIdRule(std::string_view id) {
  if (id.empty()) return IdRule::kEmpty;
  if (id.size() > kMaxIdBytes) return IdRule::kTooLong;
  return IdRule::kOk;
}

namespace {

// The index's wording of CheckIdRule's breaches.
Status CheckIdBytes(const std::string& field, std::string_view id) {
  switch (CheckIdRule(id)) {
    case IdRule::kOk:
      return OkStatus();
    case IdRule::kEmpty:
      return InvalidArgumentError(field + " is empty");
    case IdRule::kTooLong:
      break;
  }
  return InvalidArgumentError(field + " is " + std::to_string(id.size()) +
                              " bytes; the limit is " +
                              std::to_string(kMaxIdBytes));
}

}  // namespace

Status CheckMetadataEntry(const std::string& field, const std::string& key,
                          const std::string& value) {
  if (key.empty()) return InvalidArgumentError(field + " has an empty key");
  if (Status s = CheckUtf8(key); !s.ok()) return s.WithContext(field + " key");
  if (Status s = CheckUtf8(value); !s.ok())
    return s.WithContext(field + "[" + key + "]");
  return OkStatus();
}

Status CheckTimestampRange(int64_t min_timestamp_ms, int64_t max_timestamp_ms) {
  if (min_timestamp_ms > max_timestamp_ms) {
    return InvalidArgumentError("filter.min_timestamp_ms (" +
                                std::to_string(min_timestamp_ms) +
                                ") is greater than filter.max_timestamp_ms (" +
                                std::to_string(max_timestamp_ms) + ")");
  }
  return OkStatus();
}

Status ValidateFilter(const Filter& filter) {
  if (filter.min_timestamp_ms && filter.max_timestamp_ms) {
    ZV_RETURN_IF_ERROR(CheckTimestampRange(*filter.min_timestamp_ms,
                                           *filter.max_timestamp_ms));
  }
  for (const auto& [key, value] : filter.metadata_equals) {
    if (key.empty())
      return InvalidArgumentError("filter.metadata_equals: empty key");
  }
  return OkStatus();
}

Status ValidateRecords(std::span<const Record> records) {
  std::unordered_set<std::string_view> seen;
  seen.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    const auto field = [i] { return "records[" + std::to_string(i) + "]"; };
    ZV_RETURN_IF_ERROR(CheckIdBytes(field() + ".id", r.id));
    if (Status s = CheckUtf8(r.id); !s.ok())
      return s.WithContext(field() + ".id");
    if (!seen.insert(r.id).second) {
      return InvalidArgumentError(field() + ".id '" + r.id +
                                  "' appears twice in the batch");
    }
    if (Status s = CheckUtf8(r.text); !s.ok())
      return s.WithContext(field() + ".text");
    if (!r.text.empty() && IsBlank(r.text))
      return InvalidArgumentError(field() + ".text is only whitespace");
    if (Status s = CheckUtf8(r.ns); !s.ok())
      return s.WithContext(field() + ".namespace");
    if (r.expires_at_ms < 0) {
      return InvalidArgumentError(field() + ".expires_at_ms is negative (" +
                                  std::to_string(r.expires_at_ms) + ")");
    }
    for (const auto& [key, value] : r.metadata) {
      ZV_RETURN_IF_ERROR(CheckMetadataEntry(field() + ".metadata", key, value));
    }
  }
  return OkStatus();
}

Status ValidateVectors(std::span<const float> values, size_t n, uint32_t dim,
                       const std::string& field) {
  if (values.size() != n * dim) {
    return InvalidArgumentError(
        field + " has " + std::to_string(values.size()) + " floats; expected " +
        std::to_string(n) + " x dim " + std::to_string(dim) + " = " +
        std::to_string(n * dim));
  }
  for (size_t row = 0; row < n; ++row) {
    Status s = CheckVectorValues(values.subspan(row * dim, dim));
    if (!s.ok()) {
      const bool element = s.message().front() == '[';  // "[j] is not finite"
      return InvalidArgumentError(field + "[" + std::to_string(row) + "]" +
                                  (element ? "" : ": ") + s.message());
    }
  }
  return OkStatus();
}

namespace {

// Lexical and hybrid searches need a text per query; fusion parameters must
// make sense.
Status ValidateModeOptions(size_t vector_queries,
                           const SearchOptions& options) {
  if (options.mode == SearchMode::kDense) return OkStatus();
  const size_t texts = options.query_texts.size();
  if (options.mode == SearchMode::kLexical && texts == 0) {
    return InvalidArgumentError(
        "query_texts: a lexical search needs the query's text");
  }
  if (options.mode == SearchMode::kHybrid && texts != vector_queries) {
    return InvalidArgumentError(
        "query_texts: a hybrid search needs one text per query vector, got " +
        std::to_string(texts) + " for " + std::to_string(vector_queries));
  }
  for (size_t i = 0; i < texts; ++i) {
    if (options.query_texts[i].empty()) {
      return InvalidArgumentError("query_texts[" + std::to_string(i) +
                                  "] is empty: lexical and hybrid searches "
                                  "need text");
    }
  }
  const FusionOptions& f = options.fusion;
  if (!std::isfinite(f.rrf_k) || f.rrf_k <= 0) {
    return InvalidArgumentError("fusion.rrf_k must be > 0, got " +
                                std::to_string(f.rrf_k));
  }
  if (!std::isfinite(f.dense_weight) || !std::isfinite(f.lexical_weight) ||
      f.dense_weight < 0 || f.lexical_weight < 0 ||
      f.dense_weight + f.lexical_weight <= 0) {
    return InvalidArgumentError(
        "fusion weights must be >= 0 and not both 0, got dense " +
        std::to_string(f.dense_weight) + ", lexical " +
        std::to_string(f.lexical_weight));
  }
  if (f.depth != 0 && (f.depth < options.k || f.depth > kMaxK)) {
    return InvalidArgumentError("fusion.depth must be 0 or in [k, " +
                                std::to_string(kMaxK) + "], got " +
                                std::to_string(f.depth));
  }
  return OkStatus();
}

}  // namespace

Status ValidateSearch(std::span<const float> queries, uint32_t dim,
                      const SearchOptions& options) {
  if (options.k <= 0 || options.k > kMaxK) {
    return InvalidArgumentError("k must be in [1, " + std::to_string(kMaxK) +
                                "], got " + std::to_string(options.k));
  }
  if (options.ef_search != 0 &&
      (options.ef_search < options.k || options.ef_search > kMaxEfSearch)) {
    return InvalidArgumentError(
        "ef_search must be 0 (index default) or in [k, " +
        std::to_string(kMaxEfSearch) + "], got " +
        std::to_string(options.ef_search) + " with k " +
        std::to_string(options.k));
  }
  if (options.mode != SearchMode::kLexical) {
    if (queries.empty() || queries.size() % dim != 0) {
      return InvalidArgumentError("queries has " +
                                  std::to_string(queries.size()) +
                                  " floats; expected a positive multiple of "
                                  "dim " +
                                  std::to_string(dim));
    }
    ZV_RETURN_IF_ERROR(
        ValidateVectors(queries, queries.size() / dim, dim, "queries"));
  }
  ZV_RETURN_IF_ERROR(ValidateModeOptions(queries.size() / dim, options));
  if (options.recency) {
    if (options.mode != SearchMode::kDense) {
      // Fused ranks carry no similarity to decay; say so rather than apply
      // it to one side only.
      return InvalidArgumentError(
          "recency: time-aware ranking applies to dense searches only (mode "
          "lexical or hybrid given)");
    }
    ZV_RETURN_IF_ERROR(ValidateRecency(*options.recency));
  }
  return ValidateFilter(options.filter);
}

Status ValidateRecency(const Recency& r) {
  if (r.half_life_ms <= 0) {
    return InvalidArgumentError("recency.half_life_ms must be > 0, got " +
                                std::to_string(r.half_life_ms));
  }
  if (!std::isfinite(r.weight) || r.weight < 0) {
    return InvalidArgumentError(
        "recency.weight must be finite and >= 0 (0: multiply the similarity "
        "by the decay), got " +
        std::to_string(r.weight));
  }
  if (r.candidates < 0 || r.candidates > kMaxK) {
    return InvalidArgumentError("recency.candidates must be in [0, " +
                                std::to_string(kMaxK) + "], got " +
                                std::to_string(r.candidates));
  }
  if (r.now_ms < 0) {
    return InvalidArgumentError("recency.now_ms must be >= 0, got " +
                                std::to_string(r.now_ms));
  }
  return OkStatus();
}

Status ValidateIds(std::span<const std::string> ids) {
  for (size_t i = 0; i < ids.size(); ++i)
    ZV_RETURN_IF_ERROR(CheckIdBytes("ids[" + std::to_string(i) + "]", ids[i]));
  return OkStatus();
}

int64_t HashId(std::string_view id) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return static_cast<int64_t>(h >> 1);
}

}  // namespace zv::index
