// Over 600 lines: one short handler per RPC of the one service class, plus the
// proto <-> index conversions they share.
#include "service/zerovec_service.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <utility>

#include "service/validation.h"

namespace zv::service {
namespace {

namespace pb = zerovec::v1;

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

shm::Metric ToMetric(pb::Metric m) {
  return m == pb::METRIC_L2 ? shm::Metric::kL2 : shm::Metric::kInnerProduct;
}

pb::Metric FromMetric(shm::Metric m) {
  return m == shm::Metric::kL2 ? pb::METRIC_L2 : pb::METRIC_INNER_PRODUCT;
}

void ToProto(const index::CollectionInfo& info, pb::CollectionInfo* out) {
  out->set_name(info.name);
  out->set_dim(info.dim);
  out->set_metric(FromMetric(info.metric));
  out->set_index(info.index_descriptor);
  out->set_rows(info.rows);
  out->set_live_rows(info.live_rows);
  out->set_tombstones(info.tombstones);
  out->set_generation(info.generation);
  out->set_gpu_mirrored(info.gpu_mirrored);
  out->set_gpu_mirror_bytes(info.gpu_mirror_bytes);
  out->set_gpu_searches(info.gpu_searches);
  out->set_gpu_rows_from_device(info.gpu_rows_from_device);
  out->set_default_ttl_ms(info.default_ttl_ms);
  out->set_expired_swept(info.expired_swept);
  out->set_lexical(info.lexical);
  out->set_lexical_documents(info.lexical_documents);
}

index::SearchMode ToMode(pb::SearchMode m) {
  switch (m) {
    case pb::SEARCH_MODE_LEXICAL:
      return index::SearchMode::kLexical;
    case pb::SEARCH_MODE_HYBRID:
      return index::SearchMode::kHybrid;
    default:
      return index::SearchMode::kDense;
  }
}

// Unset fields take the documented defaults (zerovec.proto, Fusion).
index::FusionOptions ToFusion(const pb::Fusion& f) {
  index::FusionOptions out;
  if (f.rrf_k() != 0) out.rrf_k = f.rrf_k();
  if (f.dense_weight() != 0 || f.lexical_weight() != 0) {
    out.dense_weight = f.dense_weight();
    out.lexical_weight = f.lexical_weight();
  }
  out.depth = f.depth();
  return out;
}

index::Filter ToFilter(const pb::Filter& f) {
  index::Filter out;
  if (!f.namespace_().empty()) out.ns = f.namespace_();
  out.metadata_equals.insert(f.metadata_equals().begin(),
                             f.metadata_equals().end());
  if (f.min_timestamp_ms() != 0) out.min_timestamp_ms = f.min_timestamp_ms();
  if (f.max_timestamp_ms() != 0) out.max_timestamp_ms = f.max_timestamp_ms();
  return out;
}

void ToProto(const index::Hit& hit, bool include_documents, pb::Hit* out) {
  out->set_id(hit.id);
  out->set_score(hit.score);
  out->set_namespace_(hit.record.ns);
  out->set_timestamp_ms(hit.record.timestamp_ms);
  out->set_dense_rank(hit.dense_rank);
  out->set_lexical_rank(hit.lexical_rank);
  if (include_documents) {
    out->set_text(hit.record.text);
    out->mutable_metadata()->insert(hit.record.metadata.begin(),
                                    hit.record.metadata.end());
  }
}

void ToProto(const OpSnapshot& s, pb::OpStats* out) {
  out->set_count(s.count);
  out->set_errors(s.errors);
  out->set_p50_us(s.p50_us);
  out->set_p95_us(s.p95_us);
  out->set_p99_us(s.p99_us);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ZeroVecService::ZeroVecService(index::Database* db, embed::Embedder* embedder,
                               const Limits& limits, const BearerAuth* auth,
                               Compactor* compactor, SearchCoalescer* coalescer,
                               const Sweeper* sweeper,
                               bool text_queries_on_device)
    : db_(db),
      embedder_(embedder),
      limits_(limits),
      auth_(auth),
      compactor_(compactor),
      coalescer_(coalescer),
      sweeper_(sweeper),
      text_queries_on_device_(text_queries_on_device),
      device_queries_(embedder),
      started_(std::chrono::steady_clock::now()) {}

grpc::Status ZeroVecService::Handle(grpc::ServerContext* ctx,
                                    const std::function<Status()>& body) {
  if (!auth_->Check(*ctx)) {
    return grpc::Status(
        grpc::StatusCode::UNAUTHENTICATED,
        "missing or invalid token: send metadata \"authorization: Bearer "
        "<token>\"");
  }
  const int now = in_flight_.fetch_add(1, std::memory_order_acq_rel) + 1;
  struct Release {
    std::atomic<int>* n;
    ~Release() { n->fetch_sub(1, std::memory_order_acq_rel); }
  } release{&in_flight_};
  if (now > limits_.max_concurrent_requests) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "server busy: more than " +
            std::to_string(limits_.max_concurrent_requests) +
            " requests in flight (max_concurrent_requests); retry later");
  }
  try {
    return ToGrpc(body());
  } catch (const std::bad_alloc&) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "out of memory");
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        std::string("internal error: ") + e.what());
  }
}

