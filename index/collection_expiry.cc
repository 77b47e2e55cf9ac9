// The collection's expiry (issue 17): Touch renews items as replacement rows,
// SweepExpired deletes expired ones by the delete protocol. Searches and Get
// hide expired rows by the clock rule (IsExpired) without either.
#include <cstring>
#include <unordered_set>

#include "index/collection_impl.h"
#include "index/validate.h"

namespace zv::index {

StatusOr<uint64_t> CollectionImpl::Touch(std::span<const std::string> ids,
                                         int64_t expires_at_ms) {
  ZV_RETURN_IF_ERROR(ValidateIds(ids));
  if (expires_at_ms < 0) {
    return InvalidArgumentError("expires_at_ms is negative (" +
                                std::to_string(expires_at_ms) + ")");
  }
  std::lock_guard<std::mutex> writer_lock(write_mu_);
  ZV_RETURN_IF_ERROR(CheckAlive());
  const uint32_t dim = meta_.options.dim;
  const int64_t at = expires_at_ms > 0 ? expires_at_ms : DefaultExpiry();
  // The renewed item is a replacement row with the same vector and record:
  // the write protocol, readers and recovery need nothing new for it.
  std::vector<Record> records;
  std::vector<float> vectors;
  {
    std::shared_lock<RwLock> l(mu_);
    std::unordered_set<std::string> seen;
    for (const std::string& id : ids) {
      if (!seen.insert(id).second) continue;
      ZV_ASSIGN_OR_RETURN(auto row, VisibleRow(id));
      if (!row) continue;
      ZV_ASSIGN_OR_RETURN(auto rec,
                          store_->GetRow(meta_.name, g_->number, *row, true));
      if (!rec) continue;
      rec->expires_at_ms = at;
      records.push_back(std::move(*rec));
      const float* v = g_->writer->Row(*row);
      vectors.insert(vectors.end(), v, v + dim);
    }
  }
  if (records.empty()) return uint64_t{0};
  ZV_RETURN_IF_ERROR(UpsertLocked(
      records,
      [&](std::span<float* const> rows, DeviceRowTargets*) {
        for (size_t i = 0; i < rows.size(); ++i) {
          std::memcpy(rows[i], vectors.data() + i * dim, dim * sizeof(float));
        }
        return OkStatus();
      },
      /*check_rows=*/false));
  return static_cast<uint64_t>(records.size());
}

StatusOr<uint64_t> CollectionImpl::SweepExpired(int64_t now_ms) {
  std::lock_guard<std::mutex> writer_lock(write_mu_);
  ZV_RETURN_IF_ERROR(CheckAlive());
  Generation& g = *g_;
  std::vector<uint64_t> due;
  {
    std::shared_lock<RwLock> l(mu_);
    if (!g.attrs.MayHaveExpired(now_ms)) return uint64_t{0};
  }
  {
    std::unique_lock<RwLock> l(mu_);  // the queue is read by searches
    due = g.attrs.PopExpired(now_ms);
  }
  auto batch = store_->NewBatch();
  std::vector<uint64_t> rows;
  std::vector<std::string> ids;  // whose current row this is
  for (uint64_t row : due) {
    // Replaced, deleted or renewed rows are tombstoned already.
    if (row >= g.writer->committed() || g.writer->IsTombstoned(row)) continue;
    std::string id(g.attrs.id(row));
    ZV_ASSIGN_OR_RETURN(auto e, store_->GetId(meta_.name, id));
    if (e && e->generation == g.number && e->row == row) {
      batch.DeleteId(meta_.name, id);
      ids.push_back(std::move(id));
    }
    batch.DeleteRow(meta_.name, g.number, row);
    rows.push_back(row);
  }
  if (rows.empty()) return uint64_t{0};
  if (Status s = CommitDelete(batch, rows, ids); !s.ok()) {
    std::unique_lock<RwLock> l(mu_);
    g.attrs.RequeueExpired(rows);  // the next sweep tries again
    return s;
  }
  expired_swept_.fetch_add(rows.size(), std::memory_order_relaxed);
  return static_cast<uint64_t>(rows.size());
}

}  // namespace zv::index
