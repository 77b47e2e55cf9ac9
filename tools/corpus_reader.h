// Reads a corpus for `zerovec build`: JSONL (one {"id","text","namespace",
// "metadata","timestamp_ms","vector"} object a line) or plain text (one
// document a line). "vector" (optional) is a precomputed embedding, an array
// of finite numbers; a line with one may omit "text". Robust to arbitrary
// input: a bad line is an error naming its line number, never a crash (this
// file is a fuzz target). JSON is parsed with simdjson (DOM: measured faster
// than On-Demand here, and it validates the whole line, unknown fields too).
#ifndef ZEROVEC_TOOLS_CORPUS_READER_H_
#define ZEROVEC_TOOLS_CORPUS_READER_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace zv::tools {

inline constexpr size_t kMaxCorpusLineBytes = 1 << 20;
inline constexpr size_t kMaxCorpusIdBytes = 512;
inline constexpr size_t kMaxCorpusVectorDim = 65536;

struct CorpusRecord {
  std::string id;  // from the line, or "line-<n>" when absent / plain text
  std::string text;
  std::string ns;
  // Non-string values are kept as compact JSON ("2", "true", "[1,2]").
  std::map<std::string, std::string> metadata;
  int64_t timestamp_ms = 0;   // 0: not given
  std::vector<float> vector;  // precomputed embedding; empty: embed the text
};

enum class CorpusFormat { kJsonl, kText };

// .jsonl / .ndjson / .json are JSONL, anything else plain text.
CorpusFormat GuessCorpusFormat(const std::filesystem::path& path);

// Parses one JSONL line (1-based `line_number`) into *out, reusing its
// strings' and vector's capacity. Errors start "line <n>: ". Thread-safe (one
// parser per thread).
Status ParseJsonlLine(std::string_view line, int64_t line_number,
                      CorpusRecord* out);

class JsonlParser;  // simdjson state, defined in corpus_reader.cc

class CorpusReader {
 public:
  static StatusOr<std::unique_ptr<CorpusReader>> Open(
      const std::filesystem::path& path, CorpusFormat format);
  ~CorpusReader();
  CorpusReader(const CorpusReader&) = delete;
  CorpusReader& operator=(const CorpusReader&) = delete;

  // Reads the next record into *out (reusing its capacity); false at the end
  // of the file. Blank lines are skipped. Errors are "<file>:<line>: what";
  // reading may go on after a bad line, with the line after it.
  StatusOr<bool> Next(CorpusRecord* out);

  // Refills *out with up to `max_records` (> 0) records, reusing the capacity
  // of the elements already there; returns how many, 0 at the end, and leaves
  // out->size() equal to it. A bad line after some good ones ends the batch
  // early: its error is returned by the next call, so no record is lost.
  StatusOr<size_t> NextBatch(std::vector<CorpusRecord>* out,
                             size_t max_records);

  // The last line read (1-based; 0 before the first).
  int64_t line_number() const { return line_number_; }
  // Bytes of the file consumed so far (lines returned, skipped or rejected);
  // equals file_size() at the end. For progress / ETA without a counting pass.
  uint64_t bytes_read() const { return bytes_read_; }
  // Size of the file when opened (0 for a pipe or other non-regular file).
  uint64_t file_size() const { return file_size_; }

 private:
  CorpusReader(std::filesystem::path path, CorpusFormat format, int fd,
               uint64_t file_size);

  // Sets *line to the next line without its '\n' (it stays valid, with
  // simdjson's padding readable after it, until the next call); false at the
  // end. *too_long: the line was longer than kMaxCorpusLineBytes and was
  // skipped, not returned.
  StatusOr<bool> NextLine(std::string_view* line, bool* too_long);
  Status LineError(const Status& parse_error) const;

  const std::filesystem::path path_;
  const std::string file_name_;  // prefix of error messages
  const CorpusFormat format_;
  const int fd_;
  const uint64_t file_size_;
  // Read buffer: [begin_, end_) not yet consumed; [end_, capacity_) spare,
  // then simdjson's padding. Holds a whole longest line (once one is seen),
  // so lines are parsed where they lie.
  size_t capacity_;
  std::unique_ptr<char[]> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  size_t scanned_ = 0;  // [begin_, scanned_) holds no '\n'
  bool eof_ = false;
  std::unique_ptr<JsonlParser> parser_;
  Status pending_error_;  // NextBatch's deferred error
  int64_t line_number_ = 0;
  uint64_t bytes_read_ = 0;
};

}  // namespace zv::tools

#endif  // ZEROVEC_TOOLS_CORPUS_READER_H_