uint32_t ZeroVecService::model_dim() const {
  return embedder_ ? static_cast<uint32_t>(embedder_->info().dim) : 0;
}

StatusOr<std::shared_ptr<index::Collection>> ZeroVecService::Lookup(
    const std::string& name) const {
  auto coll = db_->GetCollection(name);
  if (!coll.ok()) {
    if (coll.status().code() == StatusCode::kNotFound) {
      return NotFoundError("collection: no collection named \"" + name + "\"");
    }
    return coll.status();
  }
  return std::move(coll).value();
}

grpc::Status ZeroVecService::CreateCollection(
    grpc::ServerContext* ctx, const pb::CreateCollectionRequest* req,
    pb::CreateCollectionResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    ZV_RETURN_IF_ERROR(ValidateCreateCollection(*req, model_dim()));
    if (db_->GetCollection(req->name()).ok()) {
      return AlreadyExistsError("name: a collection named \"" + req->name() +
                                "\" already exists");
    }
    index::CollectionOptions options;
    options.dim = req->dim() != 0 ? req->dim() : model_dim();
    options.metric = ToMetric(req->metric());
    options.index.descriptor = req->index().empty() ? "Flat" : req->index();
    options.default_ttl_ms = req->default_ttl_ms();
    options.lexical = req->lexical();
    ZV_ASSIGN_OR_RETURN(auto coll, db_->CreateCollection(req->name(), options));
    FillInfo(*coll, resp->mutable_collection());
    return OkStatus();
  });
}

grpc::Status ZeroVecService::DropCollection(
    grpc::ServerContext* ctx, const pb::DropCollectionRequest* req,
    pb::DropCollectionResponse*) {
  return Handle(ctx, [&]() -> Status {
    ZV_RETURN_IF_ERROR(ValidateCollectionName("name", req->name()));
    ZV_RETURN_IF_ERROR(Lookup(req->name()).status());
    ZV_RETURN_IF_ERROR(db_->DropCollection(req->name()));
    std::lock_guard<std::mutex> lock(truncated_mu_);
    truncated_by_collection_.erase(req->name());
    return OkStatus();
  });
}

grpc::Status ZeroVecService::ListCollections(
    grpc::ServerContext* ctx, const pb::ListCollectionsRequest*,
    pb::ListCollectionsResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    std::vector<std::string> names = db_->ListCollections();
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      auto coll = db_->GetCollection(name);
      if (!coll.ok()) continue;  // dropped meanwhile
      FillInfo(**coll, resp->add_collections());
    }
    return OkStatus();
  });
}

grpc::Status ZeroVecService::DescribeCollection(
    grpc::ServerContext* ctx, const pb::DescribeCollectionRequest* req,
    pb::CollectionInfo* resp) {
  return Handle(ctx, [&]() -> Status {
    ZV_RETURN_IF_ERROR(ValidateCollectionName("name", req->name()));
    ZV_ASSIGN_OR_RETURN(auto coll, Lookup(req->name()));
    FillInfo(*coll, resp);
    return OkStatus();
  });
}

