// The writer-side Collection: segment Writer + attribute table + ANN index of
// the current generation, and the meta store shared by the data directory.
//
// Write protocol (crash-safe at every step):
//   1. rows + segment ids written past the committed count (invisible);
//   2. one RocksDB WriteBatch: rows entries, id -> row (with the replaced row);
//   3. Writer::Commit publishes the rows (store-release);
//   4. replaced rows are tombstoned, their meta entries dropped.
//   5. (lexical collections) the records' texts are put into, or their ids
//      removed from, the Xapian index, committed with the segment's stamp.
// Reconcile on open undoes a step-2 batch whose rows never got committed
// (restoring the replaced row) and tombstones committed rows that no id points
// at; then, if the lexical index's stamp is not the segment's, it re-indexes
// every live text it lacks or holds an older version of and removes every id
// that is not live (ReconcileLexical). Deletes follow the same order: meta
// store, tombstones, lexical index.
#ifndef ZEROVEC_INDEX_COLLECTION_IMPL_H_
#define ZEROVEC_INDEX_COLLECTION_IMPL_H_

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>

#include "index/ann_index.h"
#include "index/collection.h"
#include "index/filter.h"
#include "index/gpu_mirror.h"
#include "index/lexical_index.h"
#include "index/meta_store.h"
#include "index/rwlock.h"
#include "shm/segment.h"

namespace zv::index {

// "gen.000003": the segment directory of a generation.
std::string GenerationDirName(uint64_t generation);
// Points <root>/CURRENT at a generation (write temp + atomic rename).
Status WriteCurrent(const std::filesystem::path& root, uint64_t generation);

class CollectionImpl : public Collection {
 public:
  // Creates generation 1 on disk and in the catalog; `kind` is what
  // ValidateCollectionOptions parsed from options.index.descriptor.
  static StatusOr<std::shared_ptr<CollectionImpl>> Create(
      std::shared_ptr<MetaStore> store, const std::filesystem::path& root,
      const std::string& name, const CollectionOptions& options,
      const IndexKind& kind);
  // Opens the catalog's generation and reconciles it with the meta store.
  static StatusOr<std::shared_ptr<CollectionImpl>> Open(
      std::shared_ptr<MetaStore> store, const std::filesystem::path& root,
      const CollectionMeta& meta);
  ~CollectionImpl() override;

  const std::string& name() const override { return meta_.name; }
  CollectionInfo Describe() const override;
  Status Upsert(std::span<const Record> records,
                std::span<const float> vectors) override;
  Status UpsertInPlace(std::span<const Record> records,
                       const RowFiller& fill) override;
  StatusOr<std::vector<std::vector<Hit>>> Search(
      std::span<const float> queries,
      const SearchOptions& options) const override;
  StatusOr<std::vector<GetResult>> Get(
      std::span<const std::string> ids) const override;
  StatusOr<ScanPage> Scan(const std::string& after_id,
                          size_t limit) const override;
  StatusOr<uint64_t> Delete(std::span<const std::string> ids) override;
  StatusOr<uint64_t> Touch(std::span<const std::string> ids,
                           int64_t expires_at_ms) override;
  StatusOr<uint64_t> SweepExpired(int64_t now_ms) override;
  StatusOr<CompactionResult> Compact() override;
  StatusOr<bool> Contains(const std::string& id) const override;
  StatusOr<std::unique_ptr<BulkAppender>> StartBulkAppend() override;
  Status FinishIndexing(int threads, bool one_graph) override;
  void DeferIndexing() override;

  // After DropCollection: every call fails NOT_FOUND, nothing is saved.
  void MarkDropped();
  // Bytes the index layer holds on the heap (ANN links + attribute table), not
  // rows.
  size_t IndexMemoryBytes() const;
  void set_ann_params(const AnnSearchParams& p) { ann_params_ = p; }
  // Background index work (HNSW pieces), for tests and benchmarks: waits up
  // to `timeout` until nothing is left to build or merge (holds the writer
  // lock meanwhile: writes wait, searches do not).
  bool WaitIndexIdle(std::chrono::milliseconds timeout);
  uint64_t IndexedRows() const;
  size_t IndexPieces() const;
  // Mirrors the collection on the GPU from now on, if it fits `budget`
  // (collection_gpu.cc); otherwise logs why and stays on the CPU.
  // Several budgets: the mirror is split over their devices in stripes of
  // `stripe_rows` rows (index/mirror_split.h).
  void EnableGpu(std::vector<std::shared_ptr<GpuBudget>> budgets,
                 uint64_t stripe_rows = kDefaultStripeRows);
  // Lexical documents re-indexed or removed by reconcile when this collection
  // opened (0: the index was in step), for tests.
  uint64_t lexical_repairs() const { return lexical_repairs_; }

 private:
  friend class BulkAppenderImpl;
  // One segment generation and everything derived from it.
  struct Generation {
    uint64_t number = 0;
    std::filesystem::path dir;
    std::unique_ptr<shm::Writer> writer;
    AttributeTable attrs;
    std::unique_ptr<AnnIndex> ann;  // declared after writer: destroyed first
    // The rows on the GPU (EnableGpu); null: searched on the CPU. Changed
    // only under mu_ held exclusively.
    std::unique_ptr<GenerationMirror> mirror;
  };

