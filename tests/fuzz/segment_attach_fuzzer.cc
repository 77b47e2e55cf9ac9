// libFuzzer target: attach a segment whose files hold arbitrary bytes.
// Input layout: [u8 flags][u32 size0][bytes of vectors.00000][rest ->
// vectors.00001]. Whatever the bytes, Attach/Refresh must return an error or a
// view whose every committed row, id and tombstone bit can be read without a
// crash.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "shm/segment.h"

namespace {

std::filesystem::path Dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("zv_fuzz_attach_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

void WriteFile(const std::filesystem::path& path, const uint8_t* data,
               size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data),
            static_cast<std::streamsize>(n));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const uint8_t flags = data[0];
  uint32_t size0 = 0;
  std::memcpy(&size0, data + 1, sizeof(size0));
  data += 5;
  size -= 5;
  size0 = std::min<uint32_t>(size0, static_cast<uint32_t>(size));
  const auto dir = Dir();
  std::filesystem::remove(dir / "vectors.00001");
  // Small inputs stand for a header page: pad to the size the header claims
  // when asked so the fuzzer can reach the mapping and refresh paths, not only
  // size checks.
  std::string file0(reinterpret_cast<const char*>(data), size0);
  if ((flags & 1) && file0.size() >= 80) {
    // Format 2: row_stride at byte 20, this extent's rows at byte 56.
    uint32_t stride;
    uint64_t rows;
    std::memcpy(&stride, file0.data() + 20, 4);
    std::memcpy(&rows, file0.data() + 56, 8);
    const uint64_t bytes =
        4096 + rows * (uint64_t{stride} * 4 + 8) + (rows + 63) / 64 * 8;
    if (stride <= 4096 && rows <= 4096)
      file0.resize((bytes + 4095) / 4096 * 4096);
  }
  WriteFile(dir / "vectors.00000",
            reinterpret_cast<const uint8_t*>(file0.data()), file0.size());
  if (flags & 2) WriteFile(dir / "vectors.00001", data + size0, size - size0);

  auto reader = zv::shm::Reader::Attach(dir);
  if (!reader.ok()) return 0;
  auto& view = **reader;
  volatile float sink = 0;
  for (uint64_t row = 0; row < view.committed(); ++row) {
    sink = sink + view.Row(row)[view.info().dim - 1] +
           static_cast<float>(view.Id(row)) +
           static_cast<float>(view.IsTombstoned(row));
  }
  (void)view.Blocks();
  (void)view.TombstoneCount();
  return 0;
}
