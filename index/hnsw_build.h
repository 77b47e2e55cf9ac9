// HNSW graph construction over rows in place (internal to index/): faiss's
// insertion (search the layer with efConstruction, keep neighbours by the
// heuristic, link both ways under per-node locks) on faiss's graph arrays, but
// with the distance kernel inlined per instruction set, rows prefetched ahead
// and a 16-bit visited array, as the search loop (hnsw_search.cc) does. With
// faiss's own add (a virtual call a distance, no prefetch) a 1M-row graph took
// most of a bulk load's time (bench/RESULTS.md, issue 21).
#ifndef ZEROVEC_INDEX_HNSW_BUILD_H_
#define ZEROVEC_INDEX_HNSW_BUILD_H_

#include <faiss/impl/HNSW.h>
#include <omp.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "index/hnsw_pieces.h"

namespace zv::index {

// A graph being built: node i is row begin + i of `rows`.
struct GraphBuild {
  faiss::HNSW* h = nullptr;  // its efConstruction is the beam's width
  const RowTable* rows = nullptr;
  uint64_t begin = 0;
  size_t stride = 0;  // floats a row (the kernels read whole padded rows)
  // If set, node i's row as bfloat16 at bf16 + i * stride: the beam (and the
  // descent above it) reads these, half the bytes of a float row; its results
  // are scored again on the float rows, which decide every link.
  const uint16_t* bf16 = nullptr;
  bool ip = true;
  // Rows prefetched ahead of the one being scored (>= 1).
  int prefetch_rows = 8;
  omp_lock_t* locks = nullptr;     // one a node
  std::mutex* entry_mu = nullptr;  // guards h->entry_point and h->max_level
};

// Inserts node `pt` (its level already in h->levels; nodes [0, pt) need not
// all be in yet) into the graph. Safe to call from several threads at once for
// different nodes. Nodes to insert next at the same level may see it at once.
void InsertNode(const GraphBuild& g, int32_t pt);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_HNSW_BUILD_H_
