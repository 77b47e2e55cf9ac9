// zerovec build: bulk-loads a corpus into a collection as a pipeline, in one
// pass over the input, resumably.
//
//   reader thread:  parse (simdjson) / map (.npy, .fvecs) -> skip stored ids ->
//                   reserve segment rows -> copy vectors or submit the texts
//                   to the embedder (which tokenizes on several threads and
//                   encodes on the GPU, two streams) -> bounded queue
//   this thread:    wait for the rows -> commit in order (RocksDB WriteBatch,
//                   publish, index add) -> progress
//
// Stages overlap; the queue bounds memory (--inflight chunks, default 16). A
// bad line stops the build: what came before it is committed, nothing from it
// on.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>

#include "base/u64_set.h"
#include "embed/embedder.h"
#include "index/collection.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/corpus_reader.h"
#include "tools/vector_file.h"

namespace zv::tools {
namespace {

using Clock = std::chrono::steady_clock;

// Chunks queued between the reader and the committer. Two are being embedded
// (one per GPU bulk lane) while others are staged (each on its own thread)
// and committed.
// By Little's law the rows a second are the rows in flight over a chunk's time
// from reading to commit; RocksDB and tokenizing make that time long, so
// enough chunks must be in flight (16 x 16384 rows on a GPU).
constexpr int64_t kDefaultChunksInFlight = 16;
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

// Seconds each stage spent, for the closing report.
struct StageTimes {
  double read = 0;        // reading and parsing the input
  double resume = 0;      // skip-if-stored lookups, duplicate drains
  double fill = 0;        // reserving rows (and registering new extents)
  double queue_full = 0;  // reader blocked: the committer is behind
  double embed_wait = 0;  // committer waiting for rows to be embedded + staged
  double stage = 0;       // staging (row checks, RocksDB batches), summed over
                          // the chunks' threads, which overlap
  double commit = 0;      // in-order publication (+ metadata where an id
                          // repeats), index add
};

struct BuildStats {
  uint64_t stored = 0;
  uint64_t skipped = 0;
  uint64_t embedded = 0;     // texts embedded (rows stored from a text)
  uint64_t truncated = 0;    // of those, longer than the model's window
  uint64_t split_texts = 0;  // --chunk-long-texts: texts stored as chunks
  uint64_t chunk_rows = 0;   // the rows they made
  StageTimes times;
  int window = 0;          // the model's max_length in tokens; 0: no model
  std::string device;      // where texts were embedded; empty: nothing embedded
  embed::LaneStats lanes;  // the embedder's bulk lanes, when it ran
};

// Where records come from: a JSONL / text corpus, or a binary vector file.
class Source {
 public:
  virtual ~Source() = default;
  // Next record; false at the end. For a vector file, `vector_row` is set and
  // record->vector stays empty (rows are copied straight from the mapping).
  virtual StatusOr<bool> Next(CorpusRecord* record,
                              std::optional<uint64_t>* vector_row) = 0;
  virtual double fraction() const = 0;    // of the input consumed
  virtual std::string where() const = 0;  // "file:line" of the last record
  virtual const VectorFile* vectors() const { return nullptr; }
};

class CorpusSource : public Source {
 public:
  CorpusSource(std::unique_ptr<CorpusReader> reader, std::string name)
      : reader_(std::move(reader)), name_(std::move(name)) {}
  StatusOr<bool> Next(CorpusRecord* record,
                      std::optional<uint64_t>* vector_row) override {
    vector_row->reset();
    return reader_->Next(record);
  }
  double fraction() const override {
    const uint64_t size = reader_->file_size();
    return size == 0 ? 1.0
                     : std::min(1.0, double(reader_->bytes_read()) / size);
  }
  std::string where() const override {
    return name_ + ":" + std::to_string(reader_->line_number());
  }

 private:
  std::unique_ptr<CorpusReader> reader_;
  std::string name_;
};

class VectorFileSource : public Source {
 public:
  VectorFileSource(std::unique_ptr<VectorFile> file, std::string name)
      : file_(std::move(file)), name_(std::move(name)) {}
  StatusOr<bool> Next(CorpusRecord* record,
                      std::optional<uint64_t>* vector_row) override {
    if (next_ >= file_->rows()) return false;
    record->id = file_->Id(next_);
    record->text.clear();
    record->ns.clear();
    record->metadata.clear();
    record->timestamp_ms = 0;
    record->vector.clear();
    *vector_row = next_++;
    return true;
  }
  double fraction() const override {
    return file_->rows() == 0 ? 1.0 : double(next_) / file_->rows();
  }
  std::string where() const override {
    return name_ + ": row " + std::to_string(next_ == 0 ? 0 : next_ - 1);
  }
  const VectorFile* vectors() const override { return file_.get(); }