void ZeroVecService::FillInfo(const index::Collection& coll,
                              pb::CollectionInfo* out) const {
  const index::CollectionInfo info = coll.Describe();
  ToProto(info, out);
  if (embedder_ && model_dim() == info.dim) {
    out->set_model_max_length(embedder_->info().max_length);
  }
  std::lock_guard<std::mutex> lock(truncated_mu_);
  auto it = truncated_by_collection_.find(info.name);
  if (it != truncated_by_collection_.end())
    out->set_truncated_texts(it->second);
}

void ZeroVecService::CountTruncated(const std::string& collection, uint64_t n) {
  if (n == 0) return;
  truncated_texts_.fetch_add(n, std::memory_order_relaxed);
  if (collection.empty()) return;
  std::lock_guard<std::mutex> lock(truncated_mu_);
  truncated_by_collection_[collection] += n;
}

Status ZeroVecService::DoUpsert(const pb::UpsertRequest& req,
                                uint64_t* upserted, uint64_t* truncated) {
  ZV_RETURN_IF_ERROR(ValidateUpsert(req, limits_));
  ZV_ASSIGN_OR_RETURN(auto coll, Lookup(req.collection()));
  const uint32_t dim = coll->Describe().dim;
  ZV_RETURN_IF_ERROR(ValidateUpsertDims(req, dim, embedder_ != nullptr));
  const int n = req.items_size();
  std::vector<index::Record> records(n);
  bool any_text = false;
  const int64_t now = NowMs();
  for (int i = 0; i < n; ++i) {
    const pb::Item& item = req.items(i);
    index::Record& r = records[i];
    r.id = item.id();
    r.text = item.text();
    r.ns = item.namespace_();
    r.metadata.insert(item.metadata().begin(), item.metadata().end());
    r.timestamp_ms = item.timestamp_ms() != 0 ? item.timestamp_ms() : now;
    r.expires_at_ms = item.expires_at_ms();
    any_text |= item.vector_size() == 0;
  }
  if (any_text && model_dim() != dim) {
    return FailedPreconditionError(
        "items: collection \"" + req.collection() + "\" has dim " +
        std::to_string(dim) + " but the server model makes " +
        std::to_string(model_dim()) + "; send vectors");
  }
  // Vectors land straight in the segment rows: given ones are copied from the
  // request, text ones are written there by the embedder (ingest path).
  embed::EmbedReport report;
  index::RowFiller fill = [&](std::span<float* const> rows,
                              index::DeviceRowTargets* device) {
    return FillRows(req, dim, rows, device, &report);
  };
  ZV_RETURN_IF_ERROR(coll->UpsertInPlace(records, fill));
  *upserted += n;
  // Counted once stored: a failed batch stores nothing.
  *truncated += report.truncated;
  CountTruncated(req.collection(), report.truncated);
  compactor_->Notify(req.collection());  // replaced ids leave tombstones
  return OkStatus();
}

Status ZeroVecService::FillRows(const pb::UpsertRequest& req, uint32_t dim,
                                std::span<float* const> rows,
                                index::DeviceRowTargets* device,
                                embed::EmbedReport* report) {
  std::vector<std::string_view> texts;
  std::vector<float*> text_rows;
  std::vector<int> text_items;
  for (int i = 0; i < req.items_size(); ++i) {
    const pb::Item& item = req.items(i);
    if (item.vector_size() != 0) {
      std::memcpy(rows[i], item.vector().data(), sizeof(float) * dim);
    } else {
      texts.push_back(item.text());
      text_rows.push_back(rows[i]);
      text_items.push_back(i);
    }
  }
  // Text rows go to the GPU mirror when the encoder runs on its device: the
  // collection copies them into the segment, and they never cross back. Only
  // then are device rows staged.
  const bool on_device =
      !texts.empty() && device != nullptr && embedder_ != nullptr &&
      embedder_->cuda_device() == device->cuda_device && device->Stage().ok();
  if (on_device) {
    for (size_t t = 0; t < texts.size(); ++t) {
      text_rows[t] = device->rows[text_items[t]];
    }
  }
  if (texts.empty()) return OkStatus();
  ScopedOpTimer timer(&embed_stats_);
  void* registered = nullptr;
  if (on_device) {
    const size_t bytes = device->rows.size() * device->row_stride * 4;
    if (embedder_->RegisterDeviceOutputMemory(device->rows[0], bytes).ok()) {
      registered = device->rows[0];
    } else {  // not the encoder's memory after all: the host way
      for (size_t t = 0; t < texts.size(); ++t) {
        text_rows[t] = rows[text_items[t]];
      }
    }
  }
  Status s = embedder_->EmbedInto(texts, text_rows, report);
  if (registered != nullptr) {
    embedder_->UnregisterOutputMemory(registered);
    for (int i : text_items) device->written[i] = 1;
  }
  timer.set_ok(s.ok());
  return s;
}

