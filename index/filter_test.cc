// The attribute table and the row selectors of index/filter.h, over a real
// segment in a temp dir: what a filter compiles to, which rows match, and that
// tombstones and absent rows never do.
#include "index/filter.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "index/test_util.h"

namespace zv::index {
namespace {

using testing::MakeTempDir;

// Row i: ns "n<i%2>", color "<i%3>", timestamp 100 * i.
Record RowRecord(uint64_t i) {
  Record r;
  r.id = "id" + std::to_string(i);
  r.ns = "n" + std::to_string(i % 2);
  r.metadata = {{"color", std::to_string(i % 3)}, {"k", "v"}};
  r.timestamp_ms = 100 * static_cast<int64_t>(i);
  return r;
}

AttributeTable TableOf(uint64_t rows, uint64_t absent_row) {
  AttributeTable table;
  for (uint64_t i = 0; i < rows; ++i) {
    if (i == absent_row) {
      table.AppendAbsent();
    } else {
      table.Append(RowRecord(i));
    }
  }
  return table;
}

std::vector<uint64_t> Matching(const AttributeTable& table, const Filter& f) {
  const CompiledFilter compiled = table.Compile(f);
  std::vector<uint64_t> rows;
  for (uint64_t row = 0; row < table.size(); ++row) {
    if (table.Matches(row, compiled)) rows.push_back(row);
  }
  return rows;
}

TEST(AttributeTableTest, DescribesWhatWasAppended) {
  const AttributeTable table = TableOf(4, /*absent_row=*/2);
  ASSERT_EQ(table.size(), 4u);
  EXPECT_TRUE(table.present(1));
  EXPECT_FALSE(table.present(2));
  EXPECT_EQ(table.id(3), "id3");
  EXPECT_EQ(table.id(2), "");
  EXPECT_EQ(table.ns(1), "n1");
  EXPECT_EQ(table.timestamp(3), 300);
  Record with, without;
  table.Describe(1, /*with_metadata=*/true, &with);
  table.Describe(1, /*with_metadata=*/false, &without);
  EXPECT_EQ(with.id, "id1");
  EXPECT_EQ(with.metadata, RowRecord(1).metadata);
  EXPECT_TRUE(without.metadata.empty());
  EXPECT_GT(table.MemoryBytes(), 0u);
}

TEST(AttributeTableTest, FiltersAndTheirConditionsCombine) {
  const AttributeTable table = TableOf(12, /*absent_row=*/4);
  Filter any;
  EXPECT_EQ(Matching(table, any).size(), 11u);  // all but the absent row

  Filter ns;
  ns.ns = "n0";
  EXPECT_EQ(Matching(table, ns), (std::vector<uint64_t>{0, 2, 6, 8, 10}));

  Filter meta_and_time;
  meta_and_time.metadata_equals = {{"color", "0"}, {"k", "v"}};
  meta_and_time.min_timestamp_ms = 300;
  meta_and_time.max_timestamp_ms = 900;  // inclusive
  EXPECT_EQ(Matching(table, meta_and_time), (std::vector<uint64_t>{3, 6, 9}));

  // A value never stored compiles to "impossible": nothing matches.
  Filter unseen;
  unseen.metadata_equals = {{"color", "7"}};
  EXPECT_TRUE(table.Compile(unseen).impossible);
  EXPECT_TRUE(Matching(table, unseen).empty());
  Filter unseen_ns;
  unseen_ns.ns = "n9";
  EXPECT_TRUE(Matching(table, unseen_ns).empty());
}

class RowSelectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shm::SegmentOptions options;
    options.dim = 4;
    options.rows_per_extent = 8;
    auto writer = shm::Writer::Create(MakeTempDir("filter") / "seg", options);
    ASSERT_TRUE(writer.ok()) << writer.status().message();
    writer_ = std::move(writer).value();
    ASSERT_TRUE(writer_->Reserve(kRows).ok());
    for (uint64_t row = 0; row < kRows; ++row) writer_->SetId(row, row);
    ASSERT_TRUE(writer_->Commit(kRows).ok());
    for (uint64_t row : {3u, 64u}) ASSERT_TRUE(writer_->Tombstone(row).ok());
  }

