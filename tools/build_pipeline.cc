#include "tools/build_pipeline.h"

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>

#include "base/u64_set.h"

namespace zv::tools {
namespace {

using Clock = std::chrono::steady_clock;

// A chunk closes at this many bytes of text, whatever --batch says, so a
// corpus of long documents keeps memory bounded.
constexpr size_t kMaxChunkTextBytes = 16 << 20;
double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Faults in the pages of each row (rows are not yet published), so the page
// faults happen on the calling thread: one madvise(MADV_POPULATE_WRITE) per
// contiguous run of rows where the kernel has it (Linux 5.14+), else a zero
// written into every page.
void PrefaultRows(std::span<float* const> rows, uint32_t dim) {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  constexpr uintptr_t kPage = 4096;
  static std::atomic<bool> populate_works{true};
  size_t begin = 0;
  while (begin < rows.size()) {
    // A run: rows at one stride from each other (one extent).
    size_t end = begin + 1;
    const ptrdiff_t stride = end < rows.size() ? rows[end] - rows[begin] : 0;
    while (end < rows.size() && rows[end] - rows[end - 1] == stride &&
           stride > 0) {
      ++end;
    }
    const uintptr_t lo =
        reinterpret_cast<uintptr_t>(rows[begin]) & ~(kPage - 1);
    const uintptr_t hi =
        (reinterpret_cast<uintptr_t>(rows[end - 1] + dim) + kPage - 1) &
        ~(kPage - 1);
    if (!populate_works.load(std::memory_order_relaxed) ||
        ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE) !=
            0) {
      populate_works.store(false, std::memory_order_relaxed);
      constexpr uint32_t kFloatsPerPage = kPage / sizeof(float);
      for (size_t i = begin; i < end; ++i) {
        for (uint32_t j = 0; j < dim; j += kFloatsPerPage) rows[i][j] = 0.0f;
        rows[i][dim - 1] = 0.0f;
      }
    }
    begin = end;
  }
}

// One batch on its way through the pipeline.
struct Chunk {
  std::vector<index::Record> records;
  std::vector<std::string_view> texts;  // into records[i].text, when embedded
  index::ReservedRows rows;
  double fraction = 0;        // of the input consumed once this is stored
  uint64_t skipped = 0;       // input records skipped before this chunk
  embed::EmbedReport report;  // of embedding `texts`
  // Rows filled and staged (checked, metadata written where independent), on
  // a thread of its own. Last member: destroyed first, so its task has ended
  // before the rows and texts it reads go away.
  std::future<Status> ready;
};
// The reader thread and the committer (the calling thread), joined by a
// bounded queue of chunks.
class Pipeline {
 public:
  Pipeline(Source& source, index::Collection& collection,
           index::BulkAppender& appender, embed::Embedder* embedder,
           uint32_t dim, size_t chunk_rows, size_t max_in_flight, bool resume,
           int split_overlap, Progress& progress, BuildStats* stats)
      : source_(source),
        collection_(collection),
        appender_(appender),
        embedder_(embedder),
        dim_(dim),
        chunk_rows_(chunk_rows),
        max_in_flight_(max_in_flight),
        resume_(resume),
        split_overlap_(split_overlap),
        progress_(progress),
        stats_(stats) {}

