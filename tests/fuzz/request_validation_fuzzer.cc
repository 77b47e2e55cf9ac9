// libFuzzer target: arbitrary bytes parsed as every zerovec.v1 request message
// and, where they parse, checked by service/validation.h under default and tiny
// limits. Beyond "no crash": an accepted request really is within the limits
// the handlers rely on (ids non-empty, unique and short; finite vectors of the
// checked dimension; k in range; collection names free of '/', '.' and NUL).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "service/validation.h"
#include "zerovec/v1/zerovec.pb.h"

namespace {

namespace pb = zerovec::v1;
using zv::service::Limits;

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "invariant failed: %s\n", what);
    abort();
  }
}

void CheckName(const std::string& name) {
  Check(!name.empty() && name.size() <= 64, "name length");
  Check(name[0] != '-', "name does not start with '-'");
  for (char c : name) {
    Check(c != '/' && c != '.' && c != '\0' && c != '\\' && c != ' ',
          "name has no separators");
  }
}

void CheckId(const std::string& id) {
  Check(!id.empty() && id.size() <= 512, "id length");
}

void CheckVector(const float* v, int n) {
  for (int i = 0; i < n; ++i) Check(std::isfinite(v[i]), "finite vector");
}

void CheckQuery(const pb::Query& q, const Limits& limits) {
  if (q.has_text()) {
    Check(!q.text().empty() && q.text().size() <= limits.max_text_bytes,
          "query text");
  } else {
    Check(q.has_vector() && q.vector().values_size() > 0, "query vector set");
    CheckVector(q.vector().values().data(), q.vector().values_size());
  }
}

void CheckK(int32_t k, const Limits& limits) {
  Check(k >= 0 && zv::service::EffectiveK(k) <= limits.max_k, "k range");
}

template <typename M>
bool Parse(M* m, const uint8_t* data, size_t size) {
  return m->ParseFromArray(data, static_cast<int>(size));
}

// With and without a model, accepted upsert dimensions are the collection's.
void CheckUpsertDims(const pb::UpsertRequest& r, uint32_t dim) {
  using namespace zv::service;
  for (bool has_model : {false, true}) {
    if (ValidateUpsertDims(r, dim, has_model).ok()) {
      for (const auto& item : r.items()) {
        Check(item.vector_size() == 0
                  ? has_model
                  : item.vector_size() == static_cast<int>(dim),
              "upsert dims");
      }
    }
  }
}

void FuzzCatalog(const uint8_t* data, size_t size, uint32_t dim) {
  using namespace zv::service;
  if (pb::CreateCollectionRequest r; Parse(&r, data, size)) {
    for (uint32_t model_dim : {0u, dim}) {
      if (ValidateCreateCollection(r, model_dim).ok()) {
        CheckName(r.name());
        Check(r.dim() != 0 || model_dim != 0, "dim");
        Check(r.dim() <= kMaxDim && pb::Metric_IsValid(r.metric()),
              "dim/metric");
        Check(r.index().size() <= kMaxIndexDescriptorBytes, "descriptor");
      }
    }
  }
  if (pb::DropCollectionRequest r; Parse(&r, data, size)) {
    if (ValidateCollectionName("name", r.name()).ok()) CheckName(r.name());
  }
  if (pb::DescribeCollectionRequest r; Parse(&r, data, size)) {
    if (ValidateCollectionName("name", r.name()).ok()) CheckName(r.name());
  }
  if (pb::StatsRequest r; Parse(&r, data, size)) {
    if (ValidateCollectionName("collection", r.collection()).ok())
      CheckName(r.collection());
  }
}

