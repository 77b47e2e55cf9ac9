// A collection: a shm segment of vectors + a FAISS index over it in place +
// metadata in the data directory's RocksDB store. The one public header of
// index/.
//
// Thread-safety: any number of concurrent Search/Get/Describe calls with one
// writer (Upsert/Delete/Compact are serialised inside).
#ifndef ZEROVEC_INDEX_COLLECTION_H_
#define ZEROVEC_INDEX_COLLECTION_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "shm/segment.h"

namespace zv::index {

inline constexpr int kMaxK = 1000;
// HNSW search width when a search names none (SearchOptions::ef_search 0).
inline constexpr int kDefaultEfSearch = 128;
inline constexpr int kMaxEfSearch = 4096;
inline constexpr size_t kMaxIdBytes = 512;
inline constexpr uint32_t kMaxDim = shm::kMaxDim;

// Which FAISS index searches the collection. Named by FAISS-style descriptor
// strings: "Flat", "HNSW32", "IVF1024,PQ32" (the same string in CLI, API and on
// disk).
struct IndexSpec {
  std::string descriptor = "Flat";
};

struct CollectionOptions {
  uint32_t dim = 0;
  shm::Metric metric = shm::Metric::kInnerProduct;
  IndexSpec index;
  uint64_t rows_per_extent = 65536;
  std::optional<std::string> group;  // files 0640 + this group, else 0600
  bool sync = false;                 // fsync before acknowledging writes
  // Items upserted without an expiry expire this long after their upsert;
  // 0: never (issue 17: agent memories, semantic caches).
  int64_t default_ttl_ms = 0;
  // Keep a lexical (Xapian BM25) index of the texts beside the segment, for
  // SearchMode::kLexical and kHybrid. Off by default: it costs ingest time
  // and disk, and a vector-only collection has no text to index.
  bool lexical = false;
};

// The one clock rule for expiry, shared by the writer and attached readers:
// a row whose expires_at_ms is set (> 0) is expired once the wall clock
// (milliseconds since the Unix epoch) reaches it.
int64_t NowMs();
inline bool IsExpired(int64_t expires_at_ms, int64_t now_ms) {
  return expires_at_ms > 0 && expires_at_ms <= now_ms;
}

// One item of an upsert. The vector travels separately (see
// Collection::Upsert).
struct Record {
  std::string id;    // external id, 1..kMaxIdBytes bytes
  std::string text;  // the document; may be empty for vector-only items
  std::string ns;    // namespace (agent / session); may be empty
  std::map<std::string, std::string> metadata;
  int64_t timestamp_ms = 0;
  // When the item expires (ms since the Unix epoch, see IsExpired); 0: the
  // collection's default TTL from the upsert, or never without one.
  int64_t expires_at_ms = 0;
};

// Restricts a search. All present conditions must hold (AND).
struct Filter {
  std::optional<std::string> ns;
  std::map<std::string, std::string> metadata_equals;
  std::optional<int64_t> min_timestamp_ms;  // inclusive
  std::optional<int64_t> max_timestamp_ms;  // inclusive
  bool empty() const {
    return !ns && metadata_equals.empty() && !min_timestamp_ms &&
           !max_timestamp_ms;
  }
};

// Time-aware ranking: the best `candidates` rows by similarity are re-scored
// exactly with a recency term and the best k of them returned. With age =
// now - timestamp (0 for a future timestamp) and r = 0.5^(age / half_life):
//   weight == 0: score = similarity * r (inner product)
//                        distance / r   (L2: lower stays better)
//   weight  > 0: score = similarity + weight * r (inner product)
//                        distance - weight * r   (L2)
struct Recency {
  int64_t half_life_ms = 0;  // > 0
  double weight = 0;
  int64_t now_ms = 0;  // the age reference; 0: NowMs()
  int candidates = 0;  // [k, kMaxK]; 0: max(10 k, 100) capped at kMaxK
};
// What a search ranks by. Lexical and hybrid need the query's text
// (SearchOptions::query_texts) and a collection with a lexical index.
enum class SearchMode { kDense, kLexical, kHybrid };

// Reciprocal-rank fusion of the dense and the lexical ranking (hybrid mode):
//   score(d) = dense_weight / (rrf_k + dense_rank(d))
//            + lexical_weight / (rrf_k + lexical_rank(d))
// with ranks from 1 and a term left out where d is not in that list's top
// `depth`. rrf_k 60 is the constant of Cormack et al. (2009).
struct FusionOptions {
  double rrf_k = 60;
  double dense_weight = 1;
  double lexical_weight = 1;
  // Candidates taken from each list, [k, kMaxK]; 0: max(k, kDefaultDepth).
  int depth = 0;
};
inline constexpr int kDefaultFusionDepth = 100;

struct SearchOptions {
  int k = 10;
  SearchMode mode = SearchMode::kDense;
  // The queries' texts (lexical: one per query; hybrid: one per query
  // vector, same order). Dense searches ignore them.
  std::vector<std::string> query_texts;
  FusionOptions fusion;
  Filter filter;
  bool include_documents = false;
  // HNSW candidate-list width, [k, kMaxEfSearch]; 0 = kDefaultEfSearch.
  // Wider: higher recall, slower. Other indexes ignore it.
  int ef_search = 0;
  std::optional<Recency> recency;
  // The same queries already in device memory of CUDA device
  // `device_queries_device` (e.g. text queries a GPU encoder embedded), nq
  // rows of shm::RowStrideFor(dim) floats, zero padded. A search the
  // collection's GPU mirror on that device answers reads them there; every
  // other path uses the host queries. Must stay valid during the call.
  const float* device_queries = nullptr;
  int device_queries_device = -1;
};

struct Hit {
  std::string id;
  float score =
      0;  // inner product (higher is better) or squared L2 (lower is better)
  Record record;  // id, ns, timestamp always; text and metadata if
                  // include_documents
  // Ranks (from 1) in the dense and lexical candidate lists; 0: not in it.
  // Lexical mode: score is the BM25 weight; hybrid: the fused RRF score
  // (higher is better for every metric).
  uint32_t dense_rank = 0;
  uint32_t lexical_rank = 0;
};

struct GetResult {
  Record record;
  std::vector<float> vector;
};

// One page of Collection::Scan.
struct ScanPage {
  std::vector<GetResult> items;
  // The last id the page looked at: the next page starts after it. Empty
  // when the scan is done.
  std::string last_id;
};

struct CollectionInfo {
  std::string name;
  uint32_t dim = 0;
  shm::Metric metric = shm::Metric::kInnerProduct;
  std::string index_descriptor;
  uint64_t rows = 0;       // committed rows incl. tombstoned
  uint64_t live_rows = 0;  // rows - tombstones
  uint64_t tombstones = 0;
  uint64_t generation = 0;
  std::filesystem::path segment_dir;
  // Searched on the GPU from a mirror of the rows in device memory
  // (DatabaseOptions::gpu), and the device bytes the mirror holds.
  bool gpu_mirrored = false;
  uint64_t gpu_mirror_bytes = 0;
  uint64_t gpu_searches = 0;  // Search calls answered on the GPU, ever
  // Rows whose vectors a GPU encoder wrote straight into the mirror.
  uint64_t gpu_rows_from_device = 0;
  uint32_t row_stride = 0;     // floats between segment rows (dim, padded)
  int64_t default_ttl_ms = 0;  // CollectionOptions::default_ttl_ms
  // Expired rows the sweep tombstoned since the collection was opened.
  uint64_t expired_swept = 0;
  bool lexical = false;            // has a lexical index
  uint64_t lexical_documents = 0;  // documents in it (items with text)
};

// What one Compact() did.
struct CompactionResult {
  uint64_t rows_before = 0;  // committed rows incl. tombstoned
  uint64_t rows_after = 0;   // live rows carried into the new generation
  uint64_t tombstones_removed = 0;
  uint64_t generation = 0;  // the new generation
  double seconds = 0;
};

// The GPU mirror's place for the rows an upsert writes (a collection searched
// on the GPU): a GPU encoder can store a row there instead of in the segment,
// so the vector it computed stays on the device; the collection then copies
// it into the segment itself.
struct DeviceRowTargets {
  int cuda_device = -1;
  uint32_t row_stride = 0;  // floats between device rows
  // Makes the device rows (a cudaMemset and a sync): called on first use, so
  // an upsert that does not embed on this device pays nothing for it.
  std::function<StatusOr<std::vector<float*>>()> stage;
  std::vector<float*> rows;  // device row i: row_stride floats, zeroed
  // Set by the filler for each row it wrote on the device (and not in its
  // segment row).
  std::vector<uint8_t> written;

