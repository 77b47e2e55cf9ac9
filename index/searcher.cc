#include "index/searcher.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_set>

#include "gpusearch/gpu_search.h"
#include "index/distance.h"

namespace zv::index {
namespace {

// Below this many matching rows an exact scan of just those rows beats any ANN
// (and can never under-fill).
uint64_t SelectiveLimit(uint64_t rows) {
  return std::max<uint64_t>(4096, rows / 50);
}

bool UnderFilled(const TopK& top, uint64_t available) {
  const int want = static_cast<int>(std::min<uint64_t>(top.k, available));
  for (size_t q = 0; q < top.nq; ++q) {
    if (top.Filled(q) < want) return true;
  }
  return false;
}

// Exact on the GPU when the rows are mirrored there; false (top untouched)
// sends the search to the CPU, also when the GPU search fails.
bool SearchOnGpu(const SearchContext& ctx, const float* q, size_t nq,
                 const SearchOptions& options, const MirrorMask* mask,
                 TopK* top) {
  if (ctx.gpu == nullptr || ctx.gpu->rows() != ctx.rows) return false;
  const float* device_q =
      options.device_queries != nullptr &&
              options.device_queries_device == ctx.gpu->device()
          ? options.device_queries
          : nullptr;
  TopK gpu_top(top->nq, top->k, top->metric);
  if (!ctx.gpu->Search(q, device_q, nq, mask, &gpu_top).ok()) return false;
  *top = std::move(gpu_top);
  if (ctx.gpu_searches) ctx.gpu_searches->fetch_add(1);
  return true;
}

// A filter as a cache key (length-prefixed fields: no two filters share one).
std::string FilterKey(const Filter& f) {
  std::string key;
  auto add = [&key](const std::string& part) {
    key += std::to_string(part.size()) + ":" + part;
  };
  add(f.ns ? "n" + *f.ns : "-");
  for (const auto& [k, v] : f.metadata_equals) {
    add(k);
    add(v);
  }
  add(f.min_timestamp_ms ? std::to_string(*f.min_timestamp_ms) : "-");
  add(f.max_timestamp_ms ? std::to_string(*f.max_timestamp_ms) : "-");
  return key;
}

// How many rows a recency search ranks by similarity before re-scoring.
int RecencyCandidates(const Recency& r, int k) {
  if (r.candidates > 0) return std::max(r.candidates, k);
  return std::min(kMaxK, std::max(10 * k, 100));
}

// (score, row) best first for each query: the top as found, or its candidates
// re-scored exactly with the recency term (see Recency) and cut to k.
std::vector<std::vector<std::pair<float, int64_t>>> Rank(
    const SearchContext& ctx, const float* padded_queries, const TopK& top,
    const SearchOptions& options) {
  const shm::SegmentView& view = *ctx.view;
  const uint32_t stride = view.info().row_stride;
  const bool ip = top.metric == shm::Metric::kInnerProduct;
  std::vector<std::vector<std::pair<float, int64_t>>> out(top.nq);
  for (size_t i = 0; i < top.nq; ++i) {
    for (int j = 0; j < top.Filled(i); ++j) {
      out[i].emplace_back(top.dist[i * top.k + j], top.rows[i * top.k + j]);
    }
    if (!options.recency) continue;
    const Recency& r = *options.recency;
    const int64_t now = r.now_ms != 0 ? r.now_ms : NowMs();
    for (auto& [score, row] : out[i]) {
      // Exact: an IVF-PQ candidate's score is an estimate.
      const float* q = padded_queries + i * stride;
      const float sim = ip ? InnerProduct16(q, view.Row(row), stride)
                           : L2Sqr16(q, view.Row(row), stride);
      const double age = static_cast<double>(
          std::max<int64_t>(0, now - ctx.attrs->timestamp(row)));
      const double fresh =
          std::exp2(-age / static_cast<double>(r.half_life_ms));
      double s;
      if (r.weight > 0) {
        s = ip ? sim + r.weight * fresh : sim - r.weight * fresh;
      } else {
        s = ip ? sim * fresh : (fresh > 0 ? sim / fresh : HUGE_VAL);
      }
      score = static_cast<float>(s);
    }
    std::stable_sort(out[i].begin(), out[i].end(),
                     [&](const auto& a, const auto& b) {
                       return top.Better(a.first, b.first);
                     });
  }
  return out;
}

}  // namespace

StatusOr<std::optional<uint64_t>> VisibleRow(const SearchContext& ctx,
                                             const std::string& id,
                                             int64_t now_ms) {
  using Row = std::optional<uint64_t>;
  ZV_ASSIGN_OR_RETURN(auto e, ctx.store->GetId(ctx.collection, id));
  if (!e || e->generation != ctx.generation) return Row();
  uint64_t row = e->row;
  if (row >= ctx.rows) {  // an upsert in flight: its old row is the record
    if (!e->prev_row) return Row();
    row = *e->prev_row;
  }
  if (row >= ctx.rows || row >= ctx.attrs->size() ||
      ctx.view->IsTombstoned(row) || !ctx.attrs->present(row) ||
      ctx.attrs->id(row) != id || IsExpired(ctx.attrs->expires(row), now_ms)) {
    return Row();
  }
  return Row(row);
}

namespace {

// Which rows qualify for one search: all live rows, or a bitmap of live rows
// matching the filter. Rows expired but not yet swept (only between an expiry
// and the next sweep) are left out by the bitmap, or without a filter by a
// check per candidate. On the GPU the bitmap goes as a device mask, cached per
// filter while the rows do not change (not with expiry: it depends on the
// clock); a cached mask needs no bitmap at all.
struct Qualifying {
  Qualifying(const SearchContext& ctx, const SearchOptions& options)
      : ctx_(ctx),
        options_(options),
        live_(*ctx.view),
        now_(NowMs()),
        unexpired_(*ctx.view, *ctx.attrs, now_),
        expiry_(ctx.attrs->MayHaveExpired(now_)),
        on_gpu_(ctx.gpu != nullptr && ctx.gpu->rows() == ctx.rows) {
    const shm::SegmentView& view = *ctx.view;
    available = ctx.rows - std::min(ctx.rows, view.TombstoneCount());
    if (on_gpu_ && !expiry_ && !options.filter.empty()) {
      key_ = FilterKey(options.filter);
      cached_ = ctx.gpu->FindMask(key_, ctx.rows, view.TombstoneCount());
    }
    if (cached_) {
      available = cached_->matching;
    } else if (!options.filter.empty() || (expiry_ && on_gpu_)) {
      BuildBitmap();
    } else if (expiry_) {
      sel = &unexpired_;  // `available` over-counts: an under-fill goes exact
    } else if (view.TombstoneCount() > 0) {
      sel = &live_;
    }
  }

