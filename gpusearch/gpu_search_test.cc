// GpuMirror against a CPU brute force (double precision) on random data. Skips
// where there is no CUDA build or device (CI); the fallback test runs there.
#include "gpusearch/gpu_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#ifdef ZEROVEC_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace zv::gpusearch {
namespace {

constexpr uint32_t kDim = 40;
constexpr uint32_t kStride = 48;  // zero padding, as in the segment

bool HaveGpu() { return BuiltWithCuda() && DeviceCount() > 0; }

// n rows of kStride floats (padding zero); unit length for IP.
std::vector<float> RandomRows(size_t n, shm::Metric metric, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n * kStride, 0.f);
  for (size_t r = 0; r < n; ++r) {
    float* x = &v[r * kStride];
    double norm = 0;
    for (uint32_t d = 0; d < kDim; ++d) {
      x[d] = normal(rng);
      norm += double(x[d]) * x[d];
    }
    const float scale = metric == shm::Metric::kInnerProduct
                            ? float(1 / std::sqrt(norm))
                            : 0.5f;
    for (uint32_t d = 0; d < kDim; ++d) x[d] *= scale;
  }
  return v;
}

struct Result {
  std::vector<float> dist;
  std::vector<int64_t> rows;
};

double Score(const float* a, const float* b, shm::Metric m) {
  double s = 0;
  for (uint32_t d = 0; d < kStride; ++d) {
    s += m == shm::Metric::kL2 ? (double(a[d]) - b[d]) * (double(a[d]) - b[d])
                               : double(a[d]) * b[d];
  }
  return s;
}

Result BruteForce(const std::vector<float>& data, shm::Metric m,
                  const std::vector<float>& queries, size_t nq, int k,
                  const std::function<bool(size_t)>& live) {
  const size_t n = data.size() / kStride;
  const bool ip = m == shm::Metric::kInnerProduct;
  Result r{std::vector<float>(nq * k, ip ? -INFINITY : INFINITY),
           std::vector<int64_t>(nq * k, -1)};
  for (size_t q = 0; q < nq; ++q) {
    std::vector<std::pair<double, int64_t>> all;
    for (size_t i = 0; i < n; ++i) {
      if (!live(i)) continue;
      const double s = Score(&data[i * kStride], &queries[q * kStride], m);
      all.emplace_back(ip ? -s : s, int64_t(i));
    }
    const size_t top = std::min<size_t>(k, all.size());
    std::partial_sort(all.begin(), all.begin() + top, all.end());
    for (size_t i = 0; i < top; ++i) {
      r.dist[q * k + i] = float(ip ? -all[i].first : all[i].first);
      r.rows[q * k + i] = all[i].second;
    }
  }
  return r;
}

// Same rows wherever the reference has no near-tie; scores within 1e-4.
void ExpectSame(const Result& want, const Result& got, size_t nq, int k) {
  int mismatched = 0;
  for (size_t q = 0; q < nq; ++q) {
    for (int i = 0; i < k; ++i) {
      const size_t at = q * k + i;
      if (want.rows[at] < 0) {
        EXPECT_EQ(got.rows[at], -1) << "q " << q << " i " << i;
        EXPECT_TRUE(std::isinf(got.dist[at]));
        continue;
      }
      EXPECT_NEAR(got.dist[at], want.dist[at], 1e-4) << "q " << q << " i " << i;
      const bool tie_before =
          i > 0 && std::abs(want.dist[at] - want.dist[at - 1]) < 1e-5;
      const bool tie_after = i + 1 < k && want.rows[at + 1] >= 0 &&
                             std::abs(want.dist[at] - want.dist[at + 1]) < 1e-5;
      if (!tie_before && !tie_after && got.rows[at] != want.rows[at]) {
        ++mismatched;
        ADD_FAILURE() << "q " << q << " i " << i << ": row " << got.rows[at]
                      << " want " << want.rows[at];
      }
    }
  }
  EXPECT_EQ(mismatched, 0);
}

Result SearchAll(const GpuMirror& mirror, const std::vector<float>& queries,
                 size_t nq, int k, const GpuMask* mask = nullptr) {
  Result r{std::vector<float>(nq * k), std::vector<int64_t>(nq * k)};
  const Status st =
      mirror.Search(queries.data(), nq, k, mask, r.dist.data(), r.rows.data());
  EXPECT_TRUE(st.ok()) << st;
  return r;
}

std::unique_ptr<GpuMirror> NewMirror(shm::Metric m, uint64_t capacity = 4096) {
  auto mirror = GpuMirror::Create({kDim, kStride, m, capacity, 0});
  EXPECT_TRUE(mirror.ok()) << mirror.status();
  return mirror.ok() ? std::move(*mirror) : nullptr;
}

