#include "embed/checkpoint.h"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "embed/safetensors.h"

namespace zv::embed {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

StatusOr<json> ReadJson(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path.string() + ": missing or unreadable");
  std::stringstream buf;
  buf << in.rdbuf();
  try {
    return json::parse(buf.str());
  } catch (const json::exception& e) {
    return InvalidArgumentError(path.string() + ": bad JSON: " + e.what());
  }
}

// Reads an optional JSON file: nullopt-like empty object when the file is
// absent.
StatusOr<json> ReadOptionalJson(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return json::object();
  return ReadJson(path);
}

template <typename T>
Status GetField(const json& j, const char* key, const fs::path& file, T& out,
                bool required = true) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (!required) return OkStatus();
    return InvalidArgumentError(file.string() + ": missing \"" + key + "\"");
  }
  // nlohmann's get<int>() of a float or out-of-range number is undefined
  // behaviour: integer fields must hold an integer that fits.
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!it->is_number_integer()) {
      return InvalidArgumentError(file.string() + ": \"" + key +
                                  "\" must be an integer");
    }
    const bool fits =
        it->is_number_unsigned()
            ? it->template get<uint64_t>() <=
                  static_cast<uint64_t>(std::numeric_limits<T>::max())
            : it->template get<int64_t>() >=
                      static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                  it->template get<int64_t>() <=
                      static_cast<int64_t>(std::numeric_limits<T>::max());
    if (!fits) {
      return InvalidArgumentError(file.string() + ": \"" + key +
                                  "\" is out of range");
    }
  }
  try {
    out = it->template get<T>();
  } catch (const json::exception& e) {
    return InvalidArgumentError(file.string() + ": bad \"" + key +
                                "\": " + e.what());
  }
  return OkStatus();
}

Status ParseConfig(const fs::path& dir, BertConfig& c) {
  const fs::path file = dir / "config.json";
  ZV_ASSIGN_OR_RETURN(json j, ReadJson(file));
  if (!j.is_object())
    return InvalidArgumentError(file.string() + ": not an object");
  std::string model_type;
  ZV_RETURN_IF_ERROR(GetField(j, "model_type", file, model_type));
  if (model_type != "bert") {
    return UnimplementedError(file.string() + ": unsupported model_type \"" +
                              model_type + "\" (only \"bert\" is supported)");
  }
  ZV_RETURN_IF_ERROR(GetField(j, "vocab_size", file, c.vocab_size));
  ZV_RETURN_IF_ERROR(GetField(j, "hidden_size", file, c.hidden_size));
  ZV_RETURN_IF_ERROR(GetField(j, "num_hidden_layers", file, c.num_layers));
  ZV_RETURN_IF_ERROR(GetField(j, "num_attention_heads", file, c.num_heads));
  ZV_RETURN_IF_ERROR(
      GetField(j, "intermediate_size", file, c.intermediate_size));
  ZV_RETURN_IF_ERROR(
      GetField(j, "max_position_embeddings", file, c.max_position_embeddings));
  c.type_vocab_size = 2;
  ZV_RETURN_IF_ERROR(
      GetField(j, "type_vocab_size", file, c.type_vocab_size, false));
  ZV_RETURN_IF_ERROR(
      GetField(j, "layer_norm_eps", file, c.layer_norm_eps, false));
  std::string act = "gelu", pos_type = "absolute";
  ZV_RETURN_IF_ERROR(GetField(j, "hidden_act", file, act, false));
  ZV_RETURN_IF_ERROR(
      GetField(j, "position_embedding_type", file, pos_type, false));
  if (act != "gelu") {
    return UnimplementedError(file.string() + ": unsupported hidden_act \"" +
                              act + "\" (only exact \"gelu\")");
  }
  if (pos_type != "absolute") {
    return UnimplementedError(file.string() +
                              ": unsupported position_embedding_type \"" +
                              pos_type + "\"");
  }
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.num_layers <= 0 ||
      c.num_heads <= 0 || c.intermediate_size <= 0 ||
      c.max_position_embeddings <= 0 || c.type_vocab_size <= 0 ||
      c.hidden_size % c.num_heads != 0) {
    return InvalidArgumentError(
        file.string() +
        ": sizes must be positive and hidden_size divisible "
        "by num_attention_heads");
  }
  return OkStatus();
}

