// libFuzzer target: the JSONL / plain-text corpus reader of `zerovec build`.
// The bytes are parsed as one JSONL line (ParseJsonlLine) and, written to a
// file, read through CorpusReader in both formats. Beyond "no crash": every
// record it returns has a usable id (non-empty, bounded) and, for JSONL,
// non-blank text or a finite vector; errors name their line.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "tools/corpus_reader.h"

namespace {

namespace fs = std::filesystem;
using zv::tools::CorpusFormat;
using zv::tools::CorpusReader;
using zv::tools::CorpusRecord;

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "invariant failed: %s\n", what);
    abort();
  }
}

void CheckRecord(const CorpusRecord& r) {
  Check(!r.id.empty(), "id non-empty");
  Check(r.id.size() <= zv::tools::kMaxCorpusIdBytes, "id bounded");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CorpusRecord record;
  zv::Status s = zv::tools::ParseJsonlLine(bytes, 7, &record);
  if (s.ok()) {
    CheckRecord(record);
    Check(!record.vector.empty() ||
              record.text.find_first_not_of(" \t\r\n") != std::string::npos,
          "text not blank unless a vector is given");
    for (float x : record.vector) Check(std::isfinite(x), "finite vector");
  } else {
    Check(s.message().rfind("line 7: ", 0) == 0, "error names the line");
  }

  static const fs::path path =
      fs::temp_directory_path() /
      ("zv_fuzz_corpus_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  for (CorpusFormat format : {CorpusFormat::kJsonl, CorpusFormat::kText}) {
    auto reader = CorpusReader::Open(path, format);
    if (!reader.ok()) continue;
    for (int n = 0; n < 10000; ++n) {
      auto next = (*reader)->Next(&record);
      if (!next.ok()) {
        Check(next.status().message().rfind(path.filename().string() + ":",
                                            0) == 0,
              "error names file and line");
        break;
      }
      if (!*next) break;
      CheckRecord(record);
    }
  }
  return 0;
}
