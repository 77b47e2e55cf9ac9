#include "embed/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "embed/testing/test_checkpoint.h"
#include "embed/unicode_tables.h"

namespace zv::embed {
namespace {

Tokenizer TinyTokenizer(bool lower = true, int max_length = 512) {
  TokenizerOptions o;
  o.do_lower_case = lower;
  o.max_length = max_length;
  auto t = Tokenizer::Create(testing::TinyVocab(), o);
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(t).value();
}

std::vector<std::string> Words(const Tokenizer& t, std::string_view text) {
  std::vector<std::string> out;
  for (const auto& w : t.BasicTokenize(text)) out.push_back(EncodeUtf8(w));
  return out;
}

std::vector<std::string> Pieces(const Tokenizer& t, std::string_view text) {
  std::vector<std::string> vocab = testing::TinyVocab();
  std::vector<std::string> out;
  for (int32_t id : t.Encode(text)) out.push_back(vocab[id]);
  return out;
}

std::vector<uint32_t> Decode(std::string_view bytes) {
  std::u32string s = DecodeUtf8Lossy(bytes);
  return std::vector<uint32_t>(s.begin(), s.end());
}

TEST(Utf8Test, DecodesLikePythonReplace) {
  // Expected values from bytes.decode("utf-8", errors="replace")
  // (CPython 3.11).
  EXPECT_EQ(Decode("\xff"), (std::vector<uint32_t>{0xFFFD}));
  EXPECT_EQ(Decode("\xe2\x82"), (std::vector<uint32_t>{0xFFFD}));
  EXPECT_EQ(Decode("\xe2\x82"
                   "A"),
            (std::vector<uint32_t>{0xFFFD, 0x41}));
  EXPECT_EQ(Decode("\xed\xa0\x80"),
            (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD}));
  EXPECT_EQ(Decode("\xf0\x9f\x98"), (std::vector<uint32_t>{0xFFFD}));
  EXPECT_EQ(Decode("\xc0\xaf"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
  EXPECT_EQ(Decode("\xf4\x90\x80\x80"), (std::vector<uint32_t>(4, 0xFFFD)));
  EXPECT_EQ(Decode("\xf0\x9f\x98\x80"), (std::vector<uint32_t>{0x1F600}));
  EXPECT_EQ(Decode("a\xe0\x80\xaf"
                   "b"),
            (std::vector<uint32_t>{0x61, 0xFFFD, 0xFFFD, 0xFFFD, 0x62}));
  EXPECT_EQ(Decode("\xf1\x80\x80"), (std::vector<uint32_t>{0xFFFD}));
}

TEST(Utf8Test, RoundTrips) {
  const std::string s = "h\xc3\xa9llo \xe4\xb8\xad \xf0\x9f\x98\x80";
  EXPECT_EQ(EncodeUtf8(DecodeUtf8Lossy(s)), s);
}

TEST(UnicodeTest, TablesAnswerKnownCodePoints) {
  using unicode::CharClass;
  EXPECT_EQ(unicode::ClassOf(U'\u00A0'), CharClass::kWhitespace);  // Zs
  EXPECT_EQ(unicode::ClassOf(U'\u200B'), CharClass::kControl);     // Cf
  EXPECT_EQ(unicode::ClassOf(U'\u2028'), CharClass::kLineSep);
  EXPECT_EQ(unicode::ClassOf(U'\u00BF'), CharClass::kPunct);  // inverted ?
  EXPECT_EQ(unicode::ClassOf(U'\u0301'), CharClass::kNonspacingMark);
  EXPECT_EQ(unicode::ClassOf(U'\u00E9'), CharClass::kOther);
  EXPECT_EQ(unicode::Nfd(U"\u00E9"), std::u32string(U"e\u0301"));
  EXPECT_EQ(unicode::Nfd(U"\u1E69"), std::u32string(U"s\u0323\u0307"));
  // Canonical ordering: dot above (230) after dot below (220).
  EXPECT_EQ(unicode::Nfd(U"s\u0307\u0323"), std::u32string(U"s\u0323\u0307"));
  EXPECT_EQ(unicode::Nfd(U"\uD55C"), std::u32string(U"\u1112\u1161\u11AB"));
  std::u32string lower;
  unicode::AppendLower(U'\u0391', lower);  // Greek Alpha
  unicode::AppendLower(U'\u0130', lower);  // I with dot above
  unicode::AppendLower(U'\u0416', lower);  // Cyrillic Zhe
  EXPECT_EQ(lower, std::u32string(U"\u03B1i\u0307\u0436"));
  EXPECT_STREQ(unicode::kUnicodeVersion, "14.0.0");
}

TEST(TokenizerTest, SplitsPunctuationAndLowercases) {
  Tokenizer t = TinyTokenizer();
  EXPECT_EQ(Words(t, "Hello, World!"),
            (std::vector<std::string>{"hello", ",", "world", "!"}));
  EXPECT_EQ(Words(t, "a$b^c"),
            (std::vector<std::string>{"a", "$", "b", "^", "c"}));
  EXPECT_EQ(Words(t, "  tabs\tand\nnewlines\r\n "),
            (std::vector<std::string>{"tabs", "and", "newlines"}));
}

TEST(TokenizerTest, StripsAccentsWhenLowercasing) {
  EXPECT_EQ(Words(TinyTokenizer(), "Café NAÏVE"),
            (std::vector<std::string>{"cafe", "naive"}));
  EXPECT_EQ(Words(TinyTokenizer(/*lower=*/false), "Café"),
            (std::vector<std::string>{"Café"}));
}

TEST(TokenizerTest, CleansControlAndInvalidBytes) {
  Tokenizer t = TinyTokenizer();
  // U+FFFD and controls vanish without splitting; zero-width space is Cf.
  EXPECT_EQ(Words(t,
                  "ab\xff"
                  "cd\x01"
                  "e\xe2\x80\x8b"
                  "f"),
            (std::vector<std::string>{"abcdef"}));
  EXPECT_EQ(Words(t, std::string("a\0b", 3)), (std::vector<std::string>{"ab"}));
}

TEST(TokenizerTest, SplitsCjkCharacters) {
  EXPECT_EQ(Words(TinyTokenizer(), "ab中国cd"),
            (std::vector<std::string>{"ab", "中", "国", "cd"}));
}

TEST(TokenizerTest, WordPieceGreedyLongestMatch) {
  Tokenizer t = TinyTokenizer();
  EXPECT_EQ(Pieces(t, "unaffable jumps"),
            (std::vector<std::string>{"[CLS]", "un", "##aff", "##able", "jump",
                                      "##s", "[SEP]"}));
  // A piece that cannot be matched makes the whole word [UNK].
  EXPECT_EQ(Pieces(t, "dog€s"),
            (std::vector<std::string>{"[CLS]", "[UNK]", "[SEP]"}));
  EXPECT_EQ(
      Pieces(t, "the 😀 dog"),
      (std::vector<std::string>{"[CLS]", "the", "[UNK]", "dog", "[SEP]"}));
}

TEST(TokenizerTest, LongWordIsUnknown) {
  Tokenizer t = TinyTokenizer();
  EXPECT_EQ(Pieces(t, std::string(100, 'a')).size(), 102u);
  EXPECT_EQ(Pieces(t, std::string(101, 'a')),
            (std::vector<std::string>{"[CLS]", "[UNK]", "[SEP]"}));
}

TEST(TokenizerTest, TruncatesToMaxLength) {
  Tokenizer t = TinyTokenizer(true, 5);
  EXPECT_EQ(
      Pieces(t, "the quick brown fox jumps over"),
      (std::vector<std::string>{"[CLS]", "the", "quick", "brown", "[SEP]"}));
  EXPECT_EQ(Pieces(t, ""), (std::vector<std::string>{"[CLS]", "[SEP]"}));
}

// Whether Encode cut tokens, with a window of four content tokens.
bool Cut(std::string_view text) {
  static const Tokenizer t = TinyTokenizer(true, 6);
  bool truncated = true;
  t.Encode(text, &truncated);
  return truncated;
}

TEST(TokenizerTest, ReportsTruncation) {
  EXPECT_FALSE(Cut(""));
  EXPECT_FALSE(Cut("the quick brown"));
  // Exactly filling the window is not a cut, whatever whitespace or control
  // characters (dropped by the basic tokenizer) follow.
  EXPECT_FALSE(Cut("the quick brown fox"));
  EXPECT_FALSE(Cut("the quick brown fox \t\n  "));
  EXPECT_FALSE(Cut("the quick brown fox \x01"));
  EXPECT_FALSE(Cut("the quick [MASK] fox"));
  // One more word, punctuation, special token or non-ASCII letter is.
  EXPECT_TRUE(Cut("the quick brown fox dog"));
  EXPECT_TRUE(Cut("the quick brown fox."));
  EXPECT_TRUE(Cut("the quick brown fox [SEP]"));
  EXPECT_TRUE(Cut("the quick brown fox \xc3\xa9"));
  EXPECT_TRUE(Cut("the quick brown [MASK] dog"));
  EXPECT_TRUE(Cut("the quick brown [MASK] \xc3\xa9"));
  EXPECT_FALSE(Cut("the quick brown [MASK] \x01 "));
  // The last word's pieces overflow the window.
  EXPECT_TRUE(Cut("the quick brown jumps"));
  EXPECT_TRUE(Cut(std::string(5000, 'a') + " " + std::string(5000, 'b') + " " +
                  std::string(5000, 'c') + " dog dog"));
  // Without the out-parameter Encode still truncates the same way.
  Tokenizer t = TinyTokenizer(true, 6);
  EXPECT_EQ(t.Encode("the quick brown jumps").size(), 6u);
}

TEST(TokenizerTest, CountsTokensWithoutWindow) {
  Tokenizer t = TinyTokenizer(true, 6);
  EXPECT_EQ(t.CountTokens(""), 0u);
  EXPECT_EQ(t.CountTokens("the quick brown jumps over the lazy dog."), 10u);
  EXPECT_EQ(t.CountTokens("dog[SEP]dog"), 3u);
}

TEST(TokenizerTest, SplitsLongTextIntoOverlappingWindows) {
  Tokenizer t = TinyTokenizer(true, 6);  // 4 content tokens
  const std::string fits = "the quick  brown fox";
  const auto one = t.SplitToWindows(fits, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].data(), fits.data());  // the text itself
  EXPECT_EQ(one[0].size(), fits.size());
  // the quick brown fox | jumps (2 pieces) over the lazy dog: 10 tokens.
  const std::string text = " the quick brown fox\njumps over  the lazy dog ";
  const auto spans = t.SplitToWindows(text, 1);
  EXPECT_EQ(std::vector<std::string>(spans.begin(), spans.end()),
            (std::vector<std::string>{"the quick brown fox", "fox\njumps over",
                                      "over  the lazy dog"}));
  for (std::string_view s : spans) {
    EXPECT_FALSE(Cut(s)) << s;
    EXPECT_GE(s.data(), text.data());  // views into the text
    EXPECT_LE(s.data() + s.size(), text.data() + text.size());
  }
  // No overlap: consecutive spans share nothing and cover every word.
  const auto plain = t.SplitToWindows(text, 0);
  EXPECT_EQ(std::vector<std::string>(plain.begin(), plain.end()),
            (std::vector<std::string>{"the quick brown fox", "jumps over  the",
                                      "lazy dog"}));
  // A word longer than the window is a span of its own (cut when embedded).
  const auto lone = t.SplitToWindows("dog dog ......... dog", 0);
  EXPECT_EQ(std::vector<std::string>(lone.begin(), lone.end()),
            (std::vector<std::string>{"dog dog", ".........", "dog"}));
}

// Random texts over a few windows: Encode says it truncated exactly when the
// text has more tokens than the window, and every span SplitToWindows makes
// of a text fits it.
TEST(TokenizerTest, TruncationAgreesWithTokenCount) {
  const std::vector<std::string> pieces = {"the",
                                           "jumps",
                                           "dog",
                                           ".",
                                           "[SEP]",
                                           "[MASK]",
                                           "\xc3\xa9",
                                           "\x01",
                                           "unaffable",
                                           "中国",
                                           std::string(120, 'x'),
                                           "naive!"};
  const std::vector<std::string> gaps = {" ", "", "\n", "  \t"};
  uint64_t state = 42;
  auto next = [&](size_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>((state >> 33) % n);
  };
  for (int max_length : {2, 3, 6, 9}) {
    Tokenizer t = TinyTokenizer(true, max_length);
    for (int round = 0; round < 400; ++round) {
      std::string text;
      for (size_t i = 0, n = next(14); i < n; ++i) {
        text += pieces[next(pieces.size())] + gaps[next(gaps.size())];
      }
      bool cut = false;
      const std::vector<int32_t> ids = t.Encode(text, &cut);
      const size_t all = t.CountTokens(text);
      EXPECT_EQ(cut, all + 2 > static_cast<size_t>(max_length)) << text;
      if (!cut) EXPECT_EQ(ids.size(), all + 2) << text;
      for (std::string_view span : t.SplitToWindows(text, max_length / 4)) {
        bool span_cut = false;
        t.Encode(span, &span_cut);
        EXPECT_TRUE(!span_cut ||
                    span.find_first_of(" \t\n\r") == std::string_view::npos)
            << "[" << span << "] of [" << text << "]";
      }
    }
  }
}

TEST(TokenizerTest, SpecialTokensInTextAreKept) {
  EXPECT_EQ(Pieces(TinyTokenizer(), "the [MASK] dog[SEP]"),
            (std::vector<std::string>{"[CLS]", "the", "[MASK]", "dog", "[SEP]",
                                      "[SEP]"}));
}

TEST(TokenizerTest, MissingSpecialTokenIsAnError) {
  auto t = Tokenizer::Create({"a", "b", "[CLS]"}, TokenizerOptions());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("[SEP]"), std::string::npos);
}

TEST(BucketTest, SortsAndBoundsTokens) {
  const std::vector<int> lengths = {10, 3, 7, 3, 20, 1};
  auto batches = BucketByLength(lengths, 12);
  std::vector<size_t> order;
  for (const auto& b : batches) {
    int tokens = 0;
    for (size_t i : b) {
      tokens += lengths[i];
      order.push_back(i);
    }
    EXPECT_TRUE(tokens <= 12 || b.size() == 1);
  }
  EXPECT_EQ(order, (std::vector<size_t>{5, 1, 3, 2, 0, 4}));
  EXPECT_EQ(batches.size(), 4u);  // {1,3,3} {7} {10} {20}
}

// --- The reference table: ids from HF transformers on the same vocab files.
// ---

std::string Base64Decode(std::string_view in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = val(c);
    if (v < 0) continue;  // '=' padding, whitespace
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

TEST(TokenizerTableTest, MatchesReferenceTokenizer) {
  const std::filesystem::path table = "tests/data/tokenizer_cases.jsonl";
  std::ifstream in(table);
  ASSERT_TRUE(in) << table << " is missing (generated on the device machine)";
  std::map<std::string, Tokenizer> tokenizers;
  int cases = 0, failures = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto c = nlohmann::json::parse(line);
    TokenizerOptions o;
    o.do_lower_case = c.value("do_lower_case", true);
    if (c.contains("strip_accents") && !c["strip_accents"].is_null()) {
      o.strip_accents = c["strip_accents"].get<bool>();
    }
    o.max_length = c.value("max_length", 512);
    const std::string vocab = c.at("vocab").get<std::string>();
    const std::string key =
        vocab + "|" + std::to_string(o.do_lower_case) + "|" +
        (o.strip_accents ? std::to_string(*o.strip_accents) : "unset") + "|" +
        std::to_string(o.max_length);
    auto it = tokenizers.find(key);
    if (it == tokenizers.end()) {
      auto t = Tokenizer::FromVocabFile(vocab, o);
      ASSERT_TRUE(t.ok()) << t.status();
      it = tokenizers.emplace(key, std::move(t).value()).first;
    }
    const std::string text = Base64Decode(c.at("text_b64").get<std::string>());
    const auto expected = c.at("ids").get<std::vector<int32_t>>();
    const std::vector<int32_t> got = it->second.Encode(text);
    ++cases;
    if (got != expected) {
      ++failures;
      std::string g, e;
      for (int32_t id : got) g += std::to_string(id) + " ";
      for (int32_t id : expected) e += std::to_string(id) + " ";
      ADD_FAILURE() << "case " << cases << " text_b64=" << c["text_b64"]
                    << "\n  got      " << g << "\n  expected " << e;
    }
  }
  std::printf("tokenizer table: %d cases, %d matched, %d failed\n", cases,
              cases - failures, failures);
  EXPECT_GE(cases, 200);
}

}  // namespace
}  // namespace zv::embed
