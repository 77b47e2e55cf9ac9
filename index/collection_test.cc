// Collection behaviour: validation, replace/delete/get, reopen, compaction,
// attached readers, HNSW and IVF-PQ persistence, concurrency. Over 600 lines:
// one fixture for the whole Collection contract.
#include "index/collection.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "index/collection_impl.h"
#include "index/hnsw_pieces.h"
#include "index/test_util.h"

namespace zv::index {
namespace {

using testing::IdOf;
using testing::MakeTempDir;
using testing::RandomVectors;

constexpr uint32_t kDim = 32;

// Small HNSW pieces, so the builder thread runs (and races the writer and
// searches under TSan) in every HNSW test here.
const bool kSmallPieces = [] {
  PieceOptions o;
  o.interval = 500;
  SetPieceOptions(o);
  return true;
}();

std::vector<Record> Records(size_t first, size_t n,
                            const std::string& tag = "") {
  std::vector<Record> recs(n);
  for (size_t i = 0; i < n; ++i) {
    recs[i].id = IdOf(first + i);
    recs[i].text = "text of " + IdOf(first + i) + tag;
    recs[i].ns = (first + i) % 2 ? "odd" : "even";
    recs[i].metadata = {{"k", std::to_string((first + i) % 10)}, {"tag", tag}};
    recs[i].timestamp_ms = static_cast<int64_t>(first + i);
  }
  return recs;
}

class CollectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("coll");
    Reopen();
  }
  void Reopen() {
    coll_.reset();
    db_.reset();
    auto db = Database::Open(dir_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(db).value();
  }
  std::shared_ptr<Collection> Create(
      const std::string& descriptor, size_t rows,
      shm::Metric metric = shm::Metric::kInnerProduct) {
    CollectionOptions o;
    o.dim = kDim;
    o.metric = metric;
    o.index.descriptor = descriptor;
    o.rows_per_extent = 1000;
    auto c = db_->CreateCollection("c", o);
    EXPECT_TRUE(c.ok()) << c.status();
    data_ = RandomVectors(rows, kDim, 11, true);
    for (size_t first = 0; first < rows; first += 500) {
      const size_t n = std::min<size_t>(500, rows - first);
      EXPECT_TRUE((*c)->Upsert(Records(first, n),
                               std::span(data_).subspan(first * kDim, n * kDim))
                      .ok());
    }
    return *c;
  }
  std::vector<std::string> TopIds(const Collection& c, const float* q, int k,
                                  const Filter& f = Filter()) {
    SearchOptions o;
    o.k = k;
    o.filter = f;
    auto r = c.Search(std::span(q, kDim), o);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<std::string> ids;
    for (const Hit& h : (*r)[0]) ids.push_back(h.id);
    return ids;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Database> db_;
  std::shared_ptr<Collection> coll_;
  std::vector<float> data_;
};

// Every bad upsert is InvalidArgument, with a message naming the problem.
void ExpectBadUpsertsRejected(Collection& c) {
  const std::vector<float> one = RandomVectors(1, kDim, 1);
  std::vector<float> nan = one, inf = one;
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  inf[5] = std::numeric_limits<float>::infinity();
  Record ok = Records(1000, 1)[0];
  Record empty_id = ok, long_id = ok, bad_meta = ok;
  empty_id.id = "";
  long_id.id = std::string(kMaxIdBytes + 1, 'x');
  bad_meta.metadata[""] = "v";
  Record bad_text = ok, blank_text = ok, bad_ns = ok;
  bad_text.text = "ok \xff";
  blank_text.text = " \n";
  bad_ns.ns = "\xc3";
  std::vector<float> huge = one;
  huge[0] = 3e38f;
  const std::vector<float> two = RandomVectors(2, kDim, 2);
  struct Case {
    std::string name;
    std::vector<Record> recs;
    std::vector<float> vecs;
    std::string message;
  };
  const std::vector<Case> upserts = {
      {"wrong dimension",
       {ok},
       std::vector<float>(kDim - 1, 0.f),
       "vectors has 31 floats"},
      {"NaN", {ok}, nan, "vectors[0][3] is not finite"},
      {"Inf", {ok}, inf, "vectors[0][5] is not finite"},
      {"empty id", {empty_id}, one, "records[0].id is empty"},
      {"id too long", {long_id}, one, "records[0].id is 513 bytes"},
      {"duplicate ids",
       {ok, ok},
       two,
       "records[1].id 'doc-1000' appears twice"},
      {"empty metadata key",
       {bad_meta},
       one,
       "records[0].metadata has an empty key"},
      {"text not UTF-8",
       {bad_text},
       one,
       "records[0].text: not valid UTF-8 (byte 3)"},
      {"blank text", {blank_text}, one, "records[0].text is only whitespace"},
      {"namespace not UTF-8",
       {bad_ns},
       one,
       "records[0].namespace: not valid UTF-8 (byte 0)"},
      {"scores would overflow",
       {ok},
       huge,
       "vectors[0]: squared norm 9e+76 is over the limit"},
  };
  for (const Case& t : upserts) {
    Status s = c.Upsert(t.recs, t.vecs);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << t.name;
    EXPECT_NE(s.message().find(t.message), std::string::npos)
        << t.name << ": " << s.message();
  }
}

// Every bad search is InvalidArgument, with a message naming the problem.
void ExpectBadSearchesRejected(Collection& c) {
  const std::vector<float> one = RandomVectors(1, kDim, 1);
  std::vector<float> nan = one;
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> huge = one;
  huge[0] = 3e38f;
  struct SearchCase {
    std::string name;
    std::vector<float> q;
    SearchOptions o;
    std::string message;
  };
  SearchOptions k0, kbig, time, key, ef_neg, ef_small, ef_big;
  k0.k = 0;
  kbig.k = kMaxK + 1;
  ef_neg.ef_search = -1;
  ef_small.ef_search = ef_small.k - 1;
  ef_big.ef_search = kMaxEfSearch + 1;
  time.filter.min_timestamp_ms = 10;
  time.filter.max_timestamp_ms = 5;
  key.filter.metadata_equals[""] = "x";
  const std::vector<SearchCase> searches = {
      {"k = 0", one, k0, "k must be in [1, 1000]"},
      {"k too big", one, kbig, "k must be in [1, 1000], got 1001"},
      {"query dim", std::vector<float>(kDim + 1, 0.f), SearchOptions(),
       "multiple of dim 32"},
      {"query NaN", nan, SearchOptions(), "queries[0][3] is not finite"},
      {"query too big", huge, SearchOptions(),
       "queries[0]: squared norm 9e+76"},
      {"min > max", one, time, "filter.min_timestamp_ms (10) is greater"},
      {"empty key", one, key, "filter.metadata_equals: empty key"},
      {"ef_search < 0", one, ef_neg, "ef_search must be 0 (index default)"},
      {"ef_search < k", one, ef_small, "got 9 with k 10"},
      {"ef_search too big", one, ef_big, "in [k, 4096], got 4097"},
  };
  for (const SearchCase& t : searches) {
    auto r = c.Search(t.q, t.o);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << t.name;
    EXPECT_NE(r.status().message().find(t.message), std::string::npos)
        << t.name << ": " << r.status().message();
  }
}

TEST_F(CollectionTest, BadInputIsRejectedAndChangesNothing) {
  auto c = Create("Flat", 100);
  const CollectionInfo before = c->Describe();
  ExpectBadUpsertsRejected(*c);
  ExpectBadSearchesRejected(*c);
  const std::vector<std::string> bad_ids = {""};
  EXPECT_EQ(c->Delete(bad_ids).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(db_->GetCollection("nope").status().code(), StatusCode::kNotFound);
  for (const std::string& bad : std::vector<std::string>{
           "", "a/b", "..", "x.y", std::string(65, 'a'), "-x"}) {
    EXPECT_EQ(
        db_->CreateCollection(bad, CollectionOptions{.dim = 4}).status().code(),
        StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(
      db_->CreateCollection("d", CollectionOptions{.dim = 0}).status().code(),
      StatusCode::kInvalidArgument);
  CollectionOptions bad_index{.dim = 30};
  bad_index.index.descriptor = "IVF10,PQ7";
  EXPECT_EQ(db_->CreateCollection("d", bad_index).status().code(),
            StatusCode::kInvalidArgument);

  // Nothing changed.
  const CollectionInfo after = c->Describe();
  EXPECT_EQ(after.rows, before.rows);
  EXPECT_EQ(after.live_rows, before.live_rows);
  EXPECT_FALSE(*c->Contains("doc-1000"));
  const std::vector<std::string> probe = {IdOf(5)};
  auto got = c->Get(probe);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].vector,
            std::vector<float>(&data_[5 * kDim], &data_[6 * kDim]));
  EXPECT_EQ(db_->ListCollections(), std::vector<std::string>{"c"});
}

TEST_F(CollectionTest, UpsertReplacesDeleteRemovesAndReopenKeeps) {
  auto c = Create("Flat", 1200);
  const std::vector<float> fresh = RandomVectors(10, kDim, 77, true);
  ASSERT_TRUE(c->Upsert(Records(100, 10, "v2"), fresh).ok());
  const std::vector<std::string> del = {IdOf(5), IdOf(6), "missing"};
  auto n = c->Delete(del);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  auto check = [&](const Collection& coll) {
    const CollectionInfo info = coll.Describe();
    EXPECT_EQ(info.rows, 1210u);
    EXPECT_EQ(info.live_rows, 1198u);
    const std::vector<std::string> ids = {IdOf(103), IdOf(5), IdOf(7)};
    auto got = coll.Get(ids);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->size(), 2u);
    EXPECT_EQ((*got)[0].record.id, IdOf(103));
    EXPECT_EQ((*got)[0].record.text, "text of doc-103v2");
    EXPECT_EQ((*got)[0].record.metadata.at("tag"), "v2");
    EXPECT_EQ((*got)[0].vector,
              std::vector<float>(&fresh[3 * kDim], &fresh[4 * kDim]));
    EXPECT_EQ((*got)[1].vector,
              std::vector<float>(&data_[7 * kDim], &data_[8 * kDim]));
    // The replaced vector is found under its id once, with the new data.
    SearchOptions o;
    o.k = 3;
    o.include_documents = true;
    auto r = coll.Search(std::span(&fresh[3 * kDim], kDim), o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ((*r)[0][0].id, IdOf(103));
    EXPECT_NEAR((*r)[0][0].score, 1.0f, 1e-5);
    EXPECT_EQ((*r)[0][0].record.text, "text of doc-103v2");
    EXPECT_EQ((*r)[0][0].record.ns, "odd");
    auto old = coll.Search(std::span(&data_[103 * kDim], kDim), o);
    for (const Hit& h : (*old)[0]) EXPECT_LT(h.score, 0.999f) << h.id;
    EXPECT_TRUE(TopIds(coll, &data_[5 * kDim], 1) !=
                std::vector<std::string>{IdOf(5)});
  };
  check(*c);
  c.reset();
  Reopen();
  auto again = db_->GetCollection("c");
  ASSERT_TRUE(again.ok());
  check(**again);
  // New writes work after reopen.
  ASSERT_TRUE(
      (*again)->Upsert(Records(5000, 1), RandomVectors(1, kDim, 3)).ok());
  EXPECT_TRUE(*(*again)->Contains(IdOf(5000)));
}

// Reservations filled out of order on other threads, committed in order; a
// replaced id, an out-of-order commit, a NaN row (then the appender refuses
// more), and a reopen that keeps exactly what was committed.
TEST_F(CollectionTest, BulkAppendOverlapsFillAndCommitsInOrder) {
  auto c = Create("Flat", 100);
  const std::vector<float> fresh = RandomVectors(1500, kDim, 5, true);
  {
    auto appender = c->StartBulkAppend();
    ASSERT_TRUE(appender.ok()) << appender.status();
    std::vector<ReservedRows> reserved;
    const std::vector<Record> batches[3] = {
        Records(50, 500, "b"), Records(550, 500), Records(1050, 500)};
    for (size_t b = 0; b < 3; ++b) {  // 3 x 500 rows, crossing extents
      auto r = (*appender)->Reserve(batches[b]);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->first, 100 + 500 * b);
      reserved.push_back(std::move(r).value());
    }
    // Fill the last batch first, each on its own thread.
    std::vector<std::thread> fillers;
    for (size_t b = 3; b-- > 0;) {
      fillers.emplace_back([&, b] {
        for (size_t i = 0; i < 500; ++i) {
          std::memcpy(reserved[b].rows[i], &fresh[(b * 500 + i) * kDim],
                      kDim * sizeof(float));
        }
      });
    }
    for (auto& t : fillers) t.join();
    // Batch 1 before batch 0: refused, nothing published.
    EXPECT_EQ((*appender)->Commit(reserved[1], batches[1]).code(),
              StatusCode::kFailedPrecondition);
    EXPECT_EQ(c->Describe().rows, 100u);
    // Batch 0 replaces doc-50..doc-99 (ids 50..549).
    ASSERT_TRUE((*appender)->Commit(reserved[0], batches[0]).ok());
    EXPECT_EQ(c->Describe().rows, 600u);
    EXPECT_EQ(c->Describe().live_rows, 550u);
    EXPECT_EQ(TopIds(*c, &fresh[0], 1), std::vector<std::string>{IdOf(50)});
    reserved[1].rows[7][3] = std::nanf("");
    EXPECT_EQ((*appender)->Commit(reserved[1], batches[1]).code(),
              StatusCode::kInvalidArgument);
    EXPECT_FALSE(
        (*appender)->Reserve(Records(9, 1)).ok());  // refuses after a failure
    EXPECT_EQ(c->Describe().rows, 600u);
  }
  // The writer lock is released: a plain upsert works again.
  ASSERT_TRUE(c->Upsert(Records(9000, 1), RandomVectors(1, kDim, 9)).ok());
  c.reset();
  Reopen();
  auto again = db_->GetCollection("c");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Describe().live_rows, 551u);
  const std::vector<std::string> ids = {IdOf(49), IdOf(50), IdOf(549),
                                        IdOf(550)};
  auto got = (*again)->Get(ids);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[1].record.text, "text of doc-50b");
  EXPECT_EQ((*got)[1].vector, std::vector<float>(&fresh[0], &fresh[kDim]));
}

