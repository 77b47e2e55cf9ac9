// The live HNSW index (hnsw_pieces.h): recall of pieces and merges, searches
// that never wait for a writer, reopen after SIGKILL without re-inserting,
// attached readers searching the same pieces, damaged files dropped and
// rebuilt. Small intervals, so every test builds several pieces in seconds.
#include "index/hnsw_pieces.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "index/ann_index.h"
#include "index/collection.h"
#include "index/collection_impl.h"
#include "index/test_util.h"

namespace zv::index {
namespace {

using Clock = std::chrono::steady_clock;
using testing::IdOf;

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr double kSlow = 8;  // sanitizers: generous time limits
#else
constexpr double kSlow = 1;
#endif

constexpr uint32_t kDim = 48;
constexpr uint64_t kInterval = 400;
constexpr int kReadyFd = 3;

void SmallPieces() {
  PieceOptions o;
  o.interval = kInterval;
  SetPieceOptions(o);
}

std::vector<Record> Records(size_t first, size_t n) {
  std::vector<Record> recs(n);
  for (size_t i = 0; i < n; ++i) {
    recs[i].id = IdOf(first + i);
    recs[i].ns = (first + i) % 2 ? "odd" : "even";
    recs[i].timestamp_ms = static_cast<int64_t>(first + i);
  }
  return recs;
}

CollectionImpl& Impl(Collection& c) { return dynamic_cast<CollectionImpl&>(c); }

class HnswPiecesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SmallPieces();
    dir_ = testing::MakeTempDir("pieces");
    Open();
  }
  void Open() {
    db_.reset();
    auto db = Database::Open(dir_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(db).value();
  }
  std::shared_ptr<Collection> Create(shm::Metric metric) {
    CollectionOptions o;
    o.dim = kDim;
    o.metric = metric;
    o.index.descriptor = "HNSW32";
    o.rows_per_extent = 1500;  // pieces straddle extents
    auto c = db_->CreateCollection("c", o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : nullptr;
  }
  // Upserts rows [first, first + n) of data_ in batches of `batch`.
  void Add(Collection& c, size_t first, size_t n, size_t batch = 200) {
    for (size_t b = first; b < first + n; b += batch) {
      const size_t m = std::min(batch, first + n - b);
      ASSERT_TRUE(
          c.Upsert(Records(b, m), std::span(data_).subspan(b * kDim, m * kDim))
              .ok());
    }
  }
  std::filesystem::path GenDir() const {
    return dir_ / "collections/c/gen.000001";
  }

  std::filesystem::path dir_;
  std::unique_ptr<Database> db_;
  std::vector<float> data_;
};

// Several tail builds and at least one merge; recall@10 of the pieces alone
// (no exact tail involved) against brute force over the rows they cover.
TEST_F(HnswPiecesTest, PiecesAndMergesKeepRecall) {
  constexpr size_t kRows = 4000, kQueries = 100;
  data_ = testing::ClusteredVectors(kRows + kQueries, kDim, 40, 7);
  auto c = Create(shm::Metric::kInnerProduct);
  // One interval at a time, so every tail build is one interval and any
  // piece count below kRows / kInterval is the merges' doing.
  for (size_t first = 0; first < kRows; first += kInterval) {
    Add(*c, first, kInterval);
    ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(120)));
  }
  const uint64_t covered = Impl(*c).IndexedRows();
  const size_t pieces = Impl(*c).IndexPieces();
  std::printf("%zu pieces cover %llu of %zu rows\n", pieces,
              static_cast<unsigned long long>(covered), kRows);
  EXPECT_EQ(covered, kRows);
  // 10 tail builds; merges of 4 leave at most 4.
  EXPECT_LE(pieces, 4u);
  EXPECT_GE(pieces, 1u);
  EXPECT_TRUE(std::filesystem::exists(GenDir() / kManifestFile));

