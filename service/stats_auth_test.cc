#include <gtest/gtest.h>

#include "service/auth.h"
#include "service/stats.h"

namespace zv::service {
namespace {

TEST(OpStatsRecorderTest, PercentilesOverReservoir) {
  OpStatsRecorder stats(/*reservoir=*/100);
  for (int i = 1; i <= 100; ++i)
    stats.Record(std::chrono::microseconds(i), i % 10 != 0);
  OpSnapshot s = stats.Snapshot();
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.errors, 10u);
  EXPECT_NEAR(s.p50_us, 50, 0.5);
  EXPECT_NEAR(s.p95_us, 95, 0.5);
  EXPECT_NEAR(s.p99_us, 99, 0.5);
  // The reservoir keeps only the latest 100 samples.
  for (int i = 0; i < 100; ++i)
    stats.Record(std::chrono::microseconds(1000), true);
  s = stats.Snapshot();
  EXPECT_EQ(s.count, 200u);
  EXPECT_NEAR(s.p50_us, 1000, 0.5);
}

TEST(OpStatsRecorderTest, EmptyIsZero) {
  OpStatsRecorder stats;
  EXPECT_EQ(stats.Snapshot().p99_us, 0);
}

TEST(BearerAuthTest, ChecksExactHeader) {
  BearerAuth off(std::nullopt);
  EXPECT_TRUE(off.Check(""));
  BearerAuth on(std::string("tok"));
  EXPECT_TRUE(on.Check("Bearer tok"));
  EXPECT_FALSE(on.Check("Bearer to"));
  EXPECT_FALSE(on.Check("Bearer tok2"));
  EXPECT_FALSE(on.Check("bearer tok"));
  EXPECT_FALSE(on.Check(""));
}

TEST(ConstantTimeEqualsTest, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

}  // namespace
}  // namespace zv::service
