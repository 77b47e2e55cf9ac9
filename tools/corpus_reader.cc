#include "tools/corpus_reader.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace zv::tools {
namespace {

namespace dom = simdjson::dom;

// Room for a whole longest line plus its '\n', so a line is always parsed
// in place; 4x that keeps the memmove of a partial line rare.
constexpr size_t kBufferBytes = 4 * (kMaxCorpusLineBytes + 1);
constexpr size_t kMinBufferBytes = 64 << 10;

// Zeroed padding: simdjson may read it, and it should never be garbage.
std::unique_ptr<char[]> AllocateBuffer(size_t capacity) {
  std::unique_ptr<char[]> buffer(
      new char[capacity + simdjson::SIMDJSON_PADDING]);
  std::memset(buffer.get() + capacity, 0, simdjson::SIMDJSON_PADDING);
  return buffer;
}

Status LineError(int64_t line_number, std::string_view what) {
  return InvalidArgumentError("line " + std::to_string(line_number) + ": " +
                              std::string(what));
}

std::string_view TrimLineEnd(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

bool IsBlank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// Empties *r but keeps its strings' and vector's capacity for the next line.
void ClearRecord(CorpusRecord* r) {
  r->id.clear();
  r->text.clear();
  r->ns.clear();
  r->metadata.clear();
  r->timestamp_ms = 0;
  r->vector.clear();
}

void SetLineId(int64_t line_number, std::string* id) {
  id->assign("line-");
  id->append(std::to_string(line_number));
}

std::string_view JsonErrorText(simdjson::error_code err) {
  switch (err) {
    case simdjson::UTF8_ERROR:
      return "not valid JSON (invalid UTF-8)";
    case simdjson::DEPTH_ERROR:
      return "not valid JSON (nested too deeply)";
    case simdjson::NUMBER_ERROR:
    case simdjson::NUMBER_OUT_OF_RANGE:
      return "not valid JSON (a number is malformed or out of range)";
    case simdjson::UNESCAPED_CHARS:
      return "not valid JSON (a control character is not escaped in a "
             "string)";
    case simdjson::UNCLOSED_STRING:
      return "not valid JSON (a string is not closed)";
    default:
      return "not valid JSON";
  }
}

// A top-level field; null counts as absent. The last occurrence of a key
// wins (as a JSON object read into a map does).
struct Field {
  dom::element value;
  bool given = false;
  void Set(dom::element v) {
    value = v;
    given = !v.is_null();
  }
};

// "id": a string or an integer; the line number when absent.
Status ReadId(const Field& field, int64_t line_number, std::string* id_out) {
  if (!field.given) {
    SetLineId(line_number, id_out);
  } else if (std::string_view s; !field.value.get_string().get(s)) {
    id_out->assign(s);
  } else if (int64_t i; !field.value.get_int64().get(i)) {
    id_out->assign(std::to_string(i));
  } else if (uint64_t u; !field.value.get_uint64().get(u)) {
    id_out->assign(std::to_string(u));
  } else {
    return LineError(line_number, "\"id\" must be a string or an integer");
  }
  if (id_out->empty()) return LineError(line_number, "\"id\" is empty");
  if (id_out->size() > kMaxCorpusIdBytes) {
    return LineError(
        line_number,
        "\"id\" longer than " + std::to_string(kMaxCorpusIdBytes) + " bytes");
  }
  return OkStatus();
}

// "vector": a non-empty array of at most kMaxCorpusVectorDim numbers that fit
// a float.
Status ReadVector(dom::element value, int64_t line_number,
                  std::vector<float>* values_out) {
  dom::array values;
  if (value.get_array().get(values) || values.size() == 0) {
    return LineError(line_number,
                     "\"vector\" must be a non-empty array of numbers");
  }
  // dom::array::size() saturates at 0xFFFFFF, far above the bound.
  if (values.size() > kMaxCorpusVectorDim) {
    return LineError(line_number, "\"vector\" longer than " +
                                      std::to_string(kMaxCorpusVectorDim));
  }
  values_out->reserve(values.size());
  for (dom::element x : values) {
    double v;
    if (x.get_double().get(v)) {  // integers convert; anything else fails
      return LineError(line_number, "\"vector\"[" +
                                        std::to_string(values_out->size()) +
                                        "] is not a number");
    }
    // simdjson rejects overflowing literals, so finite; float may not be.
    if (!std::isfinite(v) || std::fabs(v) > FLT_MAX) {
      return LineError(line_number, "\"vector\"[" +
                                        std::to_string(values_out->size()) +
                                        "] is out of float range");
    }
    values_out->push_back(static_cast<float>(v));
  }
  return OkStatus();
}

// "metadata": an object with non-empty keys; non-string values kept as
// minified JSON.
Status ReadMetadata(dom::element json, int64_t line_number,
                    std::map<std::string, std::string>* metadata_out) {
  dom::object entries;
  if (json.get_object().get(entries)) {
    return LineError(line_number, "\"metadata\" must be an object");
  }
  for (dom::key_value_pair entry : entries) {
    if (entry.key.empty()) {
      return LineError(line_number, "\"metadata\" has an empty key");
    }
    std::string& value = (*metadata_out)[std::string(entry.key)];
    if (std::string_view s; !entry.value.get_string().get(s)) {
      value.assign(s);
    } else {
      value = simdjson::minify(entry.value);
    }
  }
  return OkStatus();
}

}  // namespace

// One simdjson parser, reused line after line (it keeps its buffers).
class JsonlParser {
 public:
  // `padded`: SIMDJSON_PADDING bytes past data + len are readable, so the
  // line is parsed where it lies; else simdjson copies it into its own
  // (reused) padded buffer.
  Status Parse(const char* data, size_t len, bool padded, int64_t line_number,
               CorpusRecord* out);

