// Over 600 lines: CollectionImpl's write protocol, recovery and search share
// its private state (compaction: compaction.cc; expiry: collection_expiry.cc;
// attached readers: attached.cc).
#include "index/collection_impl.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "base/file.h"
#include "base/u64_set.h"
#include "index/hybrid_search.h"
#include "index/searcher.h"
#include "index/validate.h"

namespace zv::index {

std::string GenerationDirName(uint64_t generation) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "gen.%06llu",
                static_cast<unsigned long long>(generation));
  return buf;
}

Status WriteCurrent(const std::filesystem::path& root, uint64_t generation) {
  // Not synced: CURRENT only mirrors the catalog's generation (the commit
  // point, synced in RocksDB), and every Open rewrites it from there.
  return WriteFileAtomically(
      root / "CURRENT", GenerationDirName(generation) + "\n", {.sync = false});
}

namespace {

// How long a write waits for a lagging index before UNAVAILABLE.
constexpr auto kAdmitTimeout = std::chrono::seconds(30);

// `records`, or copies in `*storage` where those without an expiry get `at`
// (0: nothing to apply).
std::span<const Record> WithDefaultExpiry(std::span<const Record> records,
                                          int64_t at,
                                          std::vector<Record>* storage) {
  if (at == 0 || std::none_of(records.begin(), records.end(),
                              [](auto& r) { return r.expires_at_ms == 0; })) {
    return records;
  }
  storage->assign(records.begin(), records.end());
  for (Record& r : *storage) {
    if (r.expires_at_ms == 0) r.expires_at_ms = at;
  }
  return *storage;
}

shm::SegmentOptions SegmentOptionsOf(const CollectionOptions& o) {
  shm::SegmentOptions s;
  s.dim = o.dim;
  s.metric = o.metric;
  s.rows_per_extent = o.rows_per_extent;
  s.group = o.group;
  s.sync = o.sync;
  return s;
}

}  // namespace

CollectionImpl::CollectionImpl(std::shared_ptr<MetaStore> store,
                               std::filesystem::path root, CollectionMeta meta,
                               IndexKind kind)
    : store_(std::move(store)),
      root_(std::move(root)),
      meta_(std::move(meta)),
      kind_(kind) {}

CollectionImpl::~CollectionImpl() {
  // Whatever the index has not persisted yet; failure only costs a rebuild.
  if (!dropped_ && g_ && g_->ann) (void)g_->ann->Save();
}

bool CollectionImpl::WaitIndexIdle(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> writer_lock(write_mu_);  // no Compact meanwhile
  return !g_->ann || g_->ann->WaitIdle(timeout);
}

Status CollectionImpl::FinishIndexing(int threads, bool one_graph) {
  std::lock_guard<std::mutex> writer_lock(write_mu_);  // no Compact meanwhile
  ZV_RETURN_IF_ERROR(CheckAlive());
  if (!g_->ann) return OkStatus();
  if (threads > 0) g_->ann->SetBuildThreads(threads);
  while (!g_->ann->WaitIdle(std::chrono::minutes(10))) {
  }
  Status flushed = g_->ann->Flush(one_graph);
  g_->ann->SetBuildThreads(0);
  return flushed;
}

void CollectionImpl::DeferIndexing() {
  std::lock_guard<std::mutex> writer_lock(write_mu_);
  if (!dropped_ && g_->ann) g_->ann->DeferIndexing();
}

uint64_t CollectionImpl::IndexedRows() const {
  std::shared_lock<RwLock> l(mu_);
  return g_->ann ? g_->ann->indexed() : 0;
}

size_t CollectionImpl::IndexPieces() const {
  std::shared_lock<RwLock> l(mu_);
  return g_->ann ? g_->ann->PieceCount() : 0;
}