  void BuildBitmap() {
    CompiledFilter f = ctx_.attrs->Compile(options_.filter);
    if (expiry_) f.now_ms = now_;
    bitmap.emplace(*ctx_.view, *ctx_.attrs, f, ctx_.rows);
    sel = &*bitmap;
    available = bitmap->count();
  }

  bool Selective() const {
    return bitmap && available <= SelectiveLimit(ctx_.rows);
  }

  // The GPU's answer, or false for the CPU to answer (a bitmap is built
  // then if only a cached mask stood for it).
  bool TryGpu(const float* q, size_t nq, TopK* top) {
    if (!on_gpu_) return false;
    const MirrorMask* mask = cached_ ? cached_->mask.get() : nullptr;
    std::unique_ptr<MirrorMask> once;
    if (mask == nullptr && bitmap) {
      if (!key_.empty()) {
        auto added = ctx_.gpu->AddMask(key_, ctx_.rows,
                                       ctx_.view->TombstoneCount(), *bitmap);
        if (added.ok()) mask = (cached_ = std::move(added).value())->mask.get();
      } else {
        auto made = ctx_.gpu->UploadMask(*bitmap);
        if (made.ok()) mask = (once = std::move(made).value()).get();
      }
      if (mask == nullptr) return false;
    }
    if (SearchOnGpu(ctx_, q, nq, options_, mask, top)) return true;
    if (cached_ && !bitmap) BuildBitmap();
    return false;
  }

