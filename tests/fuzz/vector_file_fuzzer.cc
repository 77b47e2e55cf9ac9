// libFuzzer target: VectorFile's header parsing (.npy and .fvecs) and its ids
// sidecar. The bytes are written to a temp file and opened as .npy and as
// .fvecs, then used as the ids file of a small valid .npy. Beyond "no crash":
// an accepted file's rows lie inside it (every float is read, so a row past
// the end of the mapping faults), and accepted ids are non-empty and bounded.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tools/vector_file.h"

namespace {

namespace fs = std::filesystem;
using zv::tools::VectorFile;

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "invariant failed: %s\n", what);
    abort();
  }
}

void Write(const fs::path& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), std::streamsize(size));
}

fs::path TempPath(const std::string& suffix) {
  return fs::temp_directory_path() /
         ("zv_fuzz_vectors_" + std::to_string(::getpid()) + suffix);
}

void CheckFile(const VectorFile& file, size_t file_size) {
  Check(file.dim() >= 1 && file.dim() <= zv::tools::kMaxVectorFileDim,
        "dim in range");
  Check(file.rows() <= file_size / (4 * uint64_t(file.dim())),
        "rows fit in the file");
  volatile float sink = 0;
  for (uint64_t i = 0; i < file.rows(); ++i) {
    const float* row = file.Row(i);
    Check(row != nullptr, "row in range");
    for (uint32_t j = 0; j < file.dim(); ++j) sink = sink + row[j];
  }
  Check(file.Row(file.rows()) == nullptr, "row past the end is null");
  const uint64_t n = std::min<uint64_t>(file.rows(), 4);
  std::vector<float> copy(n * (file.dim() + 3));
  Check(file.CopyRows(0, n, copy.data(), file.dim() + 3).ok(), "CopyRows");
  Check(!file.CopyRows(file.rows(), 1, copy.data()).ok(),
        "CopyRows past the end fails");
  if (file.rows() > 0) Check(file.Id(file.rows() - 1).size() > 0, "id");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fs::path npy = TempPath(".npy");
  static const fs::path fvecs = TempPath(".fvecs");
  static const fs::path ids = TempPath(".ids");
  static const fs::path valid = TempPath("_valid.npy");
  static const bool valid_written = [] {
    // 3 rows x 2 dims, format 1.0, header padded to a multiple of 64 bytes.
    std::string header =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string bytes("\x93NUMPY\x01\x00", 8);
    bytes += char(header.size());
    bytes += char(0);
    bytes += header;
    bytes.append(3 * 2 * sizeof(float), '\0');
    Write(valid, bytes.data(), bytes.size());
    return true;
  }();
  (void)valid_written;

  for (const fs::path& path : {npy, fvecs}) {
    Write(path, data, size);
    auto file = VectorFile::Open(path);
    if (file.ok()) {
      CheckFile(**file, size);
    } else {
      Check(file.status().message().rfind(path.string(), 0) == 0,
            "error names the file");
    }
  }

  Write(ids, data, size);
  auto with_ids = VectorFile::Open(valid, ids);
  if (with_ids.ok()) {
    for (uint64_t i = 0; i < (*with_ids)->rows(); ++i) {
      const std::string id = (*with_ids)->Id(i);
      Check(!id.empty() && id.size() <= zv::tools::kMaxVectorIdBytes &&
                id.find('\n') == std::string::npos,
            "sidecar id non-empty, bounded, one line");
    }
  } else {
    Check(with_ids.status().message().rfind(ids.string(), 0) == 0,
          "error names the ids file");
  }
  return 0;
}