StatusOr<std::shared_ptr<CollectionImpl>> CollectionImpl::Create(
    std::shared_ptr<MetaStore> store, const std::filesystem::path& root,
    const std::string& name, const CollectionOptions& options,
    const IndexKind& kind) {
  CollectionMeta meta{name, options, 1};
  std::error_code ec;
  std::filesystem::remove_all(root, ec);  // leftovers of a create that crashed
  auto g = std::make_unique<Generation>();
  g->number = 1;
  g->dir = root / GenerationDirName(1);
  ZV_ASSIGN_OR_RETURN(g->writer,
                      shm::Writer::Create(g->dir, SegmentOptionsOf(options)));
  g->writer->SetGeneration(1);
  ZV_RETURN_IF_ERROR(WriteCurrent(root, 1));
  auto batch = store->NewBatch();
  batch.PutCollection(meta);
  ZV_RETURN_IF_ERROR(store->Write(batch, /*sync=*/true));
  std::shared_ptr<CollectionImpl> c(
      new CollectionImpl(std::move(store), root, meta, kind));
  ZV_RETURN_IF_ERROR(c->OpenAnn(g.get()));
  ZV_RETURN_IF_ERROR(c->OpenLexical(*g));
  c->g_ = std::move(g);
  return c;
}

StatusOr<std::shared_ptr<CollectionImpl>> CollectionImpl::Open(
    std::shared_ptr<MetaStore> store, const std::filesystem::path& root,
    const CollectionMeta& meta) {
  ZV_ASSIGN_OR_RETURN(
      IndexKind kind,
      ParseDescriptor(meta.options.index.descriptor, meta.options.dim));
  std::shared_ptr<CollectionImpl> c(
      new CollectionImpl(std::move(store), root, meta, kind));
  auto g = std::make_unique<Generation>();
  g->number = meta.generation;
  g->dir = root / GenerationDirName(meta.generation);
  // Other generations are a crashed compaction's output or a retired segment.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string fname = entry.path().filename().string();
    if (fname.rfind("gen.", 0) == 0 && entry.path() != g->dir) {
      std::filesystem::remove_all(entry.path(), ec);
    }
  }
  auto writer = shm::Writer::Open(g->dir, meta.options.sync);
  if (!writer.ok())
    return writer.status().WithContext("collection '" + meta.name + "'");
  g->writer = std::move(writer).value();
  ZV_RETURN_IF_ERROR(WriteCurrent(root, meta.generation));
  ZV_RETURN_IF_ERROR(c->Reconcile(g.get()));
  ZV_RETURN_IF_ERROR(c->OpenAnn(g.get()));
  ZV_RETURN_IF_ERROR(c->OpenLexical(*g));
  c->g_ = std::move(g);
  return c;
}

Status CollectionImpl::OpenAnn(Generation* g) {
  ZV_ASSIGN_OR_RETURN(g->ann, OpenAnnIndex(kind_, *g->writer, g->dir));
  return OkStatus();
}

Status CollectionImpl::Reconcile(Generation* g) {
  const std::string& name = meta_.name;
  shm::Writer& w = *g->writer;
  const uint64_t committed = w.committed();
  auto fix = store_->NewBatch();
  // Attributes of committed rows; entries past `committed` belong to a batch
  // whose rows were never published.
  ZV_RETURN_IF_ERROR(
      store_->ScanRows(name, g->number, 0, [&](uint64_t row, Record r) {
        if (row >= committed || HashId(r.id) != w.Id(row)) {
          fix.DeleteRow(name, g->number, row);
          return OkStatus();
        }
        while (g->attrs.size() < row) g->attrs.AppendAbsent();
        g->attrs.Append(r);
        return OkStatus();
      }));
  while (g->attrs.size() < committed) g->attrs.AppendAbsent();

  std::vector<bool> referenced(committed, false);
  auto owns = [&](uint64_t row, const std::string& id) {
    return row < committed && g->attrs.present(row) && g->attrs.id(row) == id &&
           !w.IsTombstoned(row);
  };
  ZV_RETURN_IF_ERROR(
      store_->ScanIds(name, [&](const std::string& id, const IdEntry& e) {
        if (e.generation == g->number && owns(e.row, id)) {
          referenced[e.row] = true;
          if (e.prev_row)
            fix.PutId(name, id, IdEntry{g->number, e.row, std::nullopt});
        } else if (e.generation == g->number && e.row >= committed &&
                   e.prev_row && owns(*e.prev_row, id)) {
          // The replacing batch never committed: the replaced row is still the
          // record.
          referenced[*e.prev_row] = true;
          fix.PutId(name, id, IdEntry{g->number, *e.prev_row, std::nullopt});
        } else {
          fix.DeleteId(name, id);
        }
        return OkStatus();
      }));
  for (uint64_t row = 0; row < committed; ++row) {
    if (referenced[row]) continue;
    if (!w.IsTombstoned(row)) ZV_RETURN_IF_ERROR(w.Tombstone(row));
    if (g->attrs.present(row)) fix.DeleteRow(name, g->number, row);
  }
  if (fix.Count() > 0) ZV_RETURN_IF_ERROR(store_->Write(fix, /*sync=*/true));
  return OkStatus();
}

