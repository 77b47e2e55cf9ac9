#include "index/text_rules.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace zv::index {
namespace {

TEST(TextRulesTest, Utf8) {
  for (const char* ok : {"", "plain", "caf\xc3\xa9", "\xe2\x82\xac 5",
                         "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf"}) {
    EXPECT_TRUE(CheckUtf8(ok).ok()) << ok;
  }
  struct Bad {
    std::string s;
    int byte;
  };
  for (const Bad& b :
       std::vector<Bad>{{"\xff", 0},
                        {"ab\x80", 2},            // stray continuation byte
                        {"caf\xc3", 3},           // truncated sequence
                        {"\xc0\xaf", 0},          // overlong '/'
                        {"x\xed\xa0\x80", 1},     // UTF-16 surrogate
                        {"\xf4\x90\x80\x80", 0},  // past U+10FFFF
                        {std::string("a\0\xfe", 3), 2}}) {
    Status s = CheckUtf8(b.s);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "not valid UTF-8 (byte " + std::to_string(b.byte) + ")");
  }
}

TEST(TextRulesTest, Blank) {
  EXPECT_TRUE(IsBlank(""));
  EXPECT_TRUE(IsBlank(" \t\r\n"));
  EXPECT_FALSE(IsBlank(" a "));
}

TEST(TextRulesTest, VectorValues) {
  EXPECT_TRUE(CheckVectorValues(std::vector<float>{1, -2, 3e18f}).ok());
  Status s = CheckVectorValues(std::vector<float>{1, 3e38f});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("squared norm 9e+76 is over the limit 8.51e+37"),
            std::string::npos)
      << s.message();
  // Each value small, the sum of squares too big.
  EXPECT_FALSE(CheckVectorValues(std::vector<float>(256, 1e19f)).ok());
  s = CheckVectorValues(
      std::vector<float>{0, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_EQ(s.message(), "[1] is not finite (NaN or Inf)");
}

}  // namespace
}  // namespace zv::index