grpc::Status ZeroVecService::Upsert(grpc::ServerContext* ctx,
                                    const pb::UpsertRequest* req,
                                    pb::UpsertResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    ScopedOpTimer timer(&upsert_stats_);
    uint64_t upserted = 0, truncated = 0;
    Status s = DoUpsert(*req, &upserted, &truncated);
    timer.set_ok(s.ok());
    resp->set_upserted(upserted);
    resp->set_truncated(truncated);
    return s;
  });
}

grpc::Status ZeroVecService::UpsertStream(
    grpc::ServerContext* ctx, grpc::ServerReader<pb::UpsertRequest>* reader,
    pb::UpsertResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    uint64_t upserted = 0, truncated = 0;
    pb::UpsertRequest req;
    for (int message = 0; reader->Read(&req); ++message) {
      ScopedOpTimer timer(&upsert_stats_);
      Status s = DoUpsert(req, &upserted, &truncated);
      timer.set_ok(s.ok());
      if (!s.ok()) {
        return s.WithContext("message " + std::to_string(message) + " (the " +
                             std::to_string(upserted) +
                             " items of earlier messages are stored)");
      }
    }
    resp->set_upserted(upserted);
    resp->set_truncated(truncated);
    return OkStatus();
  });
}

StatusOr<std::vector<float>> ZeroVecService::QueryVectors(
    std::span<const pb::Query* const> queries, uint32_t dim) {
  std::vector<float> out(queries.size() * dim);
  std::vector<std::string> texts;
  std::vector<float*> rows;
  for (size_t i = 0; i < queries.size(); ++i) {
    float* row = out.data() + i * dim;
    if (queries[i]->has_text()) {
      texts.push_back(queries[i]->text());
      rows.push_back(row);
    } else {
      std::memcpy(row, queries[i]->vector().values().data(),
                  sizeof(float) * dim);
    }
  }
  if (!texts.empty()) {
    if (model_dim() != dim) {
      return FailedPreconditionError(
          "query.text: the collection has dim " + std::to_string(dim) +
          " but the server model makes " + std::to_string(model_dim()) +
          "; send a vector");
    }
    // The query path: Submit keeps text queries off the ingest worker.
    ScopedOpTimer timer(&embed_stats_);
    embed::EmbedReport report;
    Status s =
        embedder_->Submit(std::move(texts), std::move(rows), &report).get();
    timer.set_ok(s.ok());
    ZV_RETURN_IF_ERROR(s);
    CountTruncated("", report.truncated);  // a query is in no collection
  }
  return out;
}

StatusOr<std::optional<std::vector<std::vector<index::Hit>>>>
ZeroVecService::SearchTextOnDevice(index::Collection& coll,
                                   const index::CollectionInfo& info,
                                   std::span<const pb::Query* const> queries,
                                   index::SearchOptions options) {
  using Result = std::optional<std::vector<std::vector<index::Hit>>>;
  if (!text_queries_on_device_ || !info.gpu_mirrored || options.recency ||
      options.mode != index::SearchMode::kDense || embedder_ == nullptr ||
      embedder_->cuda_device() < 0 || model_dim() != info.dim) {
    return Result();
  }
  std::vector<std::string_view> texts;
  for (const pb::Query* q : queries) {
    if (!q->has_text()) return Result();  // vectors: the coalesced host way
    texts.push_back(q->text());
  }
  std::vector<float> host(texts.size() * info.dim);
  embed::EmbedReport report;
  ScopedOpTimer timer(&embed_stats_);
  auto buffer = device_queries_.Embed(texts, info.dim, info.row_stride,
                                      host.data(), &report);
  timer.set_ok(buffer.ok());
  ZV_RETURN_IF_ERROR(buffer.status());
  CountTruncated("", report.truncated);
  options.device_queries = (*buffer)->row(0);
  options.device_queries_device = (*buffer)->device();
  auto hits = coll.Search(host, options);
  device_queries_.Release(std::move(buffer).value());
  ZV_RETURN_IF_ERROR(hits.status());
  return Result(std::move(hits).value());
}