  // Runs the pipeline from `first` (already read by the caller) to the end.
  Status Run(CorpusRecord first, std::optional<uint64_t> first_row) {
    std::thread reader([&] {
      Status s = ReadAll(std::move(first), first_row);
      std::lock_guard<std::mutex> lock(mu_);
      reader_status_ = s;
      reader_done_ = true;
      cv_.notify_all();
    });
    Status commit_status = CommitAll();
    if (!commit_status.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    reader.join();
    // Chunks left behind after a failure: destroying one waits for its task
    // (Chunk::ready). Their rows stay unpublished.
    queue_.clear();
    // Nothing is in flight now: the mappings may go (the description names
    // the sink that was used, so read it first).
    if (embedder_) device_ = embedder_->device_description();
    for (void* data : registered_) embedder_->UnregisterOutputMemory(data);
    registered_.clear();
    if (!commit_status.ok()) return commit_status;
    return reader_status_;
  }

 private:
  // ---- reader thread
  // The chunk the reader is filling and what goes with it.
  struct ReadState {
    std::unique_ptr<Chunk> chunk = std::make_unique<Chunk>();
    size_t text_bytes = 0;
    bool embeds = false;
    uint64_t skipped = 0;
    std::vector<std::vector<float>> jsonl_vectors;  // with records, in order
    std::vector<uint64_t> file_rows;                // rows of a vector file
    Clock::time_point t = Clock::now();
    // Adds the time since the last lap to `*into`.
    void Lap(double* into) {
      const auto now = Clock::now();
      *into += Seconds(now - t);
      t = now;
    }
  };

  Status ReadAll(CorpusRecord record, std::optional<uint64_t> vector_row) {
    ReadState st;
    for (bool more = true; more;) {
      ZV_RETURN_IF_ERROR(AddInput(st, record, vector_row));
      auto next = source_.Next(&record, &vector_row);
      if (!next.ok()) {
        // What came before the bad line is stored; nothing from it on.
        ZV_RETURN_IF_ERROR(FlushChunk(st));
        return next.status();
      }
      more = *next;
    }
    ZV_RETURN_IF_ERROR(FlushChunk(st));
    st.Lap(&times_.read);
    if (st.skipped > 0) {
      auto tail = std::make_unique<Chunk>();  // only counts skipped records
      tail->fraction = 1.0;
      tail->skipped = st.skipped;
      if (!Push(std::move(tail))) return CancelledError("stopped");
    }
    return OkStatus();
  }

  // One input record: whole, or with --chunk-long-texts one row a
  // window-sized span, id "<id>#<n>", the source id and span number in the
  // metadata.
  Status AddInput(ReadState& st, CorpusRecord& record,
                  const std::optional<uint64_t>& vector_row) {
    const bool embeds = !vector_row && record.vector.empty();
    std::vector<std::string_view> spans;
    if (embeds && embedder_ && split_overlap_ >= 0) {
      spans = embedder_->SplitToWindows(record.text, split_overlap_);
    }
    if (spans.size() <= 1) return Add(st, record, embeds, vector_row).status();
    uint64_t kept = 0;
    for (size_t n = 0; n < spans.size(); ++n) {
      CorpusRecord piece;
      piece.id = record.id + "#" + std::to_string(n);
      piece.text = std::string(spans[n]);
      piece.ns = record.ns;
      piece.metadata = record.metadata;
      piece.metadata["source_id"] = record.id;
      piece.metadata["chunk"] = std::to_string(n);
      piece.timestamp_ms = record.timestamp_ms;
      ZV_ASSIGN_OR_RETURN(bool added, Add(st, piece, true, std::nullopt));
      kept += added;
    }
    split_rows_ += kept;
    split_texts_ += kept > 0;
    return OkStatus();
  }

  // Adds a record to the chunk unless its id is stored already; false if
  // skipped.
  StatusOr<bool> Add(ReadState& st, CorpusRecord& record, bool embeds,
                     const std::optional<uint64_t>& vector_row) {
    auto flush = [&] { return FlushChunk(st); };
    auto lap = [&](double* into) { st.Lap(into); };
    ZV_ASSIGN_OR_RETURN(bool keep, Admit(record.id, flush, lap));
    if (!keep) {
      ++st.skipped;
      return false;
    }
    if (embeds && embedder_ == nullptr) {
      return FailedPreconditionError(
          source_.where() + ": no \"vector\" (needed with --model none)");
    }
    if (!embeds && !vector_row && record.vector.size() != dim_) {
      return FailedPreconditionError(
          source_.where() + ": \"vector\" has " +
          std::to_string(record.vector.size()) + " values, collection " +
          collection_.name() + " has dim " + std::to_string(dim_));
    }
    // Chunks are homogeneous: flush when the kind changes.
    if (!st.chunk->records.empty() && embeds != st.embeds) {
      ZV_RETURN_IF_ERROR(FlushChunk(st));
    }
    st.embeds = embeds;
    index::Record r;
    r.id = std::move(record.id);
    r.text = std::move(record.text);
    r.ns = std::move(record.ns);
    r.metadata = std::move(record.metadata);
    r.timestamp_ms = record.timestamp_ms;
    st.text_bytes += r.text.size();
    st.chunk->records.push_back(std::move(r));
    if (vector_row) {
      st.file_rows.push_back(*vector_row);
    } else if (!embeds) {
      st.jsonl_vectors.push_back(std::move(record.vector));
      record.vector = {};
    }
    if (st.chunk->records.size() >= chunk_rows_ ||
        st.text_bytes >= kMaxChunkTextBytes) {
      ZV_RETURN_IF_ERROR(FlushChunk(st));
    }
    return true;
  }

  // Fills the chunk's rows and queues it; a fresh chunk follows.
  Status FlushChunk(ReadState& st) {
    if (st.chunk->records.empty()) return OkStatus();
    st.Lap(&times_.read);
    ZV_RETURN_IF_ERROR(
        Fill(*st.chunk, st.embeds, st.jsonl_vectors, st.file_rows));
    st.chunk->fraction = source_.fraction();
    st.chunk->skipped = std::exchange(st.skipped, 0);
    st.Lap(&times_.fill);
    const bool pushed = Push(std::move(st.chunk));
    st.Lap(&times_.queue_full);
    if (!pushed) return CancelledError("stopped");
    st.chunk = std::make_unique<Chunk>();
    st.text_bytes = 0;
    st.jsonl_vectors.clear();
    st.file_rows.clear();
    return OkStatus();
  }

  // Resumable: an id already stored (an earlier, interrupted run) is skipped,
  // and so is a repeat within this run (the first line with an id wins). A
  // repeated hash may be a collision: the pipeline drains, then the store
  // answers exactly.
  template <typename Flush, typename Lap>
  StatusOr<bool> Admit(const std::string& id, Flush& flush, Lap& lap) {
    if (!seen_.Insert(std::hash<std::string_view>{}(id))) {
      lap(&times_.read);
      ZV_RETURN_IF_ERROR(flush());
      if (!Drain()) return CancelledError("stopped");
      ZV_ASSIGN_OR_RETURN(bool stored, collection_.Contains(id));
      lap(&times_.resume);
      return !stored;
    }
    if (!resume_) return true;
    lap(&times_.read);
    ZV_ASSIGN_OR_RETURN(bool stored, collection_.Contains(id));
    lap(&times_.resume);
    return !stored;
  }

  Status Fill(Chunk& chunk, bool embeds,
              std::vector<std::vector<float>>& jsonl_vectors,
              std::vector<uint64_t>& file_rows) {
    ZV_ASSIGN_OR_RETURN(chunk.rows, appender_.Reserve(chunk.records));
    if (embeds) {
      // New extents are registered so a GPU encoder can store rows there
      // directly (where the kernel allows pinning the mapping; else the
      // encoder stages them, and its device description says which).
      for (const auto& range : appender_.MappedRanges()) {
        if (registered_.insert(range.data).second) {
          ZV_RETURN_IF_ERROR(
              embedder_->RegisterOutputMemory(range.data, range.bytes));
        }
      }
      chunk.texts.reserve(chunk.records.size());
      for (const auto& r : chunk.records) chunk.texts.push_back(r.text);
    }
    // Waits for (or copies) the rows, then stages them, overlapping other
    // chunks: copying vectors into fresh segment pages (page faults) and
    // writing metadata are the costly parts of a precomputed-vector load.
    chunk.ready =
        std::async(std::launch::async, [this, c = &chunk,
                                        vectors = std::move(jsonl_vectors),
                                        rows = std::move(file_rows)]() {
          Status s = OkStatus();
          if (!c->texts.empty()) {
            // Fault the rows' fresh pages in here, on this chunk's thread:
            // otherwise the encoder's worker takes each fault while it
            // stores the rows, between its GPU batches (page faults are
            // dear, under a sandboxing kernel especially).
            PrefaultRows(c->rows.rows, dim_);
            // The embedder writes straight into the segment rows.
            s = embedder_->Submit(c->texts, c->rows.rows, &c->report).get();
          }
          const auto t1 = Clock::now();
          if (const VectorFile* file = source_.vectors(); !rows.empty()) {
            for (size_t i = 0; i < rows.size(); ++i) {
              std::memcpy(c->rows.rows[i], file->Row(rows[i]),
                          dim_ * sizeof(float));
            }
          }
          for (size_t i = 0; i < vectors.size(); ++i) {
            std::memcpy(c->rows.rows[i], vectors[i].data(),
                        dim_ * sizeof(float));
          }
          if (s.ok()) s = appender_.Stage(c->rows, c->records);
          std::lock_guard<std::mutex> lock(mu_);
          stage_seconds_ += Seconds(Clock::now() - t1);
          return s;
        });
    return OkStatus();
  }

  bool Push(std::unique_ptr<Chunk> chunk) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || queue_.size() < max_in_flight_; });
    if (stop_) {
      lock.unlock();
      chunk.reset();  // waits for its task
      return false;
    }
    queue_.push_back(std::move(chunk));
    ++pushed_;
    cv_.notify_all();
    return true;
  }

  // Waits until every pushed chunk is committed; false once stopped.
  bool Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || committed_ == pushed_; });
    return !stop_;
  }

  // ---- committer (calling thread)
  Status CommitAll() {
    for (;;) {
      std::unique_ptr<Chunk> chunk;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || reader_done_; });
        if (queue_.empty()) return OkStatus();
        chunk = std::move(queue_.front());
        queue_.pop_front();
        cv_.notify_all();
      }
      auto t0 = Clock::now();
      if (chunk->ready.valid()) ZV_RETURN_IF_ERROR(chunk->ready.get());
      auto t1 = Clock::now();
      if (!chunk->records.empty()) {
        ZV_RETURN_IF_ERROR(appender_.Commit(chunk->rows, chunk->records));
      }
      auto t2 = Clock::now();
      stats_->times.embed_wait += Seconds(t1 - t0);
      stats_->times.commit += Seconds(t2 - t1);
      stats_->stored += chunk->records.size();
      stats_->skipped += chunk->skipped;
      stats_->embedded += chunk->texts.size();
      stats_->truncated += chunk->report.truncated;
      progress_.Update(stats_->stored + stats_->skipped, chunk->fraction);
      std::lock_guard<std::mutex> lock(mu_);
      ++committed_;
      stats_->times.stage = stage_seconds_;
      cv_.notify_all();
    }
  }

  Source& source_;
  index::Collection& collection_;
  index::BulkAppender& appender_;
  embed::Embedder* embedder_;
  const uint32_t dim_;
  const size_t chunk_rows_;
  const size_t max_in_flight_;
  const bool resume_;
  const int split_overlap_;  // tokens shared by a long text's chunks; <0: off
  Progress& progress_;
  BuildStats* stats_;

  U64Set seen_;                 // id hashes; reader thread only
  std::set<void*> registered_;  // extent mappings given to the embedder
  StageTimes times_;            // reader thread's stages, merged after join
  uint64_t split_texts_ = 0, split_rows_ = 0;  // reader thread's, likewise

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Chunk>> queue_;
  double stage_seconds_ = 0;
  uint64_t pushed_ = 0, committed_ = 0;
  bool stop_ = false, reader_done_ = false;
  Status reader_status_;

 public:
  const StageTimes& reader_times() const { return times_; }
  uint64_t split_texts() const { return split_texts_; }
  uint64_t split_rows() const { return split_rows_; }
  // Where texts were embedded, incl. the output sink; empty without a model.
  const std::string& device() const { return device_; }

 private:
  std::string device_;
};

}  // namespace

Status RunPipeline(Source& source, index::Collection& collection,
                   index::BulkAppender& appender, embed::Embedder* embedder,
                   const PipelineOptions& options, Progress& progress,
                   BuildStats* stats, CorpusRecord first,
                   std::optional<uint64_t> first_row) {
  Pipeline pipeline(source, collection, appender, embedder, options.dim,
                    options.chunk_rows, options.max_in_flight, options.resume,
                    options.split_overlap, progress, stats);
  Status s = pipeline.Run(std::move(first), first_row);
  const StageTimes& r = pipeline.reader_times();
  stats->times.read = r.read;
  stats->times.resume = r.resume;
  stats->times.fill = r.fill;
  stats->times.queue_full = r.queue_full;
  stats->split_texts = pipeline.split_texts();
  stats->chunk_rows = pipeline.split_rows();
  if (!pipeline.device().empty()) stats->device = pipeline.device();
  return s;
}

}  // namespace zv::tools