Status CollectionImpl::CheckAlive() const {
  if (dropped_)
    return NotFoundError("collection '" + meta_.name + "' was dropped");
  return OkStatus();
}

void CollectionImpl::MarkDropped() {
  std::unique_ptr<AnnIndex> ann;
  {
    std::lock_guard<std::mutex> w(write_mu_);
    std::unique_lock<RwLock> l(mu_);
    dropped_ = true;
    if (g_) ann = std::move(g_->ann);  // searches check dropped_ first
    if (g_) g_->mirror.reset();        // its device memory back to the budget
    lexical_.reset();                  // its files go with the collection's
    lexical_writer_.reset();
  }
  // Stops the piece builder before the files go, outside the locks: a build
  // may be finishing its file.
  ann.reset();
}

CollectionInfo CollectionImpl::Describe() const {
  std::shared_lock<RwLock> l(mu_);
  CollectionInfo info;
  info.name = meta_.name;
  info.dim = meta_.options.dim;
  info.metric = meta_.options.metric;
  info.index_descriptor = meta_.options.index.descriptor;
  info.rows = g_->writer->committed();
  info.tombstones = g_->writer->TombstoneCount();
  info.live_rows = info.rows - std::min(info.rows, info.tombstones);
  info.generation = g_->number;
  info.segment_dir = g_->dir;
  info.row_stride = g_->writer->info().row_stride;
  info.gpu_mirrored = g_->mirror != nullptr;
  if (g_->mirror) info.gpu_mirror_bytes = g_->mirror->charged_bytes();
  info.gpu_searches = gpu_searches_.load(std::memory_order_relaxed);
  info.gpu_rows_from_device =
      gpu_rows_from_device_.load(std::memory_order_relaxed);
  info.default_ttl_ms = meta_.options.default_ttl_ms;
  info.expired_swept = expired_swept_.load(std::memory_order_relaxed);
  info.lexical = meta_.options.lexical;
  info.lexical_documents = lexical_documents_.load(std::memory_order_relaxed);
  return info;
}

size_t CollectionImpl::IndexMemoryBytes() const {
  std::shared_lock<RwLock> l(mu_);
  return g_->attrs.MemoryBytes() + (g_->ann ? g_->ann->MemoryBytes() : 0);
}

Status CollectionImpl::Upsert(std::span<const Record> records,
                              std::span<const float> vectors) {
  const uint32_t dim = meta_.options.dim;
  ZV_RETURN_IF_ERROR(ValidateVectors(vectors, records.size(), dim, "vectors"));
  return UpsertImpl(
      records,
      [&](std::span<float* const> rows, DeviceRowTargets*) {
        for (size_t i = 0; i < rows.size(); ++i) {
          std::memcpy(rows[i], vectors.data() + i * dim, dim * sizeof(float));
        }
        return OkStatus();
      },
      /*check_rows=*/false);
}

Status CollectionImpl::UpsertInPlace(std::span<const Record> records,
                                     const RowFiller& fill) {
  if (!fill) return InvalidArgumentError("fill: no row filler given");
  return UpsertImpl(records, fill, /*check_rows=*/true);
}

Status CollectionImpl::UpsertImpl(std::span<const Record> records,
                                  const RowFiller& fill, bool check_rows) {
  ZV_RETURN_IF_ERROR(ValidateRecords(records));
  if (records.empty()) return CheckAlive();
  std::lock_guard<std::mutex> writer_lock(write_mu_);
  ZV_RETURN_IF_ERROR(CheckAlive());
  return UpsertLocked(records, fill, check_rows);
}