StatusOr<std::vector<std::vector<index::Hit>>> ZeroVecService::DoSearch(
    const std::string& collection, std::span<const pb::Query* const> queries,
    int32_t k, const pb::Filter& filter, bool include_documents,
    int32_t ef_search, const pb::Recency& recency, pb::SearchMode mode,
    const pb::Fusion& fusion) {
  ZV_ASSIGN_OR_RETURN(auto coll, Lookup(collection));
  const index::CollectionInfo info = coll->Describe();
  const uint32_t dim = info.dim;
  index::SearchOptions options;
  options.k = EffectiveK(k);
  options.filter = ToFilter(filter);
  options.include_documents = include_documents;
  options.ef_search = ef_search;
  options.mode = ToMode(mode);
  options.fusion = ToFusion(fusion);
  if (recency.half_life_ms() != 0 || recency.weight() != 0 ||
      recency.now_ms() != 0 || recency.candidates() != 0) {
    // Any field set turns it on, so a weight without a half-life is an
    // error (the index checks them) rather than silently ignored.
    options.recency = index::Recency{.half_life_ms = recency.half_life_ms(),
                                     .weight = recency.weight(),
                                     .now_ms = recency.now_ms(),
                                     .candidates = recency.candidates()};
  }
  if (options.mode != index::SearchMode::kDense) {
    // Texts were checked present (ValidateSearch); lexical embeds nothing.
    for (const pb::Query* q : queries) options.query_texts.push_back(q->text());
    if (!info.lexical) {
      return FailedPreconditionError(
          "mode: collection \"" + collection +
          "\" has no lexical index (create it with lexical)");
    }
    if (options.mode == index::SearchMode::kLexical) {
      return coll->Search({}, options);
    }
  }
  for (size_t i = 0; i < queries.size(); ++i) {
    const std::string field =
        queries.size() == 1 ? "query" : "queries[" + std::to_string(i) + "]";
    ZV_RETURN_IF_ERROR(
        ValidateQueryDim(field, *queries[i], dim, embedder_ != nullptr));
  }
  ZV_ASSIGN_OR_RETURN(auto on_device,
                      SearchTextOnDevice(*coll, info, queries, options));
  if (on_device) return std::move(*on_device);
  ZV_ASSIGN_OR_RETURN(std::vector<float> vectors, QueryVectors(queries, dim));
  if (coalescer_ && info.gpu_mirrored && !options.recency &&
      options.mode == index::SearchMode::kDense) {
    return coalescer_->Search(coll, vectors, queries.size(), options);
  }
  return coll->Search(vectors, options);
}

grpc::Status ZeroVecService::Search(grpc::ServerContext* ctx,
                                    const pb::SearchRequest* req,
                                    pb::SearchResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    ScopedOpTimer timer(&search_stats_);
    Status s = [&]() -> Status {
      ZV_RETURN_IF_ERROR(ValidateSearch(*req, limits_));
      const pb::Query* query = &req->query();
      ZV_ASSIGN_OR_RETURN(
          auto results,
          DoSearch(req->collection(), {&query, 1}, req->k(), req->filter(),
                   req->include_documents(), req->ef_search(), req->recency(),
                   req->mode(), req->fusion()));
      for (const auto& hit : results.at(0)) {
        ToProto(hit, req->include_documents(), resp->add_hits());
      }
      return OkStatus();
    }();
    timer.set_ok(s.ok());
    return s;
  });
}

