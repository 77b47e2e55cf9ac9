// A collection's GPU mirror split over several devices (issue 19) answers as
// the unsplit mirror does. Run on one GPU by splitting over cuda:0,cuda:0 (two
// parts, each its own GpuMirror and budget, on the same card): the same top-k
// ids and scores for single queries (scan kernel) and batches (GEMM path),
// with filters, after replacements, deletes, appends past a part's room and a
// compaction. Stripes of 1,600 rows over extents of 4,096 rows, so stripes
// and extents cut each other. Skips without a CUDA build or device (CI).
//   bazel test --config=cuda //index:gpu_split_test   (on a GPU host), or
//   bin/run-test gpu_split_test                        (from a bundle)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpusearch/gpu_search.h"
#include "index/collection.h"
#include "index/test_util.h"

namespace zv::index {
namespace {

using testing::MakeTempDir;
using testing::RandomVectors;

constexpr uint32_t kDim = 64;
// Over the searcher's selective-filter limit (4,096 matching rows, which a
// CPU scan answers), so filtered searches run on the GPU too.
constexpr int kRows = 20000;
constexpr uint64_t kStripe = 1600;
constexpr uint64_t kBudget = 8ull << 30;  // per part (search scratch: ~2.4 GB)

#define SKIP_WITHOUT_GPU()                                          \
  if (!gpusearch::BuiltWithCuda() || gpusearch::DeviceCount() == 0) \
  GTEST_SKIP() << "no CUDA build or device"

std::vector<Record> Records(int first, int n) {
  std::vector<Record> recs(n);
  for (int i = 0; i < n; ++i) {
    recs[i].id = "v" + std::to_string(first + i);
    recs[i].ns = (first + i) % 2 ? "a" : "b";
    recs[i].metadata = {{"color", std::to_string((first + i) % 3)}};
  }
  return recs;
}

struct Db {
  std::unique_ptr<Database> db;
  std::shared_ptr<Collection> coll;
  std::vector<std::string> log;
};

Db Open(std::vector<int> devices, shm::Metric metric) {
  Db d;
  DatabaseOptions o;
  o.gpu.enabled = true;
  o.gpu.devices = std::move(devices);
  o.gpu.memory_bytes = kBudget;
  o.gpu.stripe_rows = kStripe;
  o.gpu.log = [&log = d.log](const std::string& line) { log.push_back(line); };
  auto db = Database::Open(MakeTempDir("gpu_split"), o);
  EXPECT_TRUE(db.ok()) << db.status();
  d.db = std::move(db).value();
  CollectionOptions co;
  co.dim = kDim;
  co.metric = metric;
  co.index.descriptor = "Flat";
  co.rows_per_extent = 4096;
  auto c = d.db->CreateCollection("c", co);
  EXPECT_TRUE(c.ok()) << c.status();
  d.coll = *c;
  return d;
}

void Upsert(Db& d, int first, int n, uint64_t seed) {
  const std::vector<float> v = RandomVectors(n, kDim, seed, true);
  for (int b = 0; b < n; b += 1000) {
    const int m = std::min(1000, n - b);
    ASSERT_TRUE(d.coll
                    ->Upsert(Records(first + b, m),
                             std::span(v).subspan(b * kDim, m * kDim))
                    .ok());
  }
}

// Both collections answer every query alike (ids, and scores within 1e-4).
void ExpectSameAnswers(const Db& whole, const Db& split, size_t nq, int k,
                       const Filter& filter, const std::string& what) {
  const std::vector<float> q = RandomVectors(nq, kDim, 1000 + nq + k, true);
  SearchOptions so;
  so.k = k;
  so.filter = filter;
  const uint64_t before = split.coll->Describe().gpu_searches;
  auto a = whole.coll->Search(q, so);
  auto b = split.coll->Search(q, so);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT(split.coll->Describe().gpu_searches, before)
      << what << ": the split mirror did not answer";
  ASSERT_EQ(a->size(), nq);
  ASSERT_EQ(b->size(), nq);
  for (size_t i = 0; i < nq; ++i) {
    ASSERT_EQ((*a)[i].size(), (*b)[i].size()) << what << " query " << i;
    for (size_t j = 0; j < (*a)[i].size(); ++j) {
      EXPECT_EQ((*a)[i][j].id, (*b)[i][j].id)
          << what << " query " << i << " rank " << j;
      EXPECT_NEAR((*a)[i][j].score, (*b)[i][j].score, 1e-4)
          << what << " query " << i << " rank " << j;
    }
  }
}

void ExpectSameEverywhere(const Db& whole, const Db& split,
                          const std::string& when) {
  Filter none, ns, color;
  ns.ns = "a";
  color.metadata_equals = {{"color", "1"}};
  for (size_t nq : {1, 20}) {  // the scan kernel and the GEMM path
    for (int k : {10, 100}) {
      const std::string at =
          when + ", nq " + std::to_string(nq) + ", k " + std::to_string(k);
      ExpectSameAnswers(whole, split, nq, k, none, at);
      ExpectSameAnswers(whole, split, nq, k, ns, at + ", namespace filter");
      ExpectSameAnswers(whole, split, nq, k, color, at + ", metadata filter");
    }
  }
}

class GpuSplitTest : public ::testing::TestWithParam<shm::Metric> {};

TEST_P(GpuSplitTest, SplitAnswersAsTheUnsplitMirror) {
  SKIP_WITHOUT_GPU();
  Db whole = Open({0}, GetParam());
  Db split = Open({0, 0}, GetParam());
  for (Db* d : {&whole, &split}) Upsert(*d, 0, kRows, 7);
  ASSERT_TRUE(whole.coll->Describe().gpu_mirrored);
  ASSERT_TRUE(split.coll->Describe().gpu_mirrored);
  bool said_split = false;
  for (const auto& line : split.log) {
    said_split |=
        line.find("split over 2 GPUs in stripes of 1600") != std::string::npos;
  }
  EXPECT_TRUE(said_split) << "log: " << ::testing::PrintToString(split.log);
  ExpectSameEverywhere(whole, split, "after the first upserts");

  // Replacements (tombstones on both parts), deletes, and appends.
  std::vector<std::string> gone;
  for (int i = 0; i < kRows; i += 37) gone.push_back("v" + std::to_string(i));
  for (Db* d : {&whole, &split}) {
    Upsert(*d, 5000, 3000, 8);  // replaces v5000..v7999
    auto deleted = d->coll->Delete(gone);
    ASSERT_TRUE(deleted.ok()) << deleted.status();
    EXPECT_EQ(*deleted, gone.size());
    Upsert(*d, kRows, 7000, 9);  // new rows, several stripes
    for (int i = 0; i < 50; ++i)
      Upsert(*d, 40000 + i, 1, 100 + i);  // one by one
  }
  ASSERT_TRUE(split.coll->Describe().gpu_mirrored);
  ASSERT_EQ(whole.coll->Describe().live_rows, split.coll->Describe().live_rows);
  ExpectSameEverywhere(whole, split, "after replacements, deletes, appends");

  // A compaction rebuilds the split mirror from the new generation.
  for (Db* d : {&whole, &split}) {
    auto compacted = d->coll->Compact();
    ASSERT_TRUE(compacted.ok()) << compacted.status();
  }
  ASSERT_TRUE(split.coll->Describe().gpu_mirrored);
  ExpectSameEverywhere(whole, split, "after a compaction");
}

INSTANTIATE_TEST_SUITE_P(Metrics, GpuSplitTest,
                         ::testing::Values(shm::Metric::kInnerProduct,
                                           shm::Metric::kL2));

}  // namespace
}  // namespace zv::index
