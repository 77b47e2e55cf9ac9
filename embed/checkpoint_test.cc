#include "embed/checkpoint.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "embed/safetensors.h"
#include "embed/testing/test_checkpoint.h"

namespace zv::embed {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::MakeTempDir;
using testing::TinyBertOptions;
using testing::WriteTinyBert;

fs::path WriteGood(const std::string& name, TinyBertOptions o = {}) {
  fs::path dir = MakeTempDir(name);
  EXPECT_TRUE(WriteTinyBert(dir, o).ok());
  return dir;
}

// Reads a safetensors file, lets `edit` change its header, writes it back.
void EditHeader(const fs::path& path, const std::function<void(json&)>& edit) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i)
    len = (len << 8) | static_cast<uint8_t>(bytes[i]);
  json header = json::parse(bytes.substr(8, len));
  edit(header);
  std::string h = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>(uint64_t(h.size()) >> (8 * i));
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << out << h << bytes.substr(8 + len);
}

std::string LoadError(const fs::path& dir) {
  auto ck = LoadCheckpoint(dir);
  EXPECT_FALSE(ck.ok());
  return ck.ok() ? "" : ck.status().message();
}

TEST(CheckpointTest, LoadsEveryDtypeAndPrefix) {
  for (const char* dtype : {"F32", "F16", "BF16"}) {
    for (const char* prefix : {"", "bert."}) {
      TinyBertOptions o;
      o.dtype = dtype;
      o.prefix = prefix;
      o.max_seq_length = 48;
      fs::path dir = WriteGood("ck", o);
      auto ck = LoadCheckpoint(dir);
      ASSERT_TRUE(ck.ok()) << dtype << prefix << ": " << ck.status();
      const Checkpoint& c = **ck;
      EXPECT_EQ(c.config.hidden_size, 32);
      EXPECT_EQ(c.layers.size(), 2u);
      EXPECT_EQ(c.tokenizer_options.max_length, 48);
      EXPECT_TRUE(c.normalize);
      EXPECT_EQ(c.pooling, Pooling::kMean);
      // Values survive the dtype conversion to within its precision.
      const float want =
          3 * testing::DeterministicValue(
                  std::string(prefix) + "embeddings.word_embeddings.weight", 7);
      const float tol = std::string(dtype) == "F32"   ? 0
                        : std::string(dtype) == "F16" ? 1e-4f
                                                      : 1e-3f;
      EXPECT_NEAR(c.word_embeddings[7], want, tol) << dtype;
      EXPECT_EQ(c.Info().dim, 32);
    }
  }
}

TEST(CheckpointTest, ReadsClsPoolingAndPlainFolders) {
  TinyBertOptions o;
  o.cls_pooling = true;
  auto ck = LoadCheckpoint(WriteGood("cls", o));
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_EQ((*ck)->pooling, Pooling::kCls);

  o = {};
  o.sentence_transformers =
      false;  // plain HF folder: mean pooling, no Normalize
  ck = LoadCheckpoint(WriteGood("plain", o));
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_EQ((*ck)->pooling, Pooling::kMean);
  EXPECT_FALSE((*ck)->normalize);
  EXPECT_EQ((*ck)->tokenizer_options.max_length,
            64);  // max_position_embeddings
}

TEST(CheckpointTest, MissingFilesAreNamed) {
  for (const char* file : {"config.json", "vocab.txt", "model.safetensors"}) {
    fs::path dir = WriteGood("missing");
    fs::remove(dir / file);
    EXPECT_NE(LoadError(dir).find(file), std::string::npos) << file;
  }
  EXPECT_NE(LoadError("/nonexistent/model").find("not a checkpoint folder"),
            std::string::npos);
}