grpc::Status ZeroVecService::SearchBatch(grpc::ServerContext* ctx,
                                         const pb::SearchBatchRequest* req,
                                         pb::SearchBatchResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    ScopedOpTimer timer(&search_stats_);
    Status s = [&]() -> Status {
      ZV_RETURN_IF_ERROR(ValidateSearchBatch(*req, limits_));
      std::vector<const pb::Query*> queries;
      for (const pb::Query& q : req->queries()) queries.push_back(&q);
      ZV_ASSIGN_OR_RETURN(
          auto results,
          DoSearch(req->collection(), queries, req->k(), req->filter(),
                   req->include_documents(), req->ef_search(), req->recency(),
                   req->mode(), req->fusion()));
      for (const auto& hits : results) {
        pb::SearchResponse* out = resp->add_results();
        for (const auto& hit : hits)
          ToProto(hit, req->include_documents(), out->add_hits());
      }
      return OkStatus();
    }();
    timer.set_ok(s.ok());
    return s;
  });
}

namespace {

// An item as Get and Scan return it.
void ToItem(const index::GetResult& r, bool with_vector, pb::Item* item) {
  item->set_id(r.record.id);
  item->set_text(r.record.text);
  item->set_namespace_(r.record.ns);
  item->mutable_metadata()->insert(r.record.metadata.begin(),
                                   r.record.metadata.end());
  item->set_timestamp_ms(r.record.timestamp_ms);
  item->set_expires_at_ms(r.record.expires_at_ms);
  if (with_vector)
    item->mutable_vector()->Add(r.vector.begin(), r.vector.end());
}

}  // namespace

grpc::Status ZeroVecService::Scan(grpc::ServerContext* ctx,
                                  const pb::ScanRequest* req,
                                  pb::ScanResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    ZV_RETURN_IF_ERROR(ValidateScan(*req, limits_));
    ZV_ASSIGN_OR_RETURN(auto coll, Lookup(req->collection()));
    ZV_ASSIGN_OR_RETURN(
        index::ScanPage page,
        coll->Scan(req->after_id(), req->limit() == 0 ? 256 : req->limit()));
    for (const auto& r : page.items)
      ToItem(r, req->include_vectors(), resp->add_items());
    resp->set_next_after_id(page.last_id);
    return OkStatus();
  });
}

grpc::Status ZeroVecService::Get(grpc::ServerContext* ctx,
                                 const pb::GetRequest* req,
                                 pb::GetResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    ZV_RETURN_IF_ERROR(ValidateGet(*req, limits_));
    ZV_ASSIGN_OR_RETURN(auto coll, Lookup(req->collection()));
    std::vector<std::string> ids(req->ids().begin(), req->ids().end());
    ZV_ASSIGN_OR_RETURN(auto results, coll->Get(ids));
    for (const auto& r : results)
      ToItem(r, req->include_vectors(), resp->add_items());
    return OkStatus();
  });
}

grpc::Status ZeroVecService::Delete(grpc::ServerContext* ctx,
                                    const pb::DeleteRequest* req,
                                    pb::DeleteResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    ZV_RETURN_IF_ERROR(ValidateDelete(*req, limits_));
    ZV_ASSIGN_OR_RETURN(auto coll, Lookup(req->collection()));
    std::vector<std::string> ids(req->ids().begin(), req->ids().end());
    ZV_ASSIGN_OR_RETURN(uint64_t deleted, coll->Delete(ids));
    resp->set_deleted(deleted);
    if (deleted > 0) compactor_->Notify(req->collection());
    return OkStatus();
  });
}

grpc::Status ZeroVecService::Embed(grpc::ServerContext* ctx,
                                   const pb::EmbedRequest* req,
                                   pb::EmbedResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    ZV_RETURN_IF_ERROR(ValidateEmbed(*req, limits_, embedder_ != nullptr));
    const int n = req->texts_size();
    const uint32_t dim = model_dim();
    std::vector<float> out(static_cast<size_t>(n) * dim);
    std::vector<std::string> texts(req->texts().begin(), req->texts().end());
    std::vector<float*> rows(n);
    for (int i = 0; i < n; ++i)
      rows[i] = out.data() + static_cast<size_t>(i) * dim;
    ScopedOpTimer timer(&embed_stats_);
    embed::EmbedReport report;
    Status s =
        embedder_->Submit(std::move(texts), std::move(rows), &report).get();
    timer.set_ok(s.ok());
    ZV_RETURN_IF_ERROR(s);
    CountTruncated("", report.truncated);
    for (int i = 0; i < n; ++i) {
      const float* row = out.data() + static_cast<size_t>(i) * dim;
      resp->add_vectors()->mutable_values()->Add(row, row + dim);
    }
    resp->set_model(embedder_->info().name);
    resp->set_dim(dim);
    resp->set_truncated(static_cast<uint32_t>(report.truncated));
    resp->set_max_length(embedder_->info().max_length);
    return OkStatus();
  });
}

