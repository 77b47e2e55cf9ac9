// Request validation: pure checks of zerovec.v1 requests against the limits,
// run before any state changes. No I/O, no collection access, so the checks are
// unit-testable and fuzzable. Messages name the field ("items[3].id: empty").
#ifndef ZEROVEC_SERVICE_VALIDATION_H_
#define ZEROVEC_SERVICE_VALIDATION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "index/collection.h"
#include "service/server.h"
#include "zerovec/v1/zerovec.pb.h"

namespace zv::service {

inline constexpr size_t kMaxNamespaceBytes = 256;
inline constexpr int kMaxMetadataEntries = 64;
inline constexpr size_t kMaxMetadataKeyBytes = 256;
inline constexpr size_t kMaxMetadataValueBytes = 4096;
inline constexpr size_t kMaxIndexDescriptorBytes = 64;
inline constexpr uint32_t kMaxDim = index::kMaxDim;
inline constexpr int kDefaultK = 10;

// `model_dim` is the server model's dimension, 0 when it has none.
Status ValidateCreateCollection(const zerovec::v1::CreateCollectionRequest& req,
                                uint32_t model_dim);
Status ValidateCollectionName(std::string_view field, const std::string& name);

// Shape checks (everything but the collection's dimension).
Status ValidateUpsert(const zerovec::v1::UpsertRequest& req,
                      const Limits& limits);
// Dimension checks once the collection is known; `has_model` allows text items.
Status ValidateUpsertDims(const zerovec::v1::UpsertRequest& req, uint32_t dim,
                          bool has_model);

Status ValidateSearch(const zerovec::v1::SearchRequest& req,
                      const Limits& limits);
Status ValidateSearchBatch(const zerovec::v1::SearchBatchRequest& req,
                           const Limits& limits);
// `field` names the query in messages ("query", "queries[2]").
Status ValidateQuery(std::string_view field, const zerovec::v1::Query& query,
                     const Limits& limits);
Status ValidateQueryDim(std::string_view field, const zerovec::v1::Query& query,
                        uint32_t dim, bool has_model);
Status ValidateFilter(const zerovec::v1::Filter& filter);

Status ValidateGet(const zerovec::v1::GetRequest& req, const Limits& limits);
Status ValidateDelete(const zerovec::v1::DeleteRequest& req,
                      const Limits& limits);
Status ValidateCompact(const zerovec::v1::CompactRequest& req);
Status ValidateScan(const zerovec::v1::ScanRequest& req, const Limits& limits);
Status ValidateTouch(const zerovec::v1::TouchRequest& req,
                     const Limits& limits);
Status ValidateEmbed(const zerovec::v1::EmbedRequest& req, const Limits& limits,
                     bool has_model);

// k as requested, 0 meaning kDefaultK.
inline int EffectiveK(int32_t k) { return k == 0 ? kDefaultK : k; }

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_VALIDATION_H_
