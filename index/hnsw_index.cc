// The HNSW AnnIndex: immutable pieces + exact tail (design and file formats in
// hnsw_pieces.h). HnswWriterIndex runs in the writer process with a background
// builder thread; HnswReaderIndex serves attached readers from the same files.
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "index/ann_index.h"
#include "index/hnsw_pieces.h"

namespace zv::index {
namespace {

// Legacy whole-graph file of the pre-piece format: ignored and removed (the
// pieces are rebuilt from the rows).
constexpr const char* kLegacyGraphFile = "hnsw.graph";

void Log(const std::string& line) {
  std::fprintf(stderr, "zerovec: %s\n", line.c_str());
}

size_t MappedBytes(const PieceList& list) {
  size_t bytes = 0;
  for (const auto& p : list.pieces) bytes += p->file_bytes();
  return bytes;
}

// Tier of a piece of `rows` rows: floor(log_fanout(rows / interval)).
int Tier(uint64_t rows, uint64_t interval, int fanout) {
  int t = 0;
  for (uint64_t cap = interval * fanout; rows >= cap && t < 62; cap *= fanout)
    ++t;
  return t;
}

class HnswWriterIndex : public AnnIndex {
 public:
  HnswWriterIndex(int m, const shm::SegmentView& view,
                  std::filesystem::path dir, const PieceOptions& options)
      : m_(m), view_(view), dir_(std::move(dir)), options_(options) {
    options_.interval = std::max<uint64_t>(options_.interval, 1);
    options_.merge_fanout = std::max(options_.merge_fanout, 2);
    options_.build_threads = std::max(options_.build_threads, 1);
    build_threads_ = options_.build_threads;
  }

  ~HnswWriterIndex() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    stop_flag_.store(true);
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Maps what the manifest lists (no graph work before serving), cleans up
  // after a crash, and starts the builder.
  Status Init() {
    const uint64_t committed = view_.committed();
    std::error_code ec;
    uint64_t max_serial = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string f = e.path().filename().string();
      const bool tmp = f.size() > 4 && f.compare(f.size() - 4, 4, ".tmp") == 0;
      if ((f.rfind("hnsw.", 0) == 0 && tmp) || f == kLegacyGraphFile) {
        std::filesystem::remove(e.path(), ec);
      } else if (f.rfind("hnsw.piece.", 0) == 0) {
        max_serial = std::max<uint64_t>(
            max_serial, std::strtoull(f.c_str() + 11, nullptr, 10));
      }
    }
    Manifest manifest;
    bool rewrite = false;
    auto read = ReadManifest(dir_);
    if (!read.ok()) {
      Log(read.status().message() + "; dropping it, pieces are rebuilt");
      manifest.version = static_cast<uint64_t>(
          std::chrono::steady_clock::now().time_since_epoch().count());
      rewrite = true;
    } else if (*read) {
      manifest = std::move(**read);
    }
    manifest.next_serial = std::max(manifest.next_serial, max_serial + 1);
    Status bad;
    auto list =
        MapPieces(dir_, manifest, view_.info(), committed, nullptr, &bad);
    if (list->pieces.size() != manifest.entries.size()) {
      Log(bad.message() + "; dropping it and " +
          std::to_string(manifest.entries.size() - list->pieces.size() - 1) +
          " later pieces, they are rebuilt");
      manifest.entries.resize(list->pieces.size());
      rewrite = true;
    }
    if (rewrite) {
      ++manifest.version;
      ZV_RETURN_IF_ERROR(WriteManifest(dir_, manifest));
      list = MapPieces(dir_, manifest, view_.info(), committed, list.get(),
                       nullptr);
    }
    // Pieces no manifest names: a build that crashed before its swap, or
    // files replaced by a merge whose unlink never ran.
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string f = e.path().filename().string();
      if (f.rfind("hnsw.piece.", 0) != 0) continue;
      bool listed = false;
      for (const auto& p : list->pieces)
        listed |= f == PieceFileName(p->serial());
      if (!listed) std::filesystem::remove(e.path(), ec);
    }
    manifest_ = std::move(manifest);
    current_ = std::move(list);
    rows_ = RowTable(view_, committed);
    thread_ = std::thread([this] { BuilderMain(); });
    return OkStatus();
  }

  uint64_t indexed() const override { return Snapshot()->covered(); }

  Status Update(uint64_t committed) override {
    std::lock_guard<std::mutex> l(mu_);
    if (committed <= rows_.rows()) return OkStatus();
    // Captured here, under the collection's lock: the builder reads rows
    // through this table, never through the growing extent list.
    rows_ = RowTable(view_, committed);
    cv_.notify_one();
    return OkStatus();
  }