  // The pieces searched directly, as the collection does under its lock.
  auto reader = shm::Reader::Attach(GenDir());
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE((*reader)->Refresh().ok());
  auto ann = OpenHnswReader(**reader, GenDir());
  ASSERT_TRUE(ann.ok()) << ann.status();
  EXPECT_EQ((*ann)->indexed(), covered);
  const std::vector<float> base(data_.begin(), data_.begin() + covered * kDim);
  size_t hits = 0;
  const uint32_t stride = (*reader)->info().row_stride;
  for (size_t q = 0; q < kQueries; ++q) {
    const float* query = &data_[(kRows + q) * kDim];
    const auto padded = PadQueries(std::span(query, kDim), kDim, stride);
    TopK top(1, 10, shm::Metric::kInnerProduct);
    uint64_t got = 0;
    ASSERT_TRUE((*ann)
                    ->Search(padded.data(), 1, nullptr, AnnSearchParams(),
                             covered, &top, &got)
                    .ok());
    EXPECT_EQ(got, covered);
    const auto truth = testing::BruteForce(base, kDim, query, 10,
                                           shm::Metric::kInnerProduct, {});
    for (const auto& t : truth)
      hits += std::count(top.rows.begin(), top.rows.end(),
                         static_cast<int64_t>(t.index));
  }
  const double recall = static_cast<double>(hits) / (kQueries * 10);
  std::printf("pieces recall@10 = %.4f\n", recall);
  EXPECT_GE(recall, 0.95);
  ann->reset();

  // Through the collection (pieces + exact tail) with a filter on top.
  SearchOptions o;
  o.k = 10;
  o.filter.ns = "odd";
  auto r = c->Search(std::span(&data_[kRows * kDim], kDim), o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)[0].size(), 10u);
  for (const Hit& h : (*r)[0]) EXPECT_EQ(h.record.ns, "odd");
}

// A writer upserting large batches never holds up searches: its exclusive
// step is publication only; graph building happens on the builder thread.
// (Before pieces, each batch was inserted into the graph under that lock.)
TEST_F(HnswPiecesTest, SearchesDoNotWaitForAWriter) {
  PieceOptions po;
  po.interval = 4000;
  // Writes never wait for the index here (its admission has a test of its
  // own): the writer is as fast as it can be.
  po.max_backlog = UINT64_MAX / 2;
  SetPieceOptions(po);
  // Sanitizers: fewer rows, so the final catch-up stays short.
  constexpr size_t kBase = 8000, kBatch = 4000,
                   kMaxRows = kSlow > 1 ? 24000 : 80000;
  data_ = testing::ClusteredVectors(kMaxRows, kDim, 40, 9);
  auto c = Create(shm::Metric::kInnerProduct);
  Add(*c, 0, kBase, 2000);
  ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(120)));

  const std::vector<float> q = testing::RandomVectors(1, kDim, 3, true);
  auto run = [&](double seconds, std::vector<double>* lat) {
    const auto stop = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < stop) {
      SearchOptions o;
      o.k = 10;
      const auto t0 = Clock::now();
      auto r = c->Search(q, o);
      lat->push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      ASSERT_TRUE(r.ok());
      ASSERT_EQ((*r)[0].size(), 10u);
    }
  };
  std::vector<double> idle, busy;
  run(1.0, &idle);
  std::atomic<bool> done{false};
  size_t written = kBase;
  std::thread writer([&] {
    while (!done && written + kBatch <= kMaxRows) {
      Add(*c, written, kBatch, kBatch);
      written += kBatch;
    }
  });
  run(3.0, &busy);
  done = true;
  writer.join();
  auto pct = [](std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
  };
  const double max_busy = *std::max_element(busy.begin(), busy.end());
  std::printf(
      "idle: %zu searches/s p50 %.2f ms; with a writer (%zu rows written): "
      "%zu searches/s p50 %.2f ms p99 %.2f ms max %.1f ms; %zu pieces\n",
      idle.size(), pct(idle, 0.5), written - kBase, busy.size() / 3,
      pct(busy, 0.5), pct(busy, 0.99), max_busy, Impl(*c).IndexPieces());
  EXPECT_GT(written, kBase + kBatch) << "the writer did not get going";
  // A search only ever waits for a publication step (here ~70 ms at worst
  // with three busy threads on two cores); a generous bound, not a benchmark.
  EXPECT_LT(max_busy, 500 * kSlow);
  EXPECT_GT(busy.size(), 3 * 20u) << "searches starved";
  ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(300)));
  EXPECT_GT(Impl(*c).IndexedRows(), written - po.interval);
}

