// zerovec.v1.ZeroVec implemented over index::Database and embed::Embedder: one
// thin class that authenticates, limits concurrency, validates, translates and
// delegates.
#ifndef ZEROVEC_SERVICE_ZEROVEC_SERVICE_H_
#define ZEROVEC_SERVICE_ZEROVEC_SERVICE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "embed/embedder.h"
#include "index/collection.h"
#include "service/auth.h"
#include "service/coalescer.h"
#include "service/compactor.h"
#include "service/device_queries.h"
#include "service/server.h"
#include "service/stats.h"
#include "service/sweeper.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace zv::service {

class ZeroVecService final : public zerovec::v1::ZeroVec::Service {
 public:
  // `embedder` may be null (vector-only server), `coalescer` too (searches
  // of GPU-mirrored collections run one by one). Pointers must outlive this.
  ZeroVecService(index::Database* db, embed::Embedder* embedder,
                 const Limits& limits, const BearerAuth* auth,
                 Compactor* compactor, SearchCoalescer* coalescer = nullptr,
                 const Sweeper* sweeper = nullptr,
                 bool text_queries_on_device = true);

  grpc::Status CreateCollection(
      grpc::ServerContext* ctx, const zerovec::v1::CreateCollectionRequest* req,
      zerovec::v1::CreateCollectionResponse* resp) override;
  grpc::Status DropCollection(
      grpc::ServerContext* ctx, const zerovec::v1::DropCollectionRequest* req,
      zerovec::v1::DropCollectionResponse* resp) override;
  grpc::Status ListCollections(
      grpc::ServerContext* ctx, const zerovec::v1::ListCollectionsRequest* req,
      zerovec::v1::ListCollectionsResponse* resp) override;
  grpc::Status DescribeCollection(
      grpc::ServerContext* ctx,
      const zerovec::v1::DescribeCollectionRequest* req,
      zerovec::v1::CollectionInfo* resp) override;
  grpc::Status Upsert(grpc::ServerContext* ctx,
                      const zerovec::v1::UpsertRequest* req,
                      zerovec::v1::UpsertResponse* resp) override;
  grpc::Status UpsertStream(
      grpc::ServerContext* ctx,
      grpc::ServerReader<zerovec::v1::UpsertRequest>* reader,
      zerovec::v1::UpsertResponse* resp) override;
  grpc::Status Search(grpc::ServerContext* ctx,
                      const zerovec::v1::SearchRequest* req,
                      zerovec::v1::SearchResponse* resp) override;
  grpc::Status SearchBatch(grpc::ServerContext* ctx,
                           const zerovec::v1::SearchBatchRequest* req,
                           zerovec::v1::SearchBatchResponse* resp) override;
  grpc::Status Get(grpc::ServerContext* ctx, const zerovec::v1::GetRequest* req,
                   zerovec::v1::GetResponse* resp) override;
  grpc::Status Delete(grpc::ServerContext* ctx,
                      const zerovec::v1::DeleteRequest* req,
                      zerovec::v1::DeleteResponse* resp) override;
  grpc::Status Embed(grpc::ServerContext* ctx,
                     const zerovec::v1::EmbedRequest* req,
                     zerovec::v1::EmbedResponse* resp) override;
  grpc::Status Stats(grpc::ServerContext* ctx,
                     const zerovec::v1::StatsRequest* req,
                     zerovec::v1::StatsResponse* resp) override;
  grpc::Status Compact(grpc::ServerContext* ctx,
                       const zerovec::v1::CompactRequest* req,
                       zerovec::v1::CompactResponse* resp) override;
  grpc::Status Touch(grpc::ServerContext* ctx,
                     const zerovec::v1::TouchRequest* req,
                     zerovec::v1::TouchResponse* resp) override;
  grpc::Status Scan(grpc::ServerContext* ctx,
                    const zerovec::v1::ScanRequest* req,
                    zerovec::v1::ScanResponse* resp) override;

 private:
  // Auth + concurrency limit around `body`; converts the result to
  // grpc::Status.
  grpc::Status Handle(grpc::ServerContext* ctx,
                      const std::function<Status()>& body);

  uint32_t model_dim() const;
  StatusOr<std::shared_ptr<index::Collection>> Lookup(
      const std::string& name) const;
  // Adds the items stored to *upserted and those whose text was embedded
  // truncated to *truncated.
  Status DoUpsert(const zerovec::v1::UpsertRequest& req, uint64_t* upserted,
                  uint64_t* truncated);
  // The collection's description plus what the service knows of it: the
  // model's window (when the model fits it) and texts truncated.
  void FillInfo(const index::Collection& coll,
                zerovec::v1::CollectionInfo* out) const;
  void CountTruncated(const std::string& collection, uint64_t n);
  // Row-major query vectors for `queries` (text ones embedded on the query
  // path).
  StatusOr<std::vector<float>> QueryVectors(
      std::span<const zerovec::v1::Query* const> queries, uint32_t dim);
  // A dense search of text queries on a collection mirrored on the encoder's
  // GPU: embedded into device memory and searched from there. Null when that
  // path does not apply (the caller goes the host way).
  StatusOr<std::optional<std::vector<std::vector<index::Hit>>>>
  SearchTextOnDevice(index::Collection& coll, const index::CollectionInfo& info,
                     std::span<const zerovec::v1::Query* const> queries,
                     index::SearchOptions options);
  // The upsert's row filler: request vectors copied, texts embedded (into the
  // GPU mirror's rows when the collection has one on the encoder's device).
  Status FillRows(const zerovec::v1::UpsertRequest& req, uint32_t dim,
                  std::span<float* const> rows, index::DeviceRowTargets* device,
                  embed::EmbedReport* report);
  StatusOr<std::vector<std::vector<index::Hit>>> DoSearch(
      const std::string& collection,
      std::span<const zerovec::v1::Query* const> queries, int32_t k,
      const zerovec::v1::Filter& filter, bool include_documents,
      int32_t ef_search, const zerovec::v1::Recency& recency,
      zerovec::v1::SearchMode mode, const zerovec::v1::Fusion& fusion);

  index::Database* db_;
  embed::Embedder* embedder_;
  Limits limits_;
  const BearerAuth* auth_;
  Compactor* compactor_;
  SearchCoalescer* coalescer_;
  const Sweeper* sweeper_;
  std::atomic<uint64_t> touched_{0};
  const bool text_queries_on_device_;
  DeviceQueryPool device_queries_;
  std::atomic<int> in_flight_{0};
  const std::chrono::steady_clock::time_point started_;
  OpStatsRecorder embed_stats_;
  OpStatsRecorder search_stats_;
  OpStatsRecorder upsert_stats_;
  // Texts embedded truncated since the start: all, and upserted ones per
  // collection (a dropped collection's count goes with it).
  std::atomic<uint64_t> truncated_texts_{0};
  mutable std::mutex truncated_mu_;
  std::map<std::string, uint64_t> truncated_by_collection_;
};

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_ZEROVEC_SERVICE_H_
