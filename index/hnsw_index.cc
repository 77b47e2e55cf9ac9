// HNSW over the segment in place: faiss::IndexHNSW with a storage index that
// owns no vectors (it reads rows from the mapped extents), graph node i =
// segment row i. The graph is saved beside the segment as "hnsw.graph" (own
// format: faiss's write_index cannot serialise a custom storage) and extended
// on open.
#include <faiss/IndexHNSW.h>
#include <faiss/impl/DistanceComputer.h>
#include <faiss/impl/FaissAssert.h>

#include <cstring>
#include <fstream>
#include <mutex>
#include <shared_mutex>

#include "index/ann_index.h"
#include "index/distance.h"
#include "index/rwlock.h"

namespace zv::index {
namespace {

constexpr char kMagic[8] = {'Z', 'V', 'H', 'N', 'S', 'W', '0', '1'};
constexpr int kEfConstruction = 40;
constexpr const char* kGraphFile = "hnsw.graph";

faiss::MetricType FaissMetric(shm::Metric m) {
  return m == shm::Metric::kInnerProduct ? faiss::METRIC_INNER_PRODUCT
                                         : faiss::METRIC_L2;
}

class SegmentDistance : public faiss::DistanceComputer {
 public:
  explicit SegmentDistance(const shm::SegmentView& view)
      : view_(view),
        d_(view.info().row_stride),
        ip_(view.info().metric == shm::Metric::kInnerProduct) {}
  void set_query(const float* x) override { q_ = x; }
  float operator()(idx_t i) override { return Dis(q_, view_.Row(i)); }
  float symmetric_dis(idx_t i, idx_t j) override {
    return Dis(view_.Row(i), view_.Row(j));
  }

 private:
  float Dis(const float* a, const float* b) const {
    return ip_ ? InnerProduct16(a, b, d_) : L2Sqr16(a, b, d_);
  }
  const shm::SegmentView& view_;
  size_t d_;
  bool ip_;
  const float* q_ = nullptr;
};

// A faiss::Index whose "codes" are the segment rows: add() only checks the rows
// are the next ones of the segment; nothing is copied.
class SegmentStorage : public faiss::Index {
 public:
  explicit SegmentStorage(const shm::SegmentView& view)
      : faiss::Index(view.info().row_stride, FaissMetric(view.info().metric)),
        view_(view) {
    is_trained = true;
  }
  void add(idx_t n, const float* x) override {
    FAISS_THROW_IF_NOT_MSG(x == view_.Row(ntotal),
                           "HNSW storage: rows must be segment rows");
    ntotal += n;
  }
  void search(idx_t, const float*, idx_t, float*, idx_t*,
              const faiss::SearchParameters*) const override {
    FAISS_THROW_MSG("SegmentStorage::search: search through the HNSW graph");
  }
  void reset() override { ntotal = 0; }
  void reconstruct(idx_t key, float* recons) const override {
    std::memcpy(recons, view_.Row(key), sizeof(float) * d);
  }
  // faiss's contract: the caller owns and deletes the computer.
  faiss::DistanceComputer* get_distance_computer() const override {
    return std::make_unique<SegmentDistance>(view_).release();
  }

 private:
  const shm::SegmentView& view_;
};

template <typename T>
void WriteVec(std::ofstream& out, const std::vector<T>& v) {
  const uint64_t n = v.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(reinterpret_cast<const char*>(v.data()), n * sizeof(T));
}
template <typename T>
bool ReadVec(std::ifstream& in, std::vector<T>* v, uint64_t max) {
  uint64_t n = 0;
  if (!in.read(reinterpret_cast<char*>(&n), 8) || n > max) return false;
  v->resize(n);
  return static_cast<bool>(
      in.read(reinterpret_cast<char*>(v->data()), n * sizeof(T)));
}
template <typename T>
void WritePod(std::ofstream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <typename T>
bool ReadPod(std::ifstream& in, T* v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(v), sizeof(T)));
}

class HnswIndex : public AnnIndex {
 public:
  HnswIndex(int m, const shm::SegmentView& view, std::filesystem::path dir)
      : view_(view),
        dir_(std::move(dir)),
        storage_(std::make_unique<SegmentStorage>(view)),
        index_(std::make_unique<faiss::IndexHNSW>(storage_.get(), m)) {
    index_->hnsw.efConstruction = kEfConstruction;
    // Also the default: some faiss versions read efSearch only from the index.
    index_->hnsw.efSearch = AnnSearchParams().hnsw_ef_search;
  }

  uint64_t indexed() const override { return index_->ntotal; }

  Status Update(uint64_t committed) override {
    return CatchFaiss("HNSW add", [&] {
      // Block by block: faiss reads the new rows as d = row_stride vectors.
      for (const shm::RowBlock& b : view_.Blocks(committed)) {
        const uint64_t first = std::max<uint64_t>(b.first_row, index_->ntotal);
        const uint64_t end = b.first_row + b.count;
        if (first >= end) continue;
        index_->add(end - first, view_.Row(first));
      }
    });
  }