// Every piece file named by the manifest plus the manifest itself.
std::vector<std::filesystem::path> PieceFiles(const std::filesystem::path& d) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(d)) {
    if (e.path().filename().string().rfind("hnsw.piece.", 0) == 0)
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

[[noreturn]] void ChildMain(const std::string& dir) {
  SmallPieces();
  auto db = Database::Open(dir);
  if (!db.ok()) _exit(2);
  CollectionOptions o;
  o.dim = kDim;
  o.metric = shm::Metric::kL2;
  o.index.descriptor = "HNSW32";
  o.rows_per_extent = 1500;
  auto c = (*db)->CreateCollection("c", o);
  if (!c.ok()) _exit(3);
  const auto data = testing::ClusteredVectors(20000, kDim, 50, 5);
  auto add = [&](size_t first, size_t n) {
    if (!(*c)->Upsert(Records(first, n),
                      std::span(data).subspan(first * kDim, n * kDim))
             .ok())
      _exit(4);
  };
  for (size_t b = 0; b < 3000; b += 300) add(b, 300);
  if (!Impl(**c).WaitIndexIdle(std::chrono::seconds(300))) _exit(5);
  if (write(kReadyFd, "r", 1) != 1) _exit(6);
  // Keeps writing (and the builder building) until killed.
  for (size_t b = 3000; b + 100 <= 20000; b += 100) add(b, 100);
  pause();
  _exit(0);
}

TEST_F(HnswPiecesTest, ReopenAfterSigkillMapsPiecesWithoutReinserting) {
  db_.reset();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(fds[1], kReadyFd);
    const std::string d = "--child=" + dir_.string();
    execl("/proc/self/exe", "hnsw_pieces_test", d.c_str(), nullptr);
    _exit(7);
  }
  close(fds[1]);
  char ready = 0;
  ASSERT_EQ(read(fds[0], &ready, 1), 1) << "child failed before ready";
  close(fds[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, SIGKILL);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  ASSERT_TRUE(WIFSIGNALED(wstatus));

  // A build that was cut short leaves a tmp file; open removes it.
  { std::ofstream(GenDir() / "hnsw.piece.00009999.tmp") << "partial"; }
  auto manifest = ReadManifest(GenDir());
  ASSERT_TRUE(manifest.ok() && *manifest) << manifest.status();
  const uint64_t on_disk = (*manifest)->entries.back().end;
  EXPECT_GE(on_disk, 3000u - kInterval);

  const auto t0 = Clock::now();
  Open();
  auto c = db_->GetCollection("c");
  ASSERT_TRUE(c.ok()) << c.status();
  const double open_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  // Served at once from the pieces on disk: nothing was re-inserted.
  EXPECT_GE(Impl(**c).IndexedRows(), on_disk);
  const uint64_t rows = (*c)->Describe().rows;
  std::printf("reopened in %.1f ms: %llu rows, %llu in pieces\n", open_ms,
              static_cast<unsigned long long>(rows),
              static_cast<unsigned long long>(Impl(**c).IndexedRows()));
  EXPECT_FALSE(std::filesystem::exists(GenDir() / "hnsw.piece.00009999.tmp"));
  // Each row is its own nearest neighbour (L2), in a piece or in the tail.
  const auto data = testing::ClusteredVectors(20000, kDim, 50, 5);
  SearchOptions o;
  o.k = 1;
  for (uint64_t row = 0; row < rows; row += 97) {
    auto r = (*c)->Search(std::span(&data[row * kDim], kDim), o);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ((*r)[0].size(), 1u);
    EXPECT_EQ((*r)[0][0].id, IdOf(row));
  }
  // The builder catches up in the background.
  ASSERT_TRUE(Impl(**c).WaitIndexIdle(std::chrono::seconds(300)));
  EXPECT_GT(Impl(**c).IndexedRows(), rows - kInterval);
  // Files: exactly the pieces the manifest names.
  manifest = ReadManifest(GenDir());
  ASSERT_TRUE(manifest.ok() && *manifest);
  std::vector<std::filesystem::path> named;
  for (const auto& e : (*manifest)->entries)
    named.push_back(GenDir() / PieceFileName(e.serial));
  std::sort(named.begin(), named.end());  // row order is not serial order
  EXPECT_EQ(PieceFiles(GenDir()), named);
}

// An attached reader maps the same pieces, so its top-k is the writer's, up
// to the tail past them: the writer walks its live graph there, the reader
// scans it exactly. It follows new manifests on Refresh.
TEST_F(HnswPiecesTest, AttachedReaderSearchesTheSamePieces) {
  data_ = testing::ClusteredVectors(6000, kDim, 30, 13);
  auto c = Create(shm::Metric::kInnerProduct);
  Add(*c, 0, 3000);
  ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(120)));
  auto attached = AttachedCollection::Attach(dir_, "c");
  ASSERT_TRUE(attached.ok()) << attached.status();
  const std::vector<float> q = testing::RandomVectors(20, kDim, 77, true);
  auto same = [&](const char* when) {
    SearchOptions o;
    o.k = 10;
    o.ef_search = 32;  // narrow: an exact search would not match it
    auto a = c->Search(q, o);
    auto b = (*attached)->Search(q, o);
    ASSERT_TRUE(a.ok() && b.ok());
    size_t agree = 0, total = 0;
    for (size_t i = 0; i < a->size(); ++i) {
      ASSERT_EQ((*a)[i].size(), (*b)[i].size()) << when << " query " << i;
      for (size_t j = 0; j < (*a)[i].size(); ++j) {
        ++total;
        for (const Hit& h : (*b)[i]) {
          if (h.id != (*a)[i][j].id) continue;
          ++agree;
          EXPECT_NEAR(h.score, (*a)[i][j].score, 1e-5) << when;
        }
      }
    }
    EXPECT_GE(agree, total * 95 / 100) << when;
  };
  same("after attach");
  // More rows and a merge: the reader sees the new manifest on Refresh.
  const size_t pieces_before = Impl(*c).IndexPieces();
  Add(*c, 3000, 3000);
  ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(120)));
  ASSERT_TRUE((*attached)->Refresh().ok());
  same("after refresh");
  std::printf("pieces: %zu then %zu\n", pieces_before, Impl(*c).IndexPieces());
  // A compaction starts the next generation with no pieces; both sides follow.
  std::vector<std::string> del;
  for (size_t i = 0; i < 6000; i += 5) del.push_back(IdOf(i));
  ASSERT_TRUE(c->Delete(del).ok());
  ASSERT_TRUE(c->Compact().ok());
  ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(120)));
  EXPECT_GT(Impl(*c).IndexPieces(), 0u);
  ASSERT_TRUE((*attached)->Refresh().ok());
  EXPECT_EQ((*attached)->Describe().generation, 2u);
  same("after compaction");
}

