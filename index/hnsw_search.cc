// The HNSW graph search (see hnsw_search.h). One loop body (Loop), inlined
// into a function per instruction set; the distance kernel is inlined into it,
// so a distance costs no call, no dispatch and no virtual call.
#include "index/hnsw_search.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "index/distance_kernel.h"
#include "index/filter.h"

namespace zv::index {
namespace {

using hnsw_loop::Greater;
using hnsw_loop::Less;
using hnsw_loop::PrefetchAhead;
using hnsw_loop::PrefetchRow;
using hnsw_loop::Scored;

// How a search tests membership: no filter, a RowBitmap's words (inline), or
// any other selector (a virtual call).
enum FilterKind { kNone, kBitmap, kSelector };

struct Args {
  const GraphRef* g;
  const RowTable* rows;
  const float* query;
  int k, ef;
  const faiss::IDSelector* sel;
  const uint64_t* words;  // kBitmap: bit r of the bitmap is row r
  uint64_t words_limit;   // rows the bitmap covers
  float* dist;
  int64_t* out;
  size_t ahead;  // rows prefetched ahead (>= 1)
};

// 8 rows ahead: 1.35x faster than hnswlib's one row at ef 512 on 200k real
// rows on a 2-core EPYC (bench/RESULTS.md, issue 21).
std::atomic<int> search_prefetch_rows{8};

// Per-thread buffers, reused across searches.
struct Scratch {
  VisitedArray visited;
  std::vector<Scored> cand, best;
  std::vector<int32_t> fresh;
};

Scratch& ThreadScratch() {
  thread_local Scratch s;
  return s;
}

template <bool kL2, FilterKind kFilter>
__attribute__((always_inline)) inline void Loop(const Args& a) {
  const GraphRef& g = *a.g;
  const RowTable& rt = *a.rows;
  const float* query = a.query;
  const int k = a.k;
  const uint64_t begin = g.begin, nodes = g.nodes;
  const size_t stride = g.stride;
  const int32_t* cum = g.cum;
  const uint64_t* offsets = g.offsets;
  const int32_t* neighbors = g.neighbors;
  // Internal distances: smaller is closer (IP negated).
  auto row = [&](int32_t v) {
    return rt.Row(begin + static_cast<uint64_t>(v));
  };
  auto d = [&](const float* r) {
    return kL2 ? kernel::Distance<true>(query, r, stride)
               : -kernel::Distance<false>(query, r, stride);
  };
  auto member = [&](int32_t v) {
    const uint64_t r = begin + static_cast<uint64_t>(v);
    if constexpr (kFilter == kNone) {
      return true;
    } else if constexpr (kFilter == kBitmap) {
      return r < a.words_limit && ((a.words[r >> 6] >> (r & 63)) & 1);
    } else {
      return a.sel->is_member(static_cast<int64_t>(r));
    }
  };
  // Greedy descent through the upper layers.
  int32_t cur = g.entry_point;
  float dcur = d(row(cur));
  for (int l = g.max_level; l >= 1; --l) {
    for (bool moved = true; moved;) {
      moved = false;
      const int32_t* links = neighbors + offsets[cur];
      const int32_t n = cum[l + 1] - cum[l];
      links += cum[l];
      for (int32_t j = 0; j < n; ++j) {
        const int32_t v = links[j];
        if (v < 0) break;
        if (static_cast<uint64_t>(v) >= nodes) continue;
        if (j + 1 < n && links[j + 1] >= 0 &&
            static_cast<uint64_t>(links[j + 1]) < nodes)
          PrefetchRow(row(links[j + 1]), stride);
        const float dv = d(row(v));
        if (dv < dcur) cur = v, dcur = dv, moved = true;
      }
    }
  }
  // Beam search on layer 0: candidates by closeness, results (members only)
  // bounded at ef, farthest on top.
  Scratch& s = ThreadScratch();
  VisitedArray& visited = s.visited;
  visited.Reset(nodes);
  std::vector<Scored>& cand = s.cand;
  std::vector<Scored>& best = s.best;
  std::vector<int32_t>& fresh = s.fresh;
  cand.clear();
  best.clear();
  const size_t cap = static_cast<size_t>(std::max(a.ef, k));
  const int32_t degree0 = cum[1];
  if (fresh.size() < static_cast<size_t>(degree0)) fresh.resize(degree0);
  visited.TestAndSet(static_cast<uint32_t>(cur));
  cand.emplace_back(dcur, cur);
  if (member(cur)) best.emplace_back(dcur, cur);
  float bound = best.size() >= cap ? best.front().first
                                   : std::numeric_limits<float>::infinity();
  while (!cand.empty()) {
    const Scored top = cand.front();
    if (best.size() >= cap && top.first > bound) break;
    std::pop_heap(cand.begin(), cand.end(), Greater());
    cand.pop_back();
    const int32_t c = top.second;
    // Unvisited neighbours first (their tags are one array), then the
    // distances, each row prefetched a.ahead neighbours ahead (several misses
    // in flight, not one).
    const int32_t* links = neighbors + offsets[c];
    int32_t nf = 0;
    for (int32_t j = 0; j < degree0; ++j) {
      const int32_t v = links[j];
      if (v < 0) break;
      // A live graph's nodes past `nodes` are rows this search may not read.
      if (static_cast<uint64_t>(v) >= nodes ||
          visited.TestAndSet(static_cast<uint32_t>(v)))
        continue;
      fresh[nf++] = v;
    }
    auto fresh_at = [&](size_t j) { return fresh[j]; };
    for (int32_t j = 0; j < nf; ++j) {
      PrefetchAhead(row, fresh_at, static_cast<size_t>(j),
                    static_cast<size_t>(nf), a.ahead, stride);
      const int32_t v = fresh[j];
      const float dv = d(row(v));
      if (best.size() < cap || dv < bound) {
        cand.emplace_back(dv, v);
        std::push_heap(cand.begin(), cand.end(), Greater());
        // The next candidate's links, likely read next.
        __builtin_prefetch(neighbors + offsets[cand.front().second]);
        if (member(v)) {
          best.emplace_back(dv, v);
          std::push_heap(best.begin(), best.end(), Less());
          if (best.size() > cap) {
            std::pop_heap(best.begin(), best.end(), Less());
            best.pop_back();
          }
          if (best.size() >= cap) bound = best.front().first;
        }
      }
    }
  }
  // Best first: sort ascending by internal distance, keep k.
  std::sort_heap(best.begin(), best.end(), Less());
  const size_t n = std::min(best.size(), static_cast<size_t>(k));
  for (size_t i = 0; i < n; ++i) {
    a.dist[i] = kL2 ? best[i].first : -best[i].first;
    a.out[i] = static_cast<int64_t>(begin) + best[i].second;
  }
}

// Every (metric, filter) combination, inlined into the caller's ISA.
__attribute__((always_inline)) inline void Dispatch(const Args& a) {
  const bool l2 = !a.g->ip;
  const FilterKind f = a.sel == nullptr ? kNone : a.words ? kBitmap : kSelector;
  if (l2) {
    if (f == kNone) return Loop<true, kNone>(a);
    if (f == kBitmap) return Loop<true, kBitmap>(a);
    return Loop<true, kSelector>(a);
  }
  if (f == kNone) return Loop<false, kNone>(a);
  if (f == kBitmap) return Loop<false, kBitmap>(a);
  return Loop<false, kSelector>(a);
}

__attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma"))) void SearchAvx512(
    const Args& a) {
  Dispatch(a);
}
__attribute__((target("avx2,fma"))) void SearchAvx2(const Args& a) {
  Dispatch(a);
}
void SearchPortable(const Args& a) { Dispatch(a); }

}  // namespace