Status CollectionImpl::UpsertLocked(std::span<const Record> records,
                                    const RowFiller& fill, bool check_rows) {
  std::vector<Record> stamped;
  records = WithDefaultExpiry(records, DefaultExpiry(), &stamped);
  Generation& g = *g_;
  // Before anything is written: a write refused here leaves no trace.
  if (g.ann) ZV_RETURN_IF_ERROR(g.ann->AdmitWrite(kAdmitTimeout));
  shm::Writer& w = *g.writer;
  const uint32_t dim = meta_.options.dim, stride = w.info().row_stride;
  const uint64_t first = w.committed(), n = records.size();
  {
    std::unique_lock<RwLock> l(mu_);  // may add an extent
    ZV_RETURN_IF_ERROR(w.Reserve(n));
  }
  // 1. Rows past the committed count: invisible to every reader until Commit.
  std::vector<float*> rows(n);
  for (uint64_t i = 0; i < n; ++i) rows[i] = w.MutableRow(first + i);
  // On a GPU host the encoder may write rows into the mirror (issue 13).
  // Whatever happens below, the mirror's note of them lives one publish.
  struct ForgetStaged {
    Generation& g;
    ~ForgetStaged() {
      if (g.mirror) g.mirror->MarkStaged({});
    }
  } forget_staged{g};
  DeviceRowTargets device;
  const bool stage = g.mirror && g.mirror->can_stage();
  if (stage) {
    device.cuda_device = g.mirror->device();
    device.row_stride = g.mirror->row_stride();
    device.stage = [&g, first, n]() -> StatusOr<std::vector<float*>> {
      ZV_ASSIGN_OR_RETURN(float* base, g.mirror->StageRows(first, n));
      std::vector<float*> out(n);
      for (uint64_t i = 0; i < n; ++i) {
        out[i] = base + i * g.mirror->row_stride();
      }
      return out;
    };
  }
  ZV_RETURN_IF_ERROR(fill(rows, stage ? &device : nullptr));
  ZV_RETURN_IF_ERROR(CopyBackDeviceRows(g, device, rows));
  for (uint64_t i = 0; i < n; ++i) {
    if (check_rows) {
      ZV_RETURN_IF_ERROR(ValidateVectors(std::span<const float>(rows[i], dim),
                                         1, dim,
                                         "rows[" + std::to_string(i) + "]"));
    }
    std::fill(rows[i] + dim, rows[i] + stride, 0.0f);
    w.SetId(first + i, HashId(records[i].id));
  }
  Status published = PublishRows(first, records);
  if (published.ok()) {
    gpu_rows_from_device_ +=
        std::count(device.written.begin(), device.written.end(), 1);
  }
  return published;
}

Status CollectionImpl::CopyBackDeviceRows(Generation& g,
                                          const DeviceRowTargets& device,
                                          std::span<float* const> rows) {
  const auto first_written =
      std::find(device.written.begin(), device.written.end(), 1);
  if (first_written == device.written.end()) return OkStatus();
  const uint64_t lo = first_written - device.written.begin();
  const uint64_t hi =
      device.written.rend() -
      std::find(device.written.rbegin(), device.written.rend(), 1);
  const uint32_t dim = meta_.options.dim, stride = g.mirror->row_stride();
  // One copy of the span that holds them, then each row into the segment.
  std::vector<float> host((hi - lo) * stride);
  ZV_RETURN_IF_ERROR(g.mirror->ReadStaged(lo, hi - lo, host.data()));
  for (uint64_t i = lo; i < hi; ++i) {
    if (device.written[i]) {
      std::memcpy(rows[i], host.data() + (i - lo) * stride, dim * 4);
    }
  }
  g.mirror->MarkStaged(device.written);
  return OkStatus();
}

Status CollectionImpl::PublishRows(uint64_t first,
                                   std::span<const Record> records) {
  ZV_ASSIGN_OR_RETURN(std::vector<uint64_t> replaced,
                      WriteRowMeta(first, records, /*ids_new=*/false));
  return PublishWritten(first, records, replaced);
}