// A tail left unindexed at open (the live graph is never saved) becomes a
// piece on its own thread while new writes go on into the live graph; every
// row is found meanwhile (the gap is scanned exactly).
TEST_F(HnswPiecesTest, ReopenedTailIsIndexedWhileWritesContinue) {
  data_ = testing::ClusteredVectors(4000, kDim, 30, 31);
  PieceOptions big;
  big.interval = 1000000;  // nothing becomes a piece before the reopen
  SetPieceOptions(big);
  auto c = Create(shm::Metric::kL2);
  Add(*c, 0, 3000);
  EXPECT_EQ(Impl(*c).IndexPieces(), 0u);
  c.reset();
  SmallPieces();
  Open();
  auto got = db_->GetCollection("c");
  ASSERT_TRUE(got.ok()) << got.status();
  c = *got;
  const auto t0 = Clock::now();
  Add(*c, 3000, 1000);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(),
            20 * kSlow);
  SearchOptions o;
  o.k = 1;
  int found = 0;
  for (size_t r = 0; r < 4000; r += 37) {
    auto hits = c->Search(std::span(data_).subspan(r * kDim, kDim), o);
    ASSERT_TRUE(hits.ok()) << hits.status();
    found += !(*hits)[0].empty() && (*hits)[0][0].id == IdOf(r);
  }
  EXPECT_GE(found, 4000 / 37 * 95 / 100);
  ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(120)));
  EXPECT_GE(Impl(*c).IndexedRows(), 3000u);
  EXPECT_GE(Impl(*c).IndexPieces(), 1u);
}

