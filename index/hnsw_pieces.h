// The live HNSW index: immutable graph pieces over row ranges plus an exact
// tail (LSM / Lucene-segment style).
//
// A *piece* is an HNSW graph over the contiguous segment rows [begin, end):
// graph node i is row begin + i. It is built once (faiss::IndexHNSW over the
// rows in place, M from the descriptor, efConstruction 100), written to its own
// file in the generation directory and never changed. Every process maps piece
// files read-only (MAP_SHARED, PROT_READ) and searches them in place with the
// search below, so the page cache holds one copy for the server and every
// attached reader. Pieces cover a prefix [0, covered) of the segment with no
// gaps; rows past it are the *tail*, which the collection searches exactly.
//
// Piece file "hnsw.piece.NNNNNNNN" (little-endian, sections 64-byte aligned):
//   PieceHeader (128 bytes): magic "ZVPIECE1", format version, begin, end,
//     row stride, metric, M, max level, entry point, section offsets, file
//     size, a checksum of the body and an FNV-1a-64 checksum of the header;
//   cum   int32[ncum]   faiss cum_nneighbor_per_level (2M on level 0, M above)
//   levels int32[n]     1 + the top layer of each node
//   offsets uint64[n+1] node i's links start at neighbors[offsets[i]]
//   neighbors int32[..] per node, layer l's links at offsets[i] + cum[l] up to
//                       offsets[i] + cum[l + 1], -1 ends a short list
// Opening a piece checks the header, the body checksum and every link bound,
// so a damaged file can never make a search read outside the mapping.
//
// Manifest "hnsw.manifest": magic "ZVMANIF1", format version, a version
// counter (bumped on every change), the next piece serial, the pieces in row
// order (serial, begin, end), a checksum. Written to a tmp file, fsynced and
// renamed over the old one (then the directory is fsynced), so a reader sees
// the old list or the new one. Piece files are also tmp + fsync + rename, and
// always exist before a manifest names them.
//
// The writer process runs one background builder thread per HNSW collection
// (nice +10, `build_threads` OpenMP threads, default 1, so searches keep the
// CPU): when the tail holds `interval` rows (default 20,000) it builds a piece
// over the whole tail; otherwise it merges (tiered: tier = floor(log_fanout(
// rows / interval)); `fanout` (4) adjacent pieces whose tiers differ by at
// most one become one piece, smallest such run first; above kMaxPieces any
// cheapest run merges). A merge starts from the first piece's graph and
// inserts the others' rows. After a build the manifest is swapped and the
// replaced files unlinked (a process that still maps them keeps valid pages).
// Collection::FinishIndexing (end of `zerovec build`) waits for the builder
// with more threads, so a server starts with the index built.
//
// A search copies the current piece list (a shared_ptr) under a brief lock,
// then searches each piece without the index's lock (the collection's shared
// lock, which a writer takes exclusively only to publish rows, keeps the
// segment's extent table still) and merges the top-k lists with the exact
// tail. Recovery: open reads the manifest, maps the pieces, removes
// tmp files and unlisted pieces; a damaged manifest or piece is dropped (that
// piece and every later one: coverage stays a prefix), logged to stderr and
// rebuilt by the builder. Attached readers read the same manifest on Refresh
// (re-mapping only new pieces) and never write.
#ifndef ZEROVEC_INDEX_HNSW_PIECES_H_
#define ZEROVEC_INDEX_HNSW_PIECES_H_

#include <faiss/Index.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/HNSW.h>
#include <faiss/impl/IDSelector.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "index/flat_index.h"
#include "shm/segment.h"

