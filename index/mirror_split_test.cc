// The stripe arithmetic of a mirror split over several GPUs and the host merge
// of the parts' top-k lists (index/mirror_split.h), on the CPU: what the GPU
// split relies on to give the unsplit mirror's answers.
#include "index/mirror_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace zv::index {
namespace {

TEST(StripeLayoutTest, RowsMapOneToOneAndBack) {
  for (int parts : {1, 2, 3, 8}) {
    const StripeLayout layout(parts, 128);
    const uint64_t total = 128 * 7 * parts + 77;
    std::vector<uint64_t> next_local(parts, 0);
    for (uint64_t r = 0; r < total; ++r) {
      const int p = layout.PartOf(r);
      ASSERT_LT(p, parts);
      // Appends in global order land in order on each part.
      ASSERT_EQ(layout.LocalRow(r), next_local[p]) << "row " << r;
      ++next_local[p];
      ASSERT_EQ(layout.GlobalRow(p, layout.LocalRow(r)), r);
    }
    for (int p = 0; p < parts; ++p) {
      EXPECT_EQ(layout.RowsIn(p, total), next_local[p]) << parts << "/" << p;
    }
  }
}

TEST(StripeLayoutTest, OnePartIsTheIdentity) {
  const StripeLayout layout(1, kDefaultStripeRows);
  for (uint64_t r : {0ull, 1ull, 65535ull, 65536ull, 1000000ull}) {
    EXPECT_EQ(layout.PartOf(r), 0);
    EXPECT_EQ(layout.LocalRow(r), r);
    EXPECT_EQ(layout.RowsIn(0, r), r);
  }
}

TEST(StripeLayoutTest, AppendsStayBalanced) {
  const StripeLayout layout(4, kDefaultStripeRows);
  for (uint64_t total : {0ull, 1ull, 65536ull, 300000ull, 10000000ull}) {
    uint64_t lo = ~0ull, hi = 0, sum = 0;
    for (int p = 0; p < 4; ++p) {
      const uint64_t n = layout.RowsIn(p, total);
      lo = std::min(lo, n);
      hi = std::max(hi, n);
      sum += n;
    }
    EXPECT_EQ(sum, total);
    EXPECT_LE(hi - lo, kDefaultStripeRows);
  }
}

TEST(StripeLayoutTest, PartWordsHoldEachPartsBits) {
  std::mt19937_64 rng(7);
  for (int parts : {1, 2, 3}) {
    const StripeLayout layout(parts, 64 * 3);
    for (uint64_t total : {1ull, 191ull, 192ull, 1000ull, 5000ull}) {
      std::vector<uint64_t> words((total + 63) / 64);
      for (auto& w : words) w = rng();
      if (total % 64) words.back() &= (1ull << (total % 64)) - 1;
      for (int p = 0; p < parts; ++p) {
        const std::vector<uint64_t> local =
            layout.PartWords(words.data(), total, p);
        const uint64_t n = layout.RowsIn(p, total);
        ASSERT_EQ(local.size(), (n + 63) / 64);
        for (uint64_t l = 0; l < local.size() * 64; ++l) {
          const bool got = (local[l >> 6] >> (l & 63)) & 1;
          if (l >= n) {
            ASSERT_FALSE(got) << "bit past the part's rows: " << l;
            continue;
          }
          const uint64_t g = layout.GlobalRow(p, l);
          ASSERT_EQ(got, bool((words[g >> 6] >> (g & 63)) & 1))
              << parts << " parts, total " << total << ", row " << g;
        }
      }
    }
  }
}

// The parts' lists, merged, equal the top-k of all their entries together:
// scores best first, ties and short lists included, for both metrics.
TEST(MergePartTopsTest, EqualsTheTopOfTheUnion) {
  std::mt19937 rng(11);
  for (shm::Metric metric : {shm::Metric::kInnerProduct, shm::Metric::kL2}) {
    const bool ip = metric == shm::Metric::kInnerProduct;
    const size_t nq = 5;
    const int k = 10;
    const StripeLayout layout(3, 64);
    std::vector<TopK> parts;
    std::vector<std::vector<std::pair<float, int64_t>>> all(nq);
    for (int p = 0; p < 3; ++p) {
      TopK t(nq, k, metric);
      for (size_t q = 0; q < nq; ++q) {
        // Part 2 of query 1 has only 3 hits (a filter), part 1 of query 4 none.
        const int filled = (p == 2 && q == 1) ? 3 : (p == 1 && q == 4) ? 0 : k;
        std::vector<std::pair<float, int64_t>> hits;
        for (int j = 0; j < filled; ++j) {
          const float score =
              std::uniform_int_distribution<int>(0, 40)(rng) / 8.0f;
          hits.emplace_back(score, j * 5 + q);  // local rows
        }
        std::sort(hits.begin(), hits.end(), [&](const auto& a, const auto& b) {
          return ip ? a.first > b.first : a.first < b.first;
        });
        for (int j = 0; j < filled; ++j) {
          t.dist[q * k + j] = hits[j].first;
          t.rows[q * k + j] = hits[j].second;
          all[q].emplace_back(hits[j].first,
                              layout.GlobalRow(p, hits[j].second));
        }
      }
      layout.ToGlobalRows(p, t.rows.data(), t.rows.size());
      parts.push_back(std::move(t));
    }
    std::vector<const TopK*> ptrs;
    for (const TopK& t : parts) ptrs.push_back(&t);
    TopK merged(nq, k, metric);
    MergePartTops(ptrs, &merged);
    for (size_t q = 0; q < nq; ++q) {
      std::vector<float> want;
      for (const auto& h : all[q]) want.push_back(h.first);
      std::sort(want.begin(), want.end(),
                [&](float a, float b) { return ip ? a > b : a < b; });
      want.resize(std::min<size_t>(want.size(), k));
      ASSERT_EQ(merged.Filled(q), static_cast<int>(want.size()));
      for (size_t j = 0; j < want.size(); ++j) {
        EXPECT_EQ(merged.dist[q * k + j], want[j]) << "q " << q << " j " << j;
        // Every row comes from the union, with its own score.
        const int64_t row = merged.rows[q * k + j];
        EXPECT_TRUE(std::find(all[q].begin(), all[q].end(),
                              std::make_pair(merged.dist[q * k + j], row)) !=
                    all[q].end());
      }
      for (int j = static_cast<int>(want.size()); j < k; ++j) {
        EXPECT_EQ(merged.rows[q * k + j], -1);
      }
    }
  }
}

}  // namespace
}  // namespace zv::index