// The end of a bulk load: FinishIndexing leaves no tail, so a server opening
// the collection has nothing to build or scan exactly.
TEST_F(HnswPiecesTest, FinishIndexingLeavesNoTail) {
  data_ = testing::ClusteredVectors(1000, kDim, 30, 41);
  auto c = Create(shm::Metric::kL2);
  Add(*c, 0, 1000);  // 2.5 intervals: pieces plus a tail
  // One thread: TSan cannot see OpenMP.
  ASSERT_TRUE(c->FinishIndexing(1, /*one_graph=*/false).ok());
  EXPECT_EQ(Impl(*c).IndexedRows(), 1000u);
  SearchOptions o;
  o.k = 1;
  auto hits = c->Search(std::span(data_).subspan(999 * kDim, kDim), o);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ((*hits)[0][0].id, IdOf(999));
}

// FinishIndexing(one_graph), what `zerovec build` does: sealing merges every
// piece into one graph, which answers as the pieces did (recall as good, the
// same top hits).
TEST_F(HnswPiecesTest, MergeToOneSealsIntoOneGraphWithTheSameResults) {
  // No tiered merges, and the load in two halves with the builder caught up
  // between them: however its steps fall (a slow build takes the whole
  // backlog as one piece), the seal has several pieces to merge.
  PieceOptions o;
  o.interval = kInterval;
  o.merge_fanout = 1000;
  SetPieceOptions(o);
  constexpr size_t kRows = 2000, kQueries = 60;
  data_ = testing::ClusteredVectors(kRows + kQueries, kDim, 30, 43);
  auto c = Create(shm::Metric::kInnerProduct);
  Add(*c, 0, kRows / 2);
  ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(120)));
  Add(*c, kRows / 2, kRows / 2);
  ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(120)));
  ASSERT_GE(Impl(*c).IndexPieces(), 2u);
  const std::vector<float> base(data_.begin(), data_.begin() + kRows * kDim);
  auto search = [&](std::vector<std::string>* ids) {
    size_t hits = 0;
    ids->clear();
    for (size_t q = 0; q < kQueries; ++q) {
      const std::span<const float> query(&data_[(kRows + q) * kDim], kDim);
      SearchOptions so;
      so.k = 10;
      so.ef_search = 64;
      auto r = c->Search(query, so);
      EXPECT_TRUE(r.ok());
      if (!r.ok()) return 0.0;
      const auto truth = testing::BruteForce(base, kDim, query.data(), 10,
                                             shm::Metric::kInnerProduct, {});
      for (const Hit& h : (*r)[0]) {
        ids->push_back(h.id);
        for (const auto& t : truth) hits += h.id == IdOf(t.index);
      }
    }
    return static_cast<double>(hits) / (kQueries * 10);
  };
  std::vector<std::string> before, after;
  const double recall_pieces = search(&before);
  // One thread: TSan cannot see OpenMP.
  ASSERT_TRUE(c->FinishIndexing(1, /*one_graph=*/true).ok());
  EXPECT_EQ(Impl(*c).IndexPieces(), 1u);
  EXPECT_EQ(Impl(*c).IndexedRows(), kRows);
  const double recall_one = search(&after);
  std::printf("recall@10: pieces %.4f, merged %.4f\n", recall_pieces,
              recall_one);
  EXPECT_GE(recall_one, 0.95);
  EXPECT_GE(recall_one, recall_pieces - 0.02);
  size_t same = 0;
  for (size_t i = 0; i < std::min(before.size(), after.size()); ++i)
    same += before[i] == after[i];
  EXPECT_GE(static_cast<double>(same), 0.9 * before.size());
  // Reopened, the collection maps the one graph (no rebuild).
  c.reset();
  Open();
  auto reopened = db_->GetCollection("c");
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(Impl(**reopened).IndexPieces(), 1u);
  SmallPieces();
}

