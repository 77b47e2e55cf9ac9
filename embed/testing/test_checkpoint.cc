#include "embed/testing/test_checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "embed/safetensors.h"

namespace zv::embed::testing {
namespace fs = std::filesystem;
using nlohmann::json;

Status WriteSafetensors(
    const fs::path& path, const std::vector<TensorSpec>& tensors,
    const std::string& dtype,
    const std::function<float(const std::string&, uint64_t)>& value) {
  const size_t esize = dtype == "F32" ? 4 : 2;
  json header = json::object();
  uint64_t offset = 0;
  std::vector<const TensorSpec*> sorted;
  for (const auto& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](auto* a, auto* b) { return a->name < b->name; });
  for (const TensorSpec* t : sorted) {
    uint64_t n = 1;
    for (int64_t d : t->shape) n *= d;
    header[t->name] = {{"dtype", dtype},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + n * esize}}};
    offset += n * esize;
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  while ((h.size() + 8) % 8) h.push_back(' ');
  std::ofstream out(path, std::ios::binary);
  if (!out) return InternalError(path.string() + ": cannot create");
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(uint64_t(h.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), h.size());
  std::vector<uint8_t> buf;
  for (const TensorSpec* t : sorted) {
    uint64_t n = 1;
    for (int64_t d : t->shape) n *= d;
    buf.resize(n * esize);
    for (uint64_t i = 0; i < n; ++i) {
      const float v = value(t->name, i);
      if (esize == 4) {
        std::memcpy(&buf[4 * i], &v, 4);
      } else {
        const uint16_t b = dtype == "BF16" ? FloatToBf16(v) : FloatToHalf(v);
        buf[2 * i] = b & 0xFF;
        buf[2 * i + 1] = b >> 8;
      }
    }
    out.write(reinterpret_cast<const char*>(buf.data()), buf.size());
  }
  out.close();
  if (!out) return InternalError(path.string() + ": write failed");
  return OkStatus();
}

std::vector<TensorSpec> BertTensors(int vocab, int hidden, int layers,
                                    int intermediate, int max_position,
                                    int type_vocab, const std::string& p) {
  const int64_t h = hidden, f = intermediate;
  std::vector<TensorSpec> t = {
      {p + "embeddings.word_embeddings.weight", {vocab, h}},
      {p + "embeddings.position_embeddings.weight", {max_position, h}},
      {p + "embeddings.token_type_embeddings.weight", {type_vocab, h}},
      {p + "embeddings.LayerNorm.weight", {h}},
      {p + "embeddings.LayerNorm.bias", {h}},
  };
  for (int i = 0; i < layers; ++i) {
    const std::string l = p + "encoder.layer." + std::to_string(i) + ".";
    for (const char* m : {"query", "key", "value"}) {
      t.push_back({l + "attention.self." + m + ".weight", {h, h}});
      t.push_back({l + "attention.self." + m + ".bias", {h}});
    }
    t.push_back({l + "attention.output.dense.weight", {h, h}});
    t.push_back({l + "attention.output.dense.bias", {h}});
    t.push_back({l + "attention.output.LayerNorm.weight", {h}});
    t.push_back({l + "attention.output.LayerNorm.bias", {h}});
    t.push_back({l + "intermediate.dense.weight", {f, h}});
    t.push_back({l + "intermediate.dense.bias", {f}});
    t.push_back({l + "output.dense.weight", {h, f}});
    t.push_back({l + "output.dense.bias", {h}});
    t.push_back({l + "output.LayerNorm.weight", {h}});
    t.push_back({l + "output.LayerNorm.bias", {h}});
  }
  t.push_back({p + "pooler.dense.weight", {h, h}});
  t.push_back({p + "pooler.dense.bias", {h}});
  return t;
}

float DeterministicValue(const std::string& name, uint64_t index) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a-64
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  uint64_t z = hash + index;  // splitmix64
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const double u = static_cast<double>(z >> 11) * 0x1p-53;
  const double v = 2.0 * u - 1.0;
  if (name.ends_with("LayerNorm.weight"))
    return static_cast<float>(1.0 + 0.1 * v);
  if (name.ends_with(".bias")) return static_cast<float>(0.02 * v);
  return static_cast<float>(v * 0.0346410161513775);
}

