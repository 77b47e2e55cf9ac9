// Lookups over the generated tables in unicode_tables.cc.
#include <algorithm>

#include "embed/unicode_tables.h"

namespace zv::embed::unicode {
namespace {

// Hangul syllable decomposition constants (Unicode ch. 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161,
                   kTBase = 0x11A7;
constexpr int kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
              kSCount = 11172;

uint8_t FindRange(const ClassRange* ranges, size_t n, char32_t c) {
  const ClassRange* end = ranges + n;
  const ClassRange* it = std::upper_bound(
      ranges, end, static_cast<uint32_t>(c),
      [](uint32_t v, const ClassRange& r) { return v < r.first; });
  if (it == ranges) return 0;
  --it;
  return c <= it->last ? it->value : 0;
}

}  // namespace

CharClass ClassOf(char32_t c) {
  if (c < 0x80) {  // fast path for ASCII
    if (c == '\t' || c == '\n' || c == '\r' || c == ' ')
      return CharClass::kWhitespace;
    if (c < 0x20 || c == 0x7F) return CharClass::kControl;
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
        (c >= 123 && c <= 126))
      return CharClass::kPunct;
    return CharClass::kOther;
  }
  return static_cast<CharClass>(
      FindRange(kCharClassRanges, kCharClassRangeCount, c));
}

void AppendLower(char32_t c, std::u32string& out) {
  if (c < 0x80) {
    out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  if (c == 0x130) {  // the one multi-code-point lowercase mapping
    out.push_back(U'i');
    out.push_back(0x307);
    return;
  }
  const CodePointPair* end = kLowerMap + kLowerMapCount;
  const CodePointPair* it = std::lower_bound(
      kLowerMap, end, static_cast<uint32_t>(c),
      [](const CodePointPair& p, uint32_t v) { return p.from < v; });
  out.push_back(it != end && it->from == c ? it->to : c);
}

void AppendDecomposed(char32_t c, std::u32string& out) {
  if (c < 0xC0) {
    out.push_back(c);
    return;
  }
  if (c >= kSBase && c < kSBase + kSCount) {
    const int s = c - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const DecompEntry* end = kDecomp + kDecompCount;
  const DecompEntry* it = std::lower_bound(
      kDecomp, end, static_cast<uint32_t>(c),
      [](const DecompEntry& e, uint32_t v) { return e.code_point < v; });
  if (it == end || it->code_point != c) {
    out.push_back(c);
    return;
  }
  out.append(kDecompPool + it->offset, it->length);
}

uint8_t CombiningClass(char32_t c) {
  if (c < 0x300) return 0;
  return FindRange(kCccRanges, kCccRangeCount, c);
}

std::u32string Nfd(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendDecomposed(c, out);
  // Canonical ordering: stable sort of each run of non-starters by combining
  // class.
  for (size_t i = 0; i < out.size();) {
    if (CombiningClass(out[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < out.size() && CombiningClass(out[j]) != 0) ++j;
    if (j - i > 1) {
      std::stable_sort(out.begin() + i, out.begin() + j,
                       [](char32_t a, char32_t b) {
                         return CombiningClass(a) < CombiningClass(b);
                       });
    }
    i = j;
  }
  return out;
}

}  // namespace zv::embed::unicode
