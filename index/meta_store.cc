// Over 600 lines: the store's binary codecs, bulk ingestion and crash-safe
// open share one private RocksDB layout (meta_store.h).
#include "index/meta_store.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace zv::index {
namespace {

enum Cf { kDefault = 0, kCatalog, kIds, kRows, kDocuments, kNumCfs };
const char* const kCfNames[kNumCfs] = {"default", "catalog", "ids", "rows",
                                       "documents"};

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return OkStatus();
  StatusCode code = StatusCode::kInternal;
  if (s.IsNotFound()) code = StatusCode::kNotFound;
  if (s.IsCorruption()) code = StatusCode::kDataLoss;
  if (s.IsIOError() && s.subcode() == rocksdb::Status::kNoSpace) {
    code = StatusCode::kResourceExhausted;
  }
  if (s.IsBusy() || s.IsTryAgain()) code = StatusCode::kUnavailable;
  // RocksDB keeps no errno, only strerror's text: EACCES (e.g. a reader
  // outside the data dir's --group) should read as what it is.
  if (s.IsIOError() &&
      s.ToString().find("Permission denied") != std::string::npos) {
    code = StatusCode::kPermissionDenied;
  }
  return Status(code, "meta store " + std::string(what) + ": " + s.ToString());
}

// --- a tiny length-prefixed binary codec (little-endian hosts only, like
// shm/).
void PutU64(std::string* out, uint64_t v) {
  out->append(reinterpret_cast<char*>(&v), 8);
}
void PutStr(std::string* out, std::string_view s) {
  PutU64(out, s.size());
  out->append(s);
}
void PutBe64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i)
    out->push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}

class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}
  bool U64(uint64_t* v) {
    if (in_.size() < 8) return false;
    std::memcpy(v, in_.data(), 8);
    in_.remove_prefix(8);
    return true;
  }
  bool Str(std::string* s) {
    uint64_t n;
    if (!U64(&n) || in_.size() < n) return false;
    s->assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

uint64_t Be64(std::string_view s) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(s[i]);
  return v;
}

std::string Prefix(const std::string& coll) { return coll + '\0'; }
std::string IdKey(const std::string& coll, const std::string& id) {
  return Prefix(coll) + id;
}
std::string GenPrefix(const std::string& coll, uint64_t gen) {
  std::string k = Prefix(coll);
  PutBe64(&k, gen);
  return k;
}
std::string RowKey(const std::string& coll, uint64_t gen, uint64_t row) {
  std::string k = GenPrefix(coll, gen);
  PutBe64(&k, row);
  return k;
}
// The first key after every key starting with `prefix`.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<uint8_t>(prefix.back()) == 0xff)
    prefix.pop_back();
  if (!prefix.empty()) prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

std::string EncodeRecord(const Record& r) {
  std::string out;
  PutStr(&out, r.id);
  PutStr(&out, r.ns);
  PutU64(&out, static_cast<uint64_t>(r.timestamp_ms));
  PutU64(&out, r.metadata.size());
  for (const auto& [k, v] : r.metadata) {
    PutStr(&out, k);
    PutStr(&out, v);
  }
  // Optional trailing fields: absent in stores written before expiry, so
  // those decode unchanged.
  if (r.expires_at_ms > 0) PutU64(&out, static_cast<uint64_t>(r.expires_at_ms));
  return out;
}

bool DecodeRecord(std::string_view in, Record* r) {
  Decoder d(in);
  uint64_t ts, n;
  if (!d.Str(&r->id) || !d.Str(&r->ns) || !d.U64(&ts) || !d.U64(&n))
    return false;
  r->timestamp_ms = static_cast<int64_t>(ts);
  for (uint64_t i = 0; i < n; ++i) {
    std::string k, v;
    if (!d.Str(&k) || !d.Str(&v)) return false;
    r->metadata.emplace(std::move(k), std::move(v));
  }
  if (!d.done()) {
    uint64_t expires;
    if (!d.U64(&expires)) return false;
    r->expires_at_ms = static_cast<int64_t>(expires);
  }
  return d.done();
}

