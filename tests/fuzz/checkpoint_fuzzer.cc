// libFuzzer target: the embed checkpoint loader over an arbitrary config.json
// and an arbitrary safetensors header, written into a temp checkpoint folder.
// Input layout: [u8 flags][u16 LE config length][config.json bytes][header
// bytes]. model.safetensors is the 8-byte header length, the header, then a
// zero-filled data section as long as the largest data_offsets end the header
// names (capped), so a well-formed header reaches the tensor reads. Flags:
//   1: data section one byte short        2: header length field +8 (too long)
//   4: write a sentence-transformers layout (modules.json, 1_Pooling,
//   Normalize) 8: tokenizer_config.json + sentence_bert_config.json with limits
//  16: data bytes 0xFF (NaN floats) instead of zeros
// Whatever the bytes, LoadCheckpoint returns an error or a checkpoint whose
// tensor sizes match its config; it never crashes, throws or allocates without
// bound.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "embed/checkpoint.h"

namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMaxDataBytes = 4u << 20;

const fs::path& Dir() {
  static const fs::path dir = [] {
    auto d = fs::temp_directory_path() /
             ("zv_fuzz_ckpt_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

void WriteFile(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The largest data_offsets end in a header that parses, else 0.
uint64_t DataBytesFor(std::string_view header) {
  auto j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return 0;
  uint64_t end = 0;
  for (const auto& [name, t] : j.items()) {
    if (!t.is_object()) continue;
    auto it = t.find("data_offsets");
    if (it == t.end() || !it->is_array() || it->size() != 2) continue;
    const auto& e = (*it)[1];
    if (e.is_number_unsigned()) end = std::max(end, e.get<uint64_t>());
  }
  return std::min(end, kMaxDataBytes);
}

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "invariant failed: %s\n", what);
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  size_t config_len = data[1] | (size_t{data[2]} << 8);
  std::string_view rest(reinterpret_cast<const char*>(data) + 3, size - 3);
  config_len = std::min(config_len, rest.size());
  const std::string_view config = rest.substr(0, config_len);
  const std::string_view header = rest.substr(config_len);

  const fs::path& dir = Dir();
  WriteFile(dir / "config.json", config);
  WriteFile(dir / "vocab.txt",
            "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\n##a\nthe\n.\n");

  uint64_t header_len = header.size() + ((flags & 2) ? 8 : 0);
  uint64_t data_bytes = DataBytesFor(header);
  if ((flags & 1) && data_bytes > 0) --data_bytes;
  std::string st(8, '\0');
  for (int i = 0; i < 8; ++i) st[i] = static_cast<char>(header_len >> (8 * i));
  st.append(header);
  st.append(data_bytes, (flags & 16) ? '\xff' : '\0');
  WriteFile(dir / "model.safetensors", st);

  std::error_code ec;
  fs::remove_all(dir / "1_Pooling", ec);
  fs::remove(dir / "modules.json", ec);
  if (flags & 4) {
    WriteFile(
        dir / "modules.json",
        R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},)"
        R"({"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},)"
        R"({"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}])");
    fs::create_directories(dir / "1_Pooling");
    WriteFile(
        dir / "1_Pooling/config.json",
        R"({"pooling_mode_cls_token":false,"pooling_mode_mean_tokens":true})");
  }
  fs::remove(dir / "tokenizer_config.json", ec);
  fs::remove(dir / "sentence_bert_config.json", ec);
  if (flags & 8) {
    WriteFile(
        dir / "tokenizer_config.json",
        R"({"do_lower_case":false,"model_max_length":6,"strip_accents":null})");
    WriteFile(dir / "sentence_bert_config.json", R"({"max_seq_length":4})");
  }

  auto loaded = zv::embed::LoadCheckpoint(dir);
  static const bool verbose = std::getenv("ZV_FUZZ_VERBOSE") != nullptr;
  if (verbose)
    fprintf(stderr, "LoadCheckpoint: %s\n", loaded.status().ToString().c_str());
  if (!loaded.ok()) {
    Check(!loaded.status().message().empty(), "error has a message");
    return 0;
  }
  const zv::embed::Checkpoint& ck = **loaded;
  const auto& c = ck.config;
  const size_t h = static_cast<size_t>(c.hidden_size);
  Check(ck.word_embeddings.size() == static_cast<size_t>(c.vocab_size) * h,
        "word emb");
  Check(ck.position_embeddings.size() ==
            static_cast<size_t>(c.max_position_embeddings) * h,
        "position emb");
  Check(ck.token_type0.size() == h && ck.emb_ln_g.size() == h &&
            ck.emb_ln_b.size() == h,
        "emb ln");
  Check(ck.layers.size() == static_cast<size_t>(c.num_layers), "layers");
  for (const auto& l : ck.layers) {
    Check(l.qkv_w.size() == 3 * h * h && l.qkv_b.size() == 3 * h, "qkv");
    Check(l.ffn_in_w.size() == static_cast<size_t>(c.intermediate_size) * h,
          "ffn in");
  }
  Check(ck.tokenizer_options.max_length >= 1, "max_length");
  Check(ck.Info().dim == c.hidden_size, "info dim");
  return 0;
}
