// The meta store against a real RocksDB in a temp dir: catalog, ids, rows and
// documents round-trip, scans keep row order and stay inside one collection
// and generation, and what a write made durable survives a reopen. (A store
// whose CURRENT is lost: tests/faults/corrupt_open_test.cc.)
#include "index/meta_store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "index/test_util.h"

namespace zv::index {
namespace {

using testing::MakeTempDir;

Record MakeRecord(const std::string& id, const std::string& text) {
  Record r;
  r.id = id;
  r.text = text;
  r.ns = "ns-" + id;
  r.metadata = {{"lang", "en"}, {"src", id}};
  r.timestamp_ms = 1700000000000;
  return r;
}

CollectionMeta MakeMeta(const std::string& name) {
  CollectionMeta m{name, CollectionOptions(), 3};
  m.options.dim = 48;
  m.options.metric = shm::Metric::kL2;
  m.options.index.descriptor = "HNSW16";
  m.options.rows_per_extent = 1024;
  m.options.group = "staff";
  m.options.sync = true;
  return m;
}

std::vector<uint64_t> RowsOf(const MetaStore& store, const std::string& coll,
                             uint64_t gen, uint64_t first) {
  std::vector<uint64_t> rows;
  EXPECT_TRUE(store
                  .ScanRows(coll, gen, first,
                            [&](uint64_t row, Record) {
                              rows.push_back(row);
                              return OkStatus();
                            })
                  .ok());
  return rows;
}

TEST(MetaStoreTest, CatalogRoundTripsEveryOption) {
  const auto dir = MakeTempDir("meta_catalog");
  auto store = MetaStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto batch = (*store)->NewBatch();
  batch.PutCollection(MakeMeta("b"));
  batch.PutCollection(MakeMeta("a"));
  ASSERT_TRUE((*store)->Write(batch, /*sync=*/true).ok());

  auto got = (*store)->GetCollection("b");
  ASSERT_TRUE(got.ok() && got->has_value());
  const CollectionMeta want = MakeMeta("b");
  EXPECT_EQ((*got)->name, "b");
  EXPECT_EQ((*got)->generation, 3u);
  EXPECT_EQ((*got)->options.dim, want.options.dim);
  EXPECT_EQ((*got)->options.metric, want.options.metric);
  EXPECT_EQ((*got)->options.index.descriptor, "HNSW16");
  EXPECT_EQ((*got)->options.rows_per_extent, 1024u);
  EXPECT_EQ((*got)->options.group, std::optional<std::string>("staff"));
  EXPECT_TRUE((*got)->options.sync);

  auto all = (*store)->ListCollections();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "a");
  EXPECT_EQ((*all)[1].name, "b");
  auto missing = (*store)->GetCollection("c");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TEST(MetaStoreTest, IdsRowsAndDocumentsRoundTrip) {
  const auto dir = MakeTempDir("meta_rows");
  auto store = MetaStore::Open(dir);
  ASSERT_TRUE(store.ok());
  auto batch = (*store)->NewBatch();
  batch.PutId("c", "x", IdEntry{1, 7, 2});
  batch.PutRow("c", 1, 7, MakeRecord("x", "the text"));
  ASSERT_TRUE((*store)->Write(batch, false).ok());

  auto id = (*store)->GetId("c", "x");
  ASSERT_TRUE(id.ok() && id->has_value());
  EXPECT_EQ((*id)->generation, 1u);
  EXPECT_EQ((*id)->row, 7u);
  EXPECT_EQ((*id)->prev_row, std::optional<uint64_t>(2));

  auto with_text = (*store)->GetRow("c", 1, 7, /*with_text=*/true);
  ASSERT_TRUE(with_text.ok() && with_text->has_value());
  EXPECT_EQ((*with_text)->id, "x");
  EXPECT_EQ((*with_text)->text, "the text");
  EXPECT_EQ((*with_text)->ns, "ns-x");
  EXPECT_EQ((*with_text)->metadata, MakeRecord("x", "").metadata);
  EXPECT_EQ((*with_text)->timestamp_ms, 1700000000000);
  auto without = (*store)->GetRow("c", 1, 7, /*with_text=*/false);
  ASSERT_TRUE(without.ok() && without->has_value());
  EXPECT_EQ((*without)->text, "");

  auto other_gen = (*store)->GetRow("c", 2, 7, true);
  ASSERT_TRUE(other_gen.ok());
  EXPECT_FALSE(other_gen->has_value());
  auto other_coll = (*store)->GetId("d", "x");
  ASSERT_TRUE(other_coll.ok());
  EXPECT_FALSE(other_coll->has_value());
}

TEST(MetaStoreTest, ScansKeepRowOrderWithinOneCollectionAndGeneration) {
  const auto dir = MakeTempDir("meta_scan");
  auto store = MetaStore::Open(dir);
  ASSERT_TRUE(store.ok());
  auto batch = (*store)->NewBatch();
  // Row 256 sorts after row 255 only if rows are big-endian in the key.
  for (uint64_t row : {256u, 3u, 255u, 0u}) {
    batch.PutRow("c", 1, row, MakeRecord("r" + std::to_string(row), ""));
  }
  batch.PutRow("c", 2, 1, MakeRecord("gen2", ""));
  batch.PutRow("c2", 1, 1, MakeRecord("other", ""));  // "c" is its prefix
  batch.PutId("c", "a", IdEntry{1, 0, std::nullopt});
  batch.PutId("c", "b", IdEntry{1, 3, std::nullopt});
  batch.PutId("c2", "a", IdEntry{1, 1, std::nullopt});
  ASSERT_TRUE((*store)->Write(batch, false).ok());

  EXPECT_EQ(RowsOf(**store, "c", 1, 0),
            (std::vector<uint64_t>{0, 3, 255, 256}));
  EXPECT_EQ(RowsOf(**store, "c", 1, 4), (std::vector<uint64_t>{255, 256}));
  EXPECT_EQ(RowsOf(**store, "c", 2, 0), (std::vector<uint64_t>{1}));

  std::vector<std::string> ids;
  ASSERT_TRUE((*store)
                  ->ScanIds("c",
                            [&](const std::string& id, const IdEntry&) {
                              ids.push_back(id);
                              return OkStatus();
                            })
                  .ok());
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b"}));

  // A callback's error stops the scan and comes back as is.
  int seen = 0;
  Status stopped = (*store)->ScanRows("c", 1, 0, [&](uint64_t, Record) {
    ++seen;
    return CancelledError("enough");
  });
  EXPECT_EQ(stopped.code(), StatusCode::kCancelled);
  EXPECT_EQ(seen, 1);
}

TEST(MetaStoreTest, DeletesGenerationsAndDropsCollections) {
  const auto dir = MakeTempDir("meta_drop");
  auto store = MetaStore::Open(dir);
  ASSERT_TRUE(store.ok());
  auto batch = (*store)->NewBatch();
  batch.PutCollection(MakeMeta("c"));
  batch.PutCollection(MakeMeta("keep"));
  for (uint64_t gen : {1u, 2u}) batch.PutRow("c", gen, 0, MakeRecord("x", "t"));
  batch.PutId("c", "x", IdEntry{2, 0, std::nullopt});
  batch.PutRow("keep", 1, 0, MakeRecord("y", ""));
  ASSERT_TRUE((*store)->Write(batch, false).ok());

  auto drop_gen = (*store)->NewBatch();
  drop_gen.DeleteGeneration("c", 1);
  EXPECT_EQ(drop_gen.Count(), 2u);  // rows and documents ranges
  ASSERT_TRUE((*store)->Write(drop_gen, false).ok());
  EXPECT_TRUE(RowsOf(**store, "c", 1, 0).empty());
  EXPECT_EQ(RowsOf(**store, "c", 2, 0), (std::vector<uint64_t>{0}));

  ASSERT_TRUE((*store)->DropCollection("c").ok());
  auto meta = (*store)->GetCollection("c");
  ASSERT_TRUE(meta.ok());
  EXPECT_FALSE(meta->has_value());
  EXPECT_TRUE(RowsOf(**store, "c", 2, 0).empty());
  auto id = (*store)->GetId("c", "x");
  ASSERT_TRUE(id.ok());
  EXPECT_FALSE(id->has_value());
  EXPECT_EQ(RowsOf(**store, "keep", 1, 0), (std::vector<uint64_t>{0}));
}

TEST(MetaStoreTest, IngestedRowsAreReadableAndDuplicatesRefused) {
  const auto dir = MakeTempDir("meta_ingest");
  auto store = MetaStore::Open(dir);
  ASSERT_TRUE(store.ok());
  const std::vector<Record> records = {MakeRecord("p", "one"),
                                       MakeRecord("q", "two")};
  ASSERT_TRUE((*store)->IngestNewRows("c", 1, 10, records).ok());
  auto q = (*store)->GetId("c", "q");
  ASSERT_TRUE(q.ok() && q->has_value());
  EXPECT_EQ((*q)->row, 11u);
  EXPECT_FALSE((*q)->prev_row.has_value());
  auto row = (*store)->GetRow("c", 1, 11, true);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->text, "two");

