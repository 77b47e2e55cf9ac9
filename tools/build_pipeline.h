// zerovec build's pipeline: the reader thread parses the input, skips stored
// ids, reserves segment rows and copies vectors or submits texts to the
// embedder; the calling thread waits for each chunk's rows and commits them in
// order. Internal to tools/ (build_cmd.cc is its one user).
#ifndef ZEROVEC_TOOLS_BUILD_PIPELINE_H_
#define ZEROVEC_TOOLS_BUILD_PIPELINE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "embed/embedder.h"
#include "index/collection.h"
#include "tools/cli_util.h"
#include "tools/corpus_reader.h"
#include "tools/vector_file.h"

namespace zv::tools {

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

// How the pipeline runs; build_cmd.cc picks these from the flags.
struct PipelineOptions {
  uint32_t dim = 0;
  size_t chunk_rows = 1024;
  size_t max_in_flight = 16;  // chunks between the reader and the committer
  bool resume = false;        // the collection has rows: skip stored ids
  int split_overlap = -1;     // tokens shared by a long text's chunks; <0: off
};

// Runs the reader thread and the committer (this thread) from `first`
// (already read from `source`) to the end of the input. Adds the rows stored,
// skipped and embedded to `stats` and sets its stage times, split counts and
// (when texts were embedded) device. What was committed stays committed on an
// error; the caller finishes the appender.
Status RunPipeline(Source& source, index::Collection& collection,
                   index::BulkAppender& appender, embed::Embedder* embedder,
                   const PipelineOptions& options, Progress& progress,
                   BuildStats* stats, CorpusRecord first,
                   std::optional<uint64_t> first_row);

}  // namespace zv::tools

#endif  // ZEROVEC_TOOLS_BUILD_PIPELINE_H_