VisitedArray& ThreadVisited() { return ThreadScratch().visited; }

void SetSearchPrefetchRows(int rows) {
  search_prefetch_rows.store(std::clamp(rows, 1, 64),
                             std::memory_order_relaxed);
}
int SearchPrefetchRows() {
  return search_prefetch_rows.load(std::memory_order_relaxed);
}

void SearchGraphRows(const GraphRef& g, const RowTable& rows,
                     const float* query, int k, int ef,
                     const faiss::IDSelector* sel, float* dist, int64_t* out,
                     SearchIsa isa) {
  const float worst = g.ip ? -std::numeric_limits<float>::infinity()
                           : std::numeric_limits<float>::infinity();
  for (int i = 0; i < k; ++i) dist[i] = worst, out[i] = -1;
  if (g.entry_point < 0 || static_cast<uint64_t>(g.entry_point) >= g.nodes)
    return;
  Args a{&g, &rows, query, k, ef, sel, nullptr, 0, dist, out, 1};
  a.ahead = static_cast<size_t>(SearchPrefetchRows());
  if (const auto* bm = dynamic_cast<const RowBitmap*>(sel)) {
    a.words = bm->words().data();
    a.words_limit = bm->limit();
  }
  if (isa == SearchIsa::kAuto) {
    switch (DetectIsa()) {
      case Isa::kAvx512:
        isa = SearchIsa::kAvx512;
        break;
      case Isa::kAvx2:
        isa = SearchIsa::kAvx2;
        break;
      default:
        isa = SearchIsa::kPortable;
    }
  }
  // A loop this CPU cannot run falls back to the portable one.
  if (isa == SearchIsa::kAvx512 && DetectIsa() == Isa::kAvx512) {
    SearchAvx512(a);
  } else if (isa != SearchIsa::kPortable && DetectIsa() != Isa::kPortable) {
    SearchAvx2(a);
  } else {
    SearchPortable(a);
  }
}

}  // namespace zv::index
