// CudaEncoderOptions' parsers, names and environment overrides: plain C++,
// run in CI (the encoder's own tests need a GPU).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "embed/cuda_encoder.h"
#include "gtest/gtest.h"

namespace zv::embed {
namespace {

using O = CudaEncoderOptions;

TEST(CudaOptionsTest, Fp8GemmsParseAndName) {
  for (int bits = 1; bits < 8; ++bits) {
    const std::string name = Fp8GemmsName(bits);
    auto parsed = ParseFp8Gemms(name);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    EXPECT_EQ(*parsed, bits) << name;
  }
  EXPECT_EQ(Fp8GemmsName(O::kFp8Qkv | O::kFp8Down), "qkv,down");
  EXPECT_EQ(*ParseFp8Gemms("down,qkv"), O::kFp8Qkv | O::kFp8Down);
  EXPECT_EQ(*ParseFp8Gemms("up,up"), O::kFp8Up);
  for (const char* bad : {"", ",", "qkv,out", "QKV", "qkv ,up"}) {
    EXPECT_FALSE(ParseFp8Gemms(bad).ok()) << bad;
  }
}

TEST(CudaOptionsTest, Fp8LayersParseAndName) {
  EXPECT_EQ(*ParseFp8Layers("6-11"), uint64_t{0xfc0});
  EXPECT_EQ(*ParseFp8Layers("5,0-1"), uint64_t{0b100011});
  EXPECT_EQ(*ParseFp8Layers("3"), uint64_t{8});
  EXPECT_EQ(*ParseFp8Layers("63"), uint64_t{1} << 63);
  EXPECT_EQ(*ParseFp8Layers("0-63"), ~uint64_t{0});
  EXPECT_EQ(Fp8LayersName(*ParseFp8Layers("5,0-1")), "0-1,5");
  EXPECT_EQ(Fp8LayersName(~uint64_t{0}), "0-63");
  EXPECT_EQ(Fp8LayersName(uint64_t{1} << 63), "63");
  for (const char* name : {"6-11", "0,2,4", "0-1,5,9-10", "40"}) {
    auto bits = ParseFp8Layers(name);
    ASSERT_TRUE(bits.ok()) << name << ": " << bits.status();
    EXPECT_EQ(Fp8LayersName(*bits), name);
  }
  for (const char* bad : {"", ",", "-", "3-", "-3", "a", "5-2", "64", "0-64",
                          "1,,2", "100", " 1", "1-2-3"}) {
    auto r = ParseFp8Layers(bad);
    EXPECT_FALSE(r.ok()) << "\"" << bad << "\" parsed as " << (r.ok() ? *r : 0);
  }
}

TEST(CudaOptionsTest, ToStringNamesTheFp8Choices) {
  O o;
  EXPECT_EQ(o.ToString(), "fp16, fused, graphs<=32 (48 kept)");
  o.fp8_layers = 0xfc0;  // fp16: the FP8 settings are not shown
  EXPECT_EQ(o.ToString().find("fp8"), std::string::npos);
  o.precision = CudaPrecision::kFp8;
  o.fp8_gemms = O::kFp8Up | O::kFp8Down;
  const std::string s = o.ToString();
  EXPECT_NE(s.find("(fp8 GEMMs: up,down)"), std::string::npos) << s;
  EXPECT_NE(s.find("(fp8 layers: 6-11)"), std::string::npos) << s;
  o.fp8_gemms = O::kFp8Qkv | O::kFp8Up | O::kFp8Down;
  o.fp8_layers = ~uint64_t{0};
  EXPECT_EQ(o.ToString(), "fp8, fused, graphs<=32 (48 kept)");
}

TEST(CudaOptionsTest, FromEnvReadsAndIgnoresBadValues) {
  ASSERT_EQ(setenv("ZV_CUDA_PRECISION", "fp8", 1), 0);
  ASSERT_EQ(setenv("ZV_CUDA_FP8_GEMMS", "qkv", 1), 0);
  ASSERT_EQ(setenv("ZV_CUDA_FP8_LAYERS", "8-11", 1), 0);
  O o = O::FromEnv();
  EXPECT_EQ(o.precision, CudaPrecision::kFp8);
  EXPECT_EQ(o.fp8_gemms, O::kFp8Qkv);
  EXPECT_EQ(o.fp8_layers, uint64_t{0xf00});
  // Bad values leave the defaults (a warning goes to stderr).
  ASSERT_EQ(setenv("ZV_CUDA_PRECISION", "fp4", 1), 0);
  ASSERT_EQ(setenv("ZV_CUDA_FP8_GEMMS", "attention", 1), 0);
  ASSERT_EQ(setenv("ZV_CUDA_FP8_LAYERS", "11-8", 1), 0);
  o = O::FromEnv();
  EXPECT_EQ(o.precision, CudaPrecision::kFp16);
  EXPECT_EQ(o.fp8_gemms, O{}.fp8_gemms);
  EXPECT_EQ(o.fp8_layers, ~uint64_t{0});
  unsetenv("ZV_CUDA_PRECISION");
  unsetenv("ZV_CUDA_FP8_GEMMS");
  unsetenv("ZV_CUDA_FP8_LAYERS");
}

}  // namespace
}  // namespace zv::embed