// Into an empty collection, batches stage concurrently and out of order (their
// metadata written before earlier batches publish); a batch repeating an
// earlier batch's id is looked up at its ordered commit, so the later record
// wins, as with Upsert.
TEST_F(CollectionTest, BulkAppendStagesIndependentBatchesConcurrently) {
  CollectionOptions o;
  o.dim = kDim;
  o.rows_per_extent = 1000;
  auto c = db_->CreateCollection("c", o);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<float> v = RandomVectors(2000, kDim, 21, true);
  std::vector<std::vector<Record>> batches;
  for (size_t b = 0; b < 4; ++b) batches.push_back(Records(b * 500, 500));
  batches[3][7] = Records(3, 1, "again")[0];  // repeats batch 0's doc-3
  {
    auto appender = (*c)->StartBulkAppend();
    ASSERT_TRUE(appender.ok());
    std::vector<ReservedRows> reserved;
    for (auto& b : batches) reserved.push_back(*(*appender)->Reserve(b));
    EXPECT_TRUE(reserved[0].independent);
    EXPECT_FALSE(reserved[3].independent);
    std::vector<std::thread> stagers;
    for (size_t b = 4; b-- > 0;) {
      stagers.emplace_back([&, b] {
        for (size_t i = 0; i < 500; ++i) {
          std::memcpy(reserved[b].rows[i], &v[(b * 500 + i) * kDim],
                      kDim * sizeof(float));
        }
        EXPECT_TRUE((*appender)->Stage(reserved[b], batches[b]).ok());
      });
    }
    for (auto& t : stagers) t.join();
    EXPECT_EQ((*c)->Describe().rows, 0u);  // staged is not published
    for (size_t b = 0; b < 4; ++b) {
      ASSERT_TRUE((*appender)->Commit(reserved[b], batches[b]).ok()) << b;
    }
  }
  EXPECT_EQ((*c)->Describe().rows, 2000u);
  EXPECT_EQ((*c)->Describe().live_rows, 1999u);  // doc-3 once, doc-1507 never
  const std::vector<std::string> ids = {IdOf(3), IdOf(1999)};
  auto got = (*c)->Get(ids);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].record.text, "text of doc-3again");
  EXPECT_EQ((*got)[0].vector,
            std::vector<float>(&v[1507 * kDim], &v[1508 * kDim]));
  EXPECT_EQ(TopIds(**c, &v[3 * kDim], 1)[0] == IdOf(3), false);
}