namespace zv::index {

inline constexpr uint64_t kDefaultPieceInterval = 20000;
inline constexpr int kDefaultMergeFanout = 4;
// 100 (Qdrant's default; faiss's is 40): at 1M clustered rows efConstruction 40
// capped recall@10 at 0.944 whatever the search width (bench/RESULTS.md).
inline constexpr int kHnswEfConstruction = 100;
// Above this many pieces any cheapest run merges, whatever the tiers.
inline constexpr size_t kMaxPieces = 24;
inline constexpr const char* kManifestFile = "hnsw.manifest";

struct PieceOptions {
  uint64_t interval = kDefaultPieceInterval;  // tail rows that start a build
  int merge_fanout = kDefaultMergeFanout;
  int build_threads = 1;  // OpenMP threads of one build
  int ef_construction = kHnswEfConstruction;
  // With build_threads > 1 the inserter adds rows to the live graph in steps
  // of 64 rows a thread on every build thread (false: 8 rows on one thread,
  // the behaviour before issue 21; benchmarks compare the two).
  bool parallel_insert = true;
  // Rows past the live graph (scanned exactly by every search) above which
  // writes wait for the inserter (AnnIndex::AdmitWrite).
  uint64_t max_backlog = 2048;
  // Graph builds (pieces, the one-graph seal) run their beam on a bfloat16
  // copy of the rows, made for the build and freed after it (2 bytes a value:
  // 768 MB at 1M x 384), and score its results again on the float rows. Half
  // the bytes a beam distance, for builds bound by memory bandwidth; off by
  // default: on a 2-core host it built 10 % slower (bench/RESULTS.md).
  bool bf16_build = false;
  // Rows the build's loops ask the memory system for ahead of the distance
  // they compute (1: only the next row, the loop before 2026-12-07). Deeper
  // keeps more misses in flight: 8 built 9-19 % faster than 1 on a 2-core
  // EPYC, 4 % on 16 Xeon cores (bench/RESULTS.md, issue 21).
  int build_prefetch_rows = 8;
  // Level-0 insertion order. After a random build_order_random_fraction of
  // the level's nodes (a skeleton over the whole space), the rest go in the
  // order of a build_order_bits-bit random-projection code (the signs of
  // that many random hyperplanes): nodes inserted one after another search
  // the same part of the graph, whose rows are still in cache. 0 bits: every
  // node in random order (faiss's). On 300k synthetic rows 16 bits and 0.3
  // built 1.3x faster at the same recall; wholly sorted (fraction 0) built
  // 1.7x faster but lost 2 points of recall (bench/RESULTS.md, issue 21).
  int build_order_bits = 16;
  double build_order_random_fraction = 0.3;
  // The ordered part may be cut into this many stripes (0: one a build
  // thread) whose runs of 8 nodes are interleaved, so the threads insert
  // nodes of different stripes at once (neighbours inserted at the same
  // moment cannot see each other). One stripe by default: on 16 Xeon cores
  // one a thread built real 1M embeddings 8-35 % slower (synthetic 3 %
  // faster); on 2 cores 300k synthetic rows 7 % faster, 1M rows not faster
  // (bench/RESULTS.md, issue 21).
  int build_order_stripes = 1;
};

// Options for HNSW indexes opened from now on in this process (tests and
// benchmarks shrink the interval).
void SetPieceOptions(const PieceOptions& options);
PieceOptions GetPieceOptions();

// Row pointers of a segment prefix, captured while the caller holds the
// collection's lock: the builder thread reads rows without that lock, and a
// writer may grow the segment's extent table meanwhile (rows never move).
class RowTable {
 public:
  RowTable() = default;
  RowTable(const shm::SegmentView& view, uint64_t rows);
  uint64_t rows() const { return rows_; }
  size_t stride() const { return stride_; }
  __attribute__((always_inline)) const float* Row(uint64_t r) const {
    const size_t b = Block(r);
    return bases_[b] + (r - firsts_[b]) * stride_;
  }
  // Rows from r to the end of its extent (contiguous in memory).
  uint64_t ContiguousFrom(uint64_t r) const {
    const size_t b = Block(r);
    return firsts_[b] + counts_[b] - r;
  }