StatusOr<std::vector<uint64_t>> CollectionImpl::WriteRowMeta(
    uint64_t first, std::span<const Record> records, bool ids_new) {
  Generation& g = *g_;
  const std::string& name = meta_.name;
  const uint64_t n = records.size();
  // 2. Metadata, durable before the rows become visible.
  auto batch = store_->NewBatch();
  std::vector<uint64_t> replaced;
  for (uint64_t i = 0; i < n; ++i) {
    IdEntry e{g.number, first + i, std::nullopt};
    if (!ids_new) {
      ZV_ASSIGN_OR_RETURN(auto old, store_->GetId(name, records[i].id));
      if (old && old->generation == g.number && old->row < first) {
        e.prev_row = old->row;
        replaced.push_back(old->row);
      }
    }
    batch.PutRow(name, g.number, first + i, records[i]);
    batch.PutId(name, records[i].id, e);
  }
  ZV_RETURN_IF_ERROR(store_->Write(batch, meta_.options.sync));
  return replaced;
}

Status CollectionImpl::PublishWritten(uint64_t first,
                                      std::span<const Record> records,
                                      const std::vector<uint64_t>& replaced) {
  Generation& g = *g_;
  shm::Writer& w = *g.writer;
  const std::string& name = meta_.name;
  const uint64_t n = records.size();
  // 3. Publish; 4. retire the replaced rows.
  {
    std::unique_lock<RwLock> l(mu_);
    Status s = w.Commit(first + n);
    if (!s.ok()) {
      // Undo step 2 so the ids point at their old rows again (reconcile would
      // too).
      auto undo = store_->NewBatch();
      for (uint64_t i = 0; i < n; ++i) {
        auto old = store_->GetId(name, records[i].id);
        if (old.ok() && *old && (*old)->prev_row) {
          undo.PutId(name, records[i].id,
                     IdEntry{g.number, *(*old)->prev_row, std::nullopt});
        } else {
          undo.DeleteId(name, records[i].id);
        }
        undo.DeleteRow(name, g.number, first + i);
      }
      (void)store_->Write(undo, meta_.options.sync);
      return s;
    }
    for (const Record& r : records) g.attrs.Append(r);
    for (uint64_t row : replaced) {
      ZV_RETURN_IF_ERROR(MarkLexicalStaleOnError(w.Tombstone(row)));
    }
    MirrorPublished(g, replaced);
    // An ANN failure leaves the new rows to the exact tail search: no data is
    // lost.
    if (g.ann) (void)g.ann->Update(w.committed());
  }
  if (!replaced.empty()) {
    // The replaced rows' entries are garbage now; reconcile would drop them
    // too.
    auto cleanup = store_->NewBatch();
    for (uint64_t row : replaced) cleanup.DeleteRow(name, g.number, row);
    (void)store_->Write(cleanup, /*sync=*/false);
  }
  UpdateLexical(records, {});  // 5.
  return OkStatus();
}

// Independent bulk batches at least this large store their metadata by
// ingesting table files (MetaStore::IngestNewRows): concurrent WriteBatches
// serialize on RocksDB's log and memtables, and that capped GPU builds at
// ~230k rows/s. Smaller ones go through the log (an ingestion has a fixed
// cost: files, a manifest write).
constexpr size_t kIngestMinRows = 4096;

class BulkAppenderImpl : public BulkAppender {
 public:
  BulkAppenderImpl(CollectionImpl& c, std::unique_lock<std::mutex> writer_lock)
      : c_(c), writer_lock_(std::move(writer_lock)) {
    next_row_ = c_.g_->writer->committed();
    // Into a collection that starts empty, an id not seen in an earlier
    // reservation of this load cannot be stored yet: its metadata can be
    // written before earlier batches are, with no lookup.
    fresh_ = next_row_ == 0;
  }

