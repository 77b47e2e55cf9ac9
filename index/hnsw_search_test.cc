// The HNSW search (hnsw_search.h): the dense visited array, every ISA's loop
// against the portable one, a RowBitmap tested inline against the same bitmap
// through a virtual call, and the word-wise filter bitmap (namespace fast
// path) against the row-at-a-time reference.
#include "index/hnsw_search.h"

#include <faiss/IndexHNSW.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "index/filter.h"
#include "index/hnsw_pieces.h"
#include "index/test_util.h"
#include "shm/segment.h"

namespace zv::index {
namespace {

TEST(VisitedArrayTest, MarksOncePerSearchAndForgetsOnReset) {
  VisitedArray v;
  v.Reset(100);
  EXPECT_GE(v.capacity(), 100u);
  EXPECT_FALSE(v.TestAndSet(7));
  EXPECT_TRUE(v.TestAndSet(7));
  EXPECT_TRUE(v.Test(7));
  EXPECT_FALSE(v.Test(8));
  v.Reset(100);  // a new search: nothing visited, nothing cleared by hand
  EXPECT_FALSE(v.Test(7));
  EXPECT_FALSE(v.TestAndSet(7));
  v.Reset(1000);  // a larger graph: grows, old marks gone
  EXPECT_GE(v.capacity(), 1000u);
  EXPECT_FALSE(v.Test(7));
  EXPECT_FALSE(v.TestAndSet(999));
}

TEST(VisitedArrayTest, EpochWrapClearsStaleMarks) {
  VisitedArray v;
  v.Reset(10);
  v.SetEpochForTest(65535);
  EXPECT_FALSE(v.TestAndSet(3));  // tagged 65535
  v.Reset(10);                    // wraps to 0: cleared, epoch 1
  EXPECT_FALSE(v.Test(3));
  v.SetEpochForTest(65534);
  v.Reset(10);  // epoch 65535 again: the old tag must not read as visited
  EXPECT_FALSE(v.Test(3));
}

// A graph over segment rows, built as pieces are.
class SearchGraphTest : public ::testing::TestWithParam<shm::Metric> {
 protected:
  static constexpr uint32_t kDim = 40;  // padded to 48: not a multiple of 32
  static constexpr size_t kRows = 3000, kQueries = 50;
  void SetUp() override {
    dir_ = testing::MakeTempDir("hnsw-search");
    data_ = testing::ClusteredVectors(kRows + kQueries, kDim, 30, 5);
    shm::SegmentOptions so;
    so.dim = kDim;
    so.metric = GetParam();
    so.rows_per_extent = 1024;  // rows straddle extents
    so.first_extent_rows = 256;
    auto w = shm::Writer::Create(dir_, so);
    ASSERT_TRUE(w.ok()) << w.status();
    seg_ = std::move(w).value();
    ASSERT_TRUE(seg_->Reserve(kRows).ok());
    for (size_t r = 0; r < kRows; ++r)
      std::memcpy(seg_->MutableRow(r), &data_[r * kDim], 4 * kDim);
    ASSERT_TRUE(seg_->Commit(kRows).ok());
    table_ = RowTable(*seg_, kRows);
    storage_ = std::make_unique<RangeStorage>(table_, 0, stride(), GetParam());
    index_ = std::make_unique<faiss::IndexHNSW>(storage_.get(), 16);
    index_->hnsw.efConstruction = 40;
    ASSERT_TRUE(InsertLevelsFirst(*index_, *storage_, kRows, nullptr, 1).ok());
    const faiss::HNSW& h = index_->hnsw;
    g_ = GraphRef{0,
                  kRows,
                  h.max_level,
                  h.entry_point,
                  GetParam() == shm::Metric::kInnerProduct,
                  stride(),
                  h.cum_nneighbor_per_level.data(),
                  reinterpret_cast<const uint64_t*>(h.offsets.data()),
                  h.neighbors.data()};
    padded_.assign(kQueries * stride(), 0.f);
    for (size_t q = 0; q < kQueries; ++q)
      std::memcpy(&padded_[q * stride()], &data_[(kRows + q) * kDim], 4 * kDim);
  }
  size_t stride() const { return seg_->info().row_stride; }

  struct Result {
    std::vector<float> dist;
    std::vector<int64_t> rows;
  };
  Result Search(SearchIsa isa, int k, int ef, const faiss::IDSelector* sel) {
    Result r{std::vector<float>(kQueries * k),
             std::vector<int64_t>(kQueries * k)};
    for (size_t q = 0; q < kQueries; ++q)
      SearchGraphRows(g_, table_, &padded_[q * stride()], k, ef, sel,
                      &r.dist[q * k], &r.rows[q * k], isa);
    return r;
  }
  void ExpectSame(const Result& a, const Result& b) {
    ASSERT_EQ(a.rows.size(), b.rows.size());
    size_t same = 0;
    for (size_t i = 0; i < a.rows.size(); ++i) {
      same += a.rows[i] == b.rows[i];
      EXPECT_NEAR(a.dist[i], b.dist[i], 1e-4f) << i;
    }
    // FMA contraction may round a near tie the other way: allow a swap or
    // two, never a different search.
    EXPECT_GE(same, a.rows.size() - 4);
  }

  std::filesystem::path dir_;
  std::vector<float> data_, padded_;
  std::unique_ptr<shm::Writer> seg_;
  RowTable table_;
  std::unique_ptr<RangeStorage> storage_;
  std::unique_ptr<faiss::IndexHNSW> index_;
  GraphRef g_;
};

// Every row matching a predicate, through the virtual call.
class OddRows : public faiss::IDSelector {
 public:
  bool is_member(idx_t r) const override { return r % 2 == 1; }
};
// Another selector's answers through the virtual call (not a RowBitmap).
class Forward : public faiss::IDSelector {
 public:
  explicit Forward(const faiss::IDSelector& s) : s_(s) {}
  bool is_member(idx_t r) const override { return s_.is_member(r); }

