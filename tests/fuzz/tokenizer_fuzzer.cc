// libFuzzer target: the WordPiece tokenizer over arbitrary bytes (invalid
// UTF-8, control and combining characters, CJK, special-token look-alikes).
// Input layout: [u8 flags][u8 max_length code][bytes...]. flags bit 3 makes the
// text up to the first '\0' a vocabulary (one token a line) for
// Tokenizer::Create. Checks beyond "no crash": ids in range, [CLS] first and
// [SEP] last, the max_length bound, and that lossy UTF-8 decoding is idempotent
// after a round trip.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "embed/tokenizer.h"

#ifndef ZV_SOURCE_ROOT
#define ZV_SOURCE_ROOT "."
#endif

namespace {

using zv::embed::Tokenizer;
using zv::embed::TokenizerOptions;

// models/zerovec-mini/vocab.txt, or a tiny vocabulary when it is not found.
const std::vector<std::string>& BundledVocab() {
  static const std::vector<std::string> vocab = [] {
    std::vector<std::string> v;
    std::ifstream in(std::filesystem::path(ZV_SOURCE_ROOT) /
                     "models/zerovec-mini/vocab.txt");
    for (std::string line; std::getline(in, line);) {
      while (!line.empty() && line.back() == '\r') line.pop_back();
      v.push_back(line);
    }
    if (v.empty()) {
      v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b",
           "##a",   "##b",   "the",   "##s",   ",",      "."};
    }
    return v;
  }();
  return vocab;
}

constexpr int kMaxLengths[8] = {0, 1, 2, 3, 8, 32, 128, 512};

TokenizerOptions OptionsFrom(uint8_t flags, uint8_t length_code) {
  TokenizerOptions o;
  o.do_lower_case = flags & 1;
  if (flags & 2) o.strip_accents = (flags & 4) != 0;
  o.tokenize_chinese_chars = (flags & 16) == 0;
  o.max_input_chars_per_word = (flags & 32) ? 3 : 100;
  o.max_length =
      kMaxLengths[length_code & 7];  // < 2 is an error Create must report
  return o;
}

// Tokenizers over the bundled vocabulary, one per option set (built once each).
const zv::StatusOr<Tokenizer>& BundledTokenizer(uint8_t flags,
                                                uint8_t length_code) {
  static std::map<int, std::unique_ptr<zv::StatusOr<Tokenizer>>> cache;
  const int key = (flags & 0x37) << 3 | (length_code & 7);
  auto& slot = cache[key];
  if (!slot) {
    slot = std::make_unique<zv::StatusOr<Tokenizer>>(
        Tokenizer::Create(BundledVocab(), OptionsFrom(flags, length_code)));
  }
  return *slot;
}

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "invariant failed: %s\n", what);
    abort();
  }
}

// With flag 8 the text starts with a vocabulary ("\n"-separated, ended by a
// NUL): it is cut off `text` and returned.
std::vector<std::string> TakeOwnVocab(std::string_view* text) {
  std::vector<std::string> own_vocab;
  const size_t nul = text->find('\0');
  std::string_view v = text->substr(0, nul);
  *text = nul == std::string_view::npos ? std::string_view()
                                        : text->substr(nul + 1);
  size_t start = 0;
  while (start <= v.size()) {
    size_t end = v.find('\n', start);
    if (end == std::string_view::npos) end = v.size();
    own_vocab.emplace_back(v.substr(start, end - start));
    start = end + 1;
  }
  return own_vocab;
}

// Window-sized spans: inside the text, in order, each fitting unless it is a
// single word. (Addresses as integers: an empty text's data() may be null.)
void CheckWindows(const Tokenizer& tokenizer, std::string_view text,
                  int overlap) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(text.data());
  uintptr_t next_min = base;
  for (std::string_view span : tokenizer.SplitToWindows(text, overlap)) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(span.data());
    Check(at >= next_min && at + span.size() <= base + text.size(),
          "span inside the text, in order");
    next_min = at + 1;
    bool cut = false;
    tokenizer.Encode(span, &cut);
    Check(!cut || span.find_first_of(" \t\n\r") == std::string_view::npos,
          "span fits the window unless one word");
  }
}

// Bucketing the lengths of a few encodings covers every index exactly once.
void CheckBuckets(const Tokenizer& tokenizer, std::string_view text,
                  uint8_t flags) {
  std::vector<int> lengths;
  for (size_t cut = 0; cut < text.size() && lengths.size() < 8;
       cut += 1 + text.size() / 8) {
    lengths.push_back(
        static_cast<int>(tokenizer.Encode(text.substr(cut)).size()));
  }
  const auto batches =
      zv::embed::BucketByLength(lengths, 1 + (flags >> 6) * 64);
  std::vector<int> seen(lengths.size());
  for (const auto& b : batches) {
    Check(!b.empty(), "no empty batch");
    for (size_t i : b) {
      Check(i < lengths.size(), "batch index in range");
      ++seen[i];
    }
  }
  for (int s : seen) Check(s == 1, "each index in one batch");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t flags = data[0];
  const TokenizerOptions options = OptionsFrom(flags, data[1]);
  std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);

  std::vector<std::string> own_vocab;
  if (flags & 8) own_vocab = TakeOwnVocab(&text);
  const int vocab_size =
      static_cast<int>((flags & 8) ? own_vocab.size() : BundledVocab().size());

  // Lossy decoding: one more round trip changes nothing.
  const std::u32string decoded = zv::embed::DecodeUtf8Lossy(text);
  const std::string reencoded = zv::embed::EncodeUtf8(decoded);
  Check(zv::embed::DecodeUtf8Lossy(reencoded) == decoded, "decode idempotent");
  Check(decoded.size() <= text.size(), "decode never grows");

  std::optional<zv::StatusOr<Tokenizer>> own;
  if (flags & 8) own.emplace(Tokenizer::Create(std::move(own_vocab), options));
  const zv::StatusOr<Tokenizer>& tokenizer =
      own ? *own : BundledTokenizer(flags, data[1]);
  if (!tokenizer.ok()) {
    Check(options.max_length < 2 || (flags & 8),
          "Create fails only on bad input");
    return 0;
  }
  bool truncated = false;
  const std::vector<int32_t> ids = tokenizer->Encode(text, &truncated);
  // Truncated exactly when the whole text has more tokens than the window.
  const size_t all_tokens = tokenizer->CountTokens(text);
  Check(truncated == (all_tokens + 2 > static_cast<size_t>(options.max_length)),
        "truncated iff over the window");
  Check(truncated || ids.size() == all_tokens + 2, "untruncated: every token");
  CheckWindows(*tokenizer, text, flags & 7);
  Check(ids.size() >= 2, "at least [CLS] [SEP]");
  Check(ids.size() <= static_cast<size_t>(options.max_length),
        "max_length bound");
  Check(ids.front() == *tokenizer->TokenId("[CLS]"), "[CLS] first");
  Check(ids.back() == *tokenizer->TokenId("[SEP]"), "[SEP] last");
  for (int32_t id : ids) Check(id >= 0 && id < vocab_size, "id in range");

  for (const std::u32string& word : tokenizer->BasicTokenize(text)) {
    Check(!word.empty(), "no empty words");
  }
  CheckBuckets(*tokenizer, text, flags);
  return 0;
}
