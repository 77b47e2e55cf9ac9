// CudaEncoderOptions and its parsers: plain C++, built with or without CUDA
// (so CI tests them); the encoder itself is cuda_encoder.cu.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>

#include "embed/cuda_encoder.h"

namespace zv::embed {

const char* CudaPrecisionName(CudaPrecision p) {
  return p == CudaPrecision::kFp8 ? "fp8" : "fp16";
}

StatusOr<CudaPrecision> ParseCudaPrecision(const std::string& name) {
  if (name == "fp16") return CudaPrecision::kFp16;
  if (name == "fp8" || name == "e4m3") return CudaPrecision::kFp8;
  return InvalidArgumentError("cuda precision: expected fp16 or fp8, got \"" +
                              name + "\"");
}

CudaEncoderOptions CudaEncoderOptions::FromEnv() {
  CudaEncoderOptions o;
  auto read = [](const char* name, int* value) {
    const char* e = std::getenv(name);
    if (e != nullptr && *e != '\0') *value = std::atoi(e);
  };
  int fused = o.fused ? 1 : 0, graphs = o.graphs ? 1 : 0, fast_accum = 0;
  read("ZV_CUDA_FP8_FAST_ACCUM", &fast_accum);
  o.fp8_fast_accum = fast_accum != 0;
  read("ZV_CUDA_FUSED", &fused);
  read("ZV_CUDA_GRAPHS", &graphs);
  read("ZV_CUDA_SMALL_BATCH", &o.small_batch);
  read("ZV_CUDA_MAX_GRAPHS", &o.max_graphs);
  o.fused = fused != 0;
  o.graphs = graphs != 0;
  // A value `parse` refuses is ignored with a warning on stderr.
  auto read_parsed = [](const char* name, auto parse, auto* value) {
    const char* e = std::getenv(name);
    if (e == nullptr || *e == '\0') return;
    const auto parsed = parse(std::string(e));
    if (parsed.ok()) {
      *value = *parsed;
    } else {
      std::fprintf(stderr, "zerovec: ignoring %s: %s\n", name,
                   parsed.status().message().c_str());
    }
  };
  read_parsed("ZV_CUDA_PRECISION", ParseCudaPrecision, &o.precision);
  read_parsed("ZV_CUDA_FP8_GEMMS", ParseFp8Gemms, &o.fp8_gemms);
  read_parsed("ZV_CUDA_FP8_LAYERS", ParseFp8Layers, &o.fp8_layers);
  return o;
}

StatusOr<uint64_t> ParseFp8Layers(const std::string& list) {
  const auto bad = [&list](const std::string& why) {
    return InvalidArgumentError("fp8 layers \"" + list + "\": " + why +
                                " (e.g. 6-11 or 0,2,4-5; layers 0-63)");
  };
  const auto layer = [](const std::string& s, int* out) {
    if (s.empty() || s.size() > 2 ||
        s.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    *out = std::stoi(s);
    return *out < 64;
  };
  uint64_t bits = 0;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t dash = item.find('-');
    int lo = 0, hi = 0;
    if (!layer(item.substr(0, dash), &lo) ||
        !layer(dash == std::string::npos ? item.substr(0, dash)
                                         : item.substr(dash + 1),
               &hi)) {
      return bad("\"" + item + "\" is not a layer or a range of layers");
    }
    if (hi < lo) return bad("range \"" + item + "\" runs backwards");
    for (int i = lo; i <= hi; ++i) bits |= uint64_t{1} << i;
  }
  if (bits == 0) return bad("no layer named");
  return bits;
}

std::string Fp8LayersName(uint64_t bits) {
  std::string s;
  for (int i = 0; i < 64;) {
    if (!((bits >> i) & 1)) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < 64 && ((bits >> (j + 1)) & 1)) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(i) +
         (j > i ? "-" + std::to_string(j) : "");
    i = j + 1;
  }
  return s;
}

StatusOr<int> ParseFp8Gemms(const std::string& list) {
  int bits = 0;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    if (name == "qkv") {
      bits |= CudaEncoderOptions::kFp8Qkv;
    } else if (name == "up") {
      bits |= CudaEncoderOptions::kFp8Up;
    } else if (name == "down") {
      bits |= CudaEncoderOptions::kFp8Down;
    } else {
      return InvalidArgumentError(
          "fp8 GEMMs: expected a list of qkv, up, down; got \"" + list + "\"");
    }
  }
  if (bits == 0) {
    return InvalidArgumentError("fp8 GEMMs: the list is empty");
  }
  return bits;
}

std::string Fp8GemmsName(int bits) {
  std::string s;
  for (auto [bit, name] : {std::pair{CudaEncoderOptions::kFp8Qkv, "qkv"},
                           {CudaEncoderOptions::kFp8Up, "up"},
                           {CudaEncoderOptions::kFp8Down, "down"}}) {
    if (bits & bit) s += (s.empty() ? "" : ",") + std::string(name);
  }
  return s;
}

std::string CudaEncoderOptions::ToString() const {
  std::string s =
      std::string(CudaPrecisionName(precision)) +
      (precision == CudaPrecision::kFp8 && fp8_fast_accum
           ? " (fast accumulation)"
           : "") +
      (precision == CudaPrecision::kFp8 &&
               fp8_gemms != (kFp8Qkv | kFp8Up | kFp8Down)
           ? " (fp8 GEMMs: " + Fp8GemmsName(fp8_gemms) + ")"
           : "") +
      (precision == CudaPrecision::kFp8 && fp8_layers != ~uint64_t{0}
           ? " (fp8 layers: " + Fp8LayersName(fp8_layers) + ")"
           : "") +
      (fused ? ", fused" : ", unfused");
  if (small_batch <= 0) return s + ", no small-batch padding or graphs";
  const std::string n = std::to_string(small_batch);
  if (!graphs || max_graphs <= 0) return s + ", padded<=" + n + ", no graphs";
  return s + ", graphs<=" + n + " (" + std::to_string(max_graphs) + " kept)";
}

}  // namespace zv::embed