// sentence-transformers modules: Transformer, Pooling (mean or CLS), Normalize.
Status ParseModules(const fs::path& dir, const BertConfig& config,
                    Checkpoint& ck) {
  const fs::path file = dir / "modules.json";
  std::error_code ec;
  if (!fs::exists(file, ec))
    return OkStatus();  // plain HF folder: mean, no norm
  ZV_ASSIGN_OR_RETURN(json modules, ReadJson(file));
  if (!modules.is_array())
    return InvalidArgumentError(file.string() + ": not a list");
  for (const json& m : modules) {
    std::string type, path;
    ZV_RETURN_IF_ERROR(GetField(m, "type", file, type));
    ZV_RETURN_IF_ERROR(GetField(m, "path", file, path, false));
    const std::string kind = type.substr(type.rfind('.') + 1);
    if (kind == "Transformer") continue;
    if (kind == "Normalize") {
      ck.normalize = true;
      continue;
    }
    if (kind != "Pooling") {
      return UnimplementedError(file.string() + ": unsupported module " + type);
    }
    const fs::path pfile = dir / path / "config.json";
    ZV_ASSIGN_OR_RETURN(json p, ReadJson(pfile));
    bool cls = false, mean = false;
    ZV_RETURN_IF_ERROR(
        GetField(p, "pooling_mode_cls_token", pfile, cls, false));
    ZV_RETURN_IF_ERROR(
        GetField(p, "pooling_mode_mean_tokens", pfile, mean, false));
    for (const char* other :
         {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
          "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"}) {
      bool on = false;
      ZV_RETURN_IF_ERROR(GetField(p, other, pfile, on, false));
      if (on)
        return UnimplementedError(pfile.string() + ": unsupported " + other);
    }
    if (cls == mean) {
      return UnimplementedError(pfile.string() +
                                ": exactly one of pooling_mode_cls_token and "
                                "pooling_mode_mean_tokens must be true");
    }
    int dim = config.hidden_size;
    ZV_RETURN_IF_ERROR(
        GetField(p, "word_embedding_dimension", pfile, dim, false));
    if (dim != config.hidden_size) {
      return InvalidArgumentError(
          pfile.string() + ": word_embedding_dimension " + std::to_string(dim) +
          " != hidden_size " + std::to_string(config.hidden_size));
    }
    ck.pooling = cls ? Pooling::kCls : Pooling::kMean;
  }
  return OkStatus();
}

Status ParseTokenizerConfig(const fs::path& dir, const BertConfig& config,
                            TokenizerOptions& opt) {
  const fs::path tfile = dir / "tokenizer_config.json";
  ZV_ASSIGN_OR_RETURN(json t, ReadOptionalJson(tfile));
  ZV_RETURN_IF_ERROR(
      GetField(t, "do_lower_case", tfile, opt.do_lower_case, false));
  bool strip = false;
  if (t.contains("strip_accents") && !t["strip_accents"].is_null()) {
    ZV_RETURN_IF_ERROR(GetField(t, "strip_accents", tfile, strip));
    opt.strip_accents = strip;
  }
  ZV_RETURN_IF_ERROR(GetField(t, "tokenize_chinese_chars", tfile,
                              opt.tokenize_chinese_chars, false));
  // Sequence length: sentence-transformers' max_seq_length, else the
  // tokenizer's model_max_length (HF uses a huge sentinel when unset), capped
  // by the positions.
  double model_max = 0;
  ZV_RETURN_IF_ERROR(GetField(t, "model_max_length", tfile, model_max, false));
  const fs::path sfile = dir / "sentence_bert_config.json";
  ZV_ASSIGN_OR_RETURN(json s, ReadOptionalJson(sfile));
  int seq = 0;
  ZV_RETURN_IF_ERROR(GetField(s, "max_seq_length", sfile, seq, false));
  int max_length = config.max_position_embeddings;
  if (seq > 0) {
    max_length = std::min(max_length, seq);
  } else if (model_max > 0 && model_max < max_length) {
    max_length = static_cast<int>(model_max);
  }
  opt.max_length = max_length;
  return OkStatus();
}

// Resolves tensor names against the file: "bert." prefix or none; LayerNorm
// weight/bias or the older gamma/beta.
class WeightReader {
 public:
  static StatusOr<WeightReader> Create(const SafetensorsFile* file,
                                       const std::string& path) {
    const std::string probe = "embeddings.word_embeddings.weight";
    if (file->Has(probe)) return WeightReader(file, "");
    if (file->Has("bert." + probe)) return WeightReader(file, "bert.");
    return NotFoundError(path + ": missing tensor " + probe +
                         " (also looked for bert." + probe + ")");
  }
  StatusOr<std::vector<float>> Read(std::string name,
                                    std::vector<int64_t> shape) const {
    name = prefix_ + name;
    if (!file_->Has(name)) {
      const bool is_ln = name.find("LayerNorm.") != std::string::npos;
      const auto swap = [&](const char* from, const char* to) {
        const std::string f(from);
        if (name.size() > f.size() && name.ends_with(f)) {
          const std::string alt = name.substr(0, name.size() - f.size()) + to;
          if (file_->Has(alt)) name = alt;
        }
      };
      if (is_ln) swap(".weight", ".gamma");
      if (is_ln) swap(".bias", ".beta");
    }
    return file_->ReadFloat(name, shape);
  }

 private:
  WeightReader(const SafetensorsFile* file, std::string prefix)
      : file_(file), prefix_(std::move(prefix)) {}
  const SafetensorsFile* file_;
  std::string prefix_;
};

#define ZV_READ(dst, name, ...) \
  ZV_ASSIGN_OR_RETURN(dst, reader.Read(name, {__VA_ARGS__}))

