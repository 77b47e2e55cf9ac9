// Loading a BERT-family checkpoint folder as published (Hugging Face +
// sentence-transformers layout). embed/-internal.
#ifndef ZEROVEC_EMBED_CHECKPOINT_H_
#define ZEROVEC_EMBED_CHECKPOINT_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "embed/model_info.h"
#include "embed/tokenizer.h"

namespace zv::embed {

struct BertConfig {
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int intermediate_size = 0;
  int max_position_embeddings = 0;
  int type_vocab_size = 0;
  float layer_norm_eps = 1e-12f;
  int head_dim() const { return hidden_size / num_heads; }
};

// fp32 weights, row-major, torch.nn.Linear layout ([out, in]).
struct LayerWeights {
  std::vector<float> qkv_w;  // [3H, H]: query, key, value rows stacked
  std::vector<float> qkv_b;  // [3H]
  std::vector<float> attn_out_w, attn_out_b;  // [H, H], [H]
  std::vector<float> ln1_g, ln1_b;            // attention.output.LayerNorm
  std::vector<float> ffn_in_w, ffn_in_b;      // [I, H], [I]
  std::vector<float> ffn_out_w, ffn_out_b;    // [H, I], [H]
  std::vector<float> ln2_g, ln2_b;            // output.LayerNorm
};

struct Checkpoint {
  std::string name;  // folder name
  BertConfig config;
  TokenizerOptions
      tokenizer_options;  // max_length is the model's max sequence length
  std::vector<std::string> vocab;
  Pooling pooling = Pooling::kMean;
  bool normalize = false;

  std::vector<float> word_embeddings;      // [V, H]
  std::vector<float> position_embeddings;  // [P, H]
  std::vector<float> token_type0;         // [H]: row 0 of token_type_embeddings
  std::vector<float> emb_ln_g, emb_ln_b;  // [H]
  std::vector<LayerWeights> layers;

  ModelInfo Info() const;
};

// Loads and validates a checkpoint folder: config.json, vocab.txt,
// model.safetensors (F32/F16/BF16; tensor names with or without a "bert."
// prefix), and where present modules.json, 1_Pooling/config.json,
// sentence_bert_config.json, tokenizer_config.json. Errors name the file and,
// for weights, the tensor.
StatusOr<std::shared_ptr<const Checkpoint>> LoadCheckpoint(
    const std::filesystem::path& dir);

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_CHECKPOINT_H_