  Status Search(const float* queries, size_t nq, const faiss::IDSelector* sel,
                const AnnSearchParams& params, uint64_t limit, TopK* out,
                uint64_t* covered) const override {
    const auto list = Snapshot();
    ZV_ASSIGN_OR_RETURN(*covered,
                        SearchPieces(*list, view_, queries, nq, sel,
                                     params.hnsw_ef_search, limit, out));
    return OkStatus();
  }

  Status Save() override { return OkStatus(); }

  size_t MemoryBytes() const override { return MappedBytes(*Snapshot()); }

  bool WaitIdle(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> l(mu_);
    return idle_cv_.wait_for(l, timeout, [&] {
      Job job;
      return stop_ || (!building_ && !NextJob(&job));
    });
  }

  size_t PieceCount() const override { return Snapshot()->pieces.size(); }

  void SetBuildThreads(int threads) override {
    std::lock_guard<std::mutex> l(mu_);
    build_threads_ = threads > 0 ? threads : options_.build_threads;
  }

 private:
  struct Job {
    size_t first = 0, count = 0;  // pieces replaced (count 0: a tail build)
    uint64_t begin = 0, end = 0;
  };

  std::shared_ptr<const PieceList> Snapshot() const {
    std::lock_guard<std::mutex> l(mu_);
    return current_;
  }

  // The next piece to build, if any. Caller holds mu_.
  bool NextJob(Job* job) const {
    if (failed_at_rows_ == rows_.rows()) return false;  // retry on new rows
    const auto& p = current_->pieces;
    const uint64_t covered = current_->covered();
    if (rows_.rows() - covered >= options_.interval) {
      *job = Job{p.size(), 0, covered, rows_.rows()};
      return true;
    }
    const size_t f = static_cast<size_t>(options_.merge_fanout);
    if (p.size() < f) return false;
    // Tiered: fanout adjacent pieces of about the same size, cheapest first;
    // past kMaxPieces any cheapest run, so the count stays bounded whatever
    // sizes the tail builds produced.
    bool found = false;
    uint64_t best = UINT64_MAX;
    for (size_t i = 0; i + f <= p.size(); ++i) {
      int lo = 64, hi = -1;
      for (size_t j = i; j < i + f; ++j) {
        const int t = Tier(p[j]->size(), options_.interval, f);
        lo = std::min(lo, t);
        hi = std::max(hi, t);
      }
      const uint64_t rows = p[i + f - 1]->end() - p[i]->begin();
      if ((hi - lo <= 1 || p.size() > kMaxPieces) && rows < best) {
        best = rows;
        *job = Job{i, f, p[i]->begin(), p[i + f - 1]->end()};
        found = true;
      }
    }
    return found;
  }