  // Makes `rows` and `written` ready (once). An error leaves them empty: the
  // filler then writes the segment rows, and the mirror catches up from them.
  Status Stage() {
    if (!rows.empty()) return OkStatus();
    if (!stage) return FailedPreconditionError("no device rows to stage");
    ZV_ASSIGN_OR_RETURN(rows, stage());
    written.assign(rows.size(), 0);
    return OkStatus();
  }
};

// Fills `rows.size()` writable rows (each `dim` floats, in segment memory) in
// place. Used by the embedder to write vectors straight into the segment.
// `device` is null unless the collection is mirrored on a GPU.
using RowFiller = std::function<Status(std::span<float* const> rows,
                                       DeviceRowTargets* device)>;

// Rows reserved by BulkAppender::Reserve: rows[i] is row first + i, dim
// floats to fill in place. The flags are the appender's bookkeeping.
struct ReservedRows {
  uint64_t first = 0;
  std::vector<float*> rows;
  bool independent = false;   // no id repeats an earlier one: stage anywhere
  bool staged = false;        // rows checked, segment ids set
  bool meta_written = false;  // metadata already in the store
};

// Bulk loading with the stages overlapped:
//   Reserve(records)  rows past every earlier reservation, in call order;
//   (fill the rows in place from any thread, e.g. by a GPU encoder)
//   Stage(rows, ...)  optional, any thread, concurrently for different
//                     reservations: checks the rows and, where no id repeats
//                     an earlier reservation's, writes their metadata;
//   Commit(rows, ...) in reservation order: stages if not yet done, then
//                     publishes, exactly as Upsert would (existing ids
//                     replaced);
//   Finish()          makes it durable.
// On an error nothing of that batch is visible and the appender refuses
// further calls. The appender holds the collection's writer lock while it
// lives: other writers wait, searches do not. Destroy it on the thread that
// created it, before the collection.
class BulkAppender {
 public:
  virtual ~BulkAppender() = default;
  virtual StatusOr<ReservedRows> Reserve(std::span<const Record> records) = 0;
  virtual Status Stage(ReservedRows& rows, std::span<const Record> records) = 0;
  virtual Status Commit(ReservedRows& rows,
                        std::span<const Record> records) = 0;
  // The segment's writable extent mappings so far (reserved rows lie in
  // them), e.g. to register with a GPU encoder so it stores rows directly.
  virtual std::vector<shm::Writer::MappedRange> MappedRanges() const = 0;
  // Flushes the metadata of everything committed to disk (the RocksDB
  // memtables), so a finished load does not depend on replaying the log. The
  // destructor calls it.
  virtual Status Finish() = 0;
};

class Collection {
 public:
  virtual ~Collection() = default;