std::string EncodeIdEntry(const IdEntry& e) {
  std::string out;
  PutU64(&out, e.generation);
  PutU64(&out, e.row);
  PutU64(&out, e.prev_row ? *e.prev_row + 1 : 0);
  return out;
}

bool DecodeIdEntry(std::string_view in, IdEntry* e) {
  Decoder d(in);
  uint64_t prev;
  if (!d.U64(&e->generation) || !d.U64(&e->row) || !d.U64(&prev) || !d.done())
    return false;
  if (prev != 0) e->prev_row = prev - 1;
  return true;
}

// Version 2 appends the lexical flag; version 1 entries (before it) read as
// lexical off.
constexpr uint64_t kCatalogVersion = 2;

std::string EncodeMeta(const CollectionMeta& m) {
  std::string out;
  PutU64(&out, kCatalogVersion);
  PutU64(&out, m.options.dim);
  PutU64(&out, static_cast<uint64_t>(m.options.metric));
  PutStr(&out, m.options.index.descriptor);
  PutU64(&out, m.options.rows_per_extent);
  PutU64(&out, m.options.group.has_value());
  PutStr(&out, m.options.group.value_or(""));
  PutU64(&out, m.options.sync);
  PutU64(&out, m.generation);
  PutU64(&out, m.options.lexical);
  // Optional trailing field (catalogs written before it decode unchanged).
  if (m.options.default_ttl_ms > 0)
    PutU64(&out, static_cast<uint64_t>(m.options.default_ttl_ms));
  return out;
}

bool DecodeMeta(std::string_view name, std::string_view in, CollectionMeta* m) {
  Decoder d(in);
  uint64_t version, dim, metric, has_group, sync;
  std::string group;
  uint64_t lexical = 0;
  if (!d.U64(&version) || (version != 1 && version != kCatalogVersion) ||
      !d.U64(&dim) || !d.U64(&metric) || !d.Str(&m->options.index.descriptor) ||
      !d.U64(&m->options.rows_per_extent) || !d.U64(&has_group) ||
      !d.Str(&group) || !d.U64(&sync) || !d.U64(&m->generation) ||
      (version >= 2 && !d.U64(&lexical))) {
    return false;
  }
  m->options.lexical = lexical != 0;
  if (!d.done()) {
    uint64_t ttl;
    if (!d.U64(&ttl) || !d.done()) return false;
    m->options.default_ttl_ms = static_cast<int64_t>(ttl);
  }
  m->name = std::string(name);
  m->options.dim = static_cast<uint32_t>(dim);
  m->options.metric = static_cast<shm::Metric>(metric);
  if (has_group) m->options.group = group;
  m->options.sync = sync != 0;
  return true;
}

// True when `dir` (which has no CURRENT) holds only what DB::Open writes
// before CURRENT on a new store: LOCK, LOG*, IDENTITY, OPTIONS-*, the first
// MANIFEST and an empty first WAL. Any table, blob or non-empty WAL file, a
// later MANIFEST or anything unknown means the store held data.
bool CreationWasInterrupted(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool empty_file = entry.is_regular_file(ec) &&
                            std::filesystem::file_size(entry.path(), ec) == 0;
    if (name == "LOCK" || name == "IDENTITY" || name.starts_with("LOG") ||
        name.starts_with("OPTIONS-") || name == "MANIFEST-000001" ||
        (name.ends_with(".log") && empty_file) || name.ends_with(".dbtmp")) {
      continue;
    }
    return false;
  }
  return !ec;
}

}  // namespace

MetaStore::~MetaStore() {
  if (db_) {
    for (auto* cf : cfs_) (void)db_->DestroyColumnFamilyHandle(cf);
    (void)db_->Close();
  }
}

StatusOr<std::unique_ptr<MetaStore>> MetaStore::Open(
    const std::filesystem::path& dir) {
  return OpenImpl(dir, nullptr);
}