 private:
  dom::parser parser_;
};

Status JsonlParser::Parse(const char* data, size_t len, bool padded,
                          int64_t line_number, CorpusRecord* out) {
  ClearRecord(out);
  if (len > kMaxCorpusLineBytes) {
    return LineError(
        line_number,
        "longer than " + std::to_string(kMaxCorpusLineBytes) + " bytes");
  }
  dom::element doc;
  if (auto err =
          parser_.parse(data, len, /*realloc_if_needed=*/!padded).get(doc)) {
    if (err == simdjson::MEMALLOC) {
      return ResourceExhaustedError("line " + std::to_string(line_number) +
                                    ": out of memory parsing JSON");
    }
    return LineError(line_number, JsonErrorText(err));
  }
  dom::object object;
  if (doc.get_object().get(object)) {
    return LineError(line_number, "expected a JSON object");
  }

  Field id, text, vector, ns, metadata, timestamp_ms, timestamp;
  for (dom::key_value_pair field : object) {
    const std::string_view key = field.key;
    if (key == "id") {
      id.Set(field.value);
    } else if (key == "text") {
      text.Set(field.value);
    } else if (key == "vector") {
      vector.Set(field.value);
    } else if (key == "namespace") {
      ns.Set(field.value);
    } else if (key == "metadata") {
      metadata.Set(field.value);
    } else if (key == "timestamp_ms") {
      timestamp_ms.Set(field.value);
    } else if (key == "timestamp") {
      timestamp.Set(field.value);
    }
  }

  ZV_RETURN_IF_ERROR(ReadId(id, line_number, &out->id));

  if (vector.given) {
    ZV_RETURN_IF_ERROR(ReadVector(vector.value, line_number, &out->vector));
  }

  if (out->vector.empty() || text.given) {
    std::string_view s;
    if (!text.given || text.value.get_string().get(s)) {
      return LineError(line_number, "\"text\" must be a string");
    }
    if (IsBlank(s)) return LineError(line_number, "\"text\" is empty");
    out->text.assign(s);
  }

  if (ns.given) {
    std::string_view s;
    if (ns.value.get_string().get(s)) {
      return LineError(line_number, "\"namespace\" must be a string");
    }
    out->ns.assign(s);
  }

  if (metadata.given) {
    ZV_RETURN_IF_ERROR(
        ReadMetadata(metadata.value, line_number, &out->metadata));
  }

  for (Field* ts : {&timestamp_ms, &timestamp}) {
    if (!ts->given) continue;
    int64_t ms;
    // get_int64 refuses doubles (17.0) and integers above INT64_MAX.
    if (ts->value.get_int64().get(ms) || ms < 0) {
      return LineError(
          line_number,
          std::string("\"") +
              (ts == &timestamp_ms ? "timestamp_ms" : "timestamp") +
              "\" must be a non-negative integer (unix ms)");
    }
    out->timestamp_ms = ms;
  }
  return OkStatus();
}

CorpusFormat GuessCorpusFormat(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".jsonl" || ext == ".ndjson" || ext == ".json")
    return CorpusFormat::kJsonl;
  return CorpusFormat::kText;
}

Status ParseJsonlLine(std::string_view line, int64_t line_number,
                      CorpusRecord* out) {
  thread_local JsonlParser parser;
  return parser.Parse(line.data(), line.size(), /*padded=*/false, line_number,
                      out);
}

CorpusReader::CorpusReader(std::filesystem::path path, CorpusFormat format,
                           int fd, uint64_t file_size)
    : path_(std::move(path)),
      file_name_(path_.filename().string()),
      format_(format),
      fd_(fd),
      file_size_(file_size),
      // A small file gets a small buffer (it grows if the file does).
      capacity_(file_size == 0
                    ? kBufferBytes
                    : std::clamp<uint64_t>(file_size + 1, kMinBufferBytes,
                                           kBufferBytes)),
      buffer_(AllocateBuffer(capacity_)),
      parser_(std::make_unique<JsonlParser>()) {}