 private:
  // Extents grow geometrically, then all hold rows_per_extent rows: the few
  // growing ones are scanned, the rest found by division.
  __attribute__((always_inline)) size_t Block(uint64_t r) const {
    if (r >= fixed_first_row_) {
      // rows_per_extent is a power of two by default: a shift, not a divide
      // (this runs for every row an HNSW search reads).
      const uint64_t rel = r - fixed_first_row_;
      return fixed_first_block_ +
             (rpe_shift_ >= 0 ? rel >> rpe_shift_ : rel / rpe_);
    }
    size_t b = 0;
    while (r >= firsts_[b] + counts_[b]) ++b;
    return b;
  }
  std::vector<const float*> bases_;
  std::vector<uint64_t> firsts_, counts_;
  uint64_t rpe_ = 1, stride_ = 0, rows_ = 0;
  int rpe_shift_ = 0;  // log2(rpe_), or -1 if rpe_ is no power of two
  uint64_t fixed_first_row_ = 0;  // first row of the first full-size extent
  size_t fixed_first_block_ = 0;
};

// faiss's storage for an HNSW graph over rows [begin, ...): the "codes" are
// the segment rows in place, read through `rows` (kept by reference, so
// assigning a newer table to it makes newer rows readable). Nothing is copied.
class RangeStorage : public faiss::Index {
 public:
  RangeStorage(const RowTable& rows, uint64_t begin, size_t d,
               shm::Metric metric);
  void add(idx_t n, const float* x) override;
  void search(idx_t, const float*, idx_t, float*, idx_t*,
              const faiss::SearchParameters*) const override;
  void reset() override { ntotal = 0; }
  void reconstruct(idx_t key, float* recons) const override;
  // faiss's contract: the caller owns and deletes the computer.
  faiss::DistanceComputer* get_distance_computer() const override;
  const float* Row(idx_t i) const;  // node i's row
  const RowTable& rows() const { return rows_; }
  uint64_t begin() const { return begin_; }

 private:
  const RowTable& rows_;
  uint64_t begin_;
};

// Adds the next `n` rows of `storage` to `index` (a graph over it) the way
// one faiss add of them all would: levels drawn for all, then every node of
// the highest level first, down to level 0, each level in a random order.
// faiss's adds in batches (of 8 rows as the live graph inserts, 512, or even
// 10,000) insert each batch's upper nodes only after the previous batches'
// level-0 nodes, which made graphs far worse at the same M and
// efConstruction (bench/hnsw_bisect, issue 21). Runs on `threads` OpenMP
// threads in chunks; CANCELLED once `*stop` turns true (checked between
// chunks; the graph is then incomplete and must be dropped). Distances are
// taken on a transient bfloat16 copy of the rows when the process's
// PieceOptions say bf16_build; level 0 is inserted in the order
// PieceOptions' build_order_* set.
Status InsertLevelsFirst(faiss::IndexHNSW& index, RangeStorage& storage,
                         uint64_t n, const std::atomic<bool>* stop,
                         int threads);

// The arrays of one HNSW graph in faiss's layout (a mapped piece or the
// writer's live graph); node i is row begin + i. Links to nodes >= `nodes`
// are skipped, so a search of a growing graph reads only rows it may read.
struct GraphRef {
  uint64_t begin = 0, nodes = 0;
  int max_level = -1, entry_point = -1;
  bool ip = true;
  size_t stride = 0;
  const int32_t* cum = nullptr;
  const uint64_t* offsets = nullptr;
  const int32_t* neighbors = nullptr;
};

// Top-k rows of one padded query in graph `g` among those `sel` accepts
// (null: all), best first, into dist/rows (k entries, row -1 pads). `ef`
// results are kept while searching (hnswlib's rule).
void SearchGraph(const GraphRef& g, const shm::SegmentView& view,
                 const float* query, int k, int ef,
                 const faiss::IDSelector* sel, float* dist, int64_t* rows);

// One piece file, mapped read-only and validated.
class Piece {
 public:
  // DATA_LOSS for a damaged or foreign file, NOT_FOUND if it is missing.
  static StatusOr<std::shared_ptr<const Piece>> Open(
      const std::filesystem::path& path, uint64_t serial,
      const shm::SegmentInfo& info);
  ~Piece();
  Piece(const Piece&) = delete;
  Piece& operator=(const Piece&) = delete;

  uint64_t serial() const { return serial_; }
  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }
  uint64_t size() const { return end_ - begin_; }
  int m() const { return m_; }
  size_t file_bytes() const { return map_bytes_; }