StatusOr<std::unique_ptr<MetaStore>> MetaStore::OpenSecondary(
    const std::filesystem::path& dir,
    const std::filesystem::path& secondary_dir) {
  return OpenImpl(dir, &secondary_dir);
}

StatusOr<std::unique_ptr<MetaStore>> MetaStore::OpenImpl(
    const std::filesystem::path& dir, const std::filesystem::path* secondary) {
  std::error_code ec;
  if (!std::filesystem::exists(dir / "CURRENT", ec) &&
      std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec)) {
    // RocksDB writes CURRENT last when it creates a store and only renames
    // over it afterwards, so no CURRENT beside nothing but creation files is
    // a creation that a crash stopped: nothing was ever written, start again.
    // With data files present the manifest pointer was lost: say so plainly
    // rather than let RocksDB create a fresh, empty store over them.
    if (!secondary && CreationWasInterrupted(dir)) {
      for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
        std::filesystem::remove_all(entry.path(), ec);
      if (ec) {
        return InternalError("meta store: cannot clear the unfinished " +
                             dir.string() + ": " + ec.message());
      }
    } else {
      return DataLossError((dir / "CURRENT").string() +
                           ": missing from a non-empty RocksDB directory "
                           "(damaged meta store; restore it from a backup)");
    }
  }
  std::unique_ptr<MetaStore> store(new MetaStore());
  store->dir_ = dir;
  rocksdb::DBOptions options;
  options.create_if_missing = secondary == nullptr;
  options.create_missing_column_families = secondary == nullptr;
  if (secondary)
    options.max_open_files = -1;  // required by secondary instances
  // Small stores stay small. RocksDB fallocates each WAL ahead in steps of
  // write_buffer_size * 1.1 (~70 MiB) and the MANIFEST in 4 MiB, so one
  // written row made a data dir ~75 MiB on disk. Appends need no
  // preallocation (SSTs are written once, sequentially; bulk loads ingest
  // them), so it is off. Every open rotates the info LOG: keep few.
  options.allow_fallocate = false;
  options.manifest_preallocation_size = 64 * 1024;
  options.keep_log_file_num = 3;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfds;
  for (const char* name : kCfNames) {
    cfds.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      secondary
          ? rocksdb::DB::OpenAsSecondary(options, dir.string(),
                                         secondary->string(), cfds,
                                         &store->cfs_, &db)
          : rocksdb::DB::Open(options, dir.string(), cfds, &store->cfs_, &db);
  if (!s.ok()) return FromRocks(s, "open " + dir.string());
  store->db_.reset(db);
  if (secondary == nullptr) {
    // Table files of a bulk batch that a crash stopped before ingestion: the
    // batch never published, so they are garbage.
    store->ingest_dir_ = dir / "ingest";
    std::filesystem::remove_all(store->ingest_dir_, ec);
    std::filesystem::create_directories(store->ingest_dir_, ec);
    if (ec) {
      return InternalError("meta store: cannot create " +
                           store->ingest_dir_.string() + ": " + ec.message());
    }
  }
  return store;
}

Status MetaStore::CatchUp() {
  return FromRocks(db_->TryCatchUpWithPrimary(), "catch up with primary");
}

// ----------------------------------------------------------------------------
// Batch

MetaStore::Batch::Batch() : batch_(std::make_unique<rocksdb::WriteBatch>()) {}
MetaStore::Batch::~Batch() = default;
MetaStore::Batch::Batch(Batch&&) noexcept = default;
MetaStore::Batch& MetaStore::Batch::operator=(Batch&&) noexcept = default;

MetaStore::Batch MetaStore::NewBatch() {
  Batch b;
  b.store_ = this;
  return b;
}

