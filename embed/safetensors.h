// Read-only, mmapped safetensors file: 8-byte little-endian header length, a
// JSON header {name: {dtype, shape, data_offsets}}, then raw tensor bytes.
// embed/-internal.
#ifndef ZEROVEC_EMBED_SAFETENSORS_H_
#define ZEROVEC_EMBED_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/file.h"
#include "base/status.h"

namespace zv::embed {

struct TensorEntry {
  std::string dtype;  // "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps the file and validates the header: JSON well-formed, every tensor's
  // offsets inside the file and consistent with its dtype and shape.
  static StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  bool Has(const std::string& name) const { return tensors_.count(name) > 0; }
  const std::map<std::string, TensorEntry>& tensors() const { return tensors_; }
  // Tensor `name` converted to fp32; error (naming file and tensor) when it is
  // missing, has another shape, or a dtype other than F32/F16/BF16.
  StatusOr<std::vector<float>> ReadFloat(
      const std::string& name, const std::vector<int64_t>& shape) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  MappedFile map_;
  const uint8_t* data_ = nullptr;  // start of the data section, inside map_
  std::map<std::string, TensorEntry> tensors_;
};

// Half-precision conversions (round to nearest even), used by tests and the
// loader.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_SAFETENSORS_H_
