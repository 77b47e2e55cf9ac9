#include "tools/corpus_reader.h"

#include <cfloat>
#include <cmath>
#include <nlohmann/json.hpp>

namespace zv::tools {
namespace {

using nlohmann::json;

Status LineError(int64_t line_number, const std::string& what) {
  return InvalidArgumentError("line " + std::to_string(line_number) + ": " +
                              what);
}

std::string_view TrimLineEnd(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

bool IsBlank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

CorpusFormat GuessCorpusFormat(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".jsonl" || ext == ".ndjson" || ext == ".json")
    return CorpusFormat::kJsonl;
  return CorpusFormat::kText;
}

Status ParseJsonlLine(std::string_view line, int64_t line_number,
                      CorpusRecord* out) {
  *out = CorpusRecord();
  if (line.size() > kMaxCorpusLineBytes) {
    return LineError(
        line_number,
        "longer than " + std::to_string(kMaxCorpusLineBytes) + " bytes");
  }
  json doc = json::parse(line.begin(), line.end(), /*cb=*/nullptr,
                         /*allow_exceptions=*/false);
  if (doc.is_discarded()) return LineError(line_number, "not valid JSON");
  if (!doc.is_object()) return LineError(line_number, "expected a JSON object");

  auto id = doc.find("id");
  if (id == doc.end() || id->is_null()) {
    out->id = "line-" + std::to_string(line_number);
  } else if (id->is_string()) {
    out->id = id->get<std::string>();
  } else if (id->is_number_integer()) {
    out->id = id->dump();
  } else {
    return LineError(line_number, "\"id\" must be a string or an integer");
  }
  if (out->id.empty()) return LineError(line_number, "\"id\" is empty");
  if (out->id.size() > kMaxCorpusIdBytes) {
    return LineError(
        line_number,
        "\"id\" longer than " + std::to_string(kMaxCorpusIdBytes) + " bytes");
  }

  auto vector = doc.find("vector");
  if (vector != doc.end() && !vector->is_null()) {
    if (!vector->is_array() || vector->empty()) {
      return LineError(line_number,
                       "\"vector\" must be a non-empty array of numbers");
    }
    if (vector->size() > kMaxCorpusVectorDim) {
      return LineError(line_number, "\"vector\" longer than " +
                                        std::to_string(kMaxCorpusVectorDim));
    }
    out->vector.reserve(vector->size());
    for (const auto& x : *vector) {
      if (!x.is_number()) {
        return LineError(line_number,
                         "\"vector\" must be a non-empty array of numbers");
      }
      const double v = x.get<double>();
      if (!std::isfinite(v) || std::fabs(v) > FLT_MAX) {
        return LineError(line_number,
                         "\"vector\" has a value out of float range");
      }
      out->vector.push_back(static_cast<float>(v));
    }
  }

  auto text = doc.find("text");
  if (out->vector.empty() || (text != doc.end() && !text->is_null())) {
    if (text == doc.end() || !text->is_string()) {
      return LineError(line_number, "\"text\" must be a string");
    }
    out->text = text->get<std::string>();
    if (IsBlank(out->text)) return LineError(line_number, "\"text\" is empty");
  }

  auto ns = doc.find("namespace");
  if (ns != doc.end() && !ns->is_null()) {
    if (!ns->is_string())
      return LineError(line_number, "\"namespace\" must be a string");
    out->ns = ns->get<std::string>();
  }

  auto metadata = doc.find("metadata");
  if (metadata != doc.end() && !metadata->is_null()) {
    if (!metadata->is_object()) {
      return LineError(line_number, "\"metadata\" must be an object");
    }
    for (const auto& [key, value] : metadata->items()) {
      if (key.empty())
        return LineError(line_number, "\"metadata\" has an empty key");
      out->metadata[key] =
          value.is_string() ? value.get<std::string>() : value.dump();
    }
  }

  for (const char* key : {"timestamp_ms", "timestamp"}) {
    auto ts = doc.find(key);
    if (ts == doc.end() || ts->is_null()) continue;
    if (!ts->is_number_integer() || ts->get<int64_t>() < 0) {
      return LineError(line_number,
                       "\"" + std::string(key) +
                           "\" must be a non-negative integer (unix ms)");
    }
    out->timestamp_ms = ts->get<int64_t>();
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<CorpusReader>> CorpusReader::Open(
    const std::filesystem::path& path, CorpusFormat format) {
  std::unique_ptr<CorpusReader> reader(new CorpusReader(path, format));
  reader->in_.open(path, std::ios::binary);
  if (!reader->in_) return NotFoundError(path.string() + ": cannot open");
  return reader;
}

namespace {

// Reads one line into `line` but never holds more than `max_bytes` of it: a
// corpus with a gigabyte-long line must not take a gigabyte of memory.
// Returns false at end of input; sets `too_long` when the line was cut.
bool ReadBoundedLine(std::istream& in, std::string& line, size_t max_bytes,
                     bool& too_long) {
  line.clear();
  too_long = false;
  std::streambuf* buf = in.rdbuf();
  bool any = false;
  for (int c = buf->sbumpc(); c != std::char_traits<char>::eof();
       c = buf->sbumpc()) {
    any = true;
    if (c == '\n') return true;
    if (line.size() < max_bytes + 1) {
      line.push_back(static_cast<char>(c));
    } else {
      too_long = true;
    }
  }
  return any;
}

}  // namespace

StatusOr<bool> CorpusReader::Next(CorpusRecord* out) {
  bool too_long = false;
  while (ReadBoundedLine(in_, line_, kMaxCorpusLineBytes, too_long)) {
    ++line_number_;
    if (too_long) {
      return InvalidArgumentError(
          path_.filename().string() + ":" + std::to_string(line_number_) +
          ": longer than " + std::to_string(kMaxCorpusLineBytes) + " bytes");
    }
    std::string_view line = TrimLineEnd(line_);
    if (IsBlank(line)) continue;
    if (format_ == CorpusFormat::kText) {
      *out = CorpusRecord();
      out->id = "line-" + std::to_string(line_number_);
      out->text = std::string(line);
      return true;
    }
    Status s = ParseJsonlLine(line, line_number_, out);
    if (!s.ok()) {
      return Status(s.code(),
                    path_.filename().string() + ":" + s.message().substr(5));
    }
    return true;
  }
  if (in_.bad()) return InternalError(path_.string() + ": read error");
  return false;
}

}  // namespace zv::tools