CorpusReader::~CorpusReader() { ::close(fd_); }

StatusOr<std::unique_ptr<CorpusReader>> CorpusReader::Open(
    const std::filesystem::path& path, CorpusFormat format) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, path.string() + ": cannot open");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, path.string() + ": cannot stat");
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path.string() + ": is a directory");
  }
  // Advisory only (a pipe refuses it): the kernel reads ahead further.
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  const uint64_t size = S_ISREG(st.st_mode) ? uint64_t(st.st_size) : 0;
  return std::unique_ptr<CorpusReader>(
      new CorpusReader(path, format, fd, size));
}

StatusOr<bool> CorpusReader::NextLine(std::string_view* line, bool* too_long) {
  *too_long = false;
  char* buf = buffer_.get();
  bool skipping = false;  // inside an overlong line: drop bytes up to '\n'
  while (true) {
    const void* nl = std::memchr(buf + scanned_, '\n', end_ - scanned_);
    if (nl != nullptr || (eof_ && begin_ < end_)) {
      const size_t line_end =
          nl ? size_t(static_cast<const char*>(nl) - buf) : end_;
      const size_t next = nl ? line_end + 1 : end_;
      const size_t bytes = line_end - begin_;
      ++line_number_;
      bytes_read_ += next - begin_;
      *line = std::string_view(buf + begin_, bytes);
      *too_long = skipping || bytes > kMaxCorpusLineBytes;
      begin_ = scanned_ = next;
      return true;
    }
    if (eof_) {
      if (skipping) {  // the overlong line ran to the end of the file
        ++line_number_;
        *too_long = true;
        return true;
      }
      return false;
    }
    if (end_ - begin_ > kMaxCorpusLineBytes) {
      // Too long whatever follows: drop what is held, keep looking for '\n'.
      skipping = true;
      bytes_read_ += end_ - begin_;
      begin_ = scanned_ = end_ = 0;
    } else if (begin_ > 0) {
      // Keep the partial line whole (and the padding after it) at the front.
      std::memmove(buf, buf + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (end_ == capacity_) {
      // A small file's buffer, full of one line that may yet be valid (the
      // file grew since Open): make room for the longest.
      std::unique_ptr<char[]> bigger = AllocateBuffer(kBufferBytes);
      std::memcpy(bigger.get(), buf, end_);
      buffer_ = std::move(bigger);
      capacity_ = kBufferBytes;
      buf = buffer_.get();
    }
    scanned_ = end_;
    ssize_t n;
    do {
      n = ::read(fd_, buf + end_, capacity_ - end_);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return ErrnoError(errno, path_.string() + ": read error");
    if (n == 0) eof_ = true;
    end_ += size_t(n);
  }
}

Status CorpusReader::LineError(const Status& parse_error) const {
  // "line <n>: what" -> "<file>:<n>: what"
  return Status(parse_error.code(),
                file_name_ + ":" + parse_error.message().substr(5));
}

StatusOr<bool> CorpusReader::Next(CorpusRecord* out) {
  while (true) {
    std::string_view line;
    bool too_long;
    ZV_ASSIGN_OR_RETURN(bool more, NextLine(&line, &too_long));
    if (!more) return false;
    if (too_long) {
      return InvalidArgumentError(
          file_name_ + ":" + std::to_string(line_number_) + ": longer than " +
          std::to_string(kMaxCorpusLineBytes) + " bytes");
    }
    line = TrimLineEnd(line);
    if (IsBlank(line)) continue;
    if (format_ == CorpusFormat::kText) {
      ClearRecord(out);
      SetLineId(line_number_, &out->id);
      out->text.assign(line);
      return true;
    }
    // The line lies in buffer_, with the padding readable after it.
    Status s = parser_->Parse(line.data(), line.size(), /*padded=*/true,
                              line_number_, out);
    if (!s.ok()) return LineError(s);
    return true;
  }
}

StatusOr<size_t> CorpusReader::NextBatch(std::vector<CorpusRecord>* out,
                                         size_t max_records) {
  if (max_records == 0) {
    return InvalidArgumentError("NextBatch: max_records must be positive");
  }
  if (!pending_error_.ok()) {
    Status error = std::move(pending_error_);
    pending_error_ = OkStatus();
    out->clear();
    return error;
  }
  size_t n = 0;
  while (n < max_records) {
    if (n == out->size()) out->emplace_back();
    StatusOr<bool> more = Next(&(*out)[n]);
    if (!more.ok()) {
      if (n == 0) {
        out->clear();
        return more.status();
      }
      pending_error_ = more.status();
      break;
    }
    if (!*more) break;
    ++n;
  }
  out->resize(n);
  return n;
}

}  // namespace zv::tools