  const std::vector<Record> twice = {MakeRecord("r", ""), MakeRecord("r", "")};
  Status s = (*store)->IngestNewRows("c", 1, 12, twice);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'r' twice"), std::string::npos) << s.message();
  auto r = (*store)->GetId("c", "r");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());  // nothing written
}

TEST(MetaStoreTest, SyncedWritesSurviveAReopenAndReachASecondary) {
  const auto dir = MakeTempDir("meta_reopen");
  {
    auto store = MetaStore::Open(dir);
    ASSERT_TRUE(store.ok());
    auto batch = (*store)->NewBatch();
    batch.PutCollection(MakeMeta("c"));
    batch.PutId("c", "x", IdEntry{3, 5, std::nullopt});
    ASSERT_TRUE((*store)->Write(batch, /*sync=*/true).ok());
  }
  auto store = MetaStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto id = (*store)->GetId("c", "x");
  ASSERT_TRUE(id.ok() && id->has_value());
  EXPECT_EQ((*id)->row, 5u);

  auto secondary = MetaStore::OpenSecondary(dir, MakeTempDir("meta_second"));
  ASSERT_TRUE(secondary.ok()) << secondary.status().message();
  auto batch = (*store)->NewBatch();
  batch.PutId("c", "later", IdEntry{3, 6, std::nullopt});
  ASSERT_TRUE((*store)->Write(batch, /*sync=*/true).ok());
  ASSERT_TRUE((*secondary)->CatchUp().ok());
  auto later = (*secondary)->GetId("c", "later");
  ASSERT_TRUE(later.ok() && later->has_value());
  EXPECT_EQ((*later)->row, 6u);
  // The secondary is read-only.
  const std::vector<Record> one = {MakeRecord("z", "")};
  EXPECT_EQ((*secondary)->IngestNewRows("c", 3, 7, one).code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace zv::index
