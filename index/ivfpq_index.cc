// IVF-PQ for collections larger than RAM. Files beside the segment:
// clang-format off
//   ivfpq.trained  coarse centroids + PQ codebooks (small, loaded into memory)
//   ivfpq.index    the full index incl. codes and ids (row numbers), written
//                  whole and atomically renamed, opened with
//                  faiss::IO_FLAG_MMAP so the inverted lists stay in the page
//                  cache, not on the heap.
// clang-format on
// Until 39 x nlist rows exist the index is untrained and the collection
// searches exactly. New rows are searched exactly until kRebuildRows
// accumulate, then encoded and a new ivfpq.index replaces the old one. PQ
// candidates are re-ranked exactly against the rows in the segment, so scores
// are exact.
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/clone_index.h>
#include <faiss/impl/FaissAssert.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "base/file.h"
#include "index/ann_index.h"

namespace zv::index {
namespace {

// faiss's own minimum for k-means: 39 points per centroid (coarse lists, and
// the 256 centroids of each PQ sub-quantizer).
constexpr uint64_t kTrainPerList = 39;
constexpr uint64_t kMinTrainRows = 39 * 256;
constexpr uint64_t kRebuildRows = 16384;

// faiss::IOWriter into an AtomicFileWriter, buffered: faiss writes every
// header field separately.
class AtomicIndexWriter : public faiss::IOWriter {
 public:
  explicit AtomicIndexWriter(AtomicFileWriter& file) : file_(file) {
    name = file.path().string();
  }
  size_t operator()(const void* ptr, size_t size, size_t nitems) override {
    const size_t bytes = size * nitems;
    if (buffer_.size() + bytes > kBufferBytes) Flush();
    if (!status_.ok()) return 0;  // faiss throws on the short count
    if (bytes >= kBufferBytes) {
      status_ = file_.Append(ptr, bytes);
    } else {
      buffer_.append(static_cast<const char*>(ptr), bytes);
    }
    return status_.ok() ? nitems : 0;
  }
  Status Finish() {
    Flush();
    return status_;
  }

 private:
  static constexpr size_t kBufferBytes = 1 << 20;
  void Flush() {
    if (status_.ok() && !buffer_.empty()) status_ = file_.Append(buffer_);
    buffer_.clear();
  }

  AtomicFileWriter& file_;
  std::string buffer_;
  Status status_;
};

// Replaces `path` with `index` through base's atomic file writer.
Status WriteIndexAtomically(const faiss::Index& index,
                            const std::filesystem::path& path,
                            const WriteOptions& options) {
  ZV_ASSIGN_OR_RETURN(AtomicFileWriter file,
                      AtomicFileWriter::Create(path, options));
  AtomicIndexWriter writer(file);
  const Status written =
      CatchFaiss("IVF-PQ write", [&] { faiss::write_index(&index, &writer); });
  ZV_RETURN_IF_ERROR(writer.Finish());  // the cause of a short write, if any
  ZV_RETURN_IF_ERROR(written);
  return file.Commit();
}

class IvfPqIndex : public AnnIndex {
 public:
  IvfPqIndex(int nlist, int pq_m, const shm::SegmentView& view,
             std::filesystem::path dir)
      : nlist_(nlist), pq_m_(pq_m), view_(view), dir_(std::move(dir)) {}

  Status Load() {
    return CatchFaiss("IVF-PQ load", [&] {
      if (std::filesystem::exists(TrainedPath())) {
        trained_.reset(dynamic_cast<faiss::IndexIVFPQ*>(
            faiss::read_index(TrainedPath().c_str())));
      }
      if (trained_ && std::filesystem::exists(IndexPath())) {
        std::unique_ptr<faiss::Index> base(
            faiss::read_index(IndexPath().c_str(), faiss::IO_FLAG_MMAP));
        auto* ivf = dynamic_cast<faiss::IndexIVFPQ*>(base.get());
        // A file from a longer (crashed, uncommitted) history is not trusted.
        if (ivf && static_cast<uint64_t>(ivf->ntotal) <= view_.committed()) {
          base_.reset(ivf);
          base.release();
        }
      }
    });
  }