std::vector<std::string> TinyVocab() {
  std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (const char* w :
       {"the",  "quick", "brown",  "fox",   "jump",   "##s",   "over",
        "lazy", "dog",   "un",     "##aff", "##able", "hello", "world",
        "cafe", "naive", "vector", "##ing", "search", "embed", "##ded",
        "data", "base",  "##d",    "a",     "is",     "of",    "to",
        "and",  "in",    "it",     "for",   "on",     "with",  "as",
        "at",   "by",    "an",     "be",    "this",   "that",  "from",
        "or",   "are",   "was",    "but",   "not",    "中",    "国",
        "日",   "本"}) {
    v.push_back(w);
  }
  for (char c = 'a'; c <= 'z'; ++c) {
    v.push_back(std::string(1, c));
    v.push_back("##" + std::string(1, c));
  }
  for (char c = '0'; c <= '9'; ++c) v.push_back(std::string(1, c));
  for (const char* p :
       {".", ",", "!", "?", "'", "\"", "-", "(", ")", ":", ";"}) {
    v.push_back(p);
  }
  return v;
}

Status WriteTinyBert(const fs::path& dir, const TinyBertOptions& o) {
  fs::create_directories(dir);
  const std::vector<std::string> vocab = TinyVocab();
  const int vocab_size =
      o.vocab_size ? o.vocab_size : static_cast<int>(vocab.size());
  json config = {{"architectures", {"BertModel"}},
                 {"model_type", "bert"},
                 {"vocab_size", vocab_size},
                 {"hidden_size", o.hidden},
                 {"num_hidden_layers", o.layers},
                 {"num_attention_heads", o.heads},
                 {"intermediate_size", o.intermediate},
                 {"max_position_embeddings", o.max_position},
                 {"type_vocab_size", 2},
                 {"layer_norm_eps", 1e-12},
                 {"hidden_act", "gelu"},
                 {"position_embedding_type", "absolute"}};
  std::ofstream(dir / "config.json") << config.dump(2);
  {
    std::ofstream v(dir / "vocab.txt");
    for (const auto& t : vocab) v << t << "\n";
  }
  std::ofstream(dir / "tokenizer_config.json") << json{
      {"do_lower_case", o.lower_case},
      {"model_max_length", 512}}.dump();
  if (o.sentence_transformers) {
    std::ofstream(dir / "modules.json") << R"([
 {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
 {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
 {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
])";
    fs::create_directories(dir / "1_Pooling");
    std::ofstream(dir / "1_Pooling" / "config.json") << json{
        {"word_embedding_dimension", o.hidden},
        {"pooling_mode_cls_token", o.cls_pooling},
        {"pooling_mode_mean_tokens", !o.cls_pooling},
        {"pooling_mode_max_tokens", false}}.dump();
  }
  if (o.max_seq_length > 0) {
    std::ofstream(dir / "sentence_bert_config.json") << json{
        {"max_seq_length", o.max_seq_length},
        {"do_lower_case", false}}.dump();
  }
  return WriteSafetensors(
      dir / "model.safetensors",
      BertTensors(vocab_size, o.hidden, o.layers, o.intermediate,
                  o.max_position, 2, o.prefix),
      o.dtype, [](const std::string& name, uint64_t i) {
        // Larger than the MiniLM rule so a 2-layer toy model has visible
        // structure.
        const float v = DeterministicValue(name, i);
        return name.ends_with("LayerNorm.weight") || name.ends_with(".bias")
                   ? v
                   : 3 * v;
      });
}

StatusOr<fs::path> MakeMiniLmRandom() {
  const fs::path src = "tests/data/minilm_random";
  std::error_code ec;
  if (!fs::exists(src / "config.json", ec)) {
    return NotFoundError(src.string() + "/config.json is missing");
  }
  const fs::path dir = MakeTempDir("minilm_random");
  fs::copy(src, dir,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing,
           ec);
  if (ec) return InternalError("copy " + src.string() + ": " + ec.message());
  std::ifstream in(dir / "config.json");
  json c = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (c.is_discarded())
    return InvalidArgumentError("minilm_random/config.json: bad JSON");
  const auto tensors = BertTensors(
      c.value("vocab_size", 30522), c.value("hidden_size", 384),
      c.value("num_hidden_layers", 6), c.value("intermediate_size", 1536),
      c.value("max_position_embeddings", 512), c.value("type_vocab_size", 2),
      "");
  ZV_RETURN_IF_ERROR(WriteSafetensors(dir / "model.safetensors", tensors, "F32",
                                      DeterministicValue));
  return dir;
}

StatusOr<std::vector<ReferenceVector>> ReadReference(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path.string() + " is missing");
  std::vector<ReferenceVector> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("text") || !j.contains("vector")) {
      return InvalidArgumentError(path.string() + ": bad line " +
                                  std::to_string(out.size() + 1));
    }
    out.push_back(
        {j["text"].get<std::string>(), j["vector"].get<std::vector<float>>()});
  }
  return out;
}

}  // namespace zv::embed::testing