  virtual const std::string& name() const = 0;
  virtual CollectionInfo Describe() const = 0;

  // Upserts records with their vectors (row-major, records.size() x dim).
  // Checks everything first (dimension, NaN/Inf, empty/oversized/duplicate
  // ids); on error nothing changes. An existing id is replaced (old row
  // tombstoned).
  virtual Status Upsert(std::span<const Record> records,
                        std::span<const float> vectors) = 0;
  // Same, but the vectors are written in place into the segment by `fill`.
  virtual Status UpsertInPlace(std::span<const Record> records,
                               const RowFiller& fill) = 0;

  // Queries are row-major, nq x dim. Result i holds up to k hits for query i,
  // best first.
  virtual StatusOr<std::vector<std::vector<Hit>>> Search(
      std::span<const float> queries, const SearchOptions& options) const = 0;
  // Missing ids are skipped; the result is in request order.
  virtual StatusOr<std::vector<GetResult>> Get(
      std::span<const std::string> ids) const = 0;
  // Lists the items a page at a time, in id byte order: up to `limit` ids
  // after `after_id` ("" for the first page), each as Get returns it (ids
  // not live or expired are skipped, so a page may hold fewer items). Items
  // changed between pages come as they are when their page is read. For
  // copying a collection (a cluster rebuilding a replica) and exports.
  virtual StatusOr<ScanPage> Scan(const std::string& after_id,
                                  size_t limit) const = 0;
  // Returns how many of the ids existed and were deleted.
  virtual StatusOr<uint64_t> Delete(std::span<const std::string> ids) = 0;
  // Renews items: each live, unexpired id gets `expires_at_ms` (0: now plus
  // the default TTL, or never without one). Stored as a replacement row with
  // the same vector and record, so readers see it through the usual publish
  // protocol. Returns how many ids were renewed.
  virtual StatusOr<uint64_t> Touch(std::span<const std::string> ids,
                                   int64_t expires_at_ms) = 0;
  // Tombstones every live row expired at `now_ms` (the background sweep;
  // compaction then reclaims the space). Returns how many.
  virtual StatusOr<uint64_t> SweepExpired(int64_t now_ms) = 0;
  // Rewrites the collection without tombstoned rows as a new segment
  // generation. Searches keep answering from the old generation until the
  // switch; other writers wait.
  virtual StatusOr<CompactionResult> Compact() = 0;
  // True if `id` is stored (for resumable bulk builds).
  virtual StatusOr<bool> Contains(const std::string& id) const = 0;
  // Starts a bulk load (see BulkAppender).
  virtual StatusOr<std::unique_ptr<BulkAppender>> StartBulkAppend() = 0;
  // Waits until background index work (HNSW pieces, built on their own
  // thread) has caught up with the committed rows, letting it use `threads`
  // threads meanwhile (0: as configured). Writers wait too; searches do not.
  // For the end of a bulk load, so a server starts with the index built.
  // `one_graph` (HNSW): seal every piece and the tail into one graph, built
  // anew (searches several times faster than pieces at the same recall;
  // costs one graph build; later writes grow new pieces again).
  virtual Status FinishIndexing(int threads, bool one_graph) {
    return OkStatus();
  }
  // For a bulk load that FinishIndexing will seal into one graph: until then
  // the index builds nothing for the rows written (searches scan them
  // exactly), so the graph is built once, at the seal, on every core (at 1M
  // rows the pieces built meanwhile were most of the load's time and were
  // all thrown away by the seal; bench/RESULTS.md, issue 21).
  virtual void DeferIndexing() {}
};

// GPU search (issue 13): each collection whose rows fit the memory budget gets
// a mirror of them in device memory, kept in step with every write and rebuilt
// by compaction, and its searches run there, exactly (an HNSW collection's
// too: exact on the GPU is faster than the graph on the CPU). The rest search
// on the CPU; each one that does not fit says so in one log line.
struct GpuSearchOptions {
  bool enabled = false;
  int device = 0;
  // Several devices (issue 19): each collection's mirror is split over them
  // in row stripes (dealt round-robin, so appends stay balanced), each part
  // with its own budget of `memory_bytes` on its device; a search runs on
  // every part at once and the parts' top-k lists are merged on the host.
  // Empty or one entry: the single-device mirror on `device` (or devices[0]).
  // A device may repeat (tests split over cuda:0,cuda:0).
  std::vector<int> devices;
  // Rows per stripe of a split mirror; 0: 65,536. A multiple of 64.
  uint64_t stripe_rows = 0;
  // Budget for all mirrors (rows, room to grow, search scratch); 0: 80 % of
  // the device's free memory when the database opens.
  uint64_t memory_bytes = 0;
  // Receives the log lines (mirror built, fallback to the CPU); unset: stderr.
  std::function<void(const std::string&)> log;
};

struct DatabaseOptions {
  // Shares the data directory with this Unix group (`--group`), so co-located
  // readers running as other users in it can attach: the data dir and
  // everything in it is chgrp'ed to it (directories 02750, files 0640, also
  // what an earlier run made), new collections default to it, and the process
  // umask becomes 027 because RocksDB creates its files 0644 & ~umask. The
  // caller must be in the group (or root). Unset: files stay owner-only.
  std::optional<std::string> group;
  // Open fails FAILED_PRECONDITION when enabled without CUDA or the device.
  GpuSearchOptions gpu;
};

// All collections of one data directory, sharing one RocksDB meta store.
class Database {
 public:
  virtual ~Database() = default;