grpc::Status ZeroVecService::Stats(grpc::ServerContext* ctx,
                                   const pb::StatsRequest* req,
                                   pb::StatsResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    if (!req->collection().empty()) {
      ZV_RETURN_IF_ERROR(
          ValidateCollectionName("collection", req->collection()));
      ZV_ASSIGN_OR_RETURN(auto coll, Lookup(req->collection()));
      FillInfo(*coll, resp->add_collections());
    } else {
      std::vector<std::string> names = db_->ListCollections();
      std::sort(names.begin(), names.end());
      for (const auto& name : names) {
        auto coll = db_->GetCollection(name);
        if (coll.ok()) FillInfo(**coll, resp->add_collections());
      }
    }
    ToProto(embed_stats_.Snapshot(), resp->mutable_embed());
    ToProto(search_stats_.Snapshot(), resp->mutable_search());
    ToProto(upsert_stats_.Snapshot(), resp->mutable_upsert());
    ToProto(compactor_->op_stats()->Snapshot(), resp->mutable_compact());
    resp->set_auto_compactions(compactor_->automatic_runs());
    if (embedder_) {
      resp->set_model(embedder_->info().name);
      resp->set_model_dim(model_dim());
      resp->set_embed_device(embedder_->device_description());
      resp->set_model_max_length(embedder_->info().max_length);
    }
    resp->set_truncated_texts(truncated_texts_.load(std::memory_order_relaxed));
    if (sweeper_) resp->set_expired_swept(sweeper_->swept());
    resp->set_touched(touched_.load(std::memory_order_relaxed));
    if (coalescer_) {
      resp->set_gpu_batches(coalescer_->batches());
      resp->set_gpu_batched_queries(coalescer_->batched_queries());
    }
    resp->set_uptime_s(std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - started_)
                           .count());
    resp->set_in_flight(in_flight_.load(std::memory_order_relaxed));
    return OkStatus();
  });
}

grpc::Status ZeroVecService::Touch(grpc::ServerContext* ctx,
                                   const pb::TouchRequest* req,
                                   pb::TouchResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    ZV_RETURN_IF_ERROR(ValidateTouch(*req, limits_));
    ZV_ASSIGN_OR_RETURN(auto coll, Lookup(req->collection()));
    std::vector<std::string> ids(req->ids().begin(), req->ids().end());
    const int64_t at =
        req->ttl_ms() > 0 ? NowMs() + req->ttl_ms() : req->expires_at_ms();
    ZV_ASSIGN_OR_RETURN(uint64_t touched, coll->Touch(ids, at));
    resp->set_touched(touched);
    touched_.fetch_add(touched, std::memory_order_relaxed);
    // Each renewal replaces a row: the old one is a tombstone now.
    if (touched > 0) compactor_->Notify(req->collection());
    return OkStatus();
  });
}

grpc::Status ZeroVecService::Compact(grpc::ServerContext* ctx,
                                     const pb::CompactRequest* req,
                                     pb::CompactResponse* resp) {
  return Handle(ctx, [&]() -> Status {
    ScopedOpTimer timer(compactor_->op_stats());
    Status s = [&]() -> Status {
      ZV_RETURN_IF_ERROR(ValidateCompact(*req));
      ZV_ASSIGN_OR_RETURN(auto coll, Lookup(req->collection()));
      ZV_ASSIGN_OR_RETURN(index::CompactionResult r, compactor_->Compact(coll));
      resp->set_rows_before(r.rows_before);
      resp->set_rows_after(r.rows_after);
      resp->set_tombstones_removed(r.tombstones_removed);
      resp->set_generation(r.generation);
      resp->set_seconds(r.seconds);
      return OkStatus();
    }();
    timer.set_ok(s.ok());
    return s;
  });
}

}  // namespace zv::service