 private:
  std::unique_ptr<VectorFile> file_;
  std::string name_;
  uint64_t next_ = 0;
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
  Status ReadAll(CorpusRecord record, std::optional<uint64_t> vector_row) {
    auto chunk = std::make_unique<Chunk>();
    size_t chunk_text_bytes = 0;
    bool chunk_embeds = false;
    uint64_t skipped = 0;
    std::vector<std::vector<float>> jsonl_vectors;  // with records, in order
    std::vector<uint64_t> file_rows;                // rows of a vector file
    auto t = Clock::now();
    auto lap = [&](double* into) {
      const auto now = Clock::now();
      *into += Seconds(now - t);
      t = now;
    };
    auto flush = [&]() -> Status {
      if (chunk->records.empty()) return OkStatus();
      lap(&times_.read);
      ZV_RETURN_IF_ERROR(Fill(*chunk, chunk_embeds, jsonl_vectors, file_rows));
      chunk->fraction = source_.fraction();
      chunk->skipped = std::exchange(skipped, 0);
      lap(&times_.fill);
      const bool pushed = Push(std::move(chunk));
      lap(&times_.queue_full);
      if (!pushed) return CancelledError("stopped");
      chunk = std::make_unique<Chunk>();
      chunk_text_bytes = 0;
      jsonl_vectors.clear();
      file_rows.clear();
      return OkStatus();
    };
    // Adds a record to the chunk unless its id is stored already.
    auto add = [&](CorpusRecord& record, bool embeds) -> StatusOr<bool> {
      ZV_ASSIGN_OR_RETURN(bool keep, Admit(record.id, flush, lap));
      if (!keep) {
        ++skipped;
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
      if (!chunk->records.empty() && embeds != chunk_embeds) {
        ZV_RETURN_IF_ERROR(flush());
      }
      chunk_embeds = embeds;
      index::Record r;
      r.id = std::move(record.id);
      r.text = std::move(record.text);
      r.ns = std::move(record.ns);
      r.metadata = std::move(record.metadata);
      r.timestamp_ms = record.timestamp_ms;
      chunk_text_bytes += r.text.size();
      chunk->records.push_back(std::move(r));
      if (vector_row) {
        file_rows.push_back(*vector_row);
      } else if (!embeds) {
        jsonl_vectors.push_back(std::move(record.vector));
        record.vector = {};
      }
      if (chunk->records.size() >= chunk_rows_ ||
          chunk_text_bytes >= kMaxChunkTextBytes) {
        ZV_RETURN_IF_ERROR(flush());
      }
      return true;
    };
    for (bool more = true; more;) {
      const bool embeds = !vector_row && record.vector.empty();
      std::vector<std::string_view> spans;
      if (embeds && embedder_ && split_overlap_ >= 0) {
        spans = embedder_->SplitToWindows(record.text, split_overlap_);
      }
      if (spans.size() > 1) {
        // --chunk-long-texts: one row a window-sized span, id "<id>#<n>",
        // the source id and span number in the metadata.
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
          ZV_ASSIGN_OR_RETURN(bool added, add(piece, true));
          kept += added;
        }
        split_rows_ += kept;
        split_texts_ += kept > 0;
      } else {
        ZV_RETURN_IF_ERROR(add(record, embeds).status());
      }
      auto next = source_.Next(&record, &vector_row);
      if (!next.ok()) {
        // What came before the bad line is stored; nothing from it on.
        Status flushed = flush();
        if (!flushed.ok()) return flushed;
        return next.status();
      }
      more = *next;
    }
    ZV_RETURN_IF_ERROR(flush());
    lap(&times_.read);
    if (skipped > 0) {
      auto tail = std::make_unique<Chunk>();  // only counts skipped records
      tail->fraction = 1.0;
      tail->skipped = skipped;
      if (!Push(std::move(tail))) return CancelledError("stopped");
    }
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

enum class InputKind { kJsonl, kText, kNpy, kFvecs };

StatusOr<InputKind> InputKindOf(const std::string& input,
                                const std::string& flag) {
  if (flag == "auto") {
    const std::string ext = std::filesystem::path(input).extension().string();
    if (ext == ".npy") return InputKind::kNpy;
    if (ext == ".fvecs") return InputKind::kFvecs;
    return GuessCorpusFormat(input) == CorpusFormat::kJsonl ? InputKind::kJsonl
                                                            : InputKind::kText;
  }
  if (flag == "jsonl") return InputKind::kJsonl;
  if (flag == "text") return InputKind::kText;
  if (flag == "npy") return InputKind::kNpy;
  if (flag == "fvecs") return InputKind::kFvecs;
  return InvalidArgumentError(
      "--format: expected auto, jsonl, text, npy or fvecs, got \"" + flag +
      "\"");
}

Status Build(const Flags& flags, BuildStats* stats,
             std::string* collection_name) {
  ZV_ASSIGN_OR_RETURN(*collection_name, flags.Require("collection"));
  ZV_ASSIGN_OR_RETURN(const std::string input, flags.Require("input"));
  if (flags.Has("group")) {
    ZV_RETURN_IF_ERROR(CheckGroupFlag(flags.Get("group")));
  }
  const std::string data = flags.Get("data", kDefaultData);
  ZV_ASSIGN_OR_RETURN(const std::string descriptor,
                      IndexDescriptor(flags.Get("index", "flat")));
  ZV_ASSIGN_OR_RETURN(const int64_t batch_flag,
                      flags.GetInt("batch", 0, 0, 1 << 20));
  ZV_ASSIGN_OR_RETURN(const int64_t in_flight,
                      flags.GetInt("inflight", kDefaultChunksInFlight, 1, 256));
  ZV_ASSIGN_OR_RETURN(const InputKind kind,
                      InputKindOf(input, flags.Get("format", "auto")));
  ZV_ASSIGN_OR_RETURN(embed::EmbedderOptions device,
                      embed::ParseDevice(flags.Get("device", "auto")));
  ZV_ASSIGN_OR_RETURN(const int64_t threads,
                      flags.GetInt("threads", 0, 0, 4096));
  device.cpu_threads = static_cast<int>(threads);
  const bool vector_file = kind == InputKind::kNpy || kind == InputKind::kFvecs;
  if (flags.Has("ids") && !vector_file) {
    return InvalidArgumentError("--ids: only with .npy or .fvecs input");
  }
  if (Status s = index::ValidateCollectionName(*collection_name); !s.ok()) {
    return InvalidArgumentError("--collection: " + s.message());
  }
  // Vector files need no model unless one is named (then its dim must match,
  // so the collection can be searched by text).
  std::string model = "none";
  if (!vector_file || flags.Has("model")) {
    ZV_ASSIGN_OR_RETURN(model, ResolveModelDir(flags));
    if (model.empty()) model = "none";
  }
  const bool chunk_long = flags.Has("chunk-long-texts");
  if (chunk_long && (vector_file || model == "none")) {
    return InvalidArgumentError(
        "--chunk-long-texts: only for texts the model embeds (not with "
        "--model none or vector files)");
  }

  // From here on errors are not usage errors.
  auto fail = [](const Status& s) {
    return s.code() == StatusCode::kInvalidArgument
               ? FailedPreconditionError(s.message())
               : s;
  };
  const std::string name = std::filesystem::path(input).filename().string();
  std::unique_ptr<Source> source;
  if (vector_file) {
    auto file = VectorFile::Open(input, flags.Get("ids"));
    if (!file.ok()) return fail(file.status());
    source = std::make_unique<VectorFileSource>(std::move(file).value(), name);
  } else {
    auto reader = CorpusReader::Open(input, kind == InputKind::kJsonl
                                                ? CorpusFormat::kJsonl
                                                : CorpusFormat::kText);
    if (!reader.ok()) return fail(reader.status());
    source = std::make_unique<CorpusSource>(std::move(reader).value(), name);
  }
  CorpusRecord first;
  std::optional<uint64_t> first_row;
  auto more = source->Next(&first, &first_row);
  if (!more.ok()) return fail(more.status());

  std::unique_ptr<embed::Embedder> embedder;
  if (model != "none") {
    device.model_dir = model;
    auto created = embed::Embedder::Create(device);
    if (!created.ok())
      return fail(created.status().WithContext("model " + model));
    embedder = std::move(created).value();
  }
  uint32_t dim = 0;
  if (source->vectors()) {
    dim = source->vectors()->dim();
  } else if (*more && !first.vector.empty()) {
    dim = static_cast<uint32_t>(first.vector.size());
  }
  if (embedder) {
    const uint32_t model_dim = embedder->info().dim;
    if (dim != 0 && dim != model_dim) {
      return FailedPreconditionError(
          input + ": the vectors have " + std::to_string(dim) +
          " values but model " + model + " makes " + std::to_string(model_dim));
    }
    dim = model_dim;
  } else if (*more && dim == 0) {
    return FailedPreconditionError(
        source->where() + ": no \"vector\" (needed with --model none)");
  }

  index::DatabaseOptions db_options;
  if (flags.Has("group")) db_options.group = flags.Get("group");
  auto db = index::Database::Open(data, db_options);
  if (!db.ok()) {
    return fail(DataDirOpenError(
        data, db.status(),
        "add to it through that server (the Upsert RPC), stop it first, or "
        "build into another --data folder"));
  }
  std::shared_ptr<index::Collection> collection;
  if (auto existing = (*db)->GetCollection(*collection_name); existing.ok()) {
    collection = *existing;
    if (flags.Has("lexical") && !collection->Describe().lexical) {
      return FailedPreconditionError(
          "--lexical: collection " + *collection_name +
          " was created without a lexical index (fixed at creation)");
    }
    if (collection->Describe().dim != dim) {
      return FailedPreconditionError(
          "collection " + *collection_name + " has dim " +
          std::to_string(collection->Describe().dim) + " but " +
          (embedder ? "model " + model + " makes " : "the vectors have ") +
          std::to_string(dim));
    }
  } else if (!*more) {
    return FailedPreconditionError(input + ": no records");
  } else {
    index::CollectionOptions options;
    options.dim = dim;
    options.index.descriptor = descriptor;
    options.lexical = flags.Has("lexical");
    auto created = (*db)->CreateCollection(*collection_name, options);
    if (!created.ok()) return fail(created.status());
    collection = *created;
  }
  if (embedder) {
    stats->window = embedder->info().max_length;
    stats->device = embedder->device_description();
    std::cerr << "build: model " << model << ", device " << stats->device
              << "\n";
  }
  if (!*more) return OkStatus();

  // Rows a chunk: large on a GPU (each chunk is split into token-budget
  // batches there), smaller on the CPU so progress moves.
  const size_t chunk_rows = batch_flag > 0 ? static_cast<size_t>(batch_flag)
                            : (embedder && embedder->on_cuda()) || !embedder
                                ? 16384
                                : 1024;
  const bool resume = collection->Describe().rows > 0;
  Progress progress("build " + *collection_name, isatty(STDERR_FILENO));
  auto appender = collection->StartBulkAppend();
  if (!appender.ok()) return fail(appender.status());
  // Chunks of a long text share about 1/8 of the window, so a passage cut at
  // one chunk's end is whole in the next.
  const int split_overlap = chunk_long ? stats->window / 8 : -1;
  Pipeline pipeline(*source, *collection, **appender, embedder.get(), dim,
                    chunk_rows, static_cast<size_t>(in_flight), resume,
                    split_overlap, progress, stats);
  Status s = pipeline.Run(std::move(first), first_row);
  const StageTimes& r = pipeline.reader_times();
  stats->times.read = r.read;
  stats->times.resume = r.resume;
  stats->times.fill = r.fill;
  stats->times.queue_full = r.queue_full;
  stats->split_texts = pipeline.split_texts();
  stats->chunk_rows = pipeline.split_rows();
  // Durable before we say so (also after an error: what was committed stays).
  Status finished = (*appender)->Finish();
  appender->reset();
  if (!pipeline.device().empty()) stats->device = pipeline.device();
  if (embedder) stats->lanes = embedder->bulk_stats();
  if (!s.ok()) return fail(s);
  if (!finished.ok()) return fail(finished);
  progress.Finish(stats->stored + stats->skipped);
  // HNSW pieces are built in the background during the load; the rest now, on
  // every core, so `serve` starts with the index rather than an exact tail.
  if (collection->Describe().index_descriptor.rfind("HNSW", 0) == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    const unsigned cores = std::thread::hardware_concurrency();
    if (Status idx = collection->FinishIndexing(cores > 0 ? int(cores) : 1);
        !idx.ok())
      return fail(idx);
    char line[64];
    std::snprintf(
        line, sizeof(line), "build: HNSW pieces built in %.2f s\n",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count());
    std::cerr << line;
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::string> IndexDescriptor(const std::string& flag) {
  if (flag == "flat") return std::string("Flat");
  if (flag == "hnsw") return std::string("HNSW32");
  // PQ32: m must divide the dimension; 32 divides the bundled model's 256 and
  // the common 384, 768 and 1024.
  if (flag == "ivfpq") return std::string("IVF1024,PQ32");
  if (!flag.empty() && std::isupper(static_cast<unsigned char>(flag[0])))
    return flag;
  return InvalidArgumentError(
      "--index: expected flat, hnsw, ivfpq or a FAISS descriptor, got \"" +
      flag + "\"");
}

int Fail(const std::string& command, const Status& s, bool usage) {
  std::cerr << "zerovec " << command << ": " << s.message() << "\n";
  return usage ? 2 : 1;
}

int RunBuild(const std::vector<std::string>& args) {
  auto flags =
      Flags::Parse(args,
                   {"data", "collection", "input", "model", "index", "batch",
                    "format", "device", "ids", "inflight", "group", "threads"},
                   {"chunk-long-texts", "lexical"});
  if (!flags.ok()) return Fail("build", flags.status(), true);
  BuildStats stats;
  std::string name;
  const auto start = Clock::now();
  Status s = Build(*flags, &stats, &name);
  if (!s.ok()) return Fail("build", s, IsUsageError(s));
  const double secs = Seconds(Clock::now() - start);
  char line[512];
  std::snprintf(line, sizeof(line),
                "build: stored %llu rows in collection %s (skipped %llu "
                "already stored) in %.2f s (%.0f rows/s)\n",
                static_cast<unsigned long long>(stats.stored), name.c_str(),
                static_cast<unsigned long long>(stats.skipped), secs,
                secs > 0 ? stats.stored / secs : 0.0);
  std::cout << line;
  const StageTimes& t = stats.times;
  std::snprintf(line, sizeof(line),
                "build: stage seconds: read+parse %.2f, resume checks %.2f, "
                "reserve rows %.2f, reader blocked %.2f | chunk tasks "
                "(vector copy, row checks, RocksDB; parallel, thread-s) %.2f | "
                "committer: wait for rows %.2f, publish+index %.2f\n",
                t.read, t.resume, t.fill, t.queue_full, t.stage, t.embed_wait,
                t.commit);
  std::cout << line;
  if (stats.lanes.texts > 0) {
    // Busy lanes (tokenize + encode near lanes x build time) mean the
    // embedder was the limit; idle ones, what feeds or follows it.
    const embed::LaneStats& l = stats.lanes;
    std::snprintf(line, sizeof(line),
                  "build: embedder %d bulk lane(s), %llu texts: tokenize "
                  "%.2f s, encode %.2f s (wall, summed over lanes)\n",
                  l.lanes, static_cast<unsigned long long>(l.texts),
                  l.tokenize_seconds, l.encode_seconds);
    std::cout << line;
  }
  if (stats.embedded > 0) {
    // Silent truncation loses the end of long documents: say so, and how
    // to keep them.
    std::snprintf(line, sizeof(line),
                  "build: truncated %llu of %llu texts to the model's window "
                  "(%d tokens)%s\n",
                  static_cast<unsigned long long>(stats.truncated),
                  static_cast<unsigned long long>(stats.embedded), stats.window,
                  stats.truncated > 0 && stats.split_texts == 0
                      ? "; --chunk-long-texts stores long texts as "
                        "overlapping chunks"
                      : "");
    std::cout << line;
  }
  if (stats.split_texts > 0) {
    std::snprintf(
        line, sizeof(line),
        "build: --chunk-long-texts: split %llu long text(s) into %llu "
        "rows (ids ID#0, ID#1, ..., metadata source_id and chunk)\n",
        static_cast<unsigned long long>(stats.split_texts),
        static_cast<unsigned long long>(stats.chunk_rows));
    std::cout << line;
  }
  if (!stats.device.empty())
    std::cout << "build: device " << stats.device << "\n";
  return 0;
}

}  // namespace zv::tools