  static constexpr uint64_t kRows = 70;  // more than one bitmap word
  std::unique_ptr<shm::Writer> writer_;
};

TEST_F(RowSelectorTest, BitmapHoldsLiveMatchingRowsBelowTheLimit) {
  const AttributeTable table = TableOf(kRows, /*absent_row=*/5);
  Filter ns;
  ns.ns = "n1";
  const RowBitmap bitmap(*writer_, table, table.Compile(ns), /*limit=*/68);
  std::vector<int64_t> want;
  for (int64_t row = 1; row < 68; row += 2) {
    if (row != 3 && row != 5) want.push_back(row);  // tombstoned, absent
  }
  EXPECT_EQ(bitmap.Rows(), want);
  EXPECT_EQ(bitmap.count(), want.size());
  EXPECT_EQ(bitmap.limit(), 68u);
  EXPECT_EQ(bitmap.words().size(), 2u);
  EXPECT_TRUE(bitmap.is_member(67));
  EXPECT_FALSE(bitmap.is_member(69));  // past the limit
  EXPECT_FALSE(bitmap.is_member(-1));

  // The limit is at most the rows the table has attributes for.
  const AttributeTable shorter = TableOf(10, kRows);
  EXPECT_EQ(
      RowBitmap(*writer_, shorter, shorter.Compile(Filter()), kRows).limit(),
      10u);
}

// The namespace bitmap is built 64 rows a word with compare instructions
// (AVX-512 / AVX2 where the CPU has them); it must equal the row-at-a-time
// reference on whole words, a partial last word and every namespace.
TEST(NamespaceBitmapTest, WordWiseEqualsRowAtATime) {
  constexpr uint64_t kN = 1000;
  shm::SegmentOptions options;
  options.dim = 4;
  auto writer = shm::Writer::Create(MakeTempDir("nsbits") / "seg", options);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  ASSERT_TRUE((*writer)->Reserve(kN).ok());
  for (uint64_t row = 0; row < kN; ++row) (*writer)->SetId(row, row);
  ASSERT_TRUE((*writer)->Commit(kN).ok());
  for (uint64_t row : {7u, 64u, 500u})
    ASSERT_TRUE((*writer)->Tombstone(row).ok());
  AttributeTable table;
  for (uint64_t i = 0; i < kN; ++i) {
    if (i % 97 == 5) {
      table.AppendAbsent();
      continue;
    }
    Record r;
    r.id = "id" + std::to_string(i);
    r.ns = "t" + std::to_string((i * 2654435761u >> 7) % 5);  // scattered
    table.Append(r);
  }
  for (int t = 0; t < 6; ++t) {  // "t5" was never stored: nothing matches
    Filter f;
    f.ns = "t" + std::to_string(t);
    const CompiledFilter cf = table.Compile(f);
    for (uint64_t limit : {0u, 1u, 63u, 64u, 65u, 128u, 640u, 999u, 1000u}) {
      const RowBitmap fast(**writer, table, cf, limit);
      const RowBitmap slow = RowBitmap::Reference(**writer, table, cf, limit);
      EXPECT_EQ(fast.Rows(), slow.Rows()) << "ns t" << t << " limit " << limit;
      EXPECT_EQ(fast.count(), slow.count());
    }
  }
}

TEST_F(RowSelectorTest, LiveRowsAndOffsetsFollowTheSegment) {
  const LiveRows live(*writer_);
  EXPECT_TRUE(live.is_member(2));
  EXPECT_FALSE(live.is_member(3));
  EXPECT_FALSE(live.is_member(64));
  const OffsetSelector block(&live, 60);  // block-local id 4 is row 64
  EXPECT_TRUE(block.is_member(0));
  EXPECT_FALSE(block.is_member(4));
}

}  // namespace
}  // namespace zv::index