// Large independent batches store their metadata as ingested table files. A
// batch staged (its files ingested) but never committed is dropped when the
// collection reopens, as a crash would leave it; the ingested entries behave
// like written ones under later upserts and deletes.
TEST_F(CollectionTest, BulkAppendIngestsLargeBatchesAndUncommittedOnesDrop) {
  constexpr size_t kBatch = 5000;  // above the ingestion threshold
  CollectionOptions o;
  o.dim = kDim;
  o.rows_per_extent = 4096;
  auto c = db_->CreateCollection("c", o);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<float> v = RandomVectors(3 * kBatch, kDim, 31, true);
  std::vector<std::vector<Record>> batches;
  for (size_t b = 0; b < 3; ++b) batches.push_back(Records(b * kBatch, kBatch));
  {
    auto appender = (*c)->StartBulkAppend();
    ASSERT_TRUE(appender.ok());
    std::vector<ReservedRows> reserved;
    for (auto& b : batches) reserved.push_back(*(*appender)->Reserve(b));
    std::vector<std::thread> stagers;
    for (size_t b = 0; b < 3; ++b) {
      ASSERT_TRUE(reserved[b].independent);
      stagers.emplace_back([&, b] {
        for (size_t i = 0; i < kBatch; ++i) {
          std::memcpy(reserved[b].rows[i], &v[(b * kBatch + i) * kDim],
                      kDim * sizeof(float));
        }
        EXPECT_TRUE((*appender)->Stage(reserved[b], batches[b]).ok());
      });
    }
    for (auto& t : stagers) t.join();
    for (size_t b = 0; b < 2; ++b) {  // the third is never committed
      ASSERT_TRUE((*appender)->Commit(reserved[b], batches[b]).ok()) << b;
    }
  }
  c->reset();
  // Table files of a batch that never reached ingestion are removed on open.
  const auto stray = dir_ / "meta" / "ingest" / "b999.sst";
  { std::ofstream(stray) << "partial"; }
  Reopen();
  EXPECT_FALSE(std::filesystem::exists(stray));
  c = db_->GetCollection("c");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->Describe().rows, 2 * kBatch);
  EXPECT_EQ((*c)->Describe().live_rows, 2 * kBatch);
  const std::vector<std::string> ids = {IdOf(0), IdOf(kBatch + 17),
                                        IdOf(2 * kBatch + 3)};
  auto got = (*c)->Get(ids);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);  // the uncommitted batch's id is not there
  EXPECT_EQ((*got)[1].record.text, "text of " + IdOf(kBatch + 17));
  EXPECT_EQ((*got)[1].record.metadata.at("k"),
            std::to_string((kBatch + 17) % 10));
  EXPECT_EQ((*got)[1].vector, std::vector<float>(&v[(kBatch + 17) * kDim],
                                                 &v[(kBatch + 18) * kDim]));
  EXPECT_EQ(TopIds(**c, &v[(kBatch + 17) * kDim], 1)[0], IdOf(kBatch + 17));

  // Replacing and deleting ingested ids; loading the dropped batch again.
  ASSERT_TRUE(
      (*c)->Upsert(Records(17, 1, "new"), std::span(v).subspan(0, kDim)).ok());
  const std::vector<std::string> gone = {IdOf(18)};
  ASSERT_TRUE((*c)->Delete(gone).ok());
  {
    auto appender = (*c)->StartBulkAppend();
    ASSERT_TRUE(appender.ok());
    auto reserved = (*appender)->Reserve(batches[2]);
    ASSERT_TRUE(reserved.ok());
    for (size_t i = 0; i < kBatch; ++i) {
      std::memcpy(reserved->rows[i], &v[(2 * kBatch + i) * kDim],
                  kDim * sizeof(float));
    }
    ASSERT_TRUE((*appender)->Commit(*reserved, batches[2]).ok());
  }
  c->reset();
  Reopen();
  c = db_->GetCollection("c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->Describe().live_rows, 3 * kBatch - 1);
  const std::vector<std::string> check = {IdOf(17), IdOf(18),
                                          IdOf(2 * kBatch + 3)};
  got = (*c)->Get(check);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].record.text, "text of " + IdOf(17) + "new");
  EXPECT_EQ((*got)[1].record.text, "text of " + IdOf(2 * kBatch + 3));
}

