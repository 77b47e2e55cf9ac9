// AttachedCollection: a read-only view from another process. The segment is
// attached with shm::Reader, the meta store opened as a RocksDB secondary (its
// own info logs in a private temp dir). Refresh order matters: segment first,
// then the meta store, because the writer makes metadata durable before it
// commits rows. An HNSW collection's pieces are mapped read-only from the
// manifest on each Refresh (hnsw_pieces.h), so the reader searches the same
// graphs as the writer plus the exact tail.
#include <stdlib.h>

#include <mutex>
#include <shared_mutex>

#include "index/collection_impl.h"
#include "index/hybrid_search.h"
#include "index/lexical_index.h"
#include "index/meta_store.h"
#include "index/rwlock.h"
#include "index/searcher.h"
#include "index/validate.h"

namespace zv::index {
namespace {

class AttachedImpl : public AttachedCollection {
 public:
  AttachedImpl(std::filesystem::path data_dir, std::string name,
               std::filesystem::path tmp, std::unique_ptr<MetaStore> store)
      : data_dir_(std::move(data_dir)),
        name_(std::move(name)),
        tmp_(std::move(tmp)),
        store_(std::move(store)) {}
  ~AttachedImpl() override {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
  }

  Status Refresh() override {
    std::unique_lock<RwLock> l(mu_);
    return RefreshLocked();
  }

  CollectionInfo Describe() const override {
    std::shared_lock<RwLock> l(mu_);
    CollectionInfo info;
    info.name = name_;
    info.dim = meta_.options.dim;
    info.metric = meta_.options.metric;
    info.index_descriptor = meta_.options.index.descriptor;
    info.rows = rows_;
    info.tombstones = reader_->TombstoneCount();
    info.live_rows = info.rows - std::min(info.rows, info.tombstones);
    info.generation = meta_.generation;
    info.segment_dir = reader_->dir();
    info.lexical = meta_.options.lexical;
    if (lexical_) {
      auto documents = lexical_->documents();
      if (documents.ok()) info.lexical_documents = *documents;
    }
    return info;
  }

  StatusOr<std::vector<std::vector<Hit>>> Search(
      std::span<const float> queries,
      const SearchOptions& options) const override {
    std::shared_lock<RwLock> l(mu_);
    ZV_RETURN_IF_ERROR(ValidateSearch(queries, meta_.options.dim, options));
    SearchContext ctx;
    ctx.view = reader_.get();
    ctx.attrs = attrs_.get();
    ctx.rows = rows_;
    ctx.ann = ann_.get();
    if (options.ef_search > 0)
      ctx.ann_params.hnsw_ef_search = options.ef_search;
    ctx.store = store_.get();
    ctx.collection = name_;
    ctx.generation = meta_.generation;
    return SearchAnyMode(ctx, lexical_.get(), queries, options);
  }

  AttachedRows Rows() const override {
    std::shared_lock<RwLock> l(mu_);
    AttachedRows out;
    out.mapping = reader_;
    out.dim = reader_->info().dim;
    out.row_stride = reader_->info().row_stride;
    out.rows = rows_;
    out.blocks = reader_->Blocks(rows_);
    return out;
  }

  std::vector<uint8_t> Tombstones() const override {
    std::shared_lock<RwLock> l(mu_);
    std::vector<uint8_t> flags(rows_);
    for (uint64_t row = 0; row < rows_; ++row)
      flags[row] = reader_->IsTombstoned(row) ? 1 : 0;
    return flags;
  }

  std::vector<std::string> Ids() const override {
    std::shared_lock<RwLock> l(mu_);
    std::vector<std::string> ids(rows_);
    for (uint64_t row = 0; row < rows_; ++row) {
      if (attrs_->present(row)) ids[row] = attrs_->id(row);
    }
    return ids;
  }

