// The writer's live HNSW graph (see hnsw_live.h).
#include "index/hnsw_live.h"

#include <algorithm>

#include "index/ann_index.h"
#include "index/hnsw_search.h"

namespace zv::index {
namespace {

// Unpublished rows that trigger a copy: a sixteenth of the graph (so copying
// stays a small fraction of inserting), between these bounds (so the rows
// searches scan exactly stay few).
constexpr uint64_t kMinPublishRows = 64;
constexpr uint64_t kMaxPublishRows = 512;

}  // namespace

LiveGraph::LiveGraph(const shm::SegmentInfo& info, int m, int efc,
                     uint64_t begin)
    : info_(info),
      m_(m),
      begin_(begin),
      storage_(rows_, begin, info.row_stride, info.metric),
      index_(&storage_, m),  // does not own the storage
      end_(begin) {
  index_.hnsw.efConstruction = efc;
  auto first = std::make_shared<Copy>();
  first->end = begin;
  published_ = std::move(first);
}

uint64_t LiveGraph::searchable() const {
  std::lock_guard<std::mutex> l(mu_);
  return published_->end;
}

Status LiveGraph::Insert(const RowTable& rows, uint64_t n, bool publish) {
  const uint64_t first = end();
  if (n > 0) {
    if (first + n > rows.rows() || rows.ContiguousFrom(first) < n)
      return InvalidArgumentError("live HNSW graph: rows not available");
    if (rows.rows() != rows_.rows()) rows_ = rows;
    ZV_RETURN_IF_ERROR(CatchFaiss("live HNSW insert", [&] {
      index_.add(static_cast<faiss::Index::idx_t>(n), rows_.Row(first));
    }));
    end_.store(first + n, std::memory_order_release);
  }
  const uint64_t unpublished = end() - searchable();
  const uint64_t threshold =
      std::clamp(size() / 16, kMinPublishRows, kMaxPublishRows);
  if (unpublished > 0 && (publish || unpublished >= threshold)) Publish();
  return OkStatus();
}

void LiveGraph::Publish() {
  const faiss::HNSW& h = index_.hnsw;
  auto copy = std::make_shared<Copy>();
  copy->end = end();
  copy->entry_point = h.entry_point;
  copy->max_level = h.max_level;
  copy->cum.assign(h.cum_nneighbor_per_level.begin(),
                   h.cum_nneighbor_per_level.end());
  copy->levels.assign(h.levels.begin(), h.levels.end());
  copy->offsets.assign(h.offsets.begin(), h.offsets.end());
  copy->neighbors.assign(h.neighbors.begin(), h.neighbors.end());
  std::lock_guard<std::mutex> l(mu_);
  published_ = std::move(copy);
}

uint64_t LiveGraph::Search(const shm::SegmentView& view, const float* queries,
                           size_t nq, const faiss::IDSelector* sel, int ef,
                           uint64_t limit, TopK* out) const {
  std::shared_ptr<const Copy> c;
  {
    std::lock_guard<std::mutex> l(mu_);
    c = published_;
  }
  const uint64_t end = std::min(c->end, limit);
  if (end <= begin_) return begin_;
  const GraphRef g{begin_,
                   end - begin_,
                   c->max_level,
                   c->entry_point,
                   info_.metric == shm::Metric::kInnerProduct,
                   info_.row_stride,
                   c->cum.data(),
                   c->offsets.data(),
                   c->neighbors.data()};
  // The entry point is the node of the highest level, which a graph that
  // grew past `limit` may have placed there: search none of it then.
  if (g.entry_point < 0 || static_cast<uint64_t>(g.entry_point) >= g.nodes)
    return begin_;
  const size_t stride = info_.row_stride;
  const int k = out->k;
  TopK part(nq, k, out->metric);
  // Several queries (SearchBatch) spread over threads, as over the pieces;
  // the published copy is immutable, so readers share it.
  const RowTable table(view, end);
#pragma omp parallel for if (nq > 1) schedule(dynamic)
  for (size_t q = 0; q < nq; ++q) {
    SearchGraphRows(g, table, queries + q * stride, k, ef, sel,
                    &part.dist[q * k], &part.rows[q * k]);
  }
  out->Merge(part);
  return end;
}

StatusOr<std::shared_ptr<const Piece>> LiveGraph::Freeze(
    const std::filesystem::path& dir, uint64_t serial) const {
  if (size() == 0) return InvalidArgumentError("live HNSW graph is empty");
  return WritePiece(dir, serial, info_, index_.hnsw, m_, begin_, end());
}

}  // namespace zv::index