TEST_F(CollectionTest, CompactionDropsTombstonesAndAttachedReadersFollow) {
  auto c = Create("HNSW16", 2500);
  auto attached = AttachedCollection::Attach(dir_, "c");
  ASSERT_TRUE(attached.ok()) << attached.status();
  std::vector<std::string> del;
  for (size_t i = 0; i < 2500; i += 3) del.push_back(IdOf(i));
  ASSERT_TRUE(c->Delete(del).ok());
  const float* q = &data_[10 * kDim];
  const auto before = TopIds(*c, q, 10);
  ASSERT_TRUE(c->Compact().ok());
  const CollectionInfo info = c->Describe();
  EXPECT_EQ(info.generation, 2u);
  EXPECT_EQ(info.tombstones, 0u);
  EXPECT_EQ(info.rows, 2500u - del.size());
  EXPECT_EQ(TopIds(*c, q, 10), before);
  ASSERT_TRUE((*attached)->Refresh().ok());
  EXPECT_EQ((*attached)->Describe().generation, 2u);
  SearchOptions o;
  auto r = (*attached)->Search(std::span(q, kDim), o);
  ASSERT_TRUE(r.ok());
  std::vector<std::string> ids;
  for (const Hit& h : (*r)[0]) ids.push_back(h.id);
  EXPECT_EQ(ids, before);
  // Survives a reopen in its new generation, and accepts writes.
  c.reset();
  attached->reset();
  Reopen();
  auto again = db_->GetCollection("c");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Describe().generation, 2u);
  EXPECT_EQ(TopIds(**again, q, 10), before);
  EXPECT_TRUE(
      (*again)->Upsert(Records(9000, 1), RandomVectors(1, kDim, 4)).ok());
}

