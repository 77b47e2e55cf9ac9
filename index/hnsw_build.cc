// HNSW insertion (see hnsw_build.h). One body (Insert), inlined into a
// function per instruction set with the distance kernel inlined into it.
#include "index/hnsw_build.h"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>

#include "index/distance.h"
#include "index/distance_kernel.h"
#include "index/hnsw_search.h"

namespace zv::index {
namespace {

using hnsw_loop::Greater;
using hnsw_loop::Less;
using hnsw_loop::PrefetchAhead;
using hnsw_loop::PrefetchRow;
using hnsw_loop::Scored;

struct Scratch {
  VisitedArray visited;
  std::vector<Scored> cand, best, picked, fight, chosen;
  std::vector<int32_t> fresh;
};

Scratch& BuildScratch() {
  thread_local Scratch s;
  return s;
}

class Lock {
 public:
  explicit Lock(omp_lock_t* l) : l_(l) { omp_set_lock(l_); }
  ~Lock() { omp_unset_lock(l_); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  omp_lock_t* l_;
};

// kBf16: the beam (and the descent above it) reads g.bf16's rows; the
// beam's results are then scored again on the float rows, so which neighbours
// are kept and every link decision use exact distances.
template <bool kL2, bool kBf16>
__attribute__((always_inline)) inline void Insert(const GraphBuild& g,
                                                  int32_t pt) {
  using Elem = std::conditional_t<kBf16, uint16_t, float>;  // the beam's rows
  faiss::HNSW& h = *g.h;
  const size_t stride = g.stride;
  const int* cum = h.cum_nneighbor_per_level.data();
  const size_t* offsets = h.offsets.data();
  int32_t* nb = h.neighbors.data();
  const RowTable& rt = *g.rows;
  const uint64_t begin = g.begin;
  auto row = [&](int32_t v) __attribute__((always_inline)) {
    return rt.Row(begin + static_cast<uint64_t>(v));
  };
  auto beam_row = [&](int32_t v) __attribute__((always_inline))->const Elem* {
    if constexpr (kBf16) {
      return g.bf16 + static_cast<size_t>(v) * stride;
    } else {
      return row(v);
    }
  };
  // Internal distances (float or bf16 rows): smaller is closer (IP negated).
  auto dist = [&](const auto* a, const auto* b) __attribute__((always_inline)) {
    return kL2 ? kernel::Distance<true>(a, b, stride)
               : -kernel::Distance<false>(a, b, stride);
  };
  // Rows of a list are requested g.prefetch_rows ahead of the one scored
  // (one row ahead left the loop waiting on each row's first miss).
  const size_t ahead = static_cast<size_t>(g.prefetch_rows);
  auto prefetch_ahead = [&](auto row_of, auto id_at, size_t j, size_t n)
      __attribute__((always_inline)) {
    PrefetchAhead(row_of, id_at, j, n, ahead, stride);
  };
  const float* q = row(pt);
  const Elem* beam_q = beam_row(pt);
  Scratch& s = BuildScratch();

  // faiss's shrink_neighbor_list: from `in` (ascending), keep a candidate
  // only if it is closer to the base than to every one kept, up to `max`;
  // all of them when there are fewer than `max`.
  // Lambdas forced inline: compiled apart, they would lose the caller's
  // instruction set (a select() out of line ran the SSE2 kernel).
  auto select = [&](const std::vector<Scored>& in, size_t max,
                    std::vector<Scored>* out) __attribute__((always_inline)) {
    out->clear();
    if (in.size() < max) {
      out->assign(in.begin(), in.end());
      return;
    }
    for (size_t i = 0; i < in.size(); ++i) {
      const Scored& c = in[i];
      const float* rc = row(c.second);
      if (i + 1 < in.size()) PrefetchRow(row(in[i + 1].second), stride);
      bool good = true;
      for (const Scored& k : *out) {
        if (dist(row(k.second), rc) < c.first) {
          good = false;
          break;
        }
      }
      if (good) {
        out->push_back(c);
        if (out->size() >= max) return;
      }
    }
  };

  // faiss's add_link: `dest` into src's list at `level`, or, when full, the
  // list and dest shrunk by the heuristic. Caller holds src's lock.
  auto add_link = [&](int32_t src, int32_t dest, int level)
      __attribute__((always_inline)) {
    const size_t b = offsets[src] + cum[level];
    const size_t e = offsets[src] + cum[level + 1];
    if (nb[e - 1] == -1) {
      size_t i = e;
      while (i > b && nb[i - 1] == -1) --i;
      nb[i] = dest;
      return;
    }
    const float* rs = row(src);
    std::vector<Scored>& fight = s.fight;
    fight.clear();
    fight.emplace_back(dist(rs, row(dest)), dest);
    auto list_at = [&](size_t j) { return nb[b + j]; };
    for (size_t i = b; i < e; ++i) {
      prefetch_ahead(row, list_at, i - b, e - b);
      fight.emplace_back(dist(rs, row(nb[i])), nb[i]);
    }
    std::sort(fight.begin(), fight.end(), Less());
    std::vector<Scored>& kept = s.picked;
    select(fight, e - b, &kept);
    size_t i = b;
    for (const Scored& k : kept) nb[i++] = k.second;
    while (i < e) nb[i++] = -1;
  };

  int32_t nearest;
  int max_level;
  const int pt_level = h.levels[pt] - 1;
  {
    std::lock_guard<std::mutex> l(*g.entry_mu);
    nearest = h.entry_point;
    max_level = h.max_level;
    if (nearest < 0) {
      h.entry_point = pt;
      h.max_level = pt_level;
      return;
    }
  }
  float d_nearest = dist(beam_q, beam_row(nearest));
  int level = max_level;
  // Greedy descent above the node's own top layer.
  for (; level > pt_level; --level) {
    for (bool moved = true; moved;) {
      moved = false;
      const size_t b = offsets[nearest] + cum[level];
      const size_t e = offsets[nearest] + cum[level + 1];
      auto list_at = [&](size_t j) { return nb[b + j]; };
      for (size_t j = 0; j < e - b; ++j) {
        // Read once: another thread may shrink this list meanwhile.
        const int32_t v = nb[b + j];
        if (v < 0) break;
        prefetch_ahead(beam_row, list_at, j, e - b);
        const float dv = dist(beam_q, beam_row(v));
        if (dv < d_nearest) nearest = v, d_nearest = dv, moved = true;
      }
    }
  }
  const size_t efc = static_cast<size_t>(std::max(h.efConstruction, 1));
  std::vector<Scored>& cand = s.cand;
  std::vector<Scored>& best = s.best;
  std::vector<int32_t>& fresh = s.fresh;
  std::vector<Scored>& picked = s.chosen;
  Lock own(&g.locks[pt]);
  for (; level >= 0; --level) {
    // The beam of efConstruction on this layer (faiss's
    // search_neighbors_to_add), never returning the node itself (a node
    // inserted meanwhile may already link to it).
    const int32_t degree = cum[level + 1] - cum[level];
    if (fresh.size() < static_cast<size_t>(degree)) fresh.resize(degree);
    s.visited.Reset(h.levels.size());
    s.visited.TestAndSet(static_cast<uint32_t>(pt));
    s.visited.TestAndSet(static_cast<uint32_t>(nearest));
    cand.clear();
    best.clear();
    cand.emplace_back(d_nearest, nearest);
    best.emplace_back(d_nearest, nearest);
    while (!cand.empty()) {
      const Scored top = cand.front();
      if (top.first > best.front().first && best.size() >= efc) break;
      std::pop_heap(cand.begin(), cand.end(), Greater());
      cand.pop_back();
      const int32_t* links = nb + offsets[top.second] + cum[level];
      int32_t nf = 0;
      for (int32_t j = 0; j < degree; ++j) {
        const int32_t v = links[j];
        if (v < 0) break;
        if (s.visited.TestAndSet(static_cast<uint32_t>(v))) continue;
        fresh[nf++] = v;
      }
      auto fresh_at = [&](size_t j) { return fresh[j]; };
      for (int32_t j = 0; j < nf; ++j) {
        prefetch_ahead(beam_row, fresh_at, j, nf);
        const int32_t v = fresh[j];
        const float dv = dist(beam_q, beam_row(v));
        if (best.size() < efc || dv < best.front().first) {
          cand.emplace_back(dv, v);
          std::push_heap(cand.begin(), cand.end(), Greater());
          // The next candidate's links, likely read next.
          __builtin_prefetch(nb + offsets[cand.front().second] + cum[level]);
          best.emplace_back(dv, v);
          std::push_heap(best.begin(), best.end(), Less());
          if (best.size() > efc) {
            std::pop_heap(best.begin(), best.end(), Less());
            best.pop_back();
          }
        }
      }
    }
    if constexpr (kBf16) {
      // The float rows decide: every neighbour kept and every link below.
      auto best_at = [&](size_t j) { return best[j].second; };
      for (size_t i = 0; i < best.size(); ++i) {
        prefetch_ahead(row, best_at, i, best.size());
        best[i].first = dist(q, row(best[i].second));
      }
      std::sort(best.begin(), best.end(), Less());
    } else {
      std::sort_heap(best.begin(), best.end(), Less());
    }
    select(best, static_cast<size_t>(degree), &picked);
    // Every layer's search starts from the node the descent found, as in
    // faiss (starting from the closest found on the layer above, hnswlib's
    // rule, gave 0.5-0.8 points less recall in hnsw_quality_test).
    for (const Scored& p : picked) add_link(pt, p.second, level);
    omp_unset_lock(&g.locks[pt]);
    for (const Scored& p : picked) {
      Lock other(&g.locks[p.second]);
      add_link(p.second, pt, level);
    }
    omp_set_lock(&g.locks[pt]);
  }
  std::lock_guard<std::mutex> l(*g.entry_mu);
  if (pt_level > h.max_level) {
    h.max_level = pt_level;
    h.entry_point = pt;
  }
}

// One body per (metric, row type), inlined into each instruction set.
#define ZV_INSERT_DISPATCH(g, pt)                    \
  do {                                               \
    if ((g).bf16 != nullptr) {                       \
      if ((g).ip) return Insert<false, true>(g, pt); \
      return Insert<true, true>(g, pt);              \
    }                                                \
    if ((g).ip) return Insert<false, false>(g, pt);  \
    return Insert<true, false>(g, pt);               \
  } while (0)

__attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma"))) void InsertAvx512(
    const GraphBuild& g, int32_t pt) {
  ZV_INSERT_DISPATCH(g, pt);
}
__attribute__((target("avx2,fma"))) void InsertAvx2(const GraphBuild& g,
                                                    int32_t pt) {
  ZV_INSERT_DISPATCH(g, pt);
}
void InsertPortable(const GraphBuild& g, int32_t pt) {
  ZV_INSERT_DISPATCH(g, pt);
}
#undef ZV_INSERT_DISPATCH

}  // namespace

void InsertNode(const GraphBuild& g, int32_t pt) {
  switch (DetectIsa()) {
    case Isa::kAvx512:
      return InsertAvx512(g, pt);
    case Isa::kAvx2:
      return InsertAvx2(g, pt);
    default:
      return InsertPortable(g, pt);
  }
}

}  // namespace zv::index