void MetaStore::Batch::PutCollection(const CollectionMeta& meta) {
  (void)batch_->Put(store_->cfs_[kCatalog], meta.name, EncodeMeta(meta));
}
void MetaStore::Batch::DeleteCollection(const std::string& name) {
  (void)batch_->Delete(store_->cfs_[kCatalog], name);
}
void MetaStore::Batch::PutId(const std::string& coll, const std::string& id,
                             const IdEntry& e) {
  (void)batch_->Put(store_->cfs_[kIds], IdKey(coll, id), EncodeIdEntry(e));
}
void MetaStore::Batch::DeleteId(const std::string& coll,
                                const std::string& id) {
  (void)batch_->Delete(store_->cfs_[kIds], IdKey(coll, id));
}
void MetaStore::Batch::PutRow(const std::string& coll, uint64_t gen,
                              uint64_t row, const Record& record) {
  const std::string key = RowKey(coll, gen, row);
  (void)batch_->Put(store_->cfs_[kRows], key, EncodeRecord(record));
  if (!record.text.empty())
    (void)batch_->Put(store_->cfs_[kDocuments], key, record.text);
}
void MetaStore::Batch::DeleteRow(const std::string& coll, uint64_t gen,
                                 uint64_t row) {
  const std::string key = RowKey(coll, gen, row);
  (void)batch_->Delete(store_->cfs_[kRows], key);
  (void)batch_->Delete(store_->cfs_[kDocuments], key);
}
void MetaStore::Batch::DeleteGeneration(const std::string& coll, uint64_t gen) {
  const std::string begin = GenPrefix(coll, gen), end = PrefixEnd(begin);
  (void)batch_->DeleteRange(store_->cfs_[kRows], begin, end);
  (void)batch_->DeleteRange(store_->cfs_[kDocuments], begin, end);
}
size_t MetaStore::Batch::Count() const { return batch_->Count(); }

Status MetaStore::Write(Batch& batch, bool sync) {
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  return FromRocks(db_->Write(wo, batch.batch_.get()), "write");
}

Status MetaStore::Flush() {
  rocksdb::FlushOptions fo;
  fo.wait = true;
  return FromRocks(db_->Flush(fo, cfs_), "flush");
}

namespace {

// The table files of one IngestNewRows, one a column family, ingested at once
// (atomic across the column families); removed on every path (after a
// successful ingestion RocksDB has linked them into the store).
class IngestFiles {
 public:
  IngestFiles(rocksdb::DB* db, const std::filesystem::path& dir,
              std::atomic<uint64_t>* counter)
      : db_(db), dir_(dir), counter_(counter) {
    options_.move_files = true;  // link, not copy (falls back to a copy)
  }
  ~IngestFiles() {
    std::error_code ec;
    for (const auto& p : paths_) std::filesystem::remove(p, ec);
  }

  // Writes entry(0..n-1), (key, value) pairs already in key order, as one
  // table file for `cf`.
  template <typename Entry>
  Status Add(rocksdb::ColumnFamilyHandle* cf, size_t n, const Entry& entry) {
    if (n == 0) return OkStatus();
    const std::string path =
        (dir_ / ("b" + std::to_string(counter_->fetch_add(1)) + ".sst"))
            .string();
    paths_.push_back(path);
    rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), db_->GetOptions(cf),
                                  cf);
    ZV_RETURN_IF_ERROR(FromRocks(writer.Open(path), "ingest open " + path));
    for (size_t i = 0; i < n; ++i) {
      auto [key, value] = entry(i);
      ZV_RETURN_IF_ERROR(FromRocks(writer.Put(key, value), "ingest put"));
    }
    ZV_RETURN_IF_ERROR(FromRocks(writer.Finish(), "ingest finish " + path));
    rocksdb::IngestExternalFileArg arg;
    arg.column_family = cf;
    arg.external_files = {path};
    arg.options = options_;
    args_.push_back(std::move(arg));
    return OkStatus();
  }

  Status Ingest() {
    return FromRocks(db_->IngestExternalFiles(args_), "ingest");
  }

 private:
  rocksdb::DB* db_;
  const std::filesystem::path& dir_;
  std::atomic<uint64_t>* counter_;
  rocksdb::IngestExternalFileOptions options_;
  std::vector<std::string> paths_;
  std::vector<rocksdb::IngestExternalFileArg> args_;
};

}  // namespace