  CollectionImpl(std::shared_ptr<MetaStore> store, std::filesystem::path root,
                 CollectionMeta meta, IndexKind kind);
  Status Reconcile(Generation* g);
  Status OpenAnn(Generation* g);
  // The lexical index in <root>/lexical (options.lexical), opened and, after
  // a crash, brought in step with generation `g` (Reconcile first).
  Status OpenLexical(const Generation& g);
  Status ReconcileLexical(const Generation& g);
  // Step 5: puts or removes `records`' texts, or removes `deleted_ids`, then
  // commits with g_'s stamp. A failure leaves the index out of step until the
  // next open; lexical searches then fail UNAVAILABLE. Caller holds write_mu_.
  void UpdateLexical(std::span<const Record> records,
                     std::span<const std::string> deleted_ids);
  std::string LexicalStamp(const Generation& g) const;
  // A write that fails after its rows or tombstones are published never
  // reaches step 5: no later stamp may claim the index is in step.
  Status MarkLexicalStaleOnError(Status s) {
    if (!s.ok() && lexical_writer_) lexical_stale_ = true;
    return s;
  }
  // Rows the filler wrote into the GPU mirror (DeviceRowTargets), copied into
  // their segment rows; the mirror is told which, for its next CatchUp.
  Status CopyBackDeviceRows(Generation& g, const DeviceRowTargets& device,
                            std::span<float* const> rows);
  Status UpsertImpl(std::span<const Record> records, const RowFiller& fill,
                    bool check_rows);
  // UpsertImpl after validation, with write_mu_ held; applies the default
  // TTL to records without an expiry.
  Status UpsertLocked(std::span<const Record> records, const RowFiller& fill,
                      bool check_rows);
  // The live row `id` names for readers (Get's rule), if any: an upsert in
  // flight still shows its old row. Caller holds mu_ (shared).
  StatusOr<std::optional<uint64_t>> VisibleRow(const std::string& id) const;
  // The delete protocol for `rows` whose entries `batch` removes: metadata
  // first, then tombstones, then the lexical index drops `ids`. Caller holds
  // write_mu_.
  Status CommitDelete(MetaStore::Batch& batch,
                      const std::vector<uint64_t>& rows,
                      const std::vector<std::string>& ids);
  // Steps 2-4 of the write protocol for rows [first, first + n) that are
  // filled and carry their segment ids. Caller holds write_mu_.
  Status PublishRows(uint64_t first, std::span<const Record> records);
  // Step 2 alone (the rows' metadata); returns the rows it replaces. With
  // `ids_new` the caller knows no id is stored, so none is looked up. Any
  // thread: takes no collection lock.
  StatusOr<std::vector<uint64_t>> WriteRowMeta(uint64_t first,
                                               std::span<const Record> records,
                                               bool ids_new);
  // Steps 3-4 after WriteRowMeta. Caller holds write_mu_.
  Status PublishWritten(uint64_t first, std::span<const Record> records,
                        const std::vector<uint64_t>& replaced);
  Status CheckAlive() const;
  // Compaction (compaction.cc): copies the live rows of `old` into `next`
  // and their metadata into `batch` (written by the caller: the commit point);
  // the ids of expired rows it drops go to `expired_ids`.
  Status CopyLiveRows(const Generation& old, Generation* next,
                      MetaStore::Batch* batch,
                      std::vector<std::string>* expired_ids);
  // The expiry an item upserted now gets when it names none: now plus the
  // default TTL, or 0 (never) without one.
  int64_t DefaultExpiry() const {
    const int64_t ttl = meta_.options.default_ttl_ms;
    return ttl > 0 ? NowMs() + ttl : 0;
  }
  // Mirrors `g` if GPU search is on and it fits; logs either way. Caller holds
  // write_mu_ (not mu_: taken to publish the mirror when `g` is g_).
  void BuildMirror(Generation* g);
  // After rows were published and `replaced` tombstoned (mu_ held
  // exclusively): the mirror follows, or is dropped with a log line.
  void MirrorPublished(Generation& g, const std::vector<uint64_t>& replaced);
  void DropMirror(Generation& g, const Status& why);

  std::shared_ptr<MetaStore> store_;
  std::filesystem::path root_;
  CollectionMeta meta_;
  IndexKind kind_;
  AnnSearchParams ann_params_;
  std::shared_ptr<GpuBudget> gpu_;  // set once by EnableGpu, before serving
  // Every device's budget (gpu_ is the first); several: a split mirror.
  std::vector<std::shared_ptr<GpuBudget>> gpu_parts_;
  uint64_t gpu_stripe_rows_ = kDefaultStripeRows;
  mutable std::atomic<uint64_t> gpu_searches_{0};
  std::atomic<uint64_t> gpu_rows_from_device_{0};
  std::atomic<uint64_t> expired_swept_{0};

  std::mutex write_mu_;  // one writer at a time (Upsert/Delete/Compact)
  mutable RwLock mu_;    // readers vs. publication of rows/extents/index
  std::unique_ptr<Generation> g_;  // guarded by mu_ (replaced by Compact)
  // The lexical index (null when off): written under write_mu_, searched by
  // any thread.
  std::unique_ptr<LexicalWriter> lexical_writer_;
  std::unique_ptr<LexicalSearcher> lexical_;
  std::atomic<bool> lexical_stale_{false};
  std::atomic<uint64_t> lexical_documents_{0};
  uint64_t lexical_repairs_ = 0;
  bool dropped_ = false;
};

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_COLLECTION_IMPL_H_
