#include "base/u64_set.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_set>

namespace zv {
namespace {

TEST(U64SetTest, AgreesWithStdSetThroughGrowth) {
  U64Set set;
  std::unordered_set<uint64_t> reference;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    // Small keys repeat often; large ones rarely.
    const uint64_t key = i % 3 == 0 ? rng() % 5000 : rng();
    const uint64_t stored = key == 0 ? 1 : key;
    EXPECT_EQ(set.Insert(key), reference.insert(stored).second) << key;
  }
  EXPECT_EQ(set.size(), reference.size());
}

TEST(U64SetTest, SequentialKeysDoNotCluster) {
  U64Set set;
  for (uint64_t k = 1; k <= 100000; ++k) ASSERT_TRUE(set.Insert(k << 20));
  for (uint64_t k = 1; k <= 100000; ++k) ASSERT_FALSE(set.Insert(k << 20));
}

}  // namespace
}  // namespace zv
