// Compaction: copies the live rows into a new segment generation, then switches
// to it. The catalog's generation number (in the same WriteBatch as the new
// rows and ids) is the commit point; <root>/CURRENT follows it by atomic rename
// for tools that read no RocksDB. Searches keep using the old generation until
// the swap; attached readers see the old segment Retired() and re-attach.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "index/collection_impl.h"
#include "index/validate.h"

namespace zv::index {

// No lock needed: only this writer thread mutates the old generation, and
// its rows below `committed` are immutable.
Status CollectionImpl::CopyLiveRows(const Generation& old, Generation* next,
                                    MetaStore::Batch* batch,
                                    std::vector<std::string>* expired_ids) {
  const std::string& name = meta_.name;
  const shm::Writer& ow = *old.writer;
  shm::Writer& nw = *next->writer;
  const uint64_t committed = ow.committed();
  const uint32_t stride = ow.info().row_stride;
  constexpr uint64_t kChunk = 4096;
  // Expired rows the sweep has not reached yet are dropped here too, with
  // their ids.
  const int64_t now = NowMs();
  for (uint64_t row = 0; row < committed;) {
    std::vector<uint64_t> live;
    for (; row < committed && live.size() < kChunk; ++row) {
      if (ow.IsTombstoned(row) || !old.attrs.present(row)) continue;
      if (IsExpired(old.attrs.expires(row), now)) {
        expired_ids->emplace_back(old.attrs.id(row));
        batch->DeleteId(name, expired_ids->back());
        continue;
      }
      live.push_back(row);
    }
    if (live.empty()) continue;
    const uint64_t first = nw.committed();
    ZV_RETURN_IF_ERROR(nw.Reserve(live.size()));
    for (size_t i = 0; i < live.size(); ++i) {
      std::memcpy(nw.MutableRow(first + i), ow.Row(live[i]),
                  stride * sizeof(float));
      nw.SetId(first + i, ow.Id(live[i]));
      ZV_ASSIGN_OR_RETURN(auto rec,
                          store_->GetRow(name, old.number, live[i], true));
      if (!rec)
        return DataLossError("collection '" + name + "': row " +
                             std::to_string(live[i]) + " lost its meta entry");
      batch->PutRow(name, next->number, first + i, *rec);
      batch->PutId(name, rec->id,
                   IdEntry{next->number, first + i, std::nullopt});
      next->attrs.Append(*rec);
    }
    ZV_RETURN_IF_ERROR(nw.Commit(first + live.size()));
  }
  return OkStatus();
}

StatusOr<CompactionResult> CollectionImpl::Compact() {
  const auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> writer_lock(write_mu_);
  ZV_RETURN_IF_ERROR(CheckAlive());
  Generation& old = *g_;
  const std::string& name = meta_.name;
  const shm::Writer& ow = *old.writer;
  const uint64_t committed = ow.committed();

  auto next = std::make_unique<Generation>();
  next->number = old.number + 1;
  next->dir = root_ / GenerationDirName(next->number);
  std::error_code ec;
  std::filesystem::remove_all(next->dir, ec);
  shm::SegmentOptions so;
  so.dim = meta_.options.dim;
  so.metric = meta_.options.metric;
  so.rows_per_extent = meta_.options.rows_per_extent;
  so.group = meta_.options.group;
  so.sync = meta_.options.sync;
  ZV_ASSIGN_OR_RETURN(next->writer, shm::Writer::Create(next->dir, so));
  shm::Writer& nw = *next->writer;
  nw.SetGeneration(next->number);

  auto batch = store_->NewBatch();
  std::vector<std::string> expired_ids;
  ZV_RETURN_IF_ERROR(CopyLiveRows(old, next.get(), &batch, &expired_ids));
  ZV_RETURN_IF_ERROR(nw.Sync());
  // IVF-PQ is built before the switch, so searches never see it half-built;
  // HNSW starts with no pieces (every row in the exact tail) and its builder
  // thread builds them in the background.
  ZV_RETURN_IF_ERROR(OpenAnn(next.get()));
  if (next->ann) ZV_RETURN_IF_ERROR(next->ann->Save());
  // (Per device: a split mirror charges each part about the same share.)
  const uint64_t old_share =
      old.mirror ? old.mirror->charged_bytes() / old.mirror->parts() : 0;
  if (gpu_ && old.mirror &&
      std::any_of(gpu_parts_.begin(), gpu_parts_.end(), [&](const auto& b) {
        return b->used_bytes() + old_share > b->budget_bytes();
      })) {
    // Both mirrors may not fit at once: the old one goes first (searches run
    // on the CPU until the switch).
    std::unique_lock<RwLock> l(mu_);
    old.mirror.reset();
  }
  BuildMirror(next.get());  // from the new rows, before searches see them

  CollectionMeta meta = meta_;
  meta.generation = next->number;
  batch.DeleteGeneration(name, old.number);
  batch.PutCollection(meta);
  ZV_RETURN_IF_ERROR(store_->Write(batch, /*sync=*/true));  // the commit point
  ZV_RETURN_IF_ERROR(WriteCurrent(root_, next->number));

  std::unique_ptr<Generation> retired;
  {
    std::unique_lock<RwLock> l(mu_);
    meta_.generation = meta.generation;
    retired = std::exchange(g_, std::move(next));
  }
  // Other ids and texts are unchanged: the lexical index drops the expired
  // ids and takes the new stamp.
  UpdateLexical({}, expired_ids);
  retired->writer->Retire();
  const auto old_dir = retired->dir;
  retired.reset();
  // Attached readers keep their mappings of the unlinked files until they
  // re-attach.
  std::filesystem::remove_all(old_dir, ec);
  CompactionResult result;
  result.rows_before = committed;
  result.rows_after = nw.committed();  // nw now lives in g_
  result.tombstones_removed = committed - result.rows_after;
  result.generation = meta.generation;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

}  // namespace zv::index