void FuzzUpsert(const uint8_t* data, size_t size, const Limits& limits,
                uint32_t dim) {
  using namespace zv::service;
  if (pb::UpsertRequest r; Parse(&r, data, size)) {
    if (ValidateUpsert(r, limits).ok()) {
      CheckName(r.collection());
      Check(r.items_size() > 0 && r.items_size() <= limits.max_batch, "batch");
      std::set<std::string> ids;
      for (const auto& item : r.items()) {
        CheckId(item.id());
        Check(ids.insert(item.id()).second, "unique ids");
        Check(!item.text().empty() || item.vector_size() > 0, "text or vector");
        Check(item.text().size() <= limits.max_text_bytes, "text bytes");
        CheckVector(item.vector().data(), item.vector_size());
        Check(
            item.metadata().size() <= static_cast<size_t>(kMaxMetadataEntries),
            "metadata");
        Check(item.timestamp_ms() >= 0, "timestamp");
      }
      CheckUpsertDims(r, dim);
    }
  }
}

void FuzzSearch(const uint8_t* data, size_t size, const Limits& limits,
                uint32_t dim) {
  using namespace zv::service;
  if (pb::SearchRequest r; Parse(&r, data, size)) {
    if (ValidateSearch(r, limits).ok()) {
      CheckName(r.collection());
      CheckQuery(r.query(), limits);
      CheckK(r.k(), limits);
      if (ValidateQueryDim("query", r.query(), dim, false).ok()) {
        Check(r.query().has_vector() &&
                  r.query().vector().values_size() == static_cast<int>(dim),
              "query dim");
      }
    }
    (void)ValidateFilter(r.filter());
  }
  if (pb::SearchBatchRequest r; Parse(&r, data, size)) {
    if (ValidateSearchBatch(r, limits).ok()) {
      CheckName(r.collection());
      Check(r.queries_size() > 0 && r.queries_size() <= limits.max_batch,
            "batch");
      for (const auto& q : r.queries()) CheckQuery(q, limits);
      CheckK(r.k(), limits);
    }
  }
}

void FuzzIdsAndEmbed(const uint8_t* data, size_t size, const Limits& limits) {
  using namespace zv::service;
  if (pb::GetRequest r; Parse(&r, data, size)) {
    if (ValidateGet(r, limits).ok()) {
      CheckName(r.collection());
      Check(r.ids_size() > 0 && r.ids_size() <= limits.max_batch, "batch");
      for (const auto& id : r.ids()) CheckId(id);
    }
  }
  if (pb::DeleteRequest r; Parse(&r, data, size)) {
    if (ValidateDelete(r, limits).ok()) {
      CheckName(r.collection());
      for (const auto& id : r.ids()) CheckId(id);
    }
  }
  if (pb::TouchRequest r; Parse(&r, data, size)) {
    if (ValidateTouch(r, limits).ok()) {
      CheckName(r.collection());
      for (const auto& id : r.ids()) CheckId(id);
      Check(r.ttl_ms() >= 0 && r.expires_at_ms() >= 0 &&
                (r.ttl_ms() == 0 || r.expires_at_ms() == 0),
            "touch expiry");
    }
  }
  if (pb::EmbedRequest r; Parse(&r, data, size)) {
    for (bool has_model : {false, true}) {
      if (ValidateEmbed(r, limits, has_model).ok()) {
        Check(has_model, "embed needs a model");
        Check(r.texts_size() > 0 && r.texts_size() <= limits.max_batch,
              "batch");
        for (const auto& t : r.texts())
          Check(!t.empty() && t.size() <= limits.max_text_bytes, "text");
      }
    }
  }
}

void Fuzz(const uint8_t* data, size_t size, const Limits& limits,
          uint32_t dim) {
  FuzzCatalog(data, size, dim);
  FuzzUpsert(data, size, limits, dim);
  FuzzSearch(data, size, limits, dim);
  FuzzIdsAndEmbed(data, size, limits);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Limits defaults;
  static const Limits tiny = [] {
    Limits l;
    l.max_batch = 2;
    l.max_k = 3;
    l.max_text_bytes = 8;
    return l;
  }();
  Fuzz(data, size, defaults, 4);
  Fuzz(data, size, tiny, 2);
  return 0;
}
