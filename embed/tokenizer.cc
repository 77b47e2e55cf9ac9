#include "embed/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <numeric>

#include "embed/unicode_tables.h"

namespace zv::embed {
namespace {

using unicode::CharClass;

constexpr char32_t kReplacement = 0xFFFD;

bool IsCjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace

std::u32string DecodeUtf8Lossy(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = p[i];
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    // Unicode Table 3-7: sequence length and the valid range of the second
    // byte.
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {  // 80..C1, F5..FF: never valid as a first byte
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    char32_t cp = b & (0xFF >> (len + 1));
    size_t j = i + 1;
    bool ok = true;
    for (int k = 1; k < len; ++k, ++j) {
      const unsigned char lo_k = k == 1 ? lo : 0x80, hi_k = k == 1 ? hi : 0xBF;
      if (j >= n || p[j] < lo_k || p[j] > hi_k) {
        ok = false;
        break;
      }
      cp = (cp << 6) | (p[j] & 0x3F);
    }
    // A truncated sequence is one maximal subpart: one U+FFFD, resume at the
    // byte that broke it.
    out.push_back(ok ? cp : kReplacement);
    i = j;
  }
  return out;
}

std::string EncodeUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

StatusOr<Tokenizer> Tokenizer::Create(std::vector<std::string> vocab,
                                      const TokenizerOptions& options) {
  if (options.max_length < 2) {
    return InvalidArgumentError("tokenizer: max_length must be >= 2, got " +
                                std::to_string(options.max_length));
  }
  Tokenizer t;
  t.options_ = options;
  t.strip_accents_ = options.strip_accents.value_or(options.do_lower_case);
  t.vocab_ = std::move(vocab);
  t.ids_.reserve(t.vocab_.size());
  for (size_t i = 0; i < t.vocab_.size(); ++i) {
    t.ids_[t.vocab_[i]] =
        static_cast<int32_t>(i);  // a duplicate keeps the last id
  }
  for (const char* name : {"[CLS]", "[SEP]", "[UNK]"}) {
    if (!t.ids_.count(name)) {
      return InvalidArgumentError(
          std::string("vocab.txt: missing special token ") + name);
    }
  }
  t.cls_id_ = t.ids_["[CLS]"];
  t.sep_id_ = t.ids_["[SEP]"];
  t.unk_id_ = t.ids_["[UNK]"];
  for (const char* name : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    auto it = t.ids_.find(name);
    if (it != t.ids_.end()) {
      std::string_view v(name);
      t.specials_.emplace_back(std::u32string(v.begin(), v.end()), it->second);
    }
  }
  return t;
}

StatusOr<Tokenizer> Tokenizer::FromVocabFile(
    const std::filesystem::path& vocab_txt, const TokenizerOptions& options) {
  std::ifstream in(vocab_txt, std::ios::binary);
  if (!in)
    return NotFoundError(vocab_txt.string() + ": cannot open vocabulary");
  std::vector<std::string> vocab;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) {
      line.pop_back();
    }
    vocab.push_back(std::move(line));
  }
  if (vocab.empty())
    return InvalidArgumentError(vocab_txt.string() + ": empty");
  auto t = Create(std::move(vocab), options);
  if (!t.ok()) return t.status().WithContext(vocab_txt.string());
  return t;
}

