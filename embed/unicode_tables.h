// Unicode data for the BERT tokenizer (generated tables + lookups).
// embed/-internal.
#ifndef ZEROVEC_EMBED_UNICODE_TABLES_H_
#define ZEROVEC_EMBED_UNICODE_TABLES_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace zv::embed::unicode {

// Tokenizer-relevant class of a code point. kControl wins over kWhitespace
// except for \t \n \r (as in BERT's _clean_text); kPunct includes all ASCII
// punctuation ranges.
enum class CharClass : uint8_t {
  kOther = 0,
  kControl = 1,     // general category C* (Cc Cf Cn Co Cs), minus \t \n \r
  kWhitespace = 2,  // \t \n \r space and Zs
  kLineSep = 3,  // Zl Zp: whitespace for HF tokenizers (Rust), not for Python's
  kPunct = 4,    // P* and ASCII 33-47, 58-64, 91-96, 123-126
  kNonspacingMark = 5,  // Mn: removed by accent stripping
};

struct ClassRange {
  uint32_t first;
  uint32_t last;
  uint8_t value;
};
struct CodePointPair {
  uint32_t from;
  uint32_t to;
};
struct DecompEntry {
  uint32_t code_point;
  uint16_t offset;  // into kDecompPool
  uint8_t length;
};

extern const char kUnicodeVersion[];
extern const ClassRange kCharClassRanges[];
extern const size_t kCharClassRangeCount;
extern const CodePointPair kLowerMap[];
extern const size_t kLowerMapCount;
extern const char32_t kDecompPool[];
extern const DecompEntry kDecomp[];
extern const size_t kDecompCount;
extern const ClassRange kCccRanges[];
extern const size_t kCccRangeCount;

CharClass ClassOf(char32_t c);
// Appends the full lowercase mapping of c (one code point, or two for U+0130).
void AppendLower(char32_t c, std::u32string& out);
// Appends the full canonical decomposition of c (Hangul included), unordered.
void AppendDecomposed(char32_t c, std::u32string& out);
uint8_t CombiningClass(char32_t c);
// NFD of s: decomposition followed by canonical ordering of combining marks.
std::u32string Nfd(const std::u32string& s);

}  // namespace zv::embed::unicode

#endif  // ZEROVEC_EMBED_UNICODE_TABLES_H_
