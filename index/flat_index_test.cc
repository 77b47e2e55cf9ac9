// Exact search in place equals a brute-force reference (ids and scores), for IP
// and L2, with and without filters and tombstones; and it copies no rows.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "index/collection.h"
#include "index/collection_impl.h"
#include "index/test_util.h"

namespace zv::index {
namespace {

using testing::BruteForce;
using testing::IdOf;
using testing::MakeTempDir;
using testing::RandomVectors;

constexpr uint32_t kDim =
    37;  // not a multiple of 16: exercises the zero padding
constexpr size_t kRows = 5000;

Record RecordOf(size_t i) {
  Record r;
  r.id = IdOf(i);
  r.ns = "ns" + std::to_string(i % 3);
  r.metadata = {{"color", std::to_string(i % 5)},
                {"shape", std::to_string(i % 2)}};
  r.timestamp_ms = static_cast<int64_t>(i);
  return r;
}

bool Matches(size_t i, const Filter& f) {
  const Record r = RecordOf(i);
  if (f.ns && r.ns != *f.ns) return false;
  for (const auto& [k, v] : f.metadata_equals) {
    auto it = r.metadata.find(k);
    if (it == r.metadata.end() || it->second != v) return false;
  }
  if (f.min_timestamp_ms && r.timestamp_ms < *f.min_timestamp_ms) return false;
  if (f.max_timestamp_ms && r.timestamp_ms > *f.max_timestamp_ms) return false;
  return true;
}

class FlatExactTest : public ::testing::TestWithParam<shm::Metric> {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("flat");
    auto db = Database::Open(dir_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(db).value();
    CollectionOptions o;
    o.dim = kDim;
    o.metric = GetParam();
    o.rows_per_extent = 1024;  // several extents, several blocks
    auto c = db_->CreateCollection("c", o);
    ASSERT_TRUE(c.ok()) << c.status();
    coll_ = *c;
    base_ = RandomVectors(kRows, kDim, 7);
    for (size_t first = 0; first < kRows; first += 500) {
      std::vector<Record> recs;
      for (size_t i = first; i < first + 500; ++i) recs.push_back(RecordOf(i));
      ASSERT_TRUE(
          coll_
              ->Upsert(recs, std::span(base_).subspan(first * kDim, 500 * kDim))
              .ok());
    }
    live_.assign(kRows, true);
  }

  // Deletes every 7th id and replaces every 11th with a new vector.
  void AddTombstones() {
    std::vector<std::string> del;
    for (size_t i = 0; i < kRows; i += 7) {
      del.push_back(IdOf(i));
      live_[i] = false;
    }
    auto n = coll_->Delete(del);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, del.size());
    std::vector<Record> recs;
    std::vector<float> vecs;
    const std::vector<float> fresh = RandomVectors(kRows, kDim, 99);
    for (size_t i = 3; i < kRows; i += 11) {
      recs.push_back(RecordOf(i));
      std::copy_n(&fresh[i * kDim], kDim, &base_[i * kDim]);
      vecs.insert(vecs.end(), &fresh[i * kDim], &fresh[i * kDim] + kDim);
      live_[i] = true;
    }
    ASSERT_TRUE(coll_->Upsert(recs, vecs).ok());
  }

  void ExpectExact(const Filter& filter, int k) {
    const size_t nq = 24;
    const std::vector<float> q = RandomVectors(nq, kDim, 1234);
    SearchOptions opts;
    opts.k = k;
    opts.filter = filter;
    auto res = coll_->Search(q, opts);
    ASSERT_TRUE(res.ok()) << res.status();
    std::vector<bool> allowed(kRows);
    for (size_t i = 0; i < kRows; ++i)
      allowed[i] = live_[i] && Matches(i, filter);
    for (size_t qi = 0; qi < nq; ++qi) {
      const auto ref =
          BruteForce(base_, kDim, &q[qi * kDim], k, GetParam(), allowed);
      const auto& got = (*res)[qi];
      ASSERT_EQ(got.size(), ref.size()) << "query " << qi;
      for (size_t j = 0; j < ref.size(); ++j) {
        const float tol = 1e-4f * std::max(1.0f, std::abs(ref[j].score));
        EXPECT_NEAR(got[j].score, ref[j].score, tol)
            << "query " << qi << " rank " << j;
        if (got[j].id != IdOf(ref[j].index)) {
          // Only a tie within float rounding may swap two results.
          EXPECT_NEAR(ref[j].score, ref[std::min(j + 1, ref.size() - 1)].score,
                      2 * tol)
              << "query " << qi << " rank " << j << ": " << got[j].id << " vs "
              << IdOf(ref[j].index);
        }
        EXPECT_EQ(got[j].record.ns, RecordOf(ref[j].index).ns);
      }
    }
  }