TEST_F(CollectionTest, AttachedSearchEqualsWriterFlatSearch) {
  auto c = Create("Flat", 3000, shm::Metric::kL2);
  ASSERT_TRUE(c->Delete(std::vector<std::string>{IdOf(1), IdOf(2)}).ok());
  auto attached = AttachedCollection::Attach(dir_, "c");
  ASSERT_TRUE(attached.ok()) << attached.status();
  // Writes after attach become visible on Refresh.
  ASSERT_TRUE(
      c->Upsert(Records(3000, 100), RandomVectors(100, kDim, 8, true)).ok());
  ASSERT_TRUE((*attached)->Refresh().ok());
  EXPECT_EQ((*attached)->Describe().rows, c->Describe().rows);
  const std::vector<float> q = RandomVectors(16, kDim, 21, true);
  SearchOptions o;
  o.k = 20;
  for (int f = 0; f < 2; ++f) {
    if (f == 1) o.filter.ns = "odd", o.filter.metadata_equals = {{"k", "3"}};
    auto a = c->Search(q, o);
    auto b = (*attached)->Search(q, o);
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < a->size(); ++i) {
      ASSERT_EQ((*a)[i].size(), (*b)[i].size());
      for (size_t j = 0; j < (*a)[i].size(); ++j) {
        EXPECT_EQ((*a)[i][j].id, (*b)[i][j].id);
        EXPECT_EQ((*a)[i][j].score, (*b)[i][j].score);
      }
    }
  }
}

