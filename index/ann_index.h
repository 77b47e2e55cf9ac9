// Approximate indexes over a segment's rows, chosen by FAISS-style descriptor:
//   "Flat"           no ANN index; exact search in place (flat_index.h)
//   "HNSW<M>"        faiss::IndexHNSW whose storage reads the rows in place
//   "IVF<n>,PQ<m>"   faiss::IndexIVFPQ, codes in their own mmapped file,
//   re-ranked
//                    exactly against the rows in place
// An index covers rows [0, indexed()); the collection searches the rest
// exactly, so every committed row is always searchable.
#ifndef ZEROVEC_INDEX_ANN_INDEX_H_
#define ZEROVEC_INDEX_ANN_INDEX_H_

#include <faiss/impl/IDSelector.h>

#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "index/flat_index.h"
#include "shm/segment.h"

namespace zv::index {

struct IndexKind {
  enum Type { kFlat, kHnsw, kIvfPq } type = kFlat;
  int hnsw_m = 32;
  int nlist = 0;
  int pq_m = 0;
};

// INVALID_ARGUMENT (naming index.descriptor) for an unknown or unfit
// descriptor.
StatusOr<IndexKind> ParseDescriptor(const std::string& descriptor,
                                    uint32_t dim);

// Search-time knobs (defaults are what the recall tests assert against).
struct AnnSearchParams {
  int hnsw_ef_search = 128;
  int ivf_nprobe = 32;
  int ivf_rerank_factor = 8;  // PQ candidates per result re-ranked exactly
};

class AnnIndex {
 public:
  virtual ~AnnIndex() = default;
  // Rows [0, indexed()) are reachable through this index.
  virtual uint64_t indexed() const = 0;
  // Brings the index up to date with committed rows (an index may defer: IVF-PQ
  // trains once enough rows exist and re-encodes the tail in batches).
  virtual Status Update(uint64_t committed) = 0;
  // Top-k among indexed rows accepted by `sel` (null: all). Queries nq x
  // row_stride.
  virtual Status Search(const float* queries, size_t nq,
                        const faiss::IDSelector* sel,
                        const AnnSearchParams& params, TopK* out) const = 0;
  // Persists the index beside the segment so the next open need not rebuild.
  virtual Status Save() = 0;
  // Heap bytes held by the index (graph links, centroids; not the rows).
  virtual size_t MemoryBytes() const = 0;
};

// Opens (loading saved files from `dir` when present and valid) the index of
// `kind` over `view`; null for kFlat. The view must outlive the index.
StatusOr<std::unique_ptr<AnnIndex>> OpenAnnIndex(
    const IndexKind& kind, const shm::SegmentView& view,
    const std::filesystem::path& dir);

// Implementations (hnsw_index.cc, ivfpq_index.cc).
StatusOr<std::unique_ptr<AnnIndex>> OpenHnswIndex(
    int m, const shm::SegmentView& view, const std::filesystem::path& dir);
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