  uint64_t indexed() const override { return base_ ? base_->ntotal : 0; }

  Status Update(uint64_t committed) override {
    if (!trained_) {
      if (committed < TrainRows()) return OkStatus();
      ZV_RETURN_IF_ERROR(Train(committed));
    }
    if (committed - indexed() < kRebuildRows && base_) return OkStatus();
    return Rebuild(committed);
  }

  Status Search(const float* queries, size_t nq, const faiss::IDSelector* sel,
                const AnnSearchParams& params, uint64_t limit, TopK* out,
                uint64_t* covered) const override {
    // Updated under the collection's exclusive lock: never past `limit`.
    *covered = std::min(indexed(), limit);
    if (!base_) return OkStatus();
    const uint32_t dim = view_.info().dim, stride = view_.info().row_stride;
    std::vector<float> q(nq * dim);
    for (size_t i = 0; i < nq; ++i)
      std::copy_n(queries + i * stride, dim, &q[i * dim]);
    const int kc = static_cast<int>(std::min<uint64_t>(
        static_cast<uint64_t>(out->k) * params.ivf_rerank_factor,
        base_->ntotal));
    if (kc <= 0) return OkStatus();
    std::vector<float> d(nq * kc);
    std::vector<int64_t> cand(nq * kc);
    faiss::SearchParametersIVF p;
    p.nprobe = std::min(params.ivf_nprobe, nlist_);
    p.sel = const_cast<faiss::IDSelector*>(sel);  // faiss only reads it
    ZV_RETURN_IF_ERROR(CatchFaiss("IVF-PQ search", [&] {
      base_->search(nq, q.data(), kc, d.data(), cand.data(), &p);
    }));
    for (int64_t& r : cand) {
      if (r >= 0 && sel && !sel->is_member(r)) r = -1;
    }
    RerankCandidates(view_, cand.data(), kc, queries, nq, out);
    return OkStatus();
  }

  Status Save() override {
    return OkStatus();
  }  // ivfpq.index is written by Update

  size_t MemoryBytes() const override {
    if (!trained_) return 0;
    return trained_->quantizer->ntotal * trained_->d * sizeof(float) +
           trained_->pq.centroids.size() * sizeof(float) +
           (base_ ? base_->precomputed_table.size() * sizeof(float) : 0);
  }

 private:
  uint64_t TrainRows() const {
    return std::max<uint64_t>(kTrainPerList * nlist_, kMinTrainRows);
  }
  std::filesystem::path TrainedPath() const { return dir_ / "ivfpq.trained"; }
  std::filesystem::path IndexPath() const { return dir_ / "ivfpq.index"; }

  // Rows [first, first + n) without their padding (the IVF works in `dim`).
  std::vector<float> Unpadded(const std::vector<int64_t>& rows) const {
    const uint32_t dim = view_.info().dim;
    std::vector<float> x(rows.size() * dim);
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy_n(view_.Row(rows[i]), dim, &x[i * dim]);
    return x;
  }