Status MetaStore::IngestNewRows(const std::string& coll, uint64_t gen,
                                uint64_t first,
                                std::span<const Record> records) {
  if (records.empty()) return OkStatus();
  if (ingest_dir_.empty()) {
    return FailedPreconditionError("meta store: read-only instance");
  }
  std::vector<std::pair<std::string, std::string>> ids;
  ids.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    ids.emplace_back(IdKey(coll, records[i].id),
                     EncodeIdEntry(IdEntry{gen, first + i, std::nullopt}));
  }
  std::sort(ids.begin(), ids.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < ids.size(); ++i) {
    if (ids[i].first == ids[i - 1].first) {
      return InvalidArgumentError("meta store ingest: id '" +
                                  ids[i].first.substr(Prefix(coll).size()) +
                                  "' twice in one batch");
    }
  }

  IngestFiles files(db_.get(), ingest_dir_, &ingest_files_);
  const std::string gen_prefix = GenPrefix(coll, gen);
  auto row_key = [&](size_t i) {
    std::string k = gen_prefix;
    PutBe64(&k, first + i);
    return k;
  };
  ZV_RETURN_IF_ERROR(files.Add(cfs_[kIds], ids.size(), [&](size_t i) {
    return std::pair<rocksdb::Slice, rocksdb::Slice>(ids[i].first,
                                                     ids[i].second);
  }));
  std::string key, value;
  ZV_RETURN_IF_ERROR(files.Add(cfs_[kRows], records.size(), [&](size_t i) {
    key = row_key(i);
    value = EncodeRecord(records[i]);
    return std::pair<rocksdb::Slice, rocksdb::Slice>(key, value);
  }));
  // Documents: only rows with text, still in row order.
  std::vector<size_t> with_text;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!records[i].text.empty()) with_text.push_back(i);
  }
  ZV_RETURN_IF_ERROR(
      files.Add(cfs_[kDocuments], with_text.size(), [&](size_t j) {
        key = row_key(with_text[j]);
        return std::pair<rocksdb::Slice, rocksdb::Slice>(
            key, records[with_text[j]].text);
      }));
  return files.Ingest();
}

// ----------------------------------------------------------------------------
// reads

StatusOr<std::vector<CollectionMeta>> MetaStore::ListCollections() const {
  std::vector<CollectionMeta> out;
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), cfs_[kCatalog]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    CollectionMeta m;
    if (!DecodeMeta(it->key().ToStringView(), it->value().ToStringView(), &m)) {
      return DataLossError("meta store catalog: bad entry for collection '" +
                           it->key().ToString() + "'");
    }
    out.push_back(std::move(m));
  }
  ZV_RETURN_IF_ERROR(FromRocks(it->status(), "catalog scan"));
  return out;
}

StatusOr<std::optional<CollectionMeta>> MetaStore::GetCollection(
    const std::string& name) const {
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), cfs_[kCatalog], name, &value);
  if (s.IsNotFound()) return std::optional<CollectionMeta>();
  ZV_RETURN_IF_ERROR(FromRocks(s, "catalog get"));
  CollectionMeta m;
  if (!DecodeMeta(name, value, &m)) {
    return DataLossError("meta store catalog: bad entry for collection '" +
                         name + "'");
  }
  return std::optional<CollectionMeta>(std::move(m));
}

Status MetaStore::DropCollection(const std::string& name) {
  rocksdb::WriteBatch batch;
  const std::string begin = Prefix(name), end = PrefixEnd(begin);
  for (int cf : {kIds, kRows, kDocuments}) {
    (void)batch.DeleteRange(cfs_[cf], begin, end);
  }
  (void)batch.Delete(cfs_[kCatalog], name);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Write(wo, &batch), "drop collection " + name);
}

