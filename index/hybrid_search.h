// Lexical and hybrid search (issue 17) over the same SearchContext as dense
// search: lexical candidates come from the collection's LexicalSearcher and
// pass the same visibility and Filter rules as dense rows (live, committed,
// AttributeTable::Matches); hybrid fuses the two rankings by reciprocal rank
// (FusionOptions in collection.h).
#ifndef ZEROVEC_INDEX_HYBRID_SEARCH_H_
#define ZEROVEC_INDEX_HYBRID_SEARCH_H_

#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "index/collection.h"
#include "index/lexical_index.h"
#include "index/searcher.h"

namespace zv::index {

// Any mode. `queries` and `options` already validated (ValidateSearch);
// `lexical` null: lexical and hybrid fail FAILED_PRECONDITION naming
// `ctx.collection`.
StatusOr<std::vector<std::vector<Hit>>> SearchAnyMode(
    const SearchContext& ctx, const LexicalSearcher* lexical,
    std::span<const float> queries, const SearchOptions& options);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_HYBRID_SEARCH_H_