  Status RefreshLocked() {
    ZV_RETURN_IF_ERROR(store_->CatchUp());
    ZV_ASSIGN_OR_RETURN(auto meta, store_->GetCollection(name_));
    if (!meta) return NotFoundError("collection '" + name_ + "' not found");
    if (!reader_ || meta->generation != meta_.generation ||
        reader_->Retired()) {
      const auto dir = data_dir_ / "collections" / name_ /
                       GenerationDirName(meta->generation);
      ann_.reset();  // refers to reader_
      ZV_ASSIGN_OR_RETURN(reader_, shm::Reader::Attach(dir));
      attrs_ = std::make_unique<AttributeTable>();
      rows_ = 0;
      meta_ = *meta;
    }
    ZV_ASSIGN_OR_RETURN(const uint64_t committed, reader_->Refresh());
    // The writer's HNSW pieces, mapped in place; rows past them are searched
    // exactly, as the writer does.
    ZV_ASSIGN_OR_RETURN(
        IndexKind kind,
        ParseDescriptor(meta_.options.index.descriptor, meta_.options.dim));
    if (kind.type == IndexKind::kHnsw) {
      if (!ann_) {
        ZV_ASSIGN_OR_RETURN(ann_, OpenHnswReader(*reader_, reader_->dir()));
      }
      ZV_RETURN_IF_ERROR(ann_->Update(committed));
    }
    // Metadata of rows below `committed` was durable before they were
    // committed.
    ZV_RETURN_IF_ERROR(store_->CatchUp());
    AttributeTable& t = *attrs_;
    ZV_RETURN_IF_ERROR(store_->ScanRows(
        name_, meta_.generation, t.size(), [&](uint64_t row, Record r) {
          if (row >= committed) return OkStatus();
          while (t.size() < row) t.AppendAbsent();
          if (HashId(r.id) == reader_->Id(row)) {
            t.Append(r);
          } else {
            t.AppendAbsent();
          }
          return OkStatus();
        }));
    while (t.size() < committed) t.AppendAbsent();
    // Expired rows the writer has swept are tombstoned: drop them from the
    // expiry queue, so searches skip the expiry check again (the writer's
    // sweep does the same for its own table).
    std::vector<uint64_t> due = t.PopExpired(NowMs()), unswept;
    for (uint64_t row : due) {
      if (!reader_->IsTombstoned(row)) unswept.push_back(row);
    }
    t.RequeueExpired(unswept);
    rows_ = committed;
    // The writer's Xapian database, read-only; its commits follow the rows'
    // (lexical hits are mapped to rows through the store caught up above, and
    // ids it has not reached are skipped).
    if (meta_.options.lexical) {
      if (!lexical_) {
        ZV_ASSIGN_OR_RETURN(
            lexical_, LexicalSearcher::Open(data_dir_ / "collections" / name_ /
                                            kLexicalDirName));
      }
      lexical_->Refresh();
    }
    return OkStatus();
  }

 private:
  std::filesystem::path data_dir_;
  std::string name_;
  std::filesystem::path tmp_;
  std::unique_ptr<MetaStore> store_;
  mutable RwLock mu_;
  CollectionMeta meta_;
  // Shared with the AttachedRows handed out, which keep its mappings alive.
  std::shared_ptr<shm::Reader> reader_;
  std::unique_ptr<AttributeTable> attrs_;
  std::unique_ptr<AnnIndex> ann_;             // after reader_: destroyed first
  std::unique_ptr<LexicalSearcher> lexical_;  // null: no lexical index
  uint64_t rows_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<AttachedCollection>> AttachedCollection::Attach(
    const std::filesystem::path& data_dir, const std::string& name) {
  ZV_RETURN_IF_ERROR(ValidateCollectionName(name));
  std::string pattern =
      (std::filesystem::temp_directory_path() / "zv-secondary-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    return ErrnoError(errno, "mkdtemp " + pattern);
  const std::filesystem::path tmp = pattern;
  auto store = MetaStore::OpenSecondary(data_dir / "meta", tmp);
  if (!store.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    return store.status();
  }
  auto attached = std::make_unique<AttachedImpl>(data_dir, name, tmp,
                                                 std::move(store).value());
  ZV_RETURN_IF_ERROR(attached->Refresh());
  return std::unique_ptr<AttachedCollection>(std::move(attached));
}

}  // namespace zv::index
