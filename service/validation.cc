#include "service/validation.h"

#include <cmath>
#include <string>
#include <unordered_set>

#include "index/collection.h"
#include "index/descriptor.h"
#include "index/text_rules.h"
#include "index/validate.h"

namespace zv::service {
namespace {

using zerovec::v1::Query;

std::string Field(std::string_view base, int i) {
  return std::string(base) + "[" + std::to_string(i) + "]";
}

Status Invalid(std::string_view field, const std::string& what) {
  return InvalidArgumentError(std::string(field) + ": " + what);
}

// The index's string rule, named by the request field.
Status CheckUtf8(std::string_view field, std::string_view s) {
  Status st = index::CheckUtf8(s);
  return st.ok() ? st : Invalid(field, st.message());
}

Status Exhausted(std::string_view field, const std::string& what) {
  return ResourceExhaustedError(std::string(field) + ": " + what);
}

Status CheckBatchSize(std::string_view field, int n, const Limits& limits) {
  if (n == 0) return Invalid(field, "empty; send at least one");
  if (n > limits.max_batch) {
    return Exhausted(field, std::to_string(n) + " entries, the limit is " +
                                std::to_string(limits.max_batch) +
                                " (max_batch)");
  }
  return OkStatus();
}

// The index's id rule, in the service's words.
Status CheckId(std::string_view field, const std::string& id) {
  switch (index::CheckIdRule(id)) {
    case index::IdRule::kOk:
      break;
    case index::IdRule::kEmpty:
      return Invalid(field, "empty id");
    case index::IdRule::kTooLong:
      return Invalid(field, "id of " + std::to_string(id.size()) +
                                " bytes, the limit is " +
                                std::to_string(index::kMaxIdBytes));
  }
  return CheckUtf8(field, id);
}

Status CheckText(std::string_view field, const std::string& text,
                 const Limits& limits) {
  if (text.size() > limits.max_text_bytes) {
    return Exhausted(
        field, std::to_string(text.size()) + " bytes, the limit is " +
                   std::to_string(limits.max_text_bytes) + " (max_text_bytes)");
  }
  ZV_RETURN_IF_ERROR(CheckUtf8(field, text));
  // Nothing to embed: a blank text would get a meaningless vector.
  if (!text.empty() && index::IsBlank(text))
    return Invalid(field, "only whitespace");
  return OkStatus();
}

template <typename Values>
Status CheckFinite(std::string_view field, const Values& values) {
  for (int j = 0; j < values.size(); ++j) {
    if (!std::isfinite(values[j])) {
      return Invalid(std::string(field) + "[" + std::to_string(j) + "]",
                     "not a finite number");
    }
  }
  // The index's bound on magnitude (scores must not overflow to inf).
  Status s = index::CheckVectorValues({values.data(), size_t(values.size())});
  return s.ok() ? s : Invalid(field, s.message());
}

Status CheckDim(std::string_view field, int got, uint32_t dim) {
  if (static_cast<uint32_t>(got) != dim) {
    return Invalid(field, "expected " + std::to_string(dim) + " values, got " +
                              std::to_string(got));
  }
  return OkStatus();
}

Status CheckK(int32_t k, const Limits& limits) {
  if (k < 0)
    return Invalid("k",
                   "must be positive (0 means 10), got " + std::to_string(k));
  if (EffectiveK(k) > limits.max_k) {
    return Exhausted("k", std::to_string(k) + " hits, the limit is " +
                              std::to_string(limits.max_k) + " (max_k)");
  }
  return OkStatus();
}

Status CheckMetadata(
    std::string_view field,
    const google::protobuf::Map<std::string, std::string>& metadata) {
  if (metadata.size() > static_cast<size_t>(kMaxMetadataEntries)) {
    return Invalid(field, std::to_string(metadata.size()) +
                              " entries, the limit is " +
                              std::to_string(kMaxMetadataEntries));
  }
  for (const auto& [key, value] : metadata) {
    if (key.empty()) return Invalid(field, "empty key");
    ZV_RETURN_IF_ERROR(CheckUtf8(std::string(field) + " key", key));
    if (key.size() > kMaxMetadataKeyBytes) {
      return Invalid(
          std::string(field) + "[" + key.substr(0, 32) + "...]",
          "key longer than " + std::to_string(kMaxMetadataKeyBytes) + " bytes");
    }
    if (value.size() > kMaxMetadataValueBytes) {
      return Invalid(std::string(field) + "[" + key + "]",
                     "value longer than " +
                         std::to_string(kMaxMetadataValueBytes) + " bytes");
    }
    ZV_RETURN_IF_ERROR(CheckUtf8(std::string(field) + "[" + key + "]", value));
  }
  return OkStatus();
}

Status CheckNamespace(std::string_view field, const std::string& ns) {
  if (ns.size() > kMaxNamespaceBytes) {
    return Invalid(
        field, "longer than " + std::to_string(kMaxNamespaceBytes) + " bytes");
  }
  return CheckUtf8(field, ns);
}

}  // namespace

Status ValidateCollectionName(std::string_view field, const std::string& name) {
  Status s = index::ValidateCollectionName(name);
  if (!s.ok()) return Invalid(field, s.message());
  return OkStatus();
}

Status ValidateCreateCollection(const zerovec::v1::CreateCollectionRequest& req,
                                uint32_t model_dim) {
  ZV_RETURN_IF_ERROR(ValidateCollectionName("name", req.name()));
  if (req.dim() == 0 && model_dim == 0) {
    return Invalid(
        "dim",
        "0 means the server model's dimension, but the server has no model");
  }
  if (req.dim() > kMaxDim) {
    return Invalid("dim", std::to_string(req.dim()) + " is over the limit of " +
                              std::to_string(kMaxDim));
  }
  if (!zerovec::v1::Metric_IsValid(req.metric())) {
    return Invalid("metric", "unknown value " + std::to_string(req.metric()));
  }
  if (req.shards() != 0 || req.replication_factor() != 0 ||
      req.write_quorum() != 0) {
    // A cluster node (cluster/) handles these before the local service.
    return FailedPreconditionError(
        "shards: sharded collections need a cluster server (zerovec serve "
        "--cluster etcd://... --node-id N); this server is not in one");
  }
  if (req.index().size() > kMaxIndexDescriptorBytes) {
    return Invalid("index", "descriptor longer than " +
                                std::to_string(kMaxIndexDescriptorBytes) +
                                " bytes");
  }
  // The index's descriptor rule, against the dimension the collection will
  // have (the model's when the request names none).
  const uint32_t dim = req.dim() != 0 ? req.dim() : model_dim;
  return index::ParseDescriptor(req.index().empty() ? "Flat" : req.index(), dim)
      .status();
}

Status ValidateUpsert(const zerovec::v1::UpsertRequest& req,
                      const Limits& limits) {
  ZV_RETURN_IF_ERROR(ValidateCollectionName("collection", req.collection()));
  ZV_RETURN_IF_ERROR(CheckBatchSize("items", req.items_size(), limits));
  std::unordered_set<std::string_view> seen;
  for (int i = 0; i < req.items_size(); ++i) {
    const auto& item = req.items(i);
    const std::string f = Field("items", i);
    ZV_RETURN_IF_ERROR(CheckId(f + ".id", item.id()));
    if (!seen.insert(item.id()).second) {
      return Invalid(f + ".id",
                     "duplicate id \"" + item.id() + "\" in this request");
    }
    ZV_RETURN_IF_ERROR(CheckText(f + ".text", item.text(), limits));
    if (item.text().empty() && item.vector_size() == 0) {
      return Invalid(f, "has neither text nor vector");
    }
    ZV_RETURN_IF_ERROR(CheckFinite(f + ".vector", item.vector()));
    ZV_RETURN_IF_ERROR(CheckNamespace(f + ".namespace", item.namespace_()));
    ZV_RETURN_IF_ERROR(CheckMetadata(f + ".metadata", item.metadata()));
    if (item.timestamp_ms() < 0) {
      return Invalid(f + ".timestamp_ms",
                     "negative (" + std::to_string(item.timestamp_ms()) + ")");
    }
  }
  return OkStatus();
}

Status ValidateUpsertDims(const zerovec::v1::UpsertRequest& req, uint32_t dim,
                          bool has_model) {
  for (int i = 0; i < req.items_size(); ++i) {
    const auto& item = req.items(i);
    if (item.vector_size() == 0) {
      if (!has_model) {
        return FailedPreconditionError(
            Field("items", i) +
            ".text: the server has no model to embed text; "
            "send a vector");
      }
      continue;
    }
    ZV_RETURN_IF_ERROR(
        CheckDim(Field("items", i) + ".vector", item.vector_size(), dim));
  }
  return OkStatus();
}

Status ValidateQuery(std::string_view field, const Query& query,
                     const Limits& limits) {
  switch (query.query_case()) {
    case Query::kText:
      if (query.text().empty())
        return Invalid(std::string(field) + ".text", "empty");
      return CheckText(std::string(field) + ".text", query.text(), limits);
    case Query::kVector:
      if (query.vector().values_size() == 0) {
        return Invalid(std::string(field) + ".vector", "empty");
      }
      return CheckFinite(std::string(field) + ".vector",
                         query.vector().values());
    case Query::QUERY_NOT_SET:
      break;
  }
  return Invalid(field, "set either text or vector");
}

Status ValidateQueryDim(std::string_view field, const Query& query,
                        uint32_t dim, bool has_model) {
  if (query.has_text()) {
    if (!has_model) {
      return FailedPreconditionError(
          std::string(field) +
          ".text: the server has no model to embed text; "
          "send a vector");
    }
    return OkStatus();
  }
  return CheckDim(std::string(field) + ".vector", query.vector().values_size(),
                  dim);
}

Status ValidateFilter(const zerovec::v1::Filter& filter) {
  ZV_RETURN_IF_ERROR(CheckNamespace("filter.namespace", filter.namespace_()));
  ZV_RETURN_IF_ERROR(
      CheckMetadata("filter.metadata_equals", filter.metadata_equals()));
  if (filter.min_timestamp_ms() < 0) {
    return Invalid("filter.min_timestamp_ms", "negative");
  }
  if (filter.max_timestamp_ms() < 0) {
    return Invalid("filter.max_timestamp_ms", "negative");
  }
  // 0 is proto3's "unset": no upper bound. The index's range rule, in the
  // service's words.
  if (filter.max_timestamp_ms() != 0 &&
      !index::CheckTimestampRange(filter.min_timestamp_ms(),
                                  filter.max_timestamp_ms())
           .ok()) {
    return Invalid("filter", "min_timestamp_ms " +
                                 std::to_string(filter.min_timestamp_ms()) +
                                 " is after max_timestamp_ms " +
                                 std::to_string(filter.max_timestamp_ms()));
  }
  return OkStatus();
}

namespace {
// Lexical and hybrid searches rank by the query's words: each query needs
// its text.
Status CheckMode(zerovec::v1::SearchMode mode,
                 const std::vector<const zerovec::v1::Query*>& queries,
                 bool batch) {
  if (!zerovec::v1::SearchMode_IsValid(mode)) {
    return InvalidArgumentError("mode: unknown search mode " +
                                std::to_string(static_cast<int>(mode)));
  }
  if (mode != zerovec::v1::SEARCH_MODE_LEXICAL &&
      mode != zerovec::v1::SEARCH_MODE_HYBRID) {
    return OkStatus();
  }
  for (size_t i = 0; i < queries.size(); ++i) {
    if (!queries[i]->has_text()) {
      return InvalidArgumentError(
          (batch ? Field("queries", static_cast<int>(i)) : "query") +
          ".text: lexical and hybrid searches need a text query (a vector "
          "has no words)");
    }
  }
  return OkStatus();
}
}  // namespace

Status ValidateSearch(const zerovec::v1::SearchRequest& req,
                      const Limits& limits) {
  ZV_RETURN_IF_ERROR(CheckMode(req.mode(), {&req.query()}, false));
  ZV_RETURN_IF_ERROR(ValidateCollectionName("collection", req.collection()));
  ZV_RETURN_IF_ERROR(ValidateQuery("query", req.query(), limits));
  ZV_RETURN_IF_ERROR(CheckK(req.k(), limits));
  return ValidateFilter(req.filter());
}

Status ValidateSearchBatch(const zerovec::v1::SearchBatchRequest& req,
                           const Limits& limits) {
  ZV_RETURN_IF_ERROR(ValidateCollectionName("collection", req.collection()));
  ZV_RETURN_IF_ERROR(CheckBatchSize("queries", req.queries_size(), limits));
  std::vector<const zerovec::v1::Query*> queries;
  for (int i = 0; i < req.queries_size(); ++i) {
    ZV_RETURN_IF_ERROR(
        ValidateQuery(Field("queries", i), req.queries(i), limits));
    queries.push_back(&req.queries(i));
  }
  ZV_RETURN_IF_ERROR(CheckMode(req.mode(), queries, true));
  ZV_RETURN_IF_ERROR(CheckK(req.k(), limits));
  return ValidateFilter(req.filter());
}

namespace {
template <typename Ids>
Status CheckIds(const Ids& ids, const Limits& limits) {
  ZV_RETURN_IF_ERROR(CheckBatchSize("ids", ids.size(), limits));
  for (int i = 0; i < ids.size(); ++i)
    ZV_RETURN_IF_ERROR(CheckId(Field("ids", i), ids[i]));
  return OkStatus();
}
}  // namespace

Status ValidateGet(const zerovec::v1::GetRequest& req, const Limits& limits) {
  ZV_RETURN_IF_ERROR(ValidateCollectionName("collection", req.collection()));
  return CheckIds(req.ids(), limits);
}

Status ValidateDelete(const zerovec::v1::DeleteRequest& req,
                      const Limits& limits) {
  ZV_RETURN_IF_ERROR(ValidateCollectionName("collection", req.collection()));
  return CheckIds(req.ids(), limits);
}

Status ValidateScan(const zerovec::v1::ScanRequest& req, const Limits& limits) {
  ZV_RETURN_IF_ERROR(ValidateCollectionName("collection", req.collection()));
  if (static_cast<int64_t>(req.limit()) > limits.max_batch) {
    return Status(StatusCode::kResourceExhausted,
                  "limit: " + std::to_string(req.limit()) +
                      " ids, the server's limit is " +
                      std::to_string(limits.max_batch));
  }
  if (req.after_id().size() > index::kMaxIdBytes)
    return Invalid("after_id", "longer than an id can be");
  return OkStatus();
}

Status ValidateTouch(const zerovec::v1::TouchRequest& req,
                     const Limits& limits) {
  ZV_RETURN_IF_ERROR(ValidateCollectionName("collection", req.collection()));
  ZV_RETURN_IF_ERROR(CheckIds(req.ids(), limits));
  if (req.expires_at_ms() < 0) return Invalid("expires_at_ms", "negative");
  if (req.ttl_ms() < 0) return Invalid("ttl_ms", "negative");
  if (req.expires_at_ms() != 0 && req.ttl_ms() != 0)
    return Invalid("ttl_ms", "set at most one of expires_at_ms and ttl_ms");
  return OkStatus();
}

Status ValidateCompact(const zerovec::v1::CompactRequest& req) {
  return ValidateCollectionName("collection", req.collection());
}

Status ValidateEmbed(const zerovec::v1::EmbedRequest& req, const Limits& limits,
                     bool has_model) {
  ZV_RETURN_IF_ERROR(CheckBatchSize("texts", req.texts_size(), limits));
  for (int i = 0; i < req.texts_size(); ++i) {
    if (req.texts(i).empty()) return Invalid(Field("texts", i), "empty");
    ZV_RETURN_IF_ERROR(CheckText(Field("texts", i), req.texts(i), limits));
  }
  if (!has_model)
    return FailedPreconditionError("the server has no model to embed text");
  return OkStatus();
}

}  // namespace zv::service