// DeferIndexing, what `zerovec build` does before a one-graph seal: the load
// builds nothing (no piece, no live graph; searches scan the rows exactly and
// writes are never held back, however far past max_backlog), and the seal
// builds one graph over every row; writes after it are indexed again.
TEST_F(HnswPiecesTest, DeferredLoadIsBuiltOnceAtTheSeal) {
  PieceOptions o;
  o.interval = kInterval;
  o.max_backlog = 100;  // the deferred load goes far past it
  // No merges: the pieces built after the seal stay countable (with merges
  // they could fold into one, sooner or later as the build runs).
  o.merge_fanout = 1000;
  SetPieceOptions(o);
  constexpr size_t kRows = 2400, kMore = 1200, kQueries = 40;
  data_ = testing::ClusteredVectors(kRows + kMore + kQueries, kDim, 30, 47);
  auto c = Create(shm::Metric::kInnerProduct);
  c->DeferIndexing();
  Add(*c, 0, kRows);
  ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(10)));
  EXPECT_EQ(Impl(*c).IndexPieces(), 0u);
  EXPECT_EQ(Impl(*c).IndexedRows(), 0u);
  auto recall = [&](size_t rows) {
    const std::vector<float> base(data_.begin(), data_.begin() + rows * kDim);
    size_t hits = 0;
    for (size_t q = 0; q < kQueries; ++q) {
      const std::span<const float> query(&data_[(kRows + kMore + q) * kDim],
                                         kDim);
      SearchOptions so;
      so.k = 10;
      so.ef_search = 64;
      auto r = c->Search(query, so);
      EXPECT_TRUE(r.ok());
      if (!r.ok()) return 0.0;
      const auto truth = testing::BruteForce(base, kDim, query.data(), 10,
                                             shm::Metric::kInnerProduct, {});
      for (const Hit& h : (*r)[0])
        for (const auto& t : truth) hits += h.id == IdOf(t.index);
    }
    return static_cast<double>(hits) / (kQueries * 10);
  };
  EXPECT_EQ(recall(kRows), 1.0);  // exact while deferred
  // One thread: TSan cannot see OpenMP.
  ASSERT_TRUE(c->FinishIndexing(1, /*one_graph=*/true).ok());
  EXPECT_EQ(Impl(*c).IndexPieces(), 1u);
  EXPECT_EQ(Impl(*c).IndexedRows(), kRows);
  const double sealed = recall(kRows);
  std::printf("recall@10 of the graph built at the seal: %.4f\n", sealed);
  EXPECT_GE(sealed, 0.95);
  // The deferral ended with the seal: later writes are indexed again.
  Add(*c, kRows, kMore);
  ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(120)));
  EXPECT_GE(Impl(*c).IndexPieces(), 2u);
  EXPECT_GE(Impl(*c).IndexedRows(), kRows + kMore - kInterval);
  EXPECT_GE(recall(kRows + kMore), 0.95);
  SmallPieces();
}