std::optional<int32_t> Tokenizer::TokenId(std::string_view token) const {
  auto it = ids_.find(std::string(token));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

// HF tokenizers' BertNormalizer then BertPreTokenizer: clean, space out CJK,
// strip accents (NFD minus Mn), lowercase, split on whitespace and punctuation.
void Tokenizer::AppendBasicTokens(std::u32string_view text,
                                  std::vector<std::u32string>& words) const {
  std::u32string norm;
  norm.reserve(text.size());
  for (char32_t c : text) {
    if (c == 0 || c == kReplacement) continue;
    const CharClass cls = unicode::ClassOf(c);
    if (cls == CharClass::kControl) continue;
    if (cls == CharClass::kWhitespace || cls == CharClass::kLineSep) {
      norm.push_back(U' ');
    } else if (options_.tokenize_chinese_chars && IsCjk(c)) {
      norm.push_back(U' ');
      norm.push_back(c);
      norm.push_back(U' ');
    } else {
      norm.push_back(c);
    }
  }
  if (strip_accents_) {
    std::u32string nfd = unicode::Nfd(norm);
    norm.clear();
    for (char32_t c : nfd) {
      if (unicode::ClassOf(c) != CharClass::kNonspacingMark) norm.push_back(c);
    }
  }
  if (options_.do_lower_case) {
    std::u32string lower;
    lower.reserve(norm.size());
    for (char32_t c : norm) unicode::AppendLower(c, lower);
    norm.swap(lower);
  }
  std::u32string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (char32_t c : norm) {
    const CharClass cls = unicode::ClassOf(c);
    if (cls == CharClass::kWhitespace || cls == CharClass::kLineSep) {
      flush();
    } else if (cls == CharClass::kPunct) {
      flush();
      words.emplace_back(1, c);
    } else {
      word.push_back(c);
    }
  }
  flush();
}

void Tokenizer::AppendWordPieces(const std::u32string& word,
                                 std::vector<int32_t>& ids) const {
  const size_t n = word.size();
  if (n > static_cast<size_t>(options_.max_input_chars_per_word)) {
    ids.push_back(unk_id_);
    return;
  }
  // Byte offset of each code point, so candidate pieces are substrings of one
  // string.
  const std::string utf8 = EncodeUtf8(word);
  std::vector<size_t> offset(n + 1, 0);
  for (size_t i = 0, b = 0; i < n; ++i) {
    offset[i] = b;
    const char32_t c = word[i];
    b += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    offset[i + 1] = b;
  }
  const size_t first_piece = ids.size();
  std::string key;
  for (size_t start = 0; start < n;) {
    size_t end = n;
    int32_t found = -1;
    for (; end > start; --end) {
      key.assign(start > 0 ? "##" : "");
      key.append(utf8, offset[start], offset[end] - offset[start]);
      auto it = ids_.find(key);
      if (it != ids_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {  // any unmatchable piece makes the whole word [UNK]
      ids.resize(first_piece);
      ids.push_back(unk_id_);
      return;
    }
    ids.push_back(found);
    start = end;
  }
}

std::vector<std::u32string> Tokenizer::BasicTokenize(
    std::string_view utf8) const {
  std::vector<std::u32string> words;
  AppendBasicTokens(DecodeUtf8Lossy(utf8), words);
  return words;
}

bool Tokenizer::AppendTokens(std::u32string_view text, size_t limit,
                             std::vector<int32_t>& ids) const {
  std::vector<std::u32string> words;
  // False when the window filled up before the span's last word.
  auto encode_span = [&](std::u32string_view span) {
    words.clear();
    AppendBasicTokens(span, words);
    for (const auto& w : words) {
      if (ids.size() >= limit) return false;
      AppendWordPieces(w, ids);
    }
    return true;
  };
  // Special tokens in the raw text are taken verbatim (leftmost, then longest).
  size_t pos = 0, text_start = 0;
  while (pos < text.size() && ids.size() < limit) {
    int32_t special = -1;
    size_t special_len = 0;
    if (text[pos] == U'[') {
      for (const auto& [token, id] : specials_) {
        if (token.size() > special_len &&
            text.substr(pos, token.size()) == token) {
          special = id;
          special_len = token.size();
        }
      }
    }
    if (special < 0) {
      ++pos;
      continue;
    }
    if (!encode_span(text.substr(text_start, pos - text_start))) return true;
    if (ids.size() >= limit) return true;  // no room for the special token
    ids.push_back(special);
    pos += special_len;
    text_start = pos;
  }
  if (ids.size() < limit) return !encode_span(text.substr(text_start));
  // The window is full: were there tokens left? ASCII letters, digits and
  // punctuation always make one; anything else takes the basic tokenizer.
  const std::u32string_view rest = text.substr(text_start);
  for (char32_t c : rest) {
    if (c >= 0x80) break;
    if (std::isalnum(static_cast<int>(c)) || std::ispunct(static_cast<int>(c)))
      return true;
  }
  words.clear();
  AppendBasicTokens(rest, words);
  return !words.empty();
}

std::vector<int32_t> Tokenizer::Encode(std::string_view utf8,
                                       bool* truncated) const {
  const std::u32string text = DecodeUtf8Lossy(utf8);
  const size_t limit = static_cast<size_t>(options_.max_length) - 1;  // + [SEP]
  std::vector<int32_t> ids;
  ids.push_back(cls_id_);
  bool cut = AppendTokens(text, limit, ids);
  if (ids.size() > limit) {
    ids.resize(limit);
    cut = true;
  }
  ids.push_back(sep_id_);
  if (truncated) *truncated = cut;
  return ids;
}

size_t Tokenizer::CountTokens(std::string_view utf8) const {
  std::vector<int32_t> ids;
  AppendTokens(DecodeUtf8Lossy(utf8), SIZE_MAX, ids);
  return ids.size();
}

std::vector<std::string_view> Tokenizer::SplitToWindows(
    std::string_view utf8, int overlap_tokens) const {
  bool cut = false;
  Encode(utf8, &cut);
  if (!cut) return {utf8};
  // Words are runs between the whitespace the basic tokenizer splits at (no
  // token spans it, so a text's tokens are its words' tokens). \v and \f are
  // control characters there, dropped rather than split at.
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  };
  struct Word {
    size_t begin, end, tokens;
  };
  std::vector<Word> words;
  for (size_t i = 0; i < utf8.size();) {
    while (i < utf8.size() && space(utf8[i])) ++i;
    size_t j = i;
    while (j < utf8.size() && !space(utf8[j])) ++j;
    if (j > i) words.push_back({i, j, CountTokens(utf8.substr(i, j - i))});
    i = j;
  }
  const size_t budget = static_cast<size_t>(options_.max_length) - 2;
  const size_t overlap = static_cast<size_t>(std::max(0, overlap_tokens));
  std::vector<std::string_view> spans;
  for (size_t start = 0; start < words.size();) {
    size_t end = start, tokens = 0;
    while (end < words.size() &&
           (end == start || tokens + words[end].tokens <= budget)) {
      tokens += words[end++].tokens;
    }
    spans.push_back(utf8.substr(words[start].begin,
                                words[end - 1].end - words[start].begin));
    if (end == words.size()) break;
    // The next span repeats the last words of this one, about `overlap`
    // tokens, and always moves on by at least one word.
    size_t next = end, shared = 0;
    while (next > start + 1 && shared + words[next - 1].tokens <= overlap) {
      shared += words[--next].tokens;
    }
    start = next;
  }
  return spans;
}

std::vector<std::vector<size_t>> BucketByLength(const std::vector<int>& lengths,
                                                int max_batch_tokens) {
  std::vector<size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return lengths[a] < lengths[b]; });
  std::vector<std::vector<size_t>> batches;
  long tokens = 0;
  for (size_t i : order) {
    if (batches.empty() || tokens + lengths[i] > max_batch_tokens) {
      batches.emplace_back();
      tokens = 0;
    }
    batches.back().push_back(i);
    tokens += lengths[i];
  }
  return batches;
}

}  // namespace zv::embed
