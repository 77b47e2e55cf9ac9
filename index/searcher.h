// The search path shared by the writer's Collection and AttachedCollection:
// filter bitmap, ANN over indexed rows + exact over the rest, exact fallback
// whenever the ANN under-fills, then rows -> Hits.
#ifndef ZEROVEC_INDEX_SEARCHER_H_
#define ZEROVEC_INDEX_SEARCHER_H_

#include <atomic>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "index/ann_index.h"
#include "index/collection.h"
#include "index/filter.h"
#include "index/gpu_mirror.h"
#include "index/meta_store.h"
#include "shm/segment.h"

namespace zv::index {

struct SearchContext {
  const shm::SegmentView* view = nullptr;
  const AttributeTable* attrs = nullptr;
  uint64_t rows = 0;              // search rows [0, rows)
  const AnnIndex* ann = nullptr;  // null: exact only
  // Rows [0, rows) on the GPU: searched there exactly instead of ann / flat.
  const GenerationMirror* gpu = nullptr;
  std::atomic<uint64_t>* gpu_searches = nullptr;  // counts them when set
  AnnSearchParams ann_params;
  const MetaStore* store = nullptr;  // for documents
  std::string collection;
  uint64_t generation = 0;
};

// Get's visibility rule, the one place it is written: the row among
// [0, ctx.rows) that holds `id`'s current record (for an upsert in flight,
// its old row), if that row is live, has attributes, and is not expired at
// `now_ms`.
StatusOr<std::optional<uint64_t>> VisibleRow(const SearchContext& ctx,
                                             const std::string& id,
                                             int64_t now_ms);

// `queries` already validated (nq x dim).
StatusOr<std::vector<std::vector<Hit>>> SearchSegment(
    const SearchContext& ctx, std::span<const float> queries,
    const SearchOptions& options);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_SEARCHER_H_
