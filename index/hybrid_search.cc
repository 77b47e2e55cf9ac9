#include "index/hybrid_search.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace zv::index {
namespace {

// Get's rule (searcher.h); a failed lookup counts as not visible.
std::optional<uint64_t> VisibleRow(const SearchContext& ctx,
                                   const std::string& id) {
  auto row = index::VisibleRow(ctx, id, NowMs());
  return row.ok() ? *row : std::nullopt;
}

// A hit for `row` with what the options ask for.
StatusOr<Hit> HitOfRow(const SearchContext& ctx, uint64_t row,
                       bool include_documents) {
  Hit h;
  ctx.attrs->Describe(row, include_documents, &h.record);
  h.id = h.record.id;
  if (include_documents && ctx.store) {
    ZV_ASSIGN_OR_RETURN(
        auto rec, ctx.store->GetRow(ctx.collection, ctx.generation, row, true));
    if (rec) h.record.text = std::move(rec->text);
  }
  return h;
}

struct LexicalCandidate {
  uint64_t row = 0;
  double weight = 0;
};

// Without a filter nearly every document Xapian ranks is visible (it holds
// live ids only, but for a write in progress), so the top k are looked up
// after the match, not each candidate during it; a window that loses some is
// doubled.
StatusOr<std::vector<LexicalCandidate>> LexicalTopKUnfiltered(
    const SearchContext& ctx, const LexicalSearcher& lexical,
    const std::string& text, int k) {
  for (int window = k;; window *= 2) {
    ZV_ASSIGN_OR_RETURN(auto hits, lexical.Search(text, window, nullptr));
    std::vector<LexicalCandidate> out;
    for (const LexicalHit& h : hits) {
      const std::optional<uint64_t> row = VisibleRow(ctx, h.id);
      if (row) out.push_back({*row, h.weight});
      if (out.size() == static_cast<size_t>(k)) break;
    }
    if (out.size() == static_cast<size_t>(k) ||
        hits.size() < static_cast<size_t>(window)) {
      return out;
    }
  }
}

// Up to `k` live rows matching the filter, best BM25 first.
StatusOr<std::vector<LexicalCandidate>> LexicalTopK(
    const SearchContext& ctx, const LexicalSearcher& lexical,
    const std::string& text, int k, const Filter& filter) {
  if (filter.empty()) return LexicalTopKUnfiltered(ctx, lexical, text, k);
  const CompiledFilter compiled = ctx.attrs->Compile(filter);
  if (compiled.impossible) return std::vector<LexicalCandidate>{};
  // Each candidate is checked during the match, so a selective filter still
  // yields k hits.
  std::unordered_map<std::string, uint64_t> rows;
  auto accept = [&](const std::string& id) {
    const std::optional<uint64_t> row = VisibleRow(ctx, id);
    if (!row || !ctx.attrs->Matches(*row, compiled)) {
      return false;
    }
    rows[id] = *row;
    return true;
  };
  ZV_ASSIGN_OR_RETURN(auto hits, lexical.Search(text, k, accept));
  std::vector<LexicalCandidate> out;
  for (const LexicalHit& h : hits) out.push_back({rows.at(h.id), h.weight});
  return out;
}

StatusOr<std::vector<Hit>> LexicalOnly(const SearchContext& ctx,
                                       const LexicalSearcher& lexical,
                                       const std::string& text,
                                       const SearchOptions& options) {
  ZV_ASSIGN_OR_RETURN(auto candidates, LexicalTopK(ctx, lexical, text,
                                                   options.k, options.filter));
  std::vector<Hit> hits;
  for (size_t i = 0; i < candidates.size(); ++i) {
    ZV_ASSIGN_OR_RETURN(
        Hit h, HitOfRow(ctx, candidates[i].row, options.include_documents));
    h.score = static_cast<float>(candidates[i].weight);
    h.lexical_rank = static_cast<uint32_t>(i + 1);
    hits.push_back(std::move(h));
  }
  return hits;
}

// Reciprocal-rank fusion of one query's dense hits (ranked, best first) and
// lexical candidates.
StatusOr<std::vector<Hit>> Fuse(const SearchContext& ctx,
                                std::vector<Hit> dense,
                                const std::vector<LexicalCandidate>& lexical,
                                const SearchOptions& options) {
  const FusionOptions& f = options.fusion;
  struct Fused {
    double score = 0;
    uint32_t dense_rank = 0, lexical_rank = 0;
    std::optional<uint64_t> row;    // known for lexical candidates
    std::optional<size_t> dense_i;  // index into `dense`
  };
  std::unordered_map<std::string, Fused> by_id;
  std::vector<std::string> order;  // first-seen order: a stable tie-break
  auto entry = [&](const std::string& id) -> Fused& {
    auto [it, added] = by_id.try_emplace(id);
    if (added) order.push_back(id);
    return it->second;
  };
  for (size_t i = 0; i < dense.size(); ++i) {
    Fused& e = entry(dense[i].id);
    e.dense_rank = static_cast<uint32_t>(i + 1);
    e.dense_i = i;
    e.score += f.dense_weight / (f.rrf_k + e.dense_rank);
  }
  for (size_t i = 0; i < lexical.size(); ++i) {
    const uint64_t row = lexical[i].row;
    Fused& e = entry(std::string(ctx.attrs->id(row)));
    e.lexical_rank = static_cast<uint32_t>(i + 1);
    e.row = row;
    e.score += f.lexical_weight / (f.rrf_k + e.lexical_rank);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) {
                     return by_id[a].score > by_id[b].score;
                   });
  if (order.size() > static_cast<size_t>(options.k)) order.resize(options.k);
  std::vector<Hit> hits;
  for (const std::string& id : order) {
    const Fused& e = by_id[id];
    std::optional<uint64_t> row = e.row;
    if (!row && options.include_documents) row = VisibleRow(ctx, id);
    Hit h;
    if (row) {
      ZV_ASSIGN_OR_RETURN(h, HitOfRow(ctx, *row, options.include_documents));
    } else {
      h = std::move(dense[*e.dense_i]);  // replaced since: as the dense hit
    }
    h.score = static_cast<float>(e.score);
    h.dense_rank = e.dense_rank;
    h.lexical_rank = e.lexical_rank;
    hits.push_back(std::move(h));
  }
  return hits;
}

}  // namespace

