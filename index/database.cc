// Database: one data directory = one RocksDB meta store (<data>/meta) + one
// folder of segment generations per collection
// (<data>/collections/<name>/gen.NNNNNN).
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

#include "base/group.h"
#include "index/collection_impl.h"
#include "index/validate.h"

namespace zv::index {
namespace {

class DatabaseImpl : public Database {
 public:
  DatabaseImpl(std::filesystem::path data_dir, std::shared_ptr<MetaStore> store,
               std::optional<std::string> group,
               std::vector<std::shared_ptr<GpuBudget>> gpu,
               uint64_t stripe_rows)
      : data_dir_(std::move(data_dir)),
        store_(std::move(store)),
        group_(std::move(group)),
        gpu_(std::move(gpu)),
        stripe_rows_(stripe_rows) {}

  Status LoadCollections() {
    ZV_ASSIGN_OR_RETURN(auto metas, store_->ListCollections());
    for (CollectionMeta& meta : metas) {
      // A collection made before the data dir was shared: its next
      // generation (compaction) must be shared too.
      if (group_ && !meta.options.group) meta.options.group = group_;
      ZV_ASSIGN_OR_RETURN(auto c,
                          CollectionImpl::Open(store_, Root(meta.name), meta));
      if (!gpu_.empty()) c->EnableGpu(gpu_, stripe_rows_);
      collections_.emplace(meta.name, std::move(c));
    }
    // Folders without a catalog entry are creates or drops that crashed
    // halfway. They are moved aside, never deleted: if the catalog itself were
    // ever damaged, deleting would turn that into the loss of every collection.
    std::error_code ec;
    std::vector<std::filesystem::path> orphans;
    for (const auto& entry :
         std::filesystem::directory_iterator(data_dir_ / "collections", ec)) {
      if (!collections_.count(entry.path().filename().string())) {
        orphans.push_back(entry.path());
      }
    }
    if (orphans.empty()) return OkStatus();
    const auto aside = data_dir_ / "orphaned";
    std::filesystem::create_directories(aside, ec);
    const auto stamp =
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
    for (const auto& path : orphans) {
      std::filesystem::rename(
          path, aside / (path.filename().string() + "." + stamp), ec);
      if (ec) {
        return InternalError(
            path.string() +
            ": cannot move uncatalogued collection aside: " + ec.message());
      }
    }
    return OkStatus();
  }

  StatusOr<std::shared_ptr<Collection>> CreateCollection(
      const std::string& name, const CollectionOptions& options) override {
    ZV_RETURN_IF_ERROR(ValidateCollectionName(name));
    ZV_ASSIGN_OR_RETURN(const IndexKind kind,
                        ValidateCollectionOptions(options));
    std::lock_guard<std::mutex> l(mu_);
    if (collections_.count(name)) {
      return AlreadyExistsError("collection '" + name + "' already exists");
    }
    CollectionOptions o = options;
    if (!o.group) o.group = group_;
    ZV_ASSIGN_OR_RETURN(
        auto c, CollectionImpl::Create(store_, Root(name), name, o, kind));
    if (!gpu_.empty()) c->EnableGpu(gpu_, stripe_rows_);
    collections_.emplace(name, c);
    return std::shared_ptr<Collection>(c);
  }

  Status DropCollection(const std::string& name) override {
    ZV_RETURN_IF_ERROR(ValidateCollectionName(name));
    std::lock_guard<std::mutex> l(mu_);
    auto it = collections_.find(name);
    if (it == collections_.end())
      return NotFoundError("collection '" + name + "' not found");
    it->second->MarkDropped();
    ZV_RETURN_IF_ERROR(store_->DropCollection(name));
    collections_.erase(it);
    std::error_code ec;
    std::filesystem::remove_all(Root(name), ec);
    return OkStatus();
  }

  std::vector<std::string> ListCollections() const override {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<std::string> names;
    for (const auto& [name, c] : collections_) names.push_back(name);
    return names;  // std::map: sorted
  }

