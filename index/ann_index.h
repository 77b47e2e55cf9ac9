// clang-format off
// Approximate indexes over a segment's rows, chosen by FAISS-style descriptor:
//   "Flat"           no ANN index; exact search in place (flat_index.h)
//   "HNSW<M>"        immutable HNSW pieces over row ranges, mapped and
//                    searched in place, built in the background
//                    (hnsw_pieces.h)
//   "IVF<n>,PQ<m>"   faiss::IndexIVFPQ, codes in their own mmapped file,
//                    re-ranked exactly against the rows in place
// clang-format on
// An index covers rows [0, indexed()); the collection searches the rest
// exactly, so every committed row is always searchable.
#ifndef ZEROVEC_INDEX_ANN_INDEX_H_
#define ZEROVEC_INDEX_ANN_INDEX_H_

#include <faiss/impl/IDSelector.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "index/collection.h"
#include "index/descriptor.h"
#include "index/flat_index.h"
#include "shm/segment.h"

namespace zv::index {

// Search-time knobs (defaults are what the recall tests assert against).
struct AnnSearchParams {
  int hnsw_ef_search = kDefaultEfSearch;
  int ivf_nprobe = 32;
  int ivf_rerank_factor = 8;  // PQ candidates per result re-ranked exactly
};

class AnnIndex {
 public:
  virtual ~AnnIndex() = default;
  // Rows [0, indexed()) are reachable through this index (a snapshot: a
  // background builder may advance it at any time).
  virtual uint64_t indexed() const = 0;
  // Tells the index rows [0, committed) exist. Called under the collection's
  // exclusive lock, so it must be quick: an index may defer (IVF-PQ trains
  // once enough rows exist; HNSW builds pieces on its own thread).
  virtual Status Update(uint64_t committed) = 0;
  // Top-k among indexed rows below `limit` accepted by `sel` (null: all).
  // Queries nq x row_stride. `*covered` receives the prefix [0, covered) of
  // rows this search reached; the caller searches [covered, limit) exactly.
  virtual Status Search(const float* queries, size_t nq,
                        const faiss::IDSelector* sel,
                        const AnnSearchParams& params, uint64_t limit,
                        TopK* out, uint64_t* covered) const = 0;
  // Persists what the index has not persisted yet (IVF-PQ; HNSW pieces are
  // written when built, so for HNSW this does nothing).
  virtual Status Save() = 0;
  // Bytes held by the index (graph links, centroids; not the rows). For HNSW
  // the mapped piece files, shared with every process that maps them.
  virtual size_t MemoryBytes() const = 0;
  // Waits up to `timeout` until background work is done (nothing to build or
  // merge); true if idle. For tests and benchmarks.
  virtual bool WaitIdle(std::chrono::milliseconds timeout) { return true; }
  // Indexes every committed row durably now (HNSW: the tail becomes a
  // piece; with `one_graph`, every piece and the tail become one graph), with
  // the build threads; for the end of a bulk load, so a server starts with
  // nothing to build. Call when WaitIdle returned true.
  virtual Status Flush(bool one_graph) { return OkStatus(); }
  // Threads a background build may use from its next build on (0: as
  // configured).
  virtual void SetBuildThreads(int threads) {}
  // Until the next Flush, builds nothing for rows written from now on (HNSW:
  // no live graph, no pieces; searches scan them exactly and writes are not
  // held back), so a bulk load that Flush then seals into one graph builds
  // that graph once instead of pieces it would throw away.
  virtual void DeferIndexing() {}
  // Called before a write: while the index is too far behind the committed
  // rows (HNSW: rows its searches scan exactly), the caller helps index them
  // (or waits) for up to `timeout`, so a writer faster than indexing cannot
  // make every search slower without bound. UNAVAILABLE on timeout (nothing
  // was written).
  virtual Status AdmitWrite(std::chrono::milliseconds timeout) {
    return OkStatus();
  }
  // Number of immutable pieces searched (HNSW), else 0.
  virtual size_t PieceCount() const { return 0; }
};

// Opens (loading saved files from `dir` when present and valid) the index of
// `kind` over `view`; null for kFlat. The view must outlive the index.
StatusOr<std::unique_ptr<AnnIndex>> OpenAnnIndex(
    const IndexKind& kind, const shm::SegmentView& view,
    const std::filesystem::path& dir);

// Implementations (hnsw_index.cc, ivfpq_index.cc).
// The writer's HNSW: maps the pieces in `dir`, builds and merges more in the
// background. `view` must be the segment's Writer.
StatusOr<std::unique_ptr<AnnIndex>> OpenHnswIndex(
    int m, const shm::SegmentView& view, const std::filesystem::path& dir);
// A read-only HNSW for attached readers: maps the same pieces; Update
// re-reads the manifest and maps new pieces.
StatusOr<std::unique_ptr<AnnIndex>> OpenHnswReader(
    const shm::SegmentView& view, const std::filesystem::path& dir);
StatusOr<std::unique_ptr<AnnIndex>> OpenIvfPqIndex(
    int nlist, int pq_m, const shm::SegmentView& view,
    const std::filesystem::path& dir);

// Runs `fn`, turning a faiss::FaissException (or std::exception) into INTERNAL.
template <typename Fn>
Status CatchFaiss(std::string_view what, Fn&& fn) {
  try {
    fn();
    return OkStatus();
  } catch (const std::exception& e) {
    return InternalError(std::string(what) + ": " + e.what());
  }
}

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_ANN_INDEX_H_
