// Test helpers: write safetensors files and whole BERT checkpoint folders.
#ifndef ZEROVEC_EMBED_TESTING_TEST_CHECKPOINT_H_
#define ZEROVEC_EMBED_TESTING_TEST_CHECKPOINT_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/test_util.h"

namespace zv::embed::testing {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Writes a safetensors file with the given dtype ("F32", "F16" or "BF16");
// element i of tensor t is value(t.name, i). Tensors are stored in name order,
// 8-byte aligned.
Status WriteSafetensors(
    const std::filesystem::path& path, const std::vector<TensorSpec>& tensors,
    const std::string& dtype,
    const std::function<float(const std::string&, uint64_t)>& value);

struct TinyBertOptions {
  int vocab_size = 0;  // 0: size of the vocabulary written
  int hidden = 32;
  int layers = 2;
  int heads = 4;
  int intermediate = 64;
  int max_position = 64;
  std::string dtype = "F32";
  std::string prefix;                 // "" or "bert."
  bool sentence_transformers = true;  // modules.json + 1_Pooling + Normalize
  bool cls_pooling = false;
  bool lower_case = true;
  int max_seq_length = 0;  // sentence_bert_config.json; 0: not written
};

// Tensor names and shapes of transformers' BertModel for a config.
std::vector<TensorSpec> BertTensors(int vocab, int hidden, int layers,
                                    int intermediate, int max_position,
                                    int type_vocab, const std::string& prefix);

// The deterministic pseudo-random value rule of
// tests/data/minilm_random/README.md: FNV-1a-64 of the name, splitmix64 of
// (hash + index), uniform in [-1, 1) scaled by tensor kind.
float DeterministicValue(const std::string& name, uint64_t index);

// A small vocabulary covering ASCII letters, some words and wordpieces.
std::vector<std::string> TinyVocab();

// Writes a complete tiny random BERT checkpoint folder into `dir`.
Status WriteTinyBert(const std::filesystem::path& dir,
                     const TinyBertOptions& options);

// tests/data/minilm_random (config, vocab, pooling; committed) plus its
// model.safetensors regenerated in F32 by the DeterministicValue rule, in a
// temp dir.
StatusOr<std::filesystem::path> MakeMiniLmRandom();

// Reference vectors: one JSON a line, {"text": ..., "vector": [...]}.
struct ReferenceVector {
  std::string text;
  std::vector<float> vector;
};
StatusOr<std::vector<ReferenceVector>> ReadReference(
    const std::filesystem::path& path);

// base/test_util.h's, under this namespace's name.
using zv::testing::Cosine;
using zv::testing::MakeTempDir;

}  // namespace zv::embed::testing

#endif  // ZEROVEC_EMBED_TESTING_TEST_CHECKPOINT_H_
