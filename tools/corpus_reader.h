// Reads a corpus for `zerovec build`: JSONL (one {"id","text","namespace",
// "metadata","timestamp_ms","vector"} object a line) or plain text (one
// document a line). "vector" (optional) is a precomputed embedding, an array
// of finite numbers; a line with one may omit "text". Robust to arbitrary
// input: a bad line is an error naming its line number, never a crash (this
// file is a fuzz target).
#ifndef ZEROVEC_TOOLS_CORPUS_READER_H_
#define ZEROVEC_TOOLS_CORPUS_READER_H_

#include <cstdint>
#include <filesystem>
#include <fstream>
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
  std::map<std::string, std::string> metadata;
  int64_t timestamp_ms = 0;   // 0: not given
  std::vector<float> vector;  // precomputed embedding; empty: embed the text
};

enum class CorpusFormat { kJsonl, kText };

// .jsonl / .ndjson / .json are JSONL, anything else plain text.
CorpusFormat GuessCorpusFormat(const std::filesystem::path& path);

// Parses one JSONL line (1-based `line_number`). Errors start "line <n>: ".
Status ParseJsonlLine(std::string_view line, int64_t line_number,
                      CorpusRecord* out);

class CorpusReader {
 public:
  static StatusOr<std::unique_ptr<CorpusReader>> Open(
      const std::filesystem::path& path, CorpusFormat format);

  // Reads the next record into *out; false at the end of the file. Blank lines
  // are skipped. Errors are "<file>:<line>: what".
  StatusOr<bool> Next(CorpusRecord* out);

  int64_t line_number() const { return line_number_; }

 private:
  CorpusReader(std::filesystem::path path, CorpusFormat format)
      : path_(std::move(path)), format_(format) {}

  std::filesystem::path path_;
  CorpusFormat format_;
  std::ifstream in_;
  std::string line_;
  int64_t line_number_ = 0;
};

}  // namespace zv::tools

#endif  // ZEROVEC_TOOLS_CORPUS_READER_H_
