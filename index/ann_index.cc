#include "index/ann_index.h"

namespace zv::index {

StatusOr<std::unique_ptr<AnnIndex>> OpenAnnIndex(
    const IndexKind& kind, const shm::SegmentView& view,
    const std::filesystem::path& dir) {
  switch (kind.type) {
    case IndexKind::kFlat:
      return std::unique_ptr<AnnIndex>();
    case IndexKind::kHnsw:
      return OpenHnswIndex(kind.hnsw_m, view, dir);
    case IndexKind::kIvfPq:
      return OpenIvfPqIndex(kind.nlist, kind.pq_m, view, dir);
  }
  return InternalError("unreachable index kind");
}

}  // namespace zv::index