TEST(CheckpointTest, BadConfigIsExplained) {
  fs::path dir = WriteGood("badjson");
  std::ofstream(dir / "config.json") << "{\"model_type\": ";
  EXPECT_NE(LoadError(dir).find("config.json: bad JSON"), std::string::npos);

  dir = WriteGood("arch");
  std::ofstream(dir / "config.json") << R"({"model_type": "roberta"})";
  EXPECT_NE(LoadError(dir).find("unsupported model_type \"roberta\""),
            std::string::npos);

  dir = WriteGood("nosize");
  std::ofstream(dir / "config.json")
      << R"({"model_type": "bert", "vocab_size": 5})";
  EXPECT_NE(LoadError(dir).find("config.json: missing \"hidden_size\""),
            std::string::npos);

  dir = WriteGood("pool");
  std::ofstream(dir / "1_Pooling" / "config.json")
      << R"({"pooling_mode_max_tokens": true})";
  EXPECT_NE(LoadError(dir).find("unsupported pooling_mode_max_tokens"),
            std::string::npos);
}

TEST(CheckpointTest, MissingTensorIsNamed) {
  fs::path dir = WriteGood("notensor");
  EditHeader(dir / "model.safetensors", [](json& h) {
    h.erase("encoder.layer.1.intermediate.dense.bias");
  });
  const std::string err = LoadError(dir);
  EXPECT_NE(err.find("model.safetensors: missing tensor "
                     "encoder.layer.1.intermediate.dense.bias"),
            std::string::npos)
      << err;
}

TEST(CheckpointTest, WrongShapeIsNamed) {
  fs::path dir = WriteGood("shape");
  EditHeader(dir / "model.safetensors", [](json& h) {
    h["encoder.layer.0.output.LayerNorm.weight"]["shape"] = {16, 2};
  });
  const std::string err = LoadError(dir);
  EXPECT_NE(err.find("tensor encoder.layer.0.output.LayerNorm.weight has shape "
                     "[16, 2], expected [32]"),
            std::string::npos)
      << err;
}

TEST(CheckpointTest, WrongDtypeIsNamed) {
  fs::path dir = WriteGood("dtype");
  EditHeader(dir / "model.safetensors",
             [](json& h) { h["embeddings.LayerNorm.bias"]["dtype"] = "I32"; });
  const std::string err = LoadError(dir);
  EXPECT_NE(
      err.find("tensor embeddings.LayerNorm.bias has unsupported dtype I32"),
      std::string::npos)
      << err;
}

TEST(CheckpointTest, TruncatedFileIsDetected) {
  fs::path dir = WriteGood("trunc");
  const fs::path st = dir / "model.safetensors";
  fs::resize_file(st, fs::file_size(st) / 2);
  const std::string err = LoadError(dir);
  EXPECT_NE(err.find("model.safetensors: tensor "), std::string::npos) << err;
  EXPECT_NE(err.find("outside the"), std::string::npos) << err;

  std::ofstream(st, std::ios::binary | std::ios::trunc)
      << std::string("\xff\xff\x00\x00\x00\x00\x00\x00{}", 10);
  const std::string err2 = LoadError(dir);
  EXPECT_NE(err2.find("header length 65535 runs past the end of the file"),
            std::string::npos)
      << err2;

  std::ofstream(st, std::ios::binary | std::ios::trunc) << "abc";
  EXPECT_NE(LoadError(dir).find("too short"), std::string::npos);
}

TEST(CheckpointTest, VocabLargerThanModelIsRejected) {
  TinyBertOptions o;
  o.vocab_size = 20;
  const std::string err = LoadError(WriteGood("vocab", o));
  EXPECT_NE(err.find("vocab.txt"), std::string::npos) << err;
}

TEST(HalfTest, ConversionsRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f,
                  0.33325195f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_EQ(FloatToHalf(1e6f), 0x7C00);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.5f)), 1.5f);
  EXPECT_NEAR(Bf16ToFloat(FloatToBf16(0.1f)), 0.1f, 1e-3f);
}

}  // namespace
}  // namespace zv::embed