  std::optional<RowBitmap> bitmap;
  const faiss::IDSelector* sel = nullptr;
  uint64_t available = 0;

 private:
  const SearchContext& ctx_;
  const SearchOptions& options_;
  LiveRows live_;
  const int64_t now_;
  LiveUnexpiredRows unexpired_;
  const bool expiry_;
  const bool on_gpu_;
  std::string key_;
  std::optional<GenerationMirror::CachedMask> cached_;
};

}  // namespace

StatusOr<std::vector<std::vector<Hit>>> SearchSegment(
    const SearchContext& ctx, std::span<const float> queries,
    const SearchOptions& options) {
  const shm::SegmentView& view = *ctx.view;
  const uint32_t dim = view.info().dim, stride = view.info().row_stride;
  const size_t nq = queries.size() / dim;
  const std::vector<float> q = PadQueries(queries, dim, stride);
  const int k = options.recency ? RecencyCandidates(*options.recency, options.k)
                                : options.k;
  TopK top(nq, k, view.info().metric);

  Qualifying which(ctx, options);
  const faiss::IDSelector* const& sel = which.sel;
  if (which.available == 0) {
    // nothing matches
  } else if (which.Selective()) {
    const std::vector<int64_t> rows = which.bitmap->Rows();
    FlatSearchRows(view, rows, q.data(), nq, &top);
  } else if (which.TryGpu(q.data(), nq, &top)) {
    // exact, on the GPU
  } else if (which.Selective()) {  // a cached mask failed on the GPU
    const std::vector<int64_t> rows = which.bitmap->Rows();
    FlatSearchRows(view, rows, q.data(), nq, &top);
  } else if (ctx.ann != nullptr && ctx.ann->indexed() > 0) {
    // The ANN reports the prefix its snapshot covered; the rest is the tail.
    uint64_t covered = 0;
    ZV_RETURN_IF_ERROR(ctx.ann->Search(q.data(), nq, sel, ctx.ann_params,
                                       ctx.rows, &top, &covered));
    FlatSearch(view, std::min(covered, ctx.rows), ctx.rows, q.data(), nq, sel,
               &top);
    if (UnderFilled(top, which.available)) {  // ANN lost some: answer exactly
      top = TopK(nq, k, view.info().metric);
      FlatSearch(view, 0, ctx.rows, q.data(), nq, sel, &top);
    }
  } else {
    FlatSearch(view, 0, ctx.rows, q.data(), nq, sel, &top);
  }

  const auto ranked = Rank(ctx, q.data(), top, options);
  std::vector<std::vector<Hit>> hits(nq);
  for (size_t i = 0; i < nq; ++i) {
    // An id can own two live rows for a moment: a replacement is committed
    // before the row it replaces is tombstoned (and a writer killed in between
    // leaves both until it reopens). Report each id once, at its best score.
    std::unordered_set<std::string> seen;
    for (const auto& [score, row] : ranked[i]) {
      if (hits[i].size() == static_cast<size_t>(options.k)) break;
      Hit h;
      h.score = score;
      ctx.attrs->Describe(row, options.include_documents, &h.record);
      h.id = h.record.id;
      if (!seen.insert(h.id).second) continue;
      if (options.include_documents && ctx.store) {
        ZV_ASSIGN_OR_RETURN(
            auto rec,
            ctx.store->GetRow(ctx.collection, ctx.generation, row, true));
        if (rec) h.record.text = std::move(rec->text);
      }
      hits[i].push_back(std::move(h));
    }
  }
  return hits;
}

}  // namespace zv::index