  Status Train(uint64_t committed) {
    const uint32_t dim = view_.info().dim;
    const uint64_t n = std::min<uint64_t>(committed, TrainRows());
    std::vector<int64_t> rows(committed);
    std::iota(rows.begin(), rows.end(), 0);
    std::mt19937_64 rng(1234);
    std::shuffle(rows.begin(), rows.end(), rng);
    rows.resize(n);
    const std::vector<float> sample = Unpadded(rows);
    const faiss::MetricType metric =
        view_.info().metric == shm::Metric::kInnerProduct
            ? faiss::METRIC_INNER_PRODUCT
            : faiss::METRIC_L2;
    std::unique_ptr<faiss::Index> quantizer;
    if (metric == faiss::METRIC_INNER_PRODUCT) {
      quantizer = std::make_unique<faiss::IndexFlatIP>(dim);
    } else {
      quantizer = std::make_unique<faiss::IndexFlatL2>(dim);
    }
    auto index = std::make_unique<faiss::IndexIVFPQ>(quantizer.get(), dim,
                                                     nlist_, pq_m_, 8, metric);
    index->own_fields = true;  // the index now owns the quantizer
    quantizer.release();
    index->cp.niter =
        10;  // enough for coarse centroids; keeps training seconds
    index->pq.cp.niter = 15;
    ZV_RETURN_IF_ERROR(CatchFaiss("IVF-PQ train", [&] {
      index->train(static_cast<faiss::Index::idx_t>(n), sample.data());
    }));
    // Synced: Load fails on a torn file, so it must survive power loss whole.
    ZV_RETURN_IF_ERROR(
        WriteIndexAtomically(*index, TrainedPath(), {.sync = true}));
    trained_ = std::move(index);
    return OkStatus();
  }

  // Writes a new ivfpq.index holding the current lists plus rows [indexed,
  // committed).
  Status Rebuild(uint64_t committed) {
    std::unique_ptr<faiss::IndexIVFPQ> next;
    ZV_RETURN_IF_ERROR(CatchFaiss("IVF-PQ rebuild", [&] {
      next.reset(
          dynamic_cast<faiss::IndexIVFPQ*>(faiss::clone_index(trained_.get())));
      if (base_) {
        for (int l = 0; l < nlist_; ++l) {
          const size_t n = base_->invlists->list_size(l);
          if (n == 0) continue;
          faiss::InvertedLists::ScopedCodes codes(base_->invlists, l);
          faiss::InvertedLists::ScopedIds ids(base_->invlists, l);
          next->invlists->add_entries(l, n, ids.get(), codes.get());
        }
        next->ntotal = base_->ntotal;
      }
      constexpr uint64_t kBatch = 8192;
      for (uint64_t first = next->ntotal; first < committed; first += kBatch) {
        std::vector<int64_t> rows(std::min(kBatch, committed - first));
        std::iota(rows.begin(), rows.end(), static_cast<int64_t>(first));
        const std::vector<float> x = Unpadded(rows);
        next->add_with_ids(static_cast<faiss::Index::idx_t>(rows.size()),
                           x.data(), rows.data());
      }
    }));
    // Synced: Load fails on a torn file, so it must survive power loss whole.
    ZV_RETURN_IF_ERROR(
        WriteIndexAtomically(*next, IndexPath(), {.sync = true}));
    next.reset();  // its lists are on the heap; the reload maps them
    return CatchFaiss("IVF-PQ reload", [&] {
      std::unique_ptr<faiss::Index> base(
          faiss::read_index(IndexPath().c_str(), faiss::IO_FLAG_MMAP));
      auto* ivf = dynamic_cast<faiss::IndexIVFPQ*>(base.get());
      FAISS_THROW_IF_NOT_MSG(ivf, "ivfpq.index is not an IndexIVFPQ");
      base.release();
      base_.reset(ivf);
    });
  }

  int nlist_;
  int pq_m_;
  const shm::SegmentView& view_;
  std::filesystem::path dir_;
  std::unique_ptr<faiss::IndexIVFPQ> trained_;  // empty lists: the encoder
  std::unique_ptr<faiss::IndexIVFPQ> base_;  // rows [0, ntotal), lists mmapped
};

}  // namespace

StatusOr<std::unique_ptr<AnnIndex>> OpenIvfPqIndex(
    int nlist, int pq_m, const shm::SegmentView& view,
    const std::filesystem::path& dir) {
  auto index = std::make_unique<IvfPqIndex>(nlist, pq_m, view, dir);
  ZV_RETURN_IF_ERROR(index->Load());
  ZV_RETURN_IF_ERROR(index->Update(view.committed()));
  return std::unique_ptr<AnnIndex>(std::move(index));
}

}  // namespace zv::index