  StatusOr<ReservedRows> Reserve(std::span<const Record> records) override {
    std::lock_guard<std::mutex> lock(mu_);
    ZV_RETURN_IF_ERROR(failed_);
    ZV_RETURN_IF_ERROR(c_.CheckAlive());
    const size_t n = records.size();
    shm::Writer& w = *c_.g_->writer;
    ReservedRows out;
    out.first = next_row_;
    out.rows.resize(n);
    {
      // The collection's lock orders this against Commit's publication: both
      // change the writer, and a new extent changes its extent table.
      std::unique_lock<RwLock> l(c_.mu_);
      ZV_RETURN_IF_ERROR(w.Reserve(next_row_ + n - w.committed()));
      for (size_t i = 0; i < n; ++i) out.rows[i] = w.MutableRow(next_row_ + i);
    }
    next_row_ += n;
    // Ids are marked in reservation order, so a repeat is always the later
    // batch, which then waits for its ordered Commit to look the id up.
    out.independent = fresh_;
    for (size_t i = 0; i < n && fresh_; ++i) {
      if (!seen_.Insert(static_cast<uint64_t>(HashId(records[i].id)))) {
        out.independent = false;
      }
    }
    return out;
  }

  std::vector<shm::Writer::MappedRange> MappedRanges() const override {
    std::shared_lock<RwLock> l(c_.mu_);
    return c_.g_->writer->MappedRanges();
  }

  ~BulkAppenderImpl() override { (void)Finish(); }

  Status Finish() override {
    if (finished_.exchange(true)) return OkStatus();
    return c_.store_->Flush();
  }

  Status Stage(ReservedRows& reserved,
               std::span<const Record> records) override {
    if (reserved.staged) return OkStatus();
    Status s = StageImpl(reserved, records);
    if (!s.ok()) Fail(s);
    return s;
  }

  Status Commit(ReservedRows& reserved,
                std::span<const Record> records) override {
    {
      // A caller's ordering mistake changes nothing: no need to give up.
      std::shared_lock<RwLock> l(c_.mu_);
      if (reserved.first != c_.g_->writer->committed()) {
        return FailedPreconditionError(
            "bulk commit: rows from " + std::to_string(reserved.first) +
            " committed out of order (next is " +
            std::to_string(c_.g_->writer->committed()) + ")");
      }
    }
    Status s = CommitImpl(reserved, records);
    if (!s.ok()) Fail(s);
    return s;
  }

 private:
  void Fail(const Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.ok()) failed_ = s;
  }

  Status CheckUsable() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ZV_RETURN_IF_ERROR(failed_);
    }
    return c_.CheckAlive();
  }

  // Checks the filled rows, sets their segment ids and, for an independent
  // batch, writes its metadata (concurrently with other batches' stages).
  Status StageImpl(ReservedRows& reserved, std::span<const Record> records) {
    ZV_RETURN_IF_ERROR(CheckUsable());
    std::vector<Record> stamped;
    records = WithDefaultExpiry(records, expiry_, &stamped);
    if (records.size() != reserved.rows.size()) {
      return InvalidArgumentError(
          "bulk commit: " + std::to_string(records.size()) + " records for " +
          std::to_string(reserved.rows.size()) + " reserved rows");
    }
    ZV_RETURN_IF_ERROR(ValidateRecords(records));
    const uint32_t dim = c_.meta_.options.dim;
    for (size_t i = 0; i < records.size(); ++i) {
      const float* row = reserved.rows[i];
      // Exponent bits all ones: Inf or NaN (integer test: vectorizes).
      uint32_t non_finite = 0;
      for (uint32_t d = 0; d < dim; ++d) {
        uint32_t bits;
        std::memcpy(&bits, &row[d], sizeof(bits));
        non_finite |= (bits & 0x7f800000u) == 0x7f800000u;
      }
      if (non_finite) {  // the message names the row and the value
        ZV_RETURN_IF_ERROR(ValidateVectors(std::span<const float>(row, dim), 1,
                                           dim,
                                           "rows[" + std::to_string(i) + "]"));
      }
    }
    {
      std::shared_lock<RwLock> l(c_.mu_);  // no extent added meanwhile
      shm::Writer& w = *c_.g_->writer;
      const uint32_t stride = w.info().row_stride;
      for (size_t i = 0; i < records.size(); ++i) {
        std::fill(reserved.rows[i] + dim, reserved.rows[i] + stride, 0.0f);
        w.SetId(reserved.first + i, HashId(records[i].id));
      }
    }
    if (reserved.independent && !records.empty()) {
      // Rows past the committed count: a crash now leaves entries that
      // reconcile drops, exactly as for a batch that never published.
      if (records.size() >= kIngestMinRows) {
        // Table files built here, in parallel with other batches' stages.
        ZV_RETURN_IF_ERROR(c_.store_->IngestNewRows(
            c_.meta_.name, c_.g_->number, reserved.first, records));
      } else {
        ZV_ASSIGN_OR_RETURN(
            auto replaced,
            c_.WriteRowMeta(reserved.first, records, /*ids_new=*/true));
        (void)replaced;  // none: every id is new
      }
      reserved.meta_written = true;
    }
    reserved.staged = true;
    return OkStatus();
  }

  Status CommitImpl(ReservedRows& reserved, std::span<const Record> records) {
    ZV_RETURN_IF_ERROR(Stage(reserved, records));
    ZV_RETURN_IF_ERROR(CheckUsable());
    std::vector<Record> stamped;
    records = WithDefaultExpiry(records, expiry_, &stamped);
    if (records.empty()) return OkStatus();
    if (reserved.meta_written) {
      return c_.PublishWritten(reserved.first, records, {});
    }
    // Some id may be stored already (an earlier batch, or before this load):
    // look each up, in order, as Upsert does.
    return c_.PublishRows(reserved.first, records);
  }

  CollectionImpl& c_;
  std::unique_lock<std::mutex> writer_lock_;
  std::mutex mu_;  // guards next_row_, seen_ and failed_
  uint64_t next_row_ = 0;
  bool fresh_ = false;
  // One default expiry for the whole load (its start plus the TTL), so that
  // Stage and Commit store the same records.
  const int64_t expiry_ = c_.DefaultExpiry();
  U64Set seen_;  // id hashes reserved by this appender
  Status failed_;
  std::atomic<bool> finished_{false};
};