  void BuilderMain() {
    // Background work yields the CPU to searches and writes.
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)),
                      10);
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      Job job;
      cv_.wait(l, [&] { return stop_ || NextJob(&job); });
      if (stop_) return;
      building_ = true;
      const RowTable rows = rows_;
      const auto list = current_;
      const uint64_t serial = manifest_.next_serial++;
      const int threads = build_threads_;
      l.unlock();
      Status s = RunJob(job, rows, *list, serial, threads);
      l.lock();
      building_ = false;
      if (!s.ok() && !stop_) {
        // Keep searching exactly; try again when more rows arrive.
        if (std::filesystem::exists(dir_))
          Log("HNSW piece build: " + s.message());
        failed_at_rows_ = rows_.rows();
      }
      idle_cv_.notify_all();
    }
  }

  // Builds the job's piece and swaps it into the manifest. Builder thread
  // only; no lock held while building.
  Status RunJob(const Job& job, const RowTable& rows, const PieceList& list,
                uint64_t serial, int threads) {
    const Piece* base = job.count > 0 ? list.pieces[job.first].get() : nullptr;
    ZV_ASSIGN_OR_RETURN(
        auto piece, BuildPiece(dir_, serial, view_.info(), rows, m_, job.begin,
                               job.end, base, &stop_flag_, threads));
    auto next = std::make_shared<PieceList>();
    Manifest m;
    {
      std::lock_guard<std::mutex> l(mu_);
      m.version = manifest_.version + 1;
      m.next_serial = manifest_.next_serial;
    }
    std::vector<std::shared_ptr<const Piece>> replaced;
    for (size_t i = 0; i < list.pieces.size(); ++i) {
      if (i == job.first) next->pieces.push_back(piece);
      if (i >= job.first && i < job.first + job.count) {
        replaced.push_back(list.pieces[i]);
      } else {
        next->pieces.push_back(list.pieces[i]);
      }
    }
    if (job.first == list.pieces.size()) next->pieces.push_back(piece);
    for (const auto& p : next->pieces)
      m.entries.push_back({p->serial(), p->begin(), p->end()});
    next->version = m.version;
    Status s = WriteManifest(dir_, m);
    std::error_code ec;
    if (!s.ok()) {
      std::filesystem::remove(dir_ / PieceFileName(serial), ec);
      return s;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      manifest_.version = m.version;
      manifest_.entries = m.entries;
      current_ = std::move(next);
      failed_at_rows_ = UINT64_MAX;
    }
    // Processes that still map these keep their pages until they unmap.
    for (const auto& p : replaced)
      std::filesystem::remove(dir_ / PieceFileName(p->serial()), ec);
    return OkStatus();
  }

  const int m_;
  const shm::SegmentView& view_;
  const std::filesystem::path dir_;
  PieceOptions options_;

  mutable std::mutex mu_;  // brief: guards everything below but the flag
  std::condition_variable cv_, idle_cv_;
  std::shared_ptr<const PieceList> current_;
  Manifest manifest_;  // what is on disk (version, serials)
  RowTable rows_;      // committed rows, captured under the collection lock
  uint64_t failed_at_rows_ = UINT64_MAX;
  int build_threads_ = 1;
  bool building_ = false;
  bool stop_ = false;
  std::atomic<bool> stop_flag_{false};  // read by a build between batches
  std::thread thread_;
};

class HnswReaderIndex : public AnnIndex {
 public:
  HnswReaderIndex(const shm::SegmentView& view, std::filesystem::path dir)
      : view_(view),
        dir_(std::move(dir)),
        current_(std::make_shared<PieceList>()) {}

  uint64_t indexed() const override { return current_->covered(); }

  // Re-reads the manifest; maps the pieces it names that are new. A damaged
  // manifest or piece leaves those rows to the exact tail (the writer drops
  // and rebuilds it); a piece a merge removed meanwhile means a newer
  // manifest: read again.
  Status Update(uint64_t committed) override {
    for (int attempt = 0;; ++attempt) {
      auto read = ReadManifest(dir_);
      if (!read.ok() || !*read) return OkStatus();
      const Manifest& m = **read;
      if (m.version == current_->version &&
          current_->pieces.size() == m.entries.size())
        return OkStatus();
      Status bad;
      auto list =
          MapPieces(dir_, m, view_.info(), committed, current_.get(), &bad);
      if (bad.code() == StatusCode::kNotFound && attempt < 3) continue;
      current_ = std::move(list);
      return OkStatus();
    }
  }

  Status Search(const float* queries, size_t nq, const faiss::IDSelector* sel,
                const AnnSearchParams& params, uint64_t limit, TopK* out,
                uint64_t* covered) const override {
    ZV_ASSIGN_OR_RETURN(*covered,
                        SearchPieces(*current_, view_, queries, nq, sel,
                                     params.hnsw_ef_search, limit, out));
    return OkStatus();
  }

  Status Save() override { return OkStatus(); }
  size_t MemoryBytes() const override { return MappedBytes(*current_); }
  size_t PieceCount() const override { return current_->pieces.size(); }

 private:
  const shm::SegmentView& view_;
  const std::filesystem::path dir_;
  // Replaced only by Update, which the attached collection calls under its
  // exclusive lock; searches run under its shared lock.
  std::shared_ptr<const PieceList> current_;
};

}  // namespace

StatusOr<std::unique_ptr<AnnIndex>> OpenHnswIndex(
    int m, const shm::SegmentView& view, const std::filesystem::path& dir) {
  auto index =
      std::make_unique<HnswWriterIndex>(m, view, dir, GetPieceOptions());
  ZV_RETURN_IF_ERROR(index->Init());
  return std::unique_ptr<AnnIndex>(std::move(index));
}

StatusOr<std::unique_ptr<AnnIndex>> OpenHnswReader(
    const shm::SegmentView& view, const std::filesystem::path& dir) {
  auto index = std::make_unique<HnswReaderIndex>(view, dir);
  ZV_RETURN_IF_ERROR(index->Update(view.committed()));
  return std::unique_ptr<AnnIndex>(std::move(index));
}

}  // namespace zv::index
