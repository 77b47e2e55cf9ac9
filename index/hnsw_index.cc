// The HNSW AnnIndex: immutable pieces + exact tail (design and file formats in
// hnsw_pieces.h). HnswWriterIndex runs in the writer process with a background
// builder thread; HnswReaderIndex serves attached readers from the same files.
// Over 600 lines: the two share the tail and manifest code private to them.
#include <omp.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "index/ann_index.h"
#include "index/hnsw_live.h"
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

// Rows the inserter adds to the live graph per exclusive step: a search
// waits for at most this many inserts (~0.1-0.3 ms each at 384 dimensions).
constexpr uint64_t kInsertStep = 8;
// The inserter's step per build thread when it has several: faiss inserts a
// batch's rows on every thread (its parallel loop needs > 100 rows), so rows
// written faster than one thread indexes them go into the live graph on all
// build threads instead of waiting in the backlog (issue 21).
constexpr uint64_t kParallelInsertRowsPerThread = 64;
// A recovered tail shorter than this goes into the live graph instead.
constexpr uint64_t kMinRecoveredPiece = 1024;

// The writer's index: pieces (mapped files), the live graph over the rows
// after them, and an exact backlog of rows the inserter has not reached.
// Two threads, both nice +10 so searches keep the CPU: the inserter (writes
// wait on it when the backlog passes max_backlog) grows the live graph and
// writes it out as a piece when it holds `interval` rows, or builds one piece
// over a large backlog (recovery, bulk loads); the builder merges pieces.
class HnswWriterIndex : public AnnIndex {
 public:
  HnswWriterIndex(int m, const shm::SegmentView& view,
                  std::filesystem::path dir, const PieceOptions& options)
      : m_(m), view_(view), dir_(std::move(dir)), options_(options) {
    options_.interval = std::max<uint64_t>(options_.interval, 1);
    options_.merge_fanout = std::max(options_.merge_fanout, 2);
    options_.build_threads = std::max(options_.build_threads, 1);
    options_.ef_construction = std::max(options_.ef_construction, 1);
    build_threads_ = options_.build_threads;
  }

