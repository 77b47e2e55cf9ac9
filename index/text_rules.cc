#include "index/text_rules.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace zv::index {

Status CheckUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are
    // invalid too (protobuf rejects them as well).
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10FFFF &&
         !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      return InvalidArgumentError("not valid UTF-8 (byte " + std::to_string(i) +
                                  ")");
    }
    i += len;
  }
  return OkStatus();
}

bool IsBlank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

Status CheckVectorValues(std::span<const float> values) {
  double norm2 = 0;
  for (size_t j = 0; j < values.size(); ++j) {
    if (!std::isfinite(values[j])) {
      return InvalidArgumentError("[" + std::to_string(j) +
                                  "] is not finite (NaN or Inf)");
    }
    norm2 += double{values[j]} * values[j];
  }
  if (!(norm2 <= kMaxSquaredNorm)) {
    char msg[160];
    std::snprintf(msg, sizeof(msg),
                  "squared norm %.3g is over the limit %.3g: scores would "
                  "overflow to inf (scale the vector down)",
                  norm2, kMaxSquaredNorm);
    return InvalidArgumentError(msg);
  }
  return OkStatus();
}

}  // namespace zv::index