Status LoadLayer(const WeightReader& reader, const BertConfig& c, int i,
                 LayerWeights& l) {
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  const std::string p = "encoder.layer." + std::to_string(i) + ".";
  // No reserve() before the tensors are checked: a hostile config.json could
  // otherwise make us allocate gigabytes for a model that is not there.
  for (const char* m : {"query", "key", "value"}) {
    const std::string base = p + "attention.self." + m;
    ZV_READ(std::vector<float> w, base + ".weight", h, h);
    ZV_READ(std::vector<float> b, base + ".bias", h);
    l.qkv_w.insert(l.qkv_w.end(), w.begin(), w.end());
    l.qkv_b.insert(l.qkv_b.end(), b.begin(), b.end());
  }
  ZV_READ(l.attn_out_w, p + "attention.output.dense.weight", h, h);
  ZV_READ(l.attn_out_b, p + "attention.output.dense.bias", h);
  ZV_READ(l.ln1_g, p + "attention.output.LayerNorm.weight", h);
  ZV_READ(l.ln1_b, p + "attention.output.LayerNorm.bias", h);
  ZV_READ(l.ffn_in_w, p + "intermediate.dense.weight", f, h);
  ZV_READ(l.ffn_in_b, p + "intermediate.dense.bias", f);
  ZV_READ(l.ffn_out_w, p + "output.dense.weight", h, f);
  ZV_READ(l.ffn_out_b, p + "output.dense.bias", h);
  ZV_READ(l.ln2_g, p + "output.LayerNorm.weight", h);
  ZV_READ(l.ln2_b, p + "output.LayerNorm.bias", h);
  return OkStatus();
}

Status LoadWeights(const fs::path& dir, Checkpoint& ck) {
  const fs::path file = dir / "model.safetensors";
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    return NotFoundError(file.string() +
                         ": missing (only safetensors is supported)");
  }
  ZV_ASSIGN_OR_RETURN(auto st, SafetensorsFile::Open(file));
  ZV_ASSIGN_OR_RETURN(WeightReader reader,
                      WeightReader::Create(st.get(), file.string()));
  const BertConfig& c = ck.config;
  const int64_t h = c.hidden_size;
  ZV_READ(ck.word_embeddings, "embeddings.word_embeddings.weight", c.vocab_size,
          h);
  ZV_READ(ck.position_embeddings, "embeddings.position_embeddings.weight",
          c.max_position_embeddings, h);
  ZV_READ(std::vector<float> types, "embeddings.token_type_embeddings.weight",
          c.type_vocab_size, h);
  ck.token_type0.assign(types.begin(), types.begin() + h);
  ZV_READ(ck.emb_ln_g, "embeddings.LayerNorm.weight", h);
  ZV_READ(ck.emb_ln_b, "embeddings.LayerNorm.bias", h);
  ck.layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    ZV_RETURN_IF_ERROR(LoadLayer(reader, c, i, ck.layers[i]));
  }
  return OkStatus();
}

#undef ZV_READ

}  // namespace

ModelInfo Checkpoint::Info() const {
  ModelInfo info;
  info.name = name;
  info.dim = config.hidden_size;
  info.max_length = tokenizer_options.max_length;
  info.vocab_size = config.vocab_size;
  info.num_layers = config.num_layers;
  info.pooling = pooling;
  info.normalize = normalize;
  return info;
}

StatusOr<std::shared_ptr<const Checkpoint>> LoadCheckpoint(
    const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFoundError(dir.string() + ": not a checkpoint folder");
  }
  auto ck = std::make_shared<Checkpoint>();
  ck->name = fs::absolute(dir).lexically_normal().filename().string();
  if (ck->name.empty()) {
    ck->name =
        fs::absolute(dir).lexically_normal().parent_path().filename().string();
  }
  ZV_RETURN_IF_ERROR(ParseConfig(dir, ck->config));

  const fs::path vocab_file = dir / "vocab.txt";
  std::ifstream vin(vocab_file, std::ios::binary);
  if (!vin)
    return NotFoundError(vocab_file.string() + ": missing or unreadable");
  for (std::string line; std::getline(vin, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) {
      line.pop_back();
    }
    ck->vocab.push_back(std::move(line));
  }
  if (ck->vocab.empty() ||
      ck->vocab.size() > static_cast<size_t>(ck->config.vocab_size)) {
    return InvalidArgumentError(vocab_file.string() + ": " +
                                std::to_string(ck->vocab.size()) +
                                " tokens, config.json vocab_size is " +
                                std::to_string(ck->config.vocab_size));
  }
  ZV_RETURN_IF_ERROR(
      ParseTokenizerConfig(dir, ck->config, ck->tokenizer_options));
  ZV_RETURN_IF_ERROR(ParseModules(dir, ck->config, *ck));
  ZV_RETURN_IF_ERROR(LoadWeights(dir, *ck));
  return std::shared_ptr<const Checkpoint>(std::move(ck));
}

}  // namespace zv::embed