const auto kAll = [](size_t) { return true; };

class GpuSearchTest : public ::testing::TestWithParam<shm::Metric> {
 protected:
  void SetUp() override {
    if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA (--config=cuda)";
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  shm::Metric metric() const { return GetParam(); }
};

TEST(GpuSearchFallbackTest, CreateSaysWhyThereIsNoGpu) {
  if (HaveGpu()) GTEST_SKIP() << "a CUDA device is present";
  auto mirror = GpuMirror::Create({kDim, kStride, shm::Metric::kL2, 10, 0});
  ASSERT_FALSE(mirror.ok());
  EXPECT_EQ(mirror.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(mirror.status().message().find(
                BuiltWithCuda() ? "no CUDA device" : "built without CUDA"),
            std::string::npos)
      << mirror.status();
}

TEST_P(GpuSearchTest, MatchesBruteForce) {
  auto data = RandomRows(5000, metric(), 1);
  auto mirror = NewMirror(metric(), 1000);  // appends grow it
  ASSERT_NE(mirror, nullptr);
  ASSERT_TRUE(mirror->AppendHost(data.data(), 3000).ok());
  ASSERT_TRUE(mirror->AppendHost(data.data() + 3000 * kStride, 2000).ok());
  EXPECT_EQ(mirror->rows(), 5000u);
  auto queries = RandomRows(64, metric(), 2);
  for (size_t nq : {1, 3, 8, 9, 64}) {
    for (int k : {1, 10, 100}) {
      SCOPED_TRACE("nq " + std::to_string(nq) + " k " + std::to_string(k));
      ExpectSame(BruteForce(data, metric(), queries, nq, k, kAll),
                 SearchAll(*mirror, queries, nq, k), nq, k);
    }
  }
}

TEST_P(GpuSearchTest, SkipsTombstones) {
  auto data = RandomRows(3000, metric(), 3);
  auto mirror = NewMirror(metric());
  ASSERT_NE(mirror, nullptr);
  ASSERT_TRUE(mirror->AppendHost(data.data(), 3000).ok());
  auto queries = RandomRows(20, metric(), 4);
  // Delete each query's current best 5 rows, one call each.
  std::vector<bool> dead(3000, false);
  Result before = SearchAll(*mirror, queries, 20, 5);
  for (int64_t r : before.rows) {
    if (!dead[r]) {
      ASSERT_TRUE(mirror->Tombstone(r).ok());
    }
    dead[r] = true;
  }
  auto live = [&](size_t r) { return !dead[r]; };
  for (size_t nq : {1, 20}) {
    ExpectSame(BruteForce(data, metric(), queries, nq, 10, live),
               SearchAll(*mirror, queries, nq, 10), nq, 10);
  }
  // Bulk: every third row dead (replaces the bitmap).
  std::vector<uint64_t> words((3000 + 63) / 64, 0);
  for (size_t r = 0; r < 3000; r += 3) words[r / 64] |= uint64_t{1} << (r % 64);
  ASSERT_TRUE(mirror->SetTombstones(words.data(), 3000).ok());
  auto live3 = [](size_t r) { return r % 3 != 0; };
  ExpectSame(BruteForce(data, metric(), queries, 20, 10, live3),
             SearchAll(*mirror, queries, 20, 10), 20, 10);
  EXPECT_FALSE(mirror->Tombstone(3000).ok());
}

TEST_P(GpuSearchTest, AppliesMask) {
  auto data = RandomRows(3000, metric(), 5);
  auto mirror = NewMirror(metric());
  ASSERT_NE(mirror, nullptr);
  ASSERT_TRUE(mirror->AppendHost(data.data(), 2500).ok());
  std::vector<uint64_t> words((2500 + 63) / 64, 0);
  std::mt19937 rng(6);
  std::vector<bool> in(3000, false);
  for (size_t r = 0; r < 2500; ++r) {
    if (rng() % 10 < 3) {
      in[r] = true;
      words[r / 64] |= uint64_t{1} << (r % 64);
    }
  }
  auto mask = mirror->UploadMask(words.data(), 2500);
  ASSERT_TRUE(mask.ok()) << mask.status();
  // Rows appended after the mask was built never match it.
  ASSERT_TRUE(mirror->AppendHost(data.data() + 2500 * kStride, 500).ok());
  ASSERT_TRUE(mirror->Tombstone(7).ok());
  in[7] = false;
  auto live = [&](size_t r) { return bool(in[r]); };
  auto queries = RandomRows(16, metric(), 7);
  for (size_t nq : {2, 16}) {
    ExpectSame(BruteForce(data, metric(), queries, nq, 10, live),
               SearchAll(*mirror, queries, nq, 10, mask->get()), nq, 10);
  }
}

TEST_P(GpuSearchTest, PadsWhenFewerRowsThanK) {
  auto mirror = NewMirror(metric());
  ASSERT_NE(mirror, nullptr);
  auto queries = RandomRows(12, metric(), 8);
  // Empty mirror: all padding.
  ExpectSame(BruteForce({}, metric(), queries, 12, 10, kAll),
             SearchAll(*mirror, queries, 12, 10), 12, 10);
  auto data = RandomRows(7, metric(), 9);
  ASSERT_TRUE(mirror->AppendHost(data.data(), 7).ok());
  for (size_t nq : {1, 12}) {
    ExpectSame(BruteForce(data, metric(), queries, nq, 10, kAll),
               SearchAll(*mirror, queries, nq, 10), nq, 10);
  }
}

TEST_P(GpuSearchTest, FindsRowsAppendedAfterASearchAndAfterReset) {
  auto data = RandomRows(2000, metric(), 10);
  auto mirror = NewMirror(metric());
  ASSERT_NE(mirror, nullptr);
  ASSERT_TRUE(mirror->AppendHost(data.data(), 2000).ok());
  auto queries = RandomRows(10, metric(), 11);
  SearchAll(*mirror, queries, 10, 5);
  // Each query itself becomes a row: the best match of the next search (IP:
  // unit vectors; L2: distance 0).
  ASSERT_TRUE(mirror->AppendHost(queries.data(), 10).ok());
  for (size_t nq : {1, 10}) {
    Result r = SearchAll(*mirror, queries, nq, 5);
    for (size_t q = 0; q < nq; ++q) EXPECT_EQ(r.rows[q * 5], int64_t(2000 + q));
  }
  ASSERT_TRUE(mirror->Tombstone(2000).ok());
  ASSERT_TRUE(mirror->Reset().ok());
  EXPECT_EQ(mirror->rows(), 0u);
  EXPECT_EQ(SearchAll(*mirror, queries, 1, 3).rows[0], -1);
  // Rebuilt (compaction): row 0 is a fresh row, not tombstoned.
  ASSERT_TRUE(mirror->AppendHost(queries.data(), 1).ok());
  ASSERT_TRUE(mirror->AppendHost(data.data(), 2000).ok());
  data.insert(data.begin(), queries.begin(), queries.begin() + kStride);
  ExpectSame(BruteForce(data, metric(), queries, 10, 10, kAll),
             SearchAll(*mirror, queries, 10, 10), 10, 10);
}

#ifdef ZEROVEC_WITH_CUDA
TEST_P(GpuSearchTest, AppendsAndSearchesFromDeviceMemory) {
  auto data = RandomRows(3000, metric(), 12);
  auto queries = RandomRows(10, metric(), 13);
  float* rows_dev = nullptr;
  float* q_dev = nullptr;
  ASSERT_EQ(cudaMalloc(&rows_dev, data.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&q_dev, queries.size() * 4), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(rows_dev, data.data(), data.size() * 4,
                            cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(q_dev, queries.data(), queries.size() * 4,
                            cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  auto mirror = NewMirror(metric(), 100);
  ASSERT_NE(mirror, nullptr);
  // Ordered after the copies on `stream`: no synchronisation here.
  ASSERT_TRUE(mirror->AppendDevice(rows_dev, 1000, stream).ok());
  ASSERT_TRUE(
      mirror->AppendDevice(rows_dev + 1000 * kStride, 2000, stream).ok());
  for (size_t nq : {1, 10}) {
    Result got{std::vector<float>(nq * 10), std::vector<int64_t>(nq * 10)};
    ASSERT_TRUE(mirror
                    ->SearchDevice(q_dev, nq, 10, nullptr, stream,
                                   got.dist.data(), got.rows.data())
                    .ok());
    ExpectSame(BruteForce(data, metric(), queries, nq, 10, kAll), got, nq, 10);
  }
  cudaStreamDestroy(stream);
  cudaFree(rows_dev);
  cudaFree(q_dev);
}
#endif

TEST_P(GpuSearchTest, SearchesFromThreadsWhileAppending) {
  auto data = RandomRows(4000, metric(), 14);
  auto mirror = NewMirror(metric(), 1000);
  ASSERT_NE(mirror, nullptr);
  ASSERT_TRUE(mirror->AppendHost(data.data(), 1000).ok());
  auto queries = RandomRows(9, metric(), 15);
  std::vector<std::thread> readers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      const size_t nq = t % 2 ? 1 : 9;
      std::vector<float> d(nq * 10);
      std::vector<int64_t> r(nq * 10);
      for (int i = 0; i < 30; ++i) {
        const uint64_t before = mirror->rows();
        if (!mirror->Search(queries.data(), nq, 10, nullptr, d.data(), r.data())
                 .ok() ||
            r[0] < 0 || uint64_t(r[0]) >= 4000 || before < 1000) {
          ++bad;
        }
      }
    });
  }
  for (size_t at = 1000; at < 4000; at += 500) {
    ASSERT_TRUE(mirror->AppendHost(data.data() + at * kStride, 500).ok());
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  ExpectSame(BruteForce(data, metric(), queries, 9, 10, kAll),
             SearchAll(*mirror, queries, 9, 10), 9, 10);
}

#ifdef ZEROVEC_WITH_CUDA
// The encoder's path (issue 13): rows written on the device into staged rows,
// the rest from the host, read back, committed; then searched like any rows.
TEST_P(GpuSearchTest, StagedRowsAppendLikeHostRows) {
  auto data = RandomRows(3000, metric(), 21);
  auto mirror = NewMirror(metric(), 600);
  ASSERT_NE(mirror, nullptr);
  ASSERT_TRUE(mirror->AppendHost(data.data(), 500).ok());
  // A stage that is replaced before its commit leaves no trace.
  ASSERT_TRUE(mirror->StageRows(100).ok());
  ASSERT_TRUE(mirror->AppendHost(data.data() + 500 * kStride, 500).ok());
  auto staged = mirror->StageRows(2000);  // grows past the capacity
  ASSERT_TRUE(staged.ok()) << staged.status();
  const size_t row_bytes = kStride * 4;
  // Even rows as a GPU encoder would write them, odd rows from the host.
  for (uint64_t i = 0; i < 2000; i += 2) {
    ASSERT_EQ(
        cudaMemcpy(*staged + i * kStride, data.data() + (1000 + i) * kStride,
                   row_bytes, cudaMemcpyHostToDevice),
        cudaSuccess);
    ASSERT_TRUE(
        mirror->WriteStaged(i + 1, data.data() + (1001 + i) * kStride, 1).ok());
  }
  std::vector<float> back(2000 * kStride);
  ASSERT_TRUE(mirror->ReadStaged(0, 2000, back.data()).ok());
  EXPECT_EQ(0, std::memcmp(back.data(), data.data() + 1000 * kStride,
                           back.size() * 4));
  EXPECT_FALSE(mirror->ReadStaged(1999, 2, back.data()).ok());
  EXPECT_EQ(mirror->rows(), 1000u);  // staged rows are not searched yet
  ASSERT_TRUE(mirror->CommitStaged(2000).ok());
  EXPECT_FALSE(mirror->CommitStaged(1).ok());  // nothing staged any more
  ASSERT_EQ(mirror->rows(), 3000u);
  auto queries = RandomRows(10, metric(), 22);
  for (size_t nq : {1, 10}) {
    ExpectSame(BruteForce(data, metric(), queries, nq, 10, kAll),
               SearchAll(*mirror, queries, nq, 10), nq, 10);
  }
}
#endif

// Eight threads through one search slot: they queue, and all answer right.
TEST_P(GpuSearchTest, ConcurrentSearchesWaitForTheirTurn) {
  auto data = RandomRows(2000, metric(), 31);
  MirrorOptions o{kDim, kStride, metric(), 2000, 0};
  o.max_concurrent_searches = 1;
  auto created = GpuMirror::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  auto& mirror = *created;
  ASSERT_TRUE(mirror->AppendHost(data.data(), 2000).ok());
  auto queries = RandomRows(9, metric(), 32);
  const Result want = BruteForce(data, metric(), queries, 9, 10, kAll);
  std::vector<std::thread> callers;
  std::vector<Result> got(8);
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) got[t] = SearchAll(*mirror, queries, 9, 10);
    });
  }
  for (auto& t : callers) t.join();
  for (const Result& r : got) ExpectSame(want, r, 9, 10);
}

INSTANTIATE_TEST_SUITE_P(Metrics, GpuSearchTest,
                         ::testing::Values(shm::Metric::kInnerProduct,
                                           shm::Metric::kL2),
                         [](const auto& info) {
                           return info.param == shm::Metric::kL2 ? "L2" : "IP";
                         });

}  // namespace
}  // namespace zv::gpusearch