  std::filesystem::path dir_;
  std::unique_ptr<Database> db_;
  std::shared_ptr<Collection> coll_;
  std::vector<float> base_;
  std::vector<bool> live_;
};

TEST_P(FlatExactTest, EqualsBruteForce) { ExpectExact(Filter(), 10); }

TEST_P(FlatExactTest, EqualsBruteForceLargeK) { ExpectExact(Filter(), 200); }

TEST_P(FlatExactTest, EqualsBruteForceWithTombstones) {
  AddTombstones();
  ExpectExact(Filter(), 10);
}

TEST_P(FlatExactTest, EqualsBruteForceWithFilters) {
  AddTombstones();
  Filter ns;
  ns.ns = "ns1";
  ExpectExact(ns, 10);
  Filter meta;
  meta.metadata_equals = {{"color", "2"}, {"shape", "0"}};
  ExpectExact(meta, 10);
  Filter time;
  time.min_timestamp_ms = 1000;
  time.max_timestamp_ms = 2500;
  ExpectExact(time, 10);
  Filter all = meta;
  all.ns = "ns0";
  all.max_timestamp_ms = 4000;
  ExpectExact(all, 10);
}

TEST_P(FlatExactTest, SelectiveFilterReturnsEveryMatch) {
  Filter f;
  f.min_timestamp_ms = 100;
  f.max_timestamp_ms = 102;  // 3 rows
  SearchOptions opts;
  opts.k = 10;
  opts.filter = f;
  auto res = coll_->Search(RandomVectors(1, kDim, 5), opts);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ((*res)[0].size(), 3u);
  ExpectExact(f, 10);
  Filter unknown;
  unknown.ns = "never-seen";
  opts.filter = unknown;
  res = coll_->Search(RandomVectors(1, kDim, 5), opts);
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE((*res)[0].empty());
}

INSTANTIATE_TEST_SUITE_P(Metrics, FlatExactTest,
                         ::testing::Values(shm::Metric::kInnerProduct,
                                           shm::Metric::kL2),
                         [](const auto& info) {
                           return info.param == shm::Metric::kL2
                                      ? std::string("L2")
                                      : std::string("IP");
                         });

// Private (anonymous) resident memory of this process, in bytes.
size_t RssAnonBytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    size_t kb;
    if (key == "RssAnon:" && in >> kb) return kb * 1024;
  }
  return 0;
}

TEST(FlatInPlaceTest, IndexMemoryDoesNotGrowWithRows) {
  const auto dir = MakeTempDir("inplace");
  auto db = Database::Open(dir);
  ASSERT_TRUE(db.ok());
  CollectionOptions o;
  o.dim = 256;
  auto c = (*db)->CreateCollection("m", o);
  ASSERT_TRUE(c.ok());
  auto* impl = dynamic_cast<CollectionImpl*>(c->get());
  ASSERT_NE(impl, nullptr);
  const size_t batch = 2000, rows = 60000;
  const std::vector<float> v = RandomVectors(batch, o.dim, 3);
  auto upsert = [&](size_t first) {
    std::vector<Record> recs(batch);
    for (size_t i = 0; i < batch; ++i) recs[i].id = IdOf(first + i);
    ASSERT_TRUE((*c)->Upsert(recs, v).ok());
  };
  upsert(0);
  SearchOptions opts;
  ASSERT_TRUE((*c)->Search(std::span(v).subspan(0, o.dim), opts).ok());
  const size_t rss0 = RssAnonBytes(), index0 = impl->IndexMemoryBytes();
  for (size_t first = batch; first < rows; first += batch) upsert(first);
  auto res = (*c)->Search(std::span(v).subspan(0, 8 * o.dim), opts);
  ASSERT_TRUE(res.ok());
  const size_t rss1 = RssAnonBytes(), index1 = impl->IndexMemoryBytes();
  const size_t vector_bytes = (rows - batch) * o.dim * sizeof(float);
  std::printf(
      "added %zu rows = %zu vector bytes; anon RSS +%zd bytes; index heap %zu "
      "-> %zu\n",
      rows - batch, vector_bytes, static_cast<ssize_t>(rss1 - rss0), index0,
      index1);
  // The vectors live in the mapped segment (file pages), not in the index's
  // heap.
  EXPECT_LT(index1 - index0, vector_bytes / 20);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // Sanitizers keep freed heap in quarantine, so RSS is only meaningful
  // without.
  EXPECT_LT(static_cast<ssize_t>(rss1 - rss0),
            static_cast<ssize_t>(vector_bytes / 4));
#endif
}

}  // namespace
}  // namespace zv::index