TEST_F(CollectionTest, HnswIsAccurateFiltersFillKAndPiecesReload) {
  auto c = Create("HNSW16", 4000);
  ASSERT_TRUE(dynamic_cast<CollectionImpl&>(*c).WaitIndexIdle(
      std::chrono::seconds(120)));
  EXPECT_GE(dynamic_cast<CollectionImpl&>(*c).IndexedRows(), 3500u);
  const std::vector<float> q = RandomVectors(20, kDim, 5, true);
  int agree = 0;
  std::vector<std::vector<std::string>> before;
  for (int i = 0; i < 20; ++i) {
    before.push_back(TopIds(*c, &q[i * kDim], 10));
    Filter none;
    // A filter matching every row forces the exact path: the reference.
    Filter all;
    all.min_timestamp_ms = 0;
    const auto exact = TopIds(*c, &q[i * kDim], 10, all);
    for (const auto& id : before.back()) {
      agree += std::count(exact.begin(), exact.end(), id);
    }
  }
  EXPECT_GE(agree, 190);  // recall@10 >= 0.95
  Filter rare;
  rare.metadata_equals = {{"k", "7"}};
  rare.ns = "odd";
  EXPECT_EQ(TopIds(*c, &q[0], 50, rare).size(), 50u);
  c.reset();
  Reopen();
  // The pieces are on disk as built; reopening maps them, builds nothing.
  EXPECT_TRUE(std::filesystem::exists(dir_ / "collections/c/gen.000001" /
                                      kManifestFile));
  auto again = db_->GetCollection("c");
  ASSERT_TRUE(again.ok());
  EXPECT_GE(dynamic_cast<CollectionImpl&>(**again).IndexedRows(), 3500u);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(TopIds(**again, &q[i * kDim], 10), before[i]);
}

