// libFuzzer target: the JSONL / plain-text corpus reader of `zerovec build`.
// The bytes are parsed as one JSONL line (ParseJsonlLine) and, written to a
// file, read through CorpusReader in both formats (JSONL also in batches).
// Beyond "no crash": every record it returns has a usable id (non-empty,
// bounded) and, for JSONL, non-blank text or a finite vector; errors name
// their line; bytes_read() grows to the file size.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

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
  for (float x : r.vector) Check(std::isfinite(x), "finite vector");
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
  // Each format read record by record, then JSONL again in batches (sized by
  // the input, so batch boundaries move around).
  const size_t batch = 1 + (size > 0 ? data[0] % 7 : 0);
  const std::string file_prefix = path.filename().string() + ":";
  for (int pass = 0; pass < 3; ++pass) {
    const CorpusFormat format =
        pass == 1 ? CorpusFormat::kText : CorpusFormat::kJsonl;
    auto reader = CorpusReader::Open(path, format);
    if (!reader.ok()) continue;
    CorpusReader& rd = **reader;
    Check(rd.file_size() == size, "file_size is the file's size");
    std::vector<CorpusRecord> records;
    uint64_t last_bytes = 0;
    bool ended = false;
    for (int n = 0; n < 10000 && !ended; ++n) {
      zv::Status error;
      if (pass < 2) {
        auto next = rd.Next(&record);
        if (!next.ok()) {
          error = next.status();
        } else if (!*next) {
          ended = true;
        } else {
          CheckRecord(record);
        }
      } else {
        auto got = rd.NextBatch(&records, batch);
        if (!got.ok()) {
          error = got.status();
        } else {
          Check(records.size() == *got && *got <= batch, "batch size");
          ended = *got == 0;
          for (const CorpusRecord& r : records) CheckRecord(r);
        }
      }
      // Errors name file and line; reading goes on after a bad line.
      if (!error.ok()) {
        Check(error.message().rfind(file_prefix, 0) == 0,
              "error names file and line");
      }
      Check(rd.bytes_read() >= last_bytes && rd.bytes_read() <= size,
            "bytes_read grows within the file");
      last_bytes = rd.bytes_read();
    }
    if (ended) Check(rd.bytes_read() == size, "bytes_read reaches the end");
  }
  return 0;
}