StatusOr<std::vector<std::vector<Hit>>> SearchAnyMode(
    const SearchContext& ctx, const LexicalSearcher* lexical,
    std::span<const float> queries, const SearchOptions& options) {
  if (options.mode == SearchMode::kDense) {
    ZV_ASSIGN_OR_RETURN(auto hits, SearchSegment(ctx, queries, options));
    for (auto& list : hits) {
      for (size_t i = 0; i < list.size(); ++i) list[i].dense_rank = i + 1;
    }
    return hits;
  }
  if (lexical == nullptr) {
    return FailedPreconditionError(
        "collection '" + ctx.collection +
        "' has no lexical index: lexical and hybrid searches need one "
        "(create the collection with lexical on)");
  }
  const size_t nq = options.query_texts.size();
  std::vector<std::vector<Hit>> out(nq);
  if (options.mode == SearchMode::kLexical) {
    for (size_t q = 0; q < nq; ++q) {
      ZV_ASSIGN_OR_RETURN(
          out[q], LexicalOnly(ctx, *lexical, options.query_texts[q], options));
    }
    return out;
  }
  // Hybrid: both candidate lists `depth` deep, then fused.
  const int depth =
      options.fusion.depth > 0
          ? options.fusion.depth
          : std::min(kMaxK, std::max(options.k, kDefaultFusionDepth));
  SearchOptions dense_options = options;
  dense_options.k = depth;
  dense_options.include_documents = false;  // fetched for the fused top k
  if (dense_options.ef_search != 0 && dense_options.ef_search < depth) {
    dense_options.ef_search = std::min(kMaxEfSearch, depth);
  }
  ZV_ASSIGN_OR_RETURN(auto dense, SearchSegment(ctx, queries, dense_options));
  for (size_t q = 0; q < nq; ++q) {
    ZV_ASSIGN_OR_RETURN(auto lexical_candidates,
                        LexicalTopK(ctx, *lexical, options.query_texts[q],
                                    depth, options.filter));
    ZV_ASSIGN_OR_RETURN(
        out[q], Fuse(ctx, std::move(dense[q]), lexical_candidates, options));
  }
  return out;
}

}  // namespace zv::index