  Status Search(const float* queries, size_t nq, const faiss::IDSelector* sel,
                const AnnSearchParams& params, TopK* out) const override {
    if (index_->ntotal == 0) return OkStatus();
    faiss::SearchParametersHNSW p;
    p.efSearch = std::max(params.hnsw_ef_search, out->k);
    p.sel = const_cast<faiss::IDSelector*>(sel);  // faiss only reads it
    // faiss 1.7.3 sizes the candidate queue from hnsw.efSearch and stops by
    // the per-search value, so the two must agree or a wider search is capped
    // at the index's width. Searches at the current width share the lock; a
    // different width switches it exclusively (and keeps it for the next).
    std::shared_lock width(ef_mu_);
    while (index_->hnsw.efSearch != p.efSearch) {
      width.unlock();
      {
        std::unique_lock<RwLock> w(ef_mu_);
        index_->hnsw.efSearch = p.efSearch;
      }
      width.lock();
    }
    TopK part(nq, out->k, out->metric);
    ZV_RETURN_IF_ERROR(CatchFaiss("HNSW search", [&] {
      index_->search(nq, queries, out->k, part.dist.data(), part.rows.data(),
                     &p);
    }));
    // Defensive: keep only selected rows whatever the faiss version does with
    // `sel`.
    for (size_t q = 0; sel && q < nq; ++q) {
      int w = 0;
      for (int i = 0; i < out->k; ++i) {
        const int64_t r = part.rows[q * out->k + i];
        if (r >= 0 && sel->is_member(r)) {
          part.rows[q * out->k + w] = r;
          part.dist[q * out->k + w++] = part.dist[q * out->k + i];
        }
      }
      for (; w < out->k; ++w) part.rows[q * out->k + w] = -1;
    }
    out->Merge(part);
    return OkStatus();
  }

  Status Save() override {
    const auto path = dir_ / kGraphFile, tmp = dir_ / "hnsw.graph.tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      const faiss::HNSW& h = index_->hnsw;
      out.write(kMagic, 8);
      WritePod<uint64_t>(out, view_.info().row_stride);
      WritePod<uint64_t>(out, static_cast<uint64_t>(view_.info().metric));
      WritePod<uint64_t>(out, index_->ntotal);
      WriteVec(out, h.assign_probas);
      WriteVec(out, h.cum_nneighbor_per_level);
      WriteVec(out, h.levels);
      WriteVec(out, h.offsets);
      WriteVec(out, h.neighbors);
      WritePod<int32_t>(out, h.entry_point);
      WritePod<int32_t>(out, h.max_level);
      WritePod<int32_t>(out, h.efConstruction);
      // The search width is per request; store the default, not the last used.
      WritePod<int32_t>(out, AnnSearchParams().hnsw_ef_search);
      WritePod<int32_t>(out, h.upper_beam);
      out.flush();
      if (!out) return InternalError(tmp.string() + ": write failed");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec)
      return InternalError(path.string() + ": rename failed: " + ec.message());
    return OkStatus();
  }

  // Loads a saved graph if it fits this segment; otherwise leaves the index
  // empty (the caller rebuilds it from the rows).
  bool Load() {
    std::ifstream in(dir_ / kGraphFile, std::ios::binary);
    if (!in) return false;
    char magic[8];
    uint64_t stride, metric, ntotal;
    faiss::HNSW h = index_->hnsw;
    constexpr uint64_t kMax = uint64_t{1} << 40;
    if (!in.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 ||
        !ReadPod(in, &stride) || !ReadPod(in, &metric) ||
        !ReadPod(in, &ntotal) || stride != view_.info().row_stride ||
        metric != static_cast<uint64_t>(view_.info().metric) ||
        ntotal > view_.committed() || !ReadVec(in, &h.assign_probas, 1024) ||
        !ReadVec(in, &h.cum_nneighbor_per_level, 1024) ||
        !ReadVec(in, &h.levels, kMax) || !ReadVec(in, &h.offsets, kMax) ||
        !ReadVec(in, &h.neighbors, kMax) || !ReadPod(in, &h.entry_point) ||
        !ReadPod(in, &h.max_level) || !ReadPod(in, &h.efConstruction) ||
        !ReadPod(in, &h.efSearch) || !ReadPod(in, &h.upper_beam)) {
      return false;
    }
    // Consistency of the link arrays, so a damaged file cannot make search read
    // out of bounds.
    if (h.levels.size() != ntotal || h.offsets.size() != ntotal + 1 ||
        h.offsets.back() != h.neighbors.size() ||
        h.entry_point >= int64_t(ntotal)) {
      return false;
    }
    for (int32_t n : h.neighbors) {
      if (n < -1 || n >= static_cast<int64_t>(ntotal)) return false;
    }
    h.efSearch = AnnSearchParams().hnsw_ef_search;
    index_->hnsw = std::move(h);
    storage_->ntotal = ntotal;
    index_->ntotal = ntotal;
    return true;
  }

  size_t MemoryBytes() const override {
    const faiss::HNSW& h = index_->hnsw;
    return h.neighbors.capacity() * sizeof(int32_t) +
           h.offsets.capacity() * sizeof(size_t) +
           h.levels.capacity() * sizeof(int);
  }

 private:
  const shm::SegmentView& view_;
  std::filesystem::path dir_;
  // storage_ outlives index_ (declared first); IndexHNSW does not own it.
  std::unique_ptr<SegmentStorage> storage_;
  std::unique_ptr<faiss::IndexHNSW> index_;
  // Guards index_->hnsw.efSearch, which faiss reads during every search.
  mutable RwLock ef_mu_;
};

}  // namespace

StatusOr<std::unique_ptr<AnnIndex>> OpenHnswIndex(
    int m, const shm::SegmentView& view, const std::filesystem::path& dir) {
  auto index = std::make_unique<HnswIndex>(m, view, dir);
  if (!index->Load()) {
    index = std::make_unique<HnswIndex>(m, view, dir);  // start clean
  }
  ZV_RETURN_IF_ERROR(index->Update(view.committed()));
  return std::unique_ptr<AnnIndex>(std::move(index));
}

}  // namespace zv::index