  // Opens (creating if needed) the data directory.
  static StatusOr<std::unique_ptr<Database>> Open(
      const std::filesystem::path& data_dir,
      const DatabaseOptions& options = {});

  virtual StatusOr<std::shared_ptr<Collection>> CreateCollection(
      const std::string& name, const CollectionOptions& options) = 0;
  virtual Status DropCollection(const std::string& name) = 0;
  virtual std::vector<std::string> ListCollections() const = 0;
  // NOT_FOUND for an unknown collection.
  virtual StatusOr<std::shared_ptr<Collection>> GetCollection(
      const std::string& name) const = 0;
};

// The committed rows of an attached collection as of its last Refresh, in
// place in the segment's read-only mappings (no copy). The segment grows in
// extents of geometric sizes, so rows come as one block per extent. `mapping`
// owns the mappings: the pointers stay valid while any copy of it lives, even
// after the AttachedCollection is destroyed or has moved to a newer generation.
struct AttachedRows {
  std::shared_ptr<const shm::SegmentView> mapping;
  uint32_t dim = 0;
  uint32_t row_stride = 0;  // floats between consecutive rows (>= dim)
  uint64_t rows = 0;
  std::vector<shm::RowBlock> blocks;  // cover rows [0, rows) in order
};

// A co-located, read-only view of a collection that another process (the
// server) writes: attaches the segment read-only and opens the meta store as a
// RocksDB secondary. Searches committed rows as the writer does: an HNSW
// collection through the writer's piece files (mapped read-only, re-read on
// Refresh) plus an exact scan of the rest; other indexes exactly (flat).
class AttachedCollection {
 public:
  virtual ~AttachedCollection() = default;
  static StatusOr<std::unique_ptr<AttachedCollection>> Attach(
      const std::filesystem::path& data_dir, const std::string& name);
  // Picks up rows committed and metadata written since the last call.
  virtual Status Refresh() = 0;
  virtual CollectionInfo Describe() const = 0;
  virtual StatusOr<std::vector<std::vector<Hit>>> Search(
      std::span<const float> queries, const SearchOptions& options) const = 0;
  // The rows of the last Refresh, in place (see AttachedRows).
  virtual AttachedRows Rows() const = 0;
  // One flag per row of the last Refresh (1: deleted or replaced), read from
  // the segment's tombstone bits when called.
  virtual std::vector<uint8_t> Tombstones() const = 0;
  // The external id of each row of the last Refresh ("" for a row whose
  // metadata the writer never stored, e.g. one it crashed while writing).
  virtual std::vector<std::string> Ids() const = 0;
};

// Collection names: 1..64 chars of [A-Za-z0-9_-], not starting with '-'.
Status ValidateCollectionName(const std::string& name);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_COLLECTION_H_