// A damaged piece is dropped with every later one (coverage stays a prefix)
// and rebuilt; searches stay exact meanwhile. A damaged manifest likewise.
TEST_F(HnswPiecesTest, DamagedPieceOrManifestIsDroppedAndRebuilt) {
  data_ = testing::ClusteredVectors(3000, kDim, 30, 21);
  PieceOptions o;
  o.interval = kInterval;
  o.merge_fanout = 1000;  // no merges: several pieces, however steps fall
  SetPieceOptions(o);
  auto c = Create(shm::Metric::kL2);
  Add(*c, 0, 3000);
  ASSERT_TRUE(Impl(*c).WaitIndexIdle(std::chrono::seconds(120)));
  const uint64_t covered = Impl(*c).IndexedRows();
  ASSERT_GE(Impl(*c).IndexPieces(), 2u);
  c.reset();
  db_.reset();

  auto check = [&](const char* when) {
    auto got = db_->GetCollection("c");
    ASSERT_TRUE(got.ok());
    SearchOptions o;
    o.k = 1;
    for (uint64_t row = 0; row < 3000; row += 101) {
      auto r = (*got)->Search(std::span(&data_[row * kDim], kDim), o);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ((*r)[0][0].id, IdOf(row)) << when;
    }
  };
  // Flip one byte in the middle of the first piece's links.
  const auto files = PieceFiles(GenDir());
  ASSERT_FALSE(files.empty());
  {
    std::fstream f(files.front(),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(
        std::filesystem::file_size(files.front()) / 2));
    f.put('\x5a');
  }
  auto piece = Piece::Open(files.front(), 0,
                           (shm::Reader::Attach(GenDir())).value()->info());
  EXPECT_EQ(piece.status().code(), StatusCode::kDataLoss) << piece.status();
  const std::string damaged = files.front().filename().string();
  Open();
  {
    // Dropped (with every later piece): the manifest no longer names it and
    // its rows are searched exactly until the builder has rebuilt them.
    auto got = db_->GetCollection("c");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_FALSE(std::filesystem::exists(files.front()));
    auto m = ReadManifest(GenDir());
    ASSERT_TRUE(m.ok()) << m.status();
    for (const auto& e : (*m)->entries)
      EXPECT_NE(PieceFileName(e.serial), damaged);
  }
  check("damaged piece dropped");
  ASSERT_TRUE(
      Impl(**db_->GetCollection("c")).WaitIndexIdle(std::chrono::seconds(120)));
  EXPECT_GE(Impl(**db_->GetCollection("c")).IndexedRows(), covered);
  check("rebuilt");
  db_.reset();

  // A torn manifest: dropped, pieces rebuilt.
  {
    std::ofstream(GenDir() / kManifestFile, std::ios::trunc) << "ZVMANIF1 torn";
  }
  EXPECT_EQ(ReadManifest(GenDir()).status().code(), StatusCode::kDataLoss);
  Open();
  EXPECT_TRUE(ReadManifest(GenDir()).ok());  // rewritten at once
  check("damaged manifest dropped");
  ASSERT_TRUE(
      Impl(**db_->GetCollection("c")).WaitIndexIdle(std::chrono::seconds(120)));
  EXPECT_GE(Impl(**db_->GetCollection("c")).IndexedRows(), covered);
  check("rebuilt again");
}

// An old single-graph file from before pieces is ignored and removed.
TEST_F(HnswPiecesTest, LegacyGraphFileIsRemoved) {
  data_ = testing::RandomVectors(100, kDim, 2);
  auto c = Create(shm::Metric::kL2);
  Add(*c, 0, 100);
  c.reset();
  db_.reset();
  { std::ofstream(GenDir() / "hnsw.graph") << "ZVHNSW01 old"; }
  Open();
  auto got = db_->GetCollection("c");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(std::filesystem::exists(GenDir() / "hnsw.graph"));
  EXPECT_EQ((*got)->Describe().rows, 100u);
}

}  // namespace
}  // namespace zv::index

int main(int argc, char** argv) {
  if (argc == 2 && std::strncmp(argv[1], "--child=", 8) == 0) {
    zv::index::ChildMain(argv[1] + 8);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
