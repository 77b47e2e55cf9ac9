// The data directory's RocksDB meta store: one DB, column families
//   catalog    name                      -> CollectionMeta
//   ids        name \0 id                -> IdEntry   (external id -> row)
//   rows       name \0 gen(be64) row(be64) -> RowEntry (row -> id, ns, time,
//   metadata) documents  name \0 gen(be64) row(be64) -> text
// Rows entries are immutable once written; an upsert is one WriteBatch.
#ifndef ZEROVEC_INDEX_META_STORE_H_
#define ZEROVEC_INDEX_META_STORE_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "index/collection.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
class WriteBatch;
}  // namespace rocksdb

namespace zv::index {

struct CollectionMeta {
  std::string name;
  CollectionOptions options;
  uint64_t generation = 1;
};

// Where an external id lives. `prev_row` is the row it replaced in the same
// generation: kept until the new row is committed so a crash can roll back.
struct IdEntry {
  uint64_t generation = 0;
  uint64_t row = 0;
  std::optional<uint64_t> prev_row;
};

class MetaStore {
 public:
  ~MetaStore();
  MetaStore(const MetaStore&) = delete;
  MetaStore& operator=(const MetaStore&) = delete;

  // The primary (read-write) instance; creates the DB and column families.
  static StatusOr<std::unique_ptr<MetaStore>> Open(
      const std::filesystem::path& dir);
  // A secondary (read-only, catches up with the primary) instance whose own
  // logs go to `secondary_dir`.
  static StatusOr<std::unique_ptr<MetaStore>> OpenSecondary(
      const std::filesystem::path& dir,
      const std::filesystem::path& secondary_dir);
  Status CatchUp();

  // A set of changes applied atomically by Write().
  class Batch {
   public:
    Batch();
    ~Batch();
    Batch(Batch&&) noexcept;
    Batch& operator=(Batch&&) noexcept;
    void PutCollection(const CollectionMeta& meta);
    void DeleteCollection(const std::string& name);
    void PutId(const std::string& coll, const std::string& id,
               const IdEntry& entry);
    void DeleteId(const std::string& coll, const std::string& id);
    // Stores the record (text in documents, the rest in rows) for `row`.
    void PutRow(const std::string& coll, uint64_t gen, uint64_t row,
                const Record& record);
    void DeleteRow(const std::string& coll, uint64_t gen, uint64_t row);
    void DeleteGeneration(const std::string& coll, uint64_t gen);
    size_t Count() const;

   private:
    friend class MetaStore;
    MetaStore* store_ = nullptr;
    std::unique_ptr<rocksdb::WriteBatch> batch_;
  };
  Batch NewBatch();
  Status Write(Batch& batch, bool sync);
  // Flushes every column family's memtable to disk and waits.
  Status Flush();
  // Stores records[i] at row first + i of generation `gen` and its id entry
  // (no prev_row), as sorted table files built on the calling thread and
  // ingested into the store at once: no log, no memtable, so several bulk
  // batches build theirs in parallel where Write would serialize them.
  // Durable on return. The rows and ids must be new to the store and the ids
  // distinct (an InvalidArgument otherwise, nothing written).
  Status IngestNewRows(const std::string& coll, uint64_t gen, uint64_t first,
                       std::span<const Record> records);

  StatusOr<std::vector<CollectionMeta>> ListCollections() const;
  StatusOr<std::optional<CollectionMeta>> GetCollection(
      const std::string& name) const;
  // Removes every key of the collection.
  Status DropCollection(const std::string& name);

  StatusOr<std::optional<IdEntry>> GetId(const std::string& coll,
                                         const std::string& id) const;
  // Record of a row: id, ns, timestamp, metadata; text too if `with_text`.
  StatusOr<std::optional<Record>> GetRow(const std::string& coll, uint64_t gen,
                                         uint64_t row, bool with_text) const;

  // Visits rows entries of one generation in row order with row >= first_row.
  Status ScanRows(
      const std::string& coll, uint64_t gen, uint64_t first_row,
      const std::function<Status(uint64_t row, Record record)>& fn) const;
  Status ScanIds(const std::string& coll,
                 const std::function<Status(const std::string& id,
                                            const IdEntry& e)>& fn) const;
  // Up to `limit` ids of the collection greater than `after`, in byte order
  // (the key order of the ids family): a page of Collection::Scan.
  StatusOr<std::vector<std::string>> IdsAfter(const std::string& coll,
                                              const std::string& after,
                                              size_t limit) const;

 private:
  MetaStore() = default;
  // Visits the ids family of `coll` in key order from id `from` on; `fn`
  // clears *more to stop early.
  Status VisitIdsFrom(
      const std::string& coll, const std::string& from,
      const std::function<Status(std::string id, std::string_view value,
                                 bool* more)>& fn) const;
  static StatusOr<std::unique_ptr<MetaStore>> OpenImpl(
      const std::filesystem::path& dir, const std::filesystem::path* secondary);

  std::filesystem::path dir_;
  std::filesystem::path ingest_dir_;  // table files before ingestion
  std::atomic<uint64_t> ingest_files_{0};
  std::unique_ptr<rocksdb::DB> db_;
  // default, catalog, ids, rows, documents; owned by db_ (destroyed before it).
  std::vector<rocksdb::ColumnFamilyHandle*> cfs_;
};

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_META_STORE_H_