StatusOr<std::unique_ptr<BulkAppender>> CollectionImpl::StartBulkAppend() {
  std::unique_lock<std::mutex> writer_lock(write_mu_);
  ZV_RETURN_IF_ERROR(CheckAlive());
  return std::unique_ptr<BulkAppender>(
      new BulkAppenderImpl(*this, std::move(writer_lock)));
}

StatusOr<std::vector<std::vector<Hit>>> CollectionImpl::Search(
    std::span<const float> queries, const SearchOptions& options) const {
  ZV_RETURN_IF_ERROR(ValidateSearch(queries, meta_.options.dim, options));
  std::shared_lock<RwLock> l(mu_);
  ZV_RETURN_IF_ERROR(CheckAlive());
  SearchContext ctx;
  ctx.view = g_->writer.get();
  ctx.attrs = &g_->attrs;
  ctx.rows = g_->writer->committed();
  ctx.ann = g_->ann.get();
  ctx.gpu = g_->mirror.get();
  ctx.gpu_searches = &gpu_searches_;
  ctx.ann_params = ann_params_;
  if (options.ef_search > 0) ctx.ann_params.hnsw_ef_search = options.ef_search;
  ctx.store = store_.get();
  ctx.collection = meta_.name;
  ctx.generation = g_->number;
  if (options.mode != SearchMode::kDense && lexical_stale_.load()) {
    return UnavailableError("collection '" + meta_.name +
                            "': lexical index out of step after a failed "
                            "write; it is re-indexed when the server restarts");
  }
  return SearchAnyMode(ctx, lexical_.get(), queries, options);
}

StatusOr<std::vector<GetResult>> CollectionImpl::Get(
    std::span<const std::string> ids) const {
  ZV_RETURN_IF_ERROR(ValidateIds(ids));
  std::shared_lock<RwLock> l(mu_);
  ZV_RETURN_IF_ERROR(CheckAlive());
  const shm::Writer& w = *g_->writer;
  std::vector<GetResult> out;
  for (const std::string& id : ids) {
    ZV_ASSIGN_OR_RETURN(auto visible, VisibleRow(id));
    if (!visible) continue;
    const uint64_t row = *visible;
    ZV_ASSIGN_OR_RETURN(auto rec,
                        store_->GetRow(meta_.name, g_->number, row, true));
    if (!rec) continue;
    GetResult r;
    r.record = std::move(*rec);
    r.vector.assign(w.Row(row), w.Row(row) + meta_.options.dim);
    out.push_back(std::move(r));
  }
  return out;
}