StatusOr<std::optional<IdEntry>> MetaStore::GetId(const std::string& coll,
                                                  const std::string& id) const {
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), cfs_[kIds], IdKey(coll, id), &value);
  if (s.IsNotFound()) return std::optional<IdEntry>();
  ZV_RETURN_IF_ERROR(FromRocks(s, "id get"));
  IdEntry e;
  if (!DecodeIdEntry(value, &e))
    return DataLossError("meta store ids: bad entry for id " + id);
  return std::optional<IdEntry>(e);
}

StatusOr<std::optional<Record>> MetaStore::GetRow(const std::string& coll,
                                                  uint64_t gen, uint64_t row,
                                                  bool with_text) const {
  const std::string key = RowKey(coll, gen, row);
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), cfs_[kRows], key, &value);
  if (s.IsNotFound()) return std::optional<Record>();
  ZV_RETURN_IF_ERROR(FromRocks(s, "row get"));
  Record r;
  if (!DecodeRecord(value, &r)) {
    return DataLossError("meta store rows: bad entry for row " +
                         std::to_string(row));
  }
  if (with_text) {
    s = db_->Get(rocksdb::ReadOptions(), cfs_[kDocuments], key, &r.text);
    if (!s.ok() && !s.IsNotFound()) return FromRocks(s, "document get");
  }
  return std::optional<Record>(std::move(r));
}

Status MetaStore::ScanRows(
    const std::string& coll, uint64_t gen, uint64_t first_row,
    const std::function<Status(uint64_t, Record)>& fn) const {
  const std::string prefix = GenPrefix(coll, gen);
  const std::string end = PrefixEnd(prefix);
  rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, cfs_[kRows]));
  for (it->Seek(RowKey(coll, gen, first_row)); it->Valid(); it->Next()) {
    const std::string_view key = it->key().ToStringView();
    if (key.size() != prefix.size() + 8) continue;
    const uint64_t row = Be64(key.substr(prefix.size()));
    Record r;
    if (!DecodeRecord(it->value().ToStringView(), &r)) {
      return DataLossError("meta store rows: bad entry for row " +
                           std::to_string(row));
    }
    ZV_RETURN_IF_ERROR(fn(row, std::move(r)));
  }
  return FromRocks(it->status(), "rows scan");
}

Status MetaStore::VisitIdsFrom(
    const std::string& coll, const std::string& from,
    const std::function<Status(std::string id, std::string_view value,
                               bool* more)>& fn) const {
  const std::string prefix = Prefix(coll);
  const std::string end = PrefixEnd(prefix);
  rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, cfs_[kIds]));
  bool more = true;
  for (it->Seek(prefix + from); more && it->Valid(); it->Next()) {
    std::string id(it->key().ToStringView().substr(prefix.size()));
    ZV_RETURN_IF_ERROR(fn(std::move(id), it->value().ToStringView(), &more));
  }
  return FromRocks(it->status(), "ids scan");
}

Status MetaStore::ScanIds(
    const std::string& coll,
    const std::function<Status(const std::string&, const IdEntry&)>& fn) const {
  return VisitIdsFrom(
      coll, "", [&](std::string id, std::string_view value, bool*) {
        IdEntry e;
        if (!DecodeIdEntry(value, &e)) {
          return DataLossError("meta store ids: bad entry for id " + id);
        }
        return fn(id, e);
      });
}

StatusOr<std::vector<std::string>> MetaStore::IdsAfter(const std::string& coll,
                                                       const std::string& after,
                                                       size_t limit) const {
  std::vector<std::string> ids;
  if (limit == 0) return ids;
  ZV_RETURN_IF_ERROR(VisitIdsFrom(
      coll, after, [&](std::string id, std::string_view, bool* more) {
        // Strictly after: Seek lands on `after` itself if it is stored.
        if (id != after) ids.push_back(std::move(id));
        *more = ids.size() < limit;
        return OkStatus();
      }));
  return ids;
}

}  // namespace zv::index
