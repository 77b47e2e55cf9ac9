// BERT tokenizer (BasicTokenizer + WordPiece), equivalent to Hugging Face's
// BertTokenizer / BertTokenizerFast with truncation and no padding.
// embed/-internal.
#ifndef ZEROVEC_EMBED_TOKENIZER_H_
#define ZEROVEC_EMBED_TOKENIZER_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace zv::embed {

struct TokenizerOptions {
  bool do_lower_case = true;
  // Unset: follows do_lower_case (as in HF).
  std::optional<bool> strip_accents;
  bool tokenize_chinese_chars = true;
  int max_input_chars_per_word = 100;
  // Tokens per sequence including [CLS] and [SEP]; longer inputs are truncated.
  int max_length = 512;
};

// Decodes UTF-8 like Python's bytes.decode("utf-8", errors="replace"): each
// maximal invalid subpart becomes one U+FFFD.
std::u32string DecodeUtf8Lossy(std::string_view bytes);
std::string EncodeUtf8(std::u32string_view text);

class Tokenizer {
 public:
  // `vocab[i]` is the token with id i (vocab.txt order).
  static StatusOr<Tokenizer> Create(std::vector<std::string> vocab,
                                    const TokenizerOptions& options);
  static StatusOr<Tokenizer> FromVocabFile(
      const std::filesystem::path& vocab_txt, const TokenizerOptions& options);

  // [CLS] wordpieces... [SEP], truncated to options.max_length. With
  // `truncated`, says whether tokens were cut (a text that exactly fills the
  // window is not).
  std::vector<int32_t> Encode(std::string_view utf8,
                              bool* truncated = nullptr) const;
  // Wordpieces of `utf8` without [CLS]/[SEP] and without truncation.
  size_t CountTokens(std::string_view utf8) const;
  // `utf8` cut into pieces that each fit the window (max_length tokens with
  // [CLS]/[SEP]): the whole text when it fits, else overlapping spans of it
  // split at ASCII whitespace, consecutive spans sharing about
  // `overlap_tokens` tokens. A single word longer than the window is a span
  // of its own (and is truncated when embedded).
  std::vector<std::string_view> SplitToWindows(std::string_view utf8,
                                               int overlap_tokens) const;
  // The pre-tokenized words of `utf8` after normalisation (for tests and
  // debugging).
  std::vector<std::u32string> BasicTokenize(std::string_view utf8) const;

  int vocab_size() const { return static_cast<int>(vocab_.size()); }
  const TokenizerOptions& options() const { return options_; }
  std::optional<int32_t> TokenId(std::string_view token) const;

 private:
  Tokenizer() = default;
  void AppendBasicTokens(std::u32string_view text,
                         std::vector<std::u32string>& words) const;
  void AppendWordPieces(const std::u32string& word,
                        std::vector<int32_t>& ids) const;
  // Appends the tokens of `text` (special tokens verbatim) while ids holds
  // fewer than `limit`; ids may end over `limit` by the last word's pieces.
  // Returns whether some of the text's tokens were left out.
  bool AppendTokens(std::u32string_view text, size_t limit,
                    std::vector<int32_t>& ids) const;

  TokenizerOptions options_;
  bool strip_accents_ = true;
  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t> ids_;
  int32_t cls_id_ = 0, sep_id_ = 0, unk_id_ = 0;
  // Special tokens matched verbatim in the raw text, as HF's added-token
  // splitting does.
  std::vector<std::pair<std::u32string, int32_t>> specials_;
};

// Length bucketing: indices of `lengths` grouped into batches, each sorted by
// length and holding at most `max_batch_tokens` tokens (a longer single
// sequence gets its own batch). Sequences are computed unpadded, so this bounds
// memory, not padding waste.
std::vector<std::vector<size_t>> BucketByLength(const std::vector<int>& lengths,
                                                int max_batch_tokens);

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_TOKENIZER_H_