  StatusOr<std::shared_ptr<Collection>> GetCollection(
      const std::string& name) const override {
    ZV_RETURN_IF_ERROR(ValidateCollectionName(name));
    std::lock_guard<std::mutex> l(mu_);
    auto it = collections_.find(name);
    if (it == collections_.end())
      return NotFoundError("collection '" + name + "' not found");
    return std::shared_ptr<Collection>(it->second);
  }

 private:
  std::filesystem::path Root(const std::string& name) const {
    return data_dir_ / "collections" / name;
  }

  std::filesystem::path data_dir_;
  std::shared_ptr<MetaStore> store_;
  std::optional<std::string> group_;
  // One budget per device a mirror is split over; empty: no GPU search.
  std::vector<std::shared_ptr<GpuBudget>> gpu_;
  uint64_t stripe_rows_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<CollectionImpl>> collections_;
};

// Gives the data dir and everything under it to `gid` (see DatabaseOptions).
Status ShareTree(const std::filesystem::path& data_dir, gid_t gid) {
  ZV_RETURN_IF_ERROR(ShareWithGroup(data_dir, gid));
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(data_dir, ec), end;
       !ec && it != end; it.increment(ec)) {
    // RocksDB's background jobs may delete a file we just listed.
    if (Status s = ShareWithGroup(it->path(), gid);
        !s.ok() && s.code() != StatusCode::kNotFound) {
      return s;
    }
  }
  if (ec) {
    return InternalError(data_dir.string() + ": cannot list: " + ec.message());
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Database>> Database::Open(
    const std::filesystem::path& data_dir, const DatabaseOptions& options) {
  std::vector<std::shared_ptr<GpuBudget>> gpu;
  const uint64_t stripe_rows = options.gpu.stripe_rows == 0
                                   ? kDefaultStripeRows
                                   : options.gpu.stripe_rows;
  if (options.gpu.enabled) {
    ZV_ASSIGN_OR_RETURN(gpu, CreateGpuBudgets(options.gpu));
    if (stripe_rows % 64 != 0) {
      return InvalidArgumentError(
          "gpu.stripe_rows: " + std::to_string(stripe_rows) +
          " is not a multiple of 64");
    }
  }
  std::optional<gid_t> gid;
  if (options.group) {
    auto resolved = ResolveGroup(*options.group);
    if (!resolved.ok()) return resolved.status().WithContext("data dir group");
    gid = *resolved;
    // RocksDB creates files 0644 & ~umask and has no per-DB mode: keep the
    // group's read bit and nothing for others.
    ::umask(027);
  }
  // Documents and metadata are private: directories this call creates are
  // 0700 (an existing data dir keeps the permissions its operator gave it)
  // unless shared with a group.
  for (const auto& dir :
       {data_dir, data_dir / "collections", data_dir / "meta"}) {
    std::error_code ec;
    if (std::filesystem::exists(dir, ec)) continue;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return InternalError(dir.string() + ": cannot create: " + ec.message());
    }
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, ec);
  }
  // Before RocksDB opens: what it creates from here on inherits the group.
  if (gid) ZV_RETURN_IF_ERROR(ShareTree(data_dir, *gid));
  ZV_ASSIGN_OR_RETURN(std::shared_ptr<MetaStore> store,
                      MetaStore::Open(data_dir / "meta"));
  // Files RocksDB made while opening (LOG, OPTIONS, MANIFEST) and the ingest
  // dir: inherit the group already; make sure of their modes.
  if (gid) ZV_RETURN_IF_ERROR(ShareTree(data_dir / "meta", *gid));
  auto db = std::make_unique<DatabaseImpl>(
      data_dir, std::move(store), options.group, std::move(gpu), stripe_rows);
  ZV_RETURN_IF_ERROR(db->LoadCollections());
  return std::unique_ptr<Database>(std::move(db));
}

}  // namespace zv::index