  ~HnswWriterIndex() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    stop_flag_.store(true);
    merge_cv_.notify_all();
    tail_cv_.notify_all();
    admit_cv_.notify_all();
    if (builder_.joinable()) builder_.join();
    if (inserter_.joinable()) inserter_.join();
    if (recovery_.joinable()) recovery_.join();
  }

  // Maps what the manifest lists (no graph work before serving), cleans up
  // after a crash, and starts the threads.
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
    // A large tail left by a crash becomes a piece on its own thread; the
    // live graph starts after it, so new writes are indexed meanwhile.
    const uint64_t covered = list->covered();
    const bool recover = committed >= covered + kMinRecoveredPiece;
    live_ = std::make_shared<LiveGraph>(view_.info(), m_, efc(),
                                        recover ? committed : covered);
    current_ = std::move(list);
    rows_ = RowTable(view_, committed);
    opened_rows_ = committed;
    builder_ = std::thread([this] { BuilderMain(); });
    inserter_ = std::thread([this] { InserterMain(); });
    if (recover) {
      recovering_ = true;
      recovery_ = std::thread([this, covered] {
        Status s = RecoverTail(covered);
        if (!s.ok() && !stop_flag_.load())
          Log("HNSW piece over the recovered tail: " + s.message());
        std::lock_guard<std::mutex> l(mu_);
        recovering_ = false;
        idle_cv_.notify_all();
      });
    }
    return OkStatus();
  }

  uint64_t indexed() const override { return Snapshot().pieces->covered(); }

  Status Update(uint64_t committed) override {
    std::lock_guard<std::mutex> l(mu_);
    if (committed <= rows_.rows()) return OkStatus();
    // Captured here, under the collection's lock: the threads read rows
    // through this table, never through the growing extent list.
    rows_ = RowTable(view_, committed);
    tail_cv_.notify_one();
    return OkStatus();
  }

  Status AdmitWrite(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> l(mu_);
    // Rows found unindexed at open (a crash's tail) do not count: writes
    // wait only for rows written since, so a restart never stalls them.
    auto backlog = [&] {
      return rows_.rows() - std::max(live_->end(), opened_rows_);
    };
    auto admitted = [&] {
      return stop_ || deferred_ || tail_failed_at_ == rows_.rows() ||
             rows_.rows() <= opened_rows_ || backlog() <= options_.max_backlog;
    };
    // While held up, the writer inserts rows itself, at its own priority: a
    // busy machine can starve the nice-10 inserter, never the writer.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!admitted()) {
      if (std::chrono::steady_clock::now() >= deadline) break;
      l.unlock();
      bool did = false;
      Status s;
      {
        std::unique_lock<std::mutex> step(step_mu_, std::try_to_lock);
        if (step.owns_lock()) s = Step(/*allow_big=*/false, &did);
      }
      l.lock();
      if (!s.ok()) {
        Log("HNSW live graph: " + s.message());
        tail_failed_at_ = rows_.rows();
      }
      if (!did) admit_cv_.wait_for(l, std::chrono::milliseconds(5), admitted);
    }
    if (admitted()) return OkStatus();
    return UnavailableError("the HNSW index is " +
                            std::to_string(rows_.rows() - live_->end()) +
                            " rows behind the writes (limit " +
                            std::to_string(options_.max_backlog) + "); retry");
  }

  Status Search(const float* queries, size_t nq, const faiss::IDSelector* sel,
                const AnnSearchParams& params, uint64_t limit, TopK* out,
                uint64_t* covered) const override {
    const State state = Snapshot();
    const int ef = params.hnsw_ef_search;
    ZV_ASSIGN_OR_RETURN(*covered, SearchPieces(*state.pieces, view_, queries,
                                               nq, sel, ef, limit, out));
    const uint64_t live_begin = state.live->begin();
    if (*covered < live_begin && live_begin <= limit) {
      // The recovered tail, until its piece is built.
      FlatSearch(view_, *covered, live_begin, queries, nq, sel, out);
      *covered = live_begin;
    }
    if (live_begin == *covered && *covered < limit)
      *covered = state.live->Search(view_, queries, nq, sel, ef, limit, out);
    return OkStatus();
  }

  Status Save() override { return OkStatus(); }

  size_t MemoryBytes() const override {
    return MappedBytes(*Snapshot().pieces);
  }

  bool WaitIdle(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> l(mu_);
    return idle_cv_.wait_for(l, timeout, [&] { return Idle(); });
  }

  void DeferIndexing() override {
    std::lock_guard<std::mutex> l(mu_);
    deferred_ = true;
  }

  Status Flush(bool one_graph) override {
    std::lock_guard<std::mutex> step(step_mu_);  // the inserter waits
    // Whatever happens below, the inserter resumes after it (a failed build
    // leaves rows to the live graph, as after any failed piece).
    struct Resume {
      HnswWriterIndex* index;
      ~Resume() {
        {
          std::lock_guard<std::mutex> l(index->mu_);
          index->deferred_ = false;
        }
        index->tail_cv_.notify_one();
      }
    } resume{this};
    const auto [rows, live, threads] = TailSnapshot();
    if (Recovering(*live)) return OkStatus();
    // One graph: the pieces and the tail in one build (the tail's rows are
    // not built twice, as a tail piece and again in the merge).
    if (one_graph) return MergeToOne(rows, *live, threads);
    if (rows.rows() == live->begin()) return OkStatus();
    return BuildTailPiece(rows, *live, threads);
  }

  size_t PieceCount() const override {
    return Snapshot().pieces->pieces.size();
  }

  void SetBuildThreads(int threads) override {
    std::lock_guard<std::mutex> l(mu_);
    build_threads_ = threads > 0 ? threads : options_.build_threads;
  }

 private:
  struct Job {  // a merge of pieces [first, first + count)
    size_t first = 0, count = 0;
    uint64_t begin = 0, end = 0;
  };
  struct State {
    std::shared_ptr<const PieceList> pieces;
    std::shared_ptr<const LiveGraph> live;
  };

  State Snapshot() const {
    std::lock_guard<std::mutex> l(mu_);
    return State{current_, live_};
  }

  // Nothing to build or merge but a live graph short of a piece. Caller
  // holds mu_.
  bool Idle() const {
    if (stop_) return true;
    // Deferred: nothing is built for the tail until Flush.
    if (deferred_) return !merging_ && !recovering_;
    Job job;
    if (merging_ || recovering_ || NextMerge(&job)) return false;
    return tail_failed_at_ == rows_.rows() ||
           rows_.rows() - current_->covered() < options_.interval;
  }

  // The next merge, if any. Caller holds mu_.
  bool NextMerge(Job* job) const {
    if (merge_failed_version_ == current_->version) return false;
    const auto& p = current_->pieces;
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
    // Merges yield the CPU to searches, writes and the inserter.
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)),
                      10);
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      Job job;
      merge_cv_.wait(l,
                     [&] { return stop_ || (!merging_ && NextMerge(&job)); });
      if (stop_) return;
      merging_ = true;
      const RowTable rows = rows_;
      const auto list = current_;
      const uint64_t serial = manifest_.next_serial++;
      const int threads = build_threads_;
      l.unlock();
      Status s = RunMerge(job, rows, *list, serial, threads);
      l.lock();
      merging_ = false;
      if (!s.ok() && !stop_) {
        if (std::filesystem::exists(dir_)) Log("HNSW merge: " + s.message());
        merge_failed_version_ = current_->version;  // retry on a new list
      }
      idle_cv_.notify_all();
    }
  }

  // Every piece and the tail into one graph (Flush's one_graph), after any
  // merge the builder runs (the builder waits meanwhile: merging_). Built
  // anew over every row, levels first, not grown from the first piece's:
  // grown, a 1M graph lost 0.003-0.006 recall at ef 128 to faiss's and
  // hnswlib's one add, as the later rows' upper levels came after the first
  // piece's level 0 (bench/RESULTS.md, 2026-12-06).
  // Caller holds step_mu_ (the inserter writes no piece meanwhile).
  Status MergeToOne(const RowTable& rows, const LiveGraph& live, int threads) {
    std::unique_lock<std::mutex> l(mu_);
    idle_cv_.wait(l, [&] { return stop_ || !merging_; });
    const auto list = current_;
    if (stop_ || (list->pieces.size() <= 1 && rows.rows() == list->covered()))
      return OkStatus();
    if (list->pieces.empty()) {
      l.unlock();
      return BuildTailPiece(rows, live, threads);
    }
    merging_ = true;
    const uint64_t serial = manifest_.next_serial++;
    l.unlock();
    std::vector<uint64_t> replaced;
    for (const auto& p : list->pieces) replaced.push_back(p->serial());
    auto piece =
        BuildPiece(dir_, serial, view_.info(), rows, m_, efc(), 0, rows.rows(),
                   /*base=*/nullptr, &stop_flag_, threads);
    Status s = piece.ok() ? Publish(std::move(piece).value(), replaced)
                          : piece.status();
    l.lock();
    merging_ = false;
    idle_cv_.notify_all();
    merge_cv_.notify_all();
    return s;
  }

  Status RunMerge(const Job& job, const RowTable& rows, const PieceList& list,
                  uint64_t serial, int threads) {
    ZV_ASSIGN_OR_RETURN(
        auto piece, BuildPiece(dir_, serial, view_.info(), rows, m_, efc(),
                               job.begin, job.end, list.pieces[job.first].get(),
                               &stop_flag_, threads));
    std::vector<uint64_t> replaced;
    for (size_t i = job.first; i < job.first + job.count; ++i)
      replaced.push_back(list.pieces[i]->serial());
    return Publish(std::move(piece), replaced);
  }

  void InserterMain() {
    // Nice too: measured on 2 busy cores, an inserter at normal priority
    // took the CPU from searches (0.4x their QPS beside a writer, against
    // 0.6-0.9x niced); writers wait instead (AdmitWrite).
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)),
                      10);
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      // New rows, or a full live graph that the recovered tail's piece held
      // back.
      tail_cv_.wait(l, [&] {
        const bool full = live_->size() >= options_.interval &&
                          current_->covered() == live_->begin();
        return stop_ || (!deferred_ && (rows_.rows() > live_->end() || full) &&
                         tail_failed_at_ != rows_.rows());
      });
      if (stop_) return;
      l.unlock();
      Status s;
      {
        std::lock_guard<std::mutex> step(step_mu_);
        bool did;
        s = Step(/*allow_big=*/true, &did);
      }
      l.lock();
      if (!s.ok() && !stop_) {
        // Those rows stay exact; try again when more arrive.
        if (std::filesystem::exists(dir_))
          Log("HNSW live graph: " + s.message());
        tail_failed_at_ = rows_.rows();
      }
      admit_cv_.notify_all();
      idle_cv_.notify_all();
    }
  }

  // The rows [covered, opened) a crash left unindexed, as pieces built at
  // normal priority on every core (searches scan them exactly until then).

  Status RecoverTail(uint64_t covered) {
    RowTable rows;
    {
      std::lock_guard<std::mutex> l(mu_);
      rows = RowTable(view_, opened_rows_);
    }
    // Every core (OMP_NUM_THREADS if set: TSan runs faiss single-threaded).
    const int threads = std::max(1, omp_get_max_threads());
    // In pieces of two intervals, each published as it is built: progress
    // survives another crash (crashes in a row must not leave an ever
    // longer tail to scan), and merges join them later.
    const uint64_t chunk = 2 * options_.interval;
    for (uint64_t begin = covered; begin < opened_rows_;) {
      const uint64_t end =
          opened_rows_ - begin < 2 * chunk ? opened_rows_ : begin + chunk;
      ZV_ASSIGN_OR_RETURN(
          auto piece,
          BuildPiece(dir_, NextSerial(), view_.info(), rows, m_, efc(), begin,
                     end, nullptr, &stop_flag_, threads));
      ZV_RETURN_IF_ERROR(Publish(std::move(piece), {}));
      begin = end;
    }
    return OkStatus();
  }

  // A step: a few rows into the live graph (written out once it holds a
  // piece's worth), or one piece over a large backlog.
  // One step by the holder of step_mu_: the inserter, or a writer that
  // admission holds up (`allow_big` false: it never takes on a big build).
  // `*did` tells whether it did anything.
  Status Step(bool allow_big, bool* did) {
    const auto [rows, live, threads] = TailSnapshot();
    *did = false;
    const uint64_t pending = rows.rows() - live->end();
    if (pending >= 2 * options_.interval && !Recovering(*live)) {
      if (!allow_big) return OkStatus();
      *did = true;
      // A live graph of a quarter piece or more is kept as a piece; a
      // smaller one is rebuilt within the big piece (tiny pieces would only
      // trigger merges).
      if (live->size() >= options_.interval / 4 && live->size() > 0) {
        ZV_ASSIGN_OR_RETURN(auto piece, live->Freeze(dir_, NextSerial()));
        return Publish(std::move(piece), {});
      }
      return BuildTailPiece(rows, *live, threads);
    }
    // The inserter with several build threads inserts larger steps on all of
    // them; a held-up writer (a server thread that runs parallel searches
    // next) inserts a small step on one. Threads restored after.
    const bool parallel = allow_big && threads > 1 && options_.parallel_insert;
    const uint64_t step =
        parallel ? kParallelInsertRowsPerThread * threads : kInsertStep;
    const int omp_threads = omp_get_max_threads();
    omp_set_num_threads(parallel ? threads : 1);
    struct Restore {
      int n;
      ~Restore() { omp_set_num_threads(n); }
    } restore{omp_threads};
    const uint64_t n =
        pending == 0
            ? 0
            : std::min({pending, rows.ContiguousFrom(live->end()), step});
    // Caught up: publish now, so searches scan nothing exactly.
    ZV_RETURN_IF_ERROR(live->Insert(rows, n, /*publish=*/n == pending));
    *did = n > 0;
    // While the recovered tail's piece is built the live graph grows on:
    // pieces must stay contiguous.
    if (live->size() < options_.interval || Recovering(*live))
      return OkStatus();
    *did = true;
    ZV_ASSIGN_OR_RETURN(auto piece, live->Freeze(dir_, NextSerial()));
    return Publish(std::move(piece), {});
  }

  struct TailState {
    RowTable rows;
    std::shared_ptr<LiveGraph> live;
    int threads;
  };
  TailState TailSnapshot() const {
    std::lock_guard<std::mutex> l(mu_);
    return TailState{rows_, live_, build_threads_};
  }

  // One piece over every row from the live graph's start (its own rows are
  // rebuilt within it), on `threads` build threads.
  Status BuildTailPiece(const RowTable& rows, const LiveGraph& live,
                        int threads) {
    ZV_ASSIGN_OR_RETURN(
        auto piece,
        BuildPiece(dir_, NextSerial(), view_.info(), rows, m_, efc(),
                   live.begin(), rows.rows(), nullptr, &stop_flag_, threads));
    return Publish(std::move(piece), {});
  }

  // True while the recovered tail's piece is being built (pieces end
  // before the live graph begins).
  bool Recovering(const LiveGraph& live) const {
    std::lock_guard<std::mutex> l(mu_);
    return current_->covered() < live.begin();
  }

  uint64_t NextSerial() {
    std::lock_guard<std::mutex> l(mu_);
    return manifest_.next_serial++;
  }

  // Swaps `piece` into the manifest in place of the pieces `replaced` (a
  // merge) or after the last one (a tail piece: the live graph restarts
  // after it). Both threads publish; publish_mu_ orders their manifests.
  Status Publish(std::shared_ptr<const Piece> piece,
                 const std::vector<uint64_t>& replaced) {
    std::lock_guard<std::mutex> publish(publish_mu_);
    std::shared_ptr<const PieceList> list;
    Manifest m;
    {
      std::lock_guard<std::mutex> l(mu_);
      list = current_;
      m.version = manifest_.version + 1;
      m.next_serial = manifest_.next_serial;
    }
    auto next = std::make_shared<PieceList>();
    std::vector<std::shared_ptr<const Piece>> dropped;
    for (const auto& p : list->pieces) {
      const bool gone = std::find(replaced.begin(), replaced.end(),
                                  p->serial()) != replaced.end();
      if (gone && p->serial() == replaced.front())
        next->pieces.push_back(piece);
      if (gone) {
        dropped.push_back(p);
      } else {
        next->pieces.push_back(p);
      }
    }
    if (replaced.empty()) next->pieces.push_back(piece);
    std::error_code ec;
    // A piece past the covered rows must start there, or replace the last
    // pieces (one graph): coverage stays a prefix.
    const bool extends = piece->end() > list->covered();
    if (dropped.size() != replaced.size() ||
        (replaced.empty() && piece->begin() != list->covered()) ||
        (extends && !replaced.empty() &&
         replaced.back() != list->pieces.back()->serial())) {
      std::filesystem::remove(dir_ / PieceFileName(piece->serial()), ec);
      return InternalError("HNSW piece list changed under a build");
    }
    for (const auto& p : next->pieces)
      m.entries.push_back({p->serial(), p->begin(), p->end()});
    next->version = m.version;
    Status s = WriteManifest(dir_, m);
    if (!s.ok()) {
      std::filesystem::remove(dir_ / PieceFileName(piece->serial()), ec);
      return s;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      manifest_.version = m.version;
      manifest_.entries = m.entries;
      // A tail piece, or a merge that took in the tail (one graph): the
      // live graph restarts after it.
      if (piece->end() > list->covered() && live_->begin() == list->covered())
        live_ =
            std::make_shared<LiveGraph>(view_.info(), m_, efc(), piece->end());
      current_ = std::move(next);
      merge_failed_version_ = UINT64_MAX;
    }
    merge_cv_.notify_one();
    tail_cv_.notify_one();
    idle_cv_.notify_all();
    admit_cv_.notify_all();
    // Processes that still map these keep their pages until they unmap.
    for (const auto& p : dropped)
      std::filesystem::remove(dir_ / PieceFileName(p->serial()), ec);
    return OkStatus();
  }

  int efc() const { return options_.ef_construction; }

  const int m_;
  const shm::SegmentView& view_;
  const std::filesystem::path dir_;
  PieceOptions options_;

  std::mutex step_mu_;     // held by whoever runs a live-graph step
  std::mutex publish_mu_;  // held across a manifest write and its swap
  mutable std::mutex mu_;  // brief: guards everything below but the flag
  std::condition_variable merge_cv_, tail_cv_, idle_cv_, admit_cv_;
  std::shared_ptr<const PieceList> current_;
  std::shared_ptr<LiveGraph> live_;  // starts at current_->covered()
  Manifest manifest_;                // what is on disk (version, serials)
  RowTable rows_;  // committed rows, captured under the collection lock
  uint64_t opened_rows_ = 0;  // committed rows when the index was opened
  uint64_t tail_failed_at_ = UINT64_MAX;
  uint64_t merge_failed_version_ = UINT64_MAX;
  int build_threads_ = 1;
  bool merging_ = false;
  bool recovering_ = false;  // the recovered tail's piece is being built
  bool deferred_ = false;    // DeferIndexing until the next Flush
  bool stop_ = false;
  std::atomic<bool> stop_flag_{false};  // read by a build between batches
  std::thread builder_, inserter_, recovery_;
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
