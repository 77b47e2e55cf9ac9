#include "embed/safetensors.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>

namespace zv::embed {
namespace {

// Header larger than this is treated as corrupt (real ones are a few hundred
// KiB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

int DtypeSize(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16")
    return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
      dtype == "F8_E5M2")
    return 1;
  return 0;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// The little-endian length of the JSON header in the first 8 bytes, checked
// against the file's size.
StatusOr<uint64_t> HeaderLength(const uint8_t* bytes, size_t size,
                                const std::string& name) {
  if (size < 8) {
    return DataLossError(name + ": file is " + std::to_string(size) +
                         " bytes, too short for a safetensors header");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > size - 8 || header_len > kMaxHeaderBytes) {
    return DataLossError(
        name + ": header length " + std::to_string(header_len) +
        " runs past the end of the file (" + std::to_string(size) +
        " bytes); truncated or not a safetensors file");
  }
  return header_len;
}

// One header entry's dtype, shape and offsets, as JSON types allow them.
StatusOr<TensorEntry> ParseEntry(const nlohmann::json& t,
                                 const std::string& where) {
  TensorEntry e;
  try {
    e.dtype = t.at("dtype").get<std::string>();
    // Every shape element and offset must be a non-negative integer before
    // get<>() reads it (a float or negative number there is UB).
    const auto& shape = t.at("shape");
    const auto& offs = t.at("data_offsets");
    auto all_unsigned = [](const nlohmann::json& a) {
      if (!a.is_array()) return false;
      for (const auto& v : a) {
        if (!v.is_number_unsigned()) return false;
      }
      return true;
    };
    if (!all_unsigned(shape) || !all_unsigned(offs)) {
      return DataLossError(
          where + ": shape and data_offsets must be non-negative integers");
    }
    for (const auto& d : shape) {
      if (d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return DataLossError(where + ": dimension out of range");
      }
      e.shape.push_back(d.get<int64_t>());
    }
    const auto offsets = offs.get<std::vector<uint64_t>>();
    if (offsets.size() != 2) return DataLossError(where + ": bad data_offsets");
    e.begin = offsets[0];
    e.end = offsets[1];
  } catch (const nlohmann::json::exception& ex) {
    return DataLossError(where + ": bad header entry: " + ex.what());
  }
  return e;
}

// The entry's bytes lie inside the data section and match its dtype and
// shape.
Status CheckEntry(const TensorEntry& e, uint64_t data_size,
                  const std::string& where) {
  if (e.begin > e.end || e.end > data_size) {
    return DataLossError(where + ": data_offsets [" + std::to_string(e.begin) +
                         ", " + std::to_string(e.end) + ") outside the " +
                         std::to_string(data_size) +
                         "-byte data section (truncated file?)");
  }
  const int esize = DtypeSize(e.dtype);
  uint64_t numel = 1;
  for (int64_t d : e.shape) {
    if (d < 0) return DataLossError(where + ": negative dimension");
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel)) {
      return DataLossError(where + ": shape " + ShapeString(e.shape) +
                           " overflows");
    }
  }
  uint64_t bytes = 0;
  if (esize != 0 &&
      (__builtin_mul_overflow(numel, static_cast<uint64_t>(esize), &bytes) ||
       bytes != e.end - e.begin)) {
    return DataLossError(where + ": " + std::to_string(e.end - e.begin) +
                         " bytes do not match dtype " + e.dtype +
                         " and shape " + ShapeString(e.shape));
  }
  return OkStatus();
}

}  // namespace

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24
      const float v = static_cast<float>(mant) * 0x1p-24f;
      return sign ? -v : v;
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t FloatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs >= 0x7F800000) return sign | (abs > 0x7F800000 ? 0x7E00 : 0x7C00);
  if (abs >= 0x477FF000) return sign | 0x7C00;  // rounds to >= 65520: inf
  if (abs < 0x38800000) {  // below the smallest normal half: subnormal or zero
    const float a = std::bit_cast<float>(abs);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24f));
  }
  const uint32_t rounded = abs + 0xFFF + ((abs >> 13) & 1);  // nearest even
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

float Bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(uint32_t{b} << 16);
}

uint16_t FloatToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000)
    return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

SafetensorsFile::~SafetensorsFile() = default;

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::filesystem::path& path) {
  const std::string name = path.string();
  ZV_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path));
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = name;
  file->map_ = std::move(map);
  const auto* bytes = reinterpret_cast<const uint8_t*>(file->map_.data());
  ZV_ASSIGN_OR_RETURN(const uint64_t header_len,
                      HeaderLength(bytes, file->map_.size(), name));
  file->data_ = bytes + 8 + header_len;
  const uint64_t data_size = file->map_.size() - 8 - header_len;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const nlohmann::json::exception& e) {
    return DataLossError(name + ": bad JSON header: " + e.what());
  }
  if (!header.is_object())
    return DataLossError(name + ": header is not an object");
  for (const auto& [tname, t] : header.items()) {
    if (tname == "__metadata__") continue;
    const std::string where = name + ": tensor " + tname;
    ZV_ASSIGN_OR_RETURN(TensorEntry e, ParseEntry(t, where));
    ZV_RETURN_IF_ERROR(CheckEntry(e, data_size, where));
    file->tensors_.emplace(tname, std::move(e));
  }
  return file;
}

StatusOr<std::vector<float>> SafetensorsFile::ReadFloat(
    const std::string& name, const std::vector<int64_t>& shape) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return NotFoundError(path_ + ": missing tensor " + name);
  }
  const TensorEntry& e = it->second;
  if (e.shape != shape) {
    return InvalidArgumentError(path_ + ": tensor " + name + " has shape " +
                                ShapeString(e.shape) + ", expected " +
                                ShapeString(shape));
  }
  const uint8_t* src = data_ + e.begin;
  const size_t bytes = e.end - e.begin;
  std::vector<float> out;
  if (e.dtype == "F32") {
    out.resize(bytes / 4);
    std::memcpy(out.data(), src, bytes);  // offsets need not be 4-byte aligned
  } else if (e.dtype == "F16" || e.dtype == "BF16") {
    const bool bf16 = e.dtype == "BF16";
    out.resize(bytes / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      const uint16_t h =
          static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8));
      out[i] = bf16 ? Bf16ToFloat(h) : HalfToFloat(h);
    }
  } else {
    return InvalidArgumentError(path_ + ": tensor " + name +
                                " has unsupported dtype " + e.dtype +
                                " (expected F32, F16 or BF16)");
  }
  return out;
}

}  // namespace zv::embed