TEST_F(CollectionTest, IvfPqTrainsMmapsAndReloads) {
  auto c = Create("IVF16,PQ8", 12000);
  EXPECT_TRUE(
      std::filesystem::exists(dir_ / "collections/c/gen.000001/ivfpq.index"));
  const std::vector<float> q = RandomVectors(10, kDim, 5, true);
  int agree = 0;
  std::vector<std::vector<std::string>> before;
  for (int i = 0; i < 10; ++i) {
    before.push_back(TopIds(*c, &q[i * kDim], 10));
    Filter all;
    all.min_timestamp_ms = 0;
    const auto exact = TopIds(*c, &q[i * kDim], 10, all);
    for (const auto& id : before.back())
      agree += std::count(exact.begin(), exact.end(), id);
  }
  EXPECT_GE(agree, 80);
  c.reset();
  Reopen();
  auto again = db_->GetCollection("c");
  ASSERT_TRUE(again.ok());
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(TopIds(**again, &q[i * kDim], 10), before[i]);
}

TEST_F(CollectionTest, ConcurrentSearchesWithOneWriter) {
  auto c = Create("HNSW16", 1000);
  std::atomic<bool> done{false};
  std::atomic<int> searches{0}, failures{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&, t] {
      const std::vector<float> q = RandomVectors(4, kDim, 100 + t, true);
      SearchOptions o;
      o.k = 10;
      if (t == 1) o.filter.ns = "even";
      while (!done) {
        auto r = c->Search(q, o);
        if (!r.ok() || (*r)[0].size() != 10) ++failures;
        ++searches;
      }
    });
  }
  for (size_t first = 1000; first < 4000; first += 100) {
    ASSERT_TRUE(
        c->Upsert(Records(first, 100), RandomVectors(100, kDim, first, true))
            .ok());
    if (first % 1000 == 0) {
      ASSERT_TRUE(c->Delete(std::vector<std::string>{IdOf(first)}).ok());
    }
  }
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_GT(searches, 0);
  EXPECT_EQ(c->Describe().live_rows, 4000u - 3);
}

TEST_F(CollectionTest, DropRemovesEverything) {
  auto c = Create("Flat", 10);
  ASSERT_TRUE(db_->DropCollection("c").ok());
  EXPECT_EQ(db_->GetCollection("c").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(db_->DropCollection("c").code(), StatusCode::kNotFound);
  EXPECT_EQ(c->Upsert(Records(0, 1), RandomVectors(1, kDim, 1)).code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "collections/c"));
  // The name is free again and starts empty.
  auto fresh = db_->CreateCollection("c", CollectionOptions{.dim = kDim});
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->Describe().rows, 0u);
  EXPECT_FALSE(*(*fresh)->Contains(IdOf(1)));
}

}  // namespace
}  // namespace zv::index