StatusOr<ScanPage> CollectionImpl::Scan(const std::string& after_id,
                                        size_t limit) const {
  if (limit == 0) return InvalidArgumentError("limit: must be > 0");
  {
    std::shared_lock<RwLock> l(mu_);
    ZV_RETURN_IF_ERROR(CheckAlive());
  }
  // The ids family is the catalog of stored ids; Get applies the readers'
  // visibility rule (an upsert in flight, tombstones, expiry) to each.
  ZV_ASSIGN_OR_RETURN(std::vector<std::string> ids,
                      store_->IdsAfter(meta_.name, after_id, limit));
  ScanPage page;
  if (ids.empty()) return page;
  ZV_ASSIGN_OR_RETURN(page.items, Get(ids));
  page.last_id = ids.back();
  return page;
}

StatusOr<bool> CollectionImpl::Contains(const std::string& id) const {
  // Get's visibility rule without reading the record or the vector: a
  // resumed bulk load asks this once per input line.
  const std::string ids[] = {id};
  ZV_RETURN_IF_ERROR(ValidateIds(ids));
  std::shared_lock<RwLock> l(mu_);
  ZV_RETURN_IF_ERROR(CheckAlive());
  ZV_ASSIGN_OR_RETURN(auto row, VisibleRow(id));
  return row.has_value();
}

StatusOr<std::optional<uint64_t>> CollectionImpl::VisibleRow(
    const std::string& id) const {
  SearchContext ctx;
  ctx.view = g_->writer.get();
  ctx.attrs = &g_->attrs;
  ctx.rows = g_->writer->committed();
  ctx.store = store_.get();
  ctx.collection = meta_.name;
  ctx.generation = g_->number;
  return index::VisibleRow(ctx, id, NowMs());
}

StatusOr<uint64_t> CollectionImpl::Delete(std::span<const std::string> ids) {
  ZV_RETURN_IF_ERROR(ValidateIds(ids));
  std::lock_guard<std::mutex> writer_lock(write_mu_);
  ZV_RETURN_IF_ERROR(CheckAlive());
  Generation& g = *g_;
  const std::string& name = meta_.name;
  auto batch = store_->NewBatch();
  std::vector<uint64_t> rows;
  std::vector<std::string> deleted_ids;
  std::unordered_set<std::string> seen;
  for (const std::string& id : ids) {
    if (!seen.insert(id).second) continue;
    ZV_ASSIGN_OR_RETURN(auto e, store_->GetId(name, id));
    if (!e || e->generation != g.number || e->row >= g.writer->committed() ||
        g.writer->IsTombstoned(e->row)) {
      continue;
    }
    batch.DeleteId(name, id);
    batch.DeleteRow(name, g.number, e->row);
    rows.push_back(e->row);
    deleted_ids.push_back(id);
  }
  if (rows.empty()) return uint64_t{0};
  ZV_RETURN_IF_ERROR(CommitDelete(batch, rows, deleted_ids));
  return static_cast<uint64_t>(rows.size());
}

Status CollectionImpl::CommitDelete(MetaStore::Batch& batch,
                                    const std::vector<uint64_t>& rows,
                                    const std::vector<std::string>& ids) {
  Generation& g = *g_;
  // Metadata first: a crash before the tombstones leaves rows no id points at,
  // which reconcile tombstones.
  ZV_RETURN_IF_ERROR(store_->Write(batch, meta_.options.sync));
  {
    std::unique_lock<RwLock> l(mu_);
    for (uint64_t row : rows) {
      ZV_RETURN_IF_ERROR(MarkLexicalStaleOnError(g.writer->Tombstone(row)));
    }
    MirrorPublished(g, rows);
  }
  UpdateLexical({}, ids);
  return OkStatus();
}

}  // namespace zv::index