  // Top-k rows of one padded query among those `sel` accepts (null: all),
  // best first, into dist/rows (k entries, row -1 pads). `view` must hold
  // rows [begin, end) (the caller holds the collection's lock).
  void Search(const shm::SegmentView& view, const float* query, int k, int ef,
              const faiss::IDSelector* sel, float* dist, int64_t* rows) const;
  // The same through a row table holding rows [begin, end) (one per batch).
  void Search(const RowTable& table, const float* query, int k, int ef,
              const faiss::IDSelector* sel, float* dist, int64_t* rows) const;

  // The graph as faiss keeps it (to continue building from it in a merge).
  struct Graph {
    std::vector<int> cum, levels;
    std::vector<size_t> offsets;
    std::vector<int> neighbors;
    int entry_point = -1, max_level = -1;
  };
  Graph CopyGraph() const;
  GraphRef graph() const;

 private:
  Piece() = default;
  uint64_t serial_ = 0, begin_ = 0, end_ = 0;
  int m_ = 0, max_level_ = -1, entry_point_ = -1;
  bool ip_ = true;
  size_t stride_ = 0, ncum_ = 0, nlinks_ = 0;
  const int32_t* cum_ = nullptr;
  const int32_t* levels_ = nullptr;
  const uint64_t* offsets_ = nullptr;
  const int32_t* neighbors_ = nullptr;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
};

struct ManifestEntry {
  uint64_t serial = 0, begin = 0, end = 0;
};
struct Manifest {
  uint64_t version = 0;
  uint64_t next_serial = 1;
  std::vector<ManifestEntry> entries;  // row order, contiguous from 0
};

std::string PieceFileName(uint64_t serial);
// nullopt if there is no manifest; DATA_LOSS if it is damaged.
StatusOr<std::optional<Manifest>> ReadManifest(
    const std::filesystem::path& dir);
Status WriteManifest(const std::filesystem::path& dir, const Manifest& m);

// An immutable snapshot: pieces covering [0, covered()) in row order.
struct PieceList {
  uint64_t version = 0;  // of the manifest it came from (0: none)
  std::vector<std::shared_ptr<const Piece>> pieces;
  uint64_t covered() const { return pieces.empty() ? 0 : pieces.back()->end(); }
};

// Maps the pieces `manifest` names, reusing mappings from `reuse` (by
// serial). Stops at the first piece that fails to open, is not contiguous or
// ends past `limit`; `*bad` (if given) receives that piece's error.
std::shared_ptr<const PieceList> MapPieces(const std::filesystem::path& dir,
                                           const Manifest& manifest,
                                           const shm::SegmentInfo& info,
                                           uint64_t limit,
                                           const PieceList* reuse, Status* bad);

// Searches the pieces that end at or before `limit` (nq padded queries) and
// merges into `out`; returns the rows they cover (a prefix of the segment).
StatusOr<uint64_t> SearchPieces(const PieceList& list,
                                const shm::SegmentView& view,
                                const float* queries, size_t nq,
                                const faiss::IDSelector* sel, int ef,
                                uint64_t limit, TopK* out);

// Builds the piece over rows [begin, end) as file `serial` in `dir` (tmp +
// fsync + rename) and maps it. With `base`, the graph starts as a copy of
// base's (base->begin() == begin) and only rows [base->end(), end) are
// inserted. CANCELLED once `*stop` turns true (checked between small batches).
StatusOr<std::shared_ptr<const Piece>> BuildPiece(
    const std::filesystem::path& dir, uint64_t serial,
    const shm::SegmentInfo& info, const RowTable& rows, int m, int efc,
    uint64_t begin, uint64_t end, const Piece* base,
    const std::atomic<bool>* stop, int threads);

// Writes faiss graph `h` over rows [begin, end) as piece file `serial` in
// `dir` (tmp + fsync + rename) and maps it.
StatusOr<std::shared_ptr<const Piece>> WritePiece(
    const std::filesystem::path& dir, uint64_t serial,
    const shm::SegmentInfo& info, const faiss::HNSW& h, int m, uint64_t begin,
    uint64_t end);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_HNSW_PIECES_H_