 private:
  const faiss::IDSelector& s_;
};

TEST_P(SearchGraphTest, EveryIsaEqualsThePortableLoop) {
  OddRows odd;
  for (const faiss::IDSelector* sel :
       {static_cast<const faiss::IDSelector*>(nullptr),
        static_cast<const faiss::IDSelector*>(&odd)}) {
    for (int ef : {10, 40, 200}) {
      const Result portable = Search(SearchIsa::kPortable, 10, ef, sel);
      ExpectSame(Search(SearchIsa::kAvx2, 10, ef, sel), portable);
      ExpectSame(Search(SearchIsa::kAvx512, 10, ef, sel), portable);
      ExpectSame(Search(SearchIsa::kAuto, 10, ef, sel), portable);
    }
  }
}

TEST_P(SearchGraphTest, FindsTheExactNeighbours) {
  const Result r = Search(SearchIsa::kAuto, 10, 100, nullptr);
  size_t hits = 0;
  for (size_t q = 0; q < kQueries; ++q) {
    const auto truth = testing::BruteForce(
        std::vector<float>(data_.begin(), data_.begin() + kRows * kDim), kDim,
        &data_[(kRows + q) * kDim], 10, GetParam(), {});
    for (const auto& t : truth)
      for (int j = 0; j < 10; ++j)
        hits += r.rows[q * 10 + j] == static_cast<int64_t>(t.index);
  }
  EXPECT_GE(static_cast<double>(hits) / (kQueries * 10), 0.95);
}

TEST_P(SearchGraphTest, BitmapInlineEqualsTheVirtualCall) {
  AttributeTable table;
  for (size_t r = 0; r < kRows; ++r) {
    Record rec;
    rec.id = std::to_string(r);
    rec.ns = r % 10 < 3 ? "a" : "b";
    table.Append(rec);
  }
  ASSERT_TRUE(seg_->Tombstone(5).ok());
  ASSERT_TRUE(seg_->Tombstone(1500).ok());
  Filter f;
  f.ns = "a";
  const RowBitmap bitmap(*seg_, table, table.Compile(f), kRows);
  const Forward generic(bitmap);
  for (int ef : {10, 64}) {
    const Result inline_words = Search(SearchIsa::kAuto, 10, ef, &bitmap);
    const Result virtual_call = Search(SearchIsa::kAuto, 10, ef, &generic);
    EXPECT_EQ(inline_words.rows, virtual_call.rows);
    EXPECT_EQ(inline_words.dist, virtual_call.dist);
    for (const int64_t r : inline_words.rows) {
      if (r >= 0) {
        EXPECT_TRUE(bitmap.is_member(r)) << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Metrics, SearchGraphTest,
                         ::testing::Values(shm::Metric::kInnerProduct,
                                           shm::Metric::kL2));

// The word-wise bitmap (namespace fast path and the generic path, tombstones
// masked per extent) equals the row-at-a-time reference, on aligned and
// unaligned extents.
TEST(RowBitmapTest, NamespaceFastPathEqualsTheGenericFilter) {
  for (const uint64_t rpe : {uint64_t{1024}, uint64_t{1000}}) {
    const auto dir = testing::MakeTempDir("bitmap");
    shm::SegmentOptions so;
    so.dim = 16;
    so.rows_per_extent = rpe;
    so.first_extent_rows = rpe == 1024 ? 128 : 100;
    auto w = shm::Writer::Create(dir, so);
    ASSERT_TRUE(w.ok()) << w.status();
    constexpr size_t kRows = 5000;
    ASSERT_TRUE((*w)->Reserve(kRows).ok());
    ASSERT_TRUE((*w)->Commit(kRows).ok());
    AttributeTable table;
    for (size_t r = 0; r < kRows; ++r) {
      if (r % 97 == 0) {
        table.AppendAbsent();  // an orphan: never matches
        continue;
      }
      Record rec;
      rec.id = std::to_string(r);
      rec.ns = r % 7 == 0 ? "seven" : r % 2 ? "odd" : "";
      rec.timestamp_ms = static_cast<int64_t>(r);
      table.Append(rec);
    }
    for (uint64_t r : {0u, 63u, 64u, 99u, 100u, 1000u, 1023u, 1024u, 4999u})
      ASSERT_TRUE((*w)->Tombstone(r).ok());
    for (const char* ns : {"seven", "odd", ""}) {
      for (const uint64_t limit : {uint64_t{kRows}, uint64_t{4321}}) {
        Filter f;
        f.ns = ns;
        const CompiledFilter cf = table.Compile(f);
        ASSERT_TRUE(AttributeTable::NamespaceOnly(cf));
        const RowBitmap fast(**w, table, cf, limit);
        const RowBitmap ref = RowBitmap::Reference(**w, table, cf, limit);
        EXPECT_EQ(fast.words(), ref.words()) << ns << " rpe " << rpe;
        EXPECT_EQ(fast.count(), ref.count());
        // The generic path (a time range too) against its reference.
        f.min_timestamp_ms = 10;
        const CompiledFilter cg = table.Compile(f);
        ASSERT_FALSE(AttributeTable::NamespaceOnly(cg));
        const RowBitmap slow(**w, table, cg, limit);
        const RowBitmap slow_ref = RowBitmap::Reference(**w, table, cg, limit);
        EXPECT_EQ(slow.words(), slow_ref.words());
        EXPECT_EQ(slow.count(), slow_ref.count());
      }
    }
  }
}

}  // namespace
}  // namespace zv::index
