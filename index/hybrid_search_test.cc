// Lexical and hybrid search through collections (issue 17): the Xapian index
// follows upserts, replacements, deletes and compaction; filters hold in every
// mode; reopening repairs a lagging index; attached readers search it too.
#include <atomic>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "index/collection.h"
#include "index/collection_impl.h"
#include "index/lexical_index.h"
#include "index/test_util.h"

namespace zv::index {
namespace {

constexpr uint32_t kDim = 8;

Record Doc(const std::string& id, const std::string& text,
           const std::string& ns = "", int64_t ts = 1,
           std::map<std::string, std::string> md = {}) {
  Record r;
  r.id = id;
  r.text = text;
  r.ns = ns;
  r.timestamp_ms = ts;
  r.metadata = std::move(md);
  return r;
}

// Vector of doc i: a one-hot axis (distinct, exactly findable).
std::vector<float> Axis(int i) {
  std::vector<float> v(kDim, 0.0f);
  v[i % kDim] = 1.0f;
  return v;
}

class HybridTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("hybrid");
    Open();
    CollectionOptions o;
    o.dim = kDim;
    o.lexical = true;
    auto c = db_->CreateCollection("c", o);
    ASSERT_TRUE(c.ok()) << c.status();
    c_ = *c;
  }
  void Open() {
    c_.reset();
    db_.reset();
    auto db = Database::Open(dir_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(db).value();
    if (auto c = db_->GetCollection("c"); c.ok()) c_ = *c;
  }
  void Upsert(const std::vector<Record>& recs, int first_axis = 0) {
    std::vector<float> vecs;
    for (size_t i = 0; i < recs.size(); ++i) {
      auto v = Axis(first_axis + static_cast<int>(i));
      vecs.insert(vecs.end(), v.begin(), v.end());
    }
    ASSERT_TRUE(c_->Upsert(recs, vecs).ok());
  }
  std::vector<std::string> Lexical(const std::string& text, Filter f = {},
                                   int k = 10) {
    SearchOptions o;
    o.k = k;
    o.mode = SearchMode::kLexical;
    o.query_texts = {text};
    o.filter = std::move(f);
    auto r = c_->Search({}, o);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<std::string> ids;
    if (r.ok()) {
      for (const Hit& h : (*r)[0]) ids.push_back(h.id);
    }
    return ids;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Database> db_;
  std::shared_ptr<Collection> c_;
};

using Ids = std::vector<std::string>;

TEST_F(HybridTest, UpsertReplaceDeleteAndCompactKeepTheIndexesInStep) {
  Upsert({Doc("a", "red apples in the orchard"), Doc("b", "a blue whale swims"),
          Doc("c", "green apples and pears")});
  const Ids apples = Lexical("apple");  // stemmed: "apples" matches
  EXPECT_EQ(std::set<std::string>(apples.begin(), apples.end()),
            (std::set<std::string>{"a", "c"}));
  EXPECT_EQ(c_->Describe().lexical_documents, 3u);

  // Replacing a text: the old words no longer find the id, the new ones do.
  Upsert({Doc("a", "a yellow submarine")});
  EXPECT_EQ(Lexical("orchard"), Ids{});
  EXPECT_EQ(Lexical("submarine"), Ids{"a"});
  // An empty text (vector-only item) leaves nothing to match.
  Upsert({Doc("b", "")});
  EXPECT_EQ(Lexical("whale"), Ids{});
  EXPECT_EQ(c_->Describe().lexical_documents, 2u);
  // Deleted: gone from both.
  ASSERT_EQ(*c_->Delete(Ids{"c"}), 1u);
  EXPECT_EQ(Lexical("pears"), Ids{});
  EXPECT_EQ(c_->Describe().lexical_documents, 1u);

  // Compaction renumbers rows; lexical hits still map to the right rows.
  auto compacted = c_->Compact();
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  EXPECT_EQ(Lexical("submarine"), Ids{"a"});
  SearchOptions o;
  o.mode = SearchMode::kLexical;
  o.query_texts = {"submarine"};
  o.include_documents = true;
  auto r = c_->Search({}, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)[0].size(), 1u);
  EXPECT_EQ((*r)[0][0].record.text, "a yellow submarine");
  EXPECT_EQ((*r)[0][0].lexical_rank, 1u);
  EXPECT_EQ((*r)[0][0].dense_rank, 0u);

  // A clean reopen finds the index in step: nothing to repair.
  Open();
  auto* impl = dynamic_cast<CollectionImpl*>(c_.get());
  ASSERT_NE(impl, nullptr);
  EXPECT_EQ(impl->lexical_repairs(), 0u);
  EXPECT_TRUE(c_->Describe().lexical);
  EXPECT_EQ(Lexical("submarine"), Ids{"a"});
}

TEST_F(HybridTest, FiltersApplyInLexicalAndHybridModes) {
  Upsert({Doc("a1", "meeting notes about the budget", "alice", 100,
              {{"kind", "note"}}),
          Doc("a2", "budget spreadsheet for march", "alice", 200,
              {{"kind", "file"}}),
          Doc("b1", "budget review with the board", "bob", 300,
              {{"kind", "note"}})});
  Filter ns;
  ns.ns = "alice";
  auto alice = Lexical("budget", ns);
  EXPECT_EQ(std::set<std::string>(alice.begin(), alice.end()),
            (std::set<std::string>{"a1", "a2"}));
  Filter md;
  md.metadata_equals = {{"kind", "note"}};
  auto notes = Lexical("budget", md);
  EXPECT_EQ(std::set<std::string>(notes.begin(), notes.end()),
            (std::set<std::string>{"a1", "b1"}));
  Filter time;
  time.min_timestamp_ms = 150;
  time.max_timestamp_ms = 250;
  EXPECT_EQ(Lexical("budget", time), Ids{"a2"});
  Filter none;
  none.ns = "carol";
  EXPECT_EQ(Lexical("budget", none), Ids{});
  // k smaller than the matches: the filter is applied before the top k.
  EXPECT_EQ(Lexical("budget", md, 1).size(), 1u);

  // Hybrid: the dense side's best (b1's axis) is filtered out as well.
  SearchOptions o;
  o.k = 10;
  o.mode = SearchMode::kHybrid;
  o.query_texts = {"budget"};
  o.filter = ns;
  auto r = c_->Search(Axis(2), o);
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<std::string> got;
  for (const Hit& h : (*r)[0]) got.insert(h.id);
  EXPECT_EQ(got, (std::set<std::string>{"a1", "a2"}));
}

TEST_F(HybridTest, HybridFusesReciprocalRanksAndReportsBoth) {
  Upsert({Doc("x", "alpha"), Doc("y", "beta zulu-9931"), Doc("z", "gamma")});
  SearchOptions o;
  o.k = 3;
  o.mode = SearchMode::kHybrid;
  o.query_texts = {"zulu-9931"};  // only y has it; the vector is x's
  auto r = c_->Search(Axis(0), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& hits = (*r)[0];
  ASSERT_EQ(hits.size(), 3u);
  // x: dense 1; y: dense 2 or 3 and lexical 1, so y fuses above x.
  EXPECT_EQ(hits[0].id, "y");
  EXPECT_EQ(hits[0].lexical_rank, 1u);
  EXPECT_GT(hits[0].dense_rank, 1u);
  EXPECT_FLOAT_EQ(hits[0].score,
                  1.0 / (60 + 1) + 1.0 / (60 + hits[0].dense_rank));
  EXPECT_EQ(hits[1].id, "x");
  EXPECT_EQ(hits[1].dense_rank, 1u);
  EXPECT_EQ(hits[1].lexical_rank, 0u);
  EXPECT_FLOAT_EQ(hits[1].score, 1.0 / 61);

  // Weights: lexical weight 0 gives the dense order back.
  o.fusion.lexical_weight = 0;
  r = c_->Search(Axis(0), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0][0].id, "x");
  // Dense mode reports dense ranks only.
  SearchOptions dense;
  dense.k = 2;
  r = c_->Search(Axis(0), dense);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0][0].dense_rank, 1u);
  EXPECT_EQ((*r)[0][1].dense_rank, 2u);
  EXPECT_EQ((*r)[0][0].lexical_rank, 0u);
}

TEST_F(HybridTest, LexicalNeedsTextAndALexicalIndex) {
  Upsert({Doc("a", "some words")});
  SearchOptions o;
  o.mode = SearchMode::kHybrid;  // no query text
  EXPECT_EQ(c_->Search(Axis(0), o).status().code(),
            StatusCode::kInvalidArgument);
  o.mode = SearchMode::kLexical;
  o.query_texts = {""};
  EXPECT_EQ(c_->Search({}, o).status().code(), StatusCode::kInvalidArgument);
  o.query_texts = {"words"};
  o.fusion.rrf_k = 0;
  EXPECT_EQ(c_->Search({}, o).status().code(), StatusCode::kInvalidArgument);

  CollectionOptions plain;
  plain.dim = kDim;
  auto v = db_->CreateCollection("vectors_only", plain);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE((*v)->Describe().lexical);
  SearchOptions lexical;
  lexical.mode = SearchMode::kLexical;
  lexical.query_texts = {"words"};
  auto r = (*v)->Search({}, lexical);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("no lexical index"), std::string::npos)
      << r.status();
}

// The Xapian index is made to lag the collection as a crash between the
// meta store commit and the lexical commit would leave it (a doc missing, a
// deleted id still there, an old text), by writing it directly while the
// collection is closed; reopening repairs exactly those.
TEST_F(HybridTest, ReopenReconcilesALaggingLexicalIndex) {
  Upsert({Doc("a", "first text about rivers"), Doc("b", "second about hills"),
          Doc("c", "third about lakes")});
  c_.reset();
  db_.reset();
  {
    auto w = LexicalWriter::Open(dir_ / "collections" / "c" / kLexicalDirName,
                                 false);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->Remove("a").ok());                       // never indexed
    ASSERT_TRUE((*w)->Put("gone", "deleted mountains").ok());  // not live
    ASSERT_TRUE((*w)->Put("b", "stale text about valleys").ok());
    ASSERT_TRUE((*w)->Commit("crashed").ok());
  }
  Open();
  ASSERT_NE(c_, nullptr);
  auto* impl = dynamic_cast<CollectionImpl*>(c_.get());
  ASSERT_NE(impl, nullptr);
  EXPECT_EQ(impl->lexical_repairs(), 3u);
  EXPECT_EQ(Lexical("rivers"), Ids{"a"});
  EXPECT_EQ(Lexical("mountains"), Ids{});
  EXPECT_EQ(Lexical("valleys"), Ids{});
  EXPECT_EQ(Lexical("hills"), Ids{"b"});
  EXPECT_EQ(c_->Describe().lexical_documents, 3u);
}

TEST_F(HybridTest, AttachedReaderRunsLexicalAndHybridSearches) {
  Upsert({Doc("a", "the quick brown fox"), Doc("b", "lazy dogs sleep")});
  auto reader = AttachedCollection::Attach(dir_, "c");
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->Describe().lexical);
  SearchOptions o;
  o.mode = SearchMode::kLexical;
  o.query_texts = {"dog"};
  auto r = (*reader)->Search({}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)[0].size(), 1u);
  EXPECT_EQ((*r)[0][0].id, "b");

  // New, replaced and deleted documents after a Refresh.
  Upsert({Doc("c", "a dog park downtown"), Doc("b", "cats only now")}, 2);
  ASSERT_EQ(*c_->Delete(Ids{"a"}), 1u);
  ASSERT_TRUE((*reader)->Refresh().ok());
  r = (*reader)->Search({}, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)[0].size(), 1u);
  EXPECT_EQ((*r)[0][0].id, "c");
  o.mode = SearchMode::kHybrid;
  o.query_texts = {"fox"};
  r = (*reader)->Search(Axis(2), o);  // c's vector; a (fox) was deleted
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE((*r)[0].empty());
  EXPECT_EQ((*r)[0][0].id, "c");
  for (const Hit& h : (*r)[0]) EXPECT_NE(h.id, "a");
  EXPECT_EQ((*reader)->Describe().lexical_documents, 2u);
}

// Searches in every mode from two threads while a writer replaces, deletes and
// compacts: no search fails, and every hit is an id the writer stored.
TEST_F(HybridTest, SearchesRunConcurrentlyWithWrites) {
  std::atomic<bool> stop{false};
  std::atomic<int> searches{0}, failures{0};
  auto searcher = [&](SearchMode mode) {
    SearchOptions o;
    o.k = 5;
    o.mode = mode;
    o.query_texts = {"common words item"};
    for (int i = 0; !stop; ++i) {
      auto r = c_->Search(
          mode == SearchMode::kLexical ? std::vector<float>{} : Axis(i), o);
      if (!r.ok()) {
        ++failures;
        ADD_FAILURE() << r.status();
        return;
      }
      for (const Hit& h : (*r)[0]) {
        if (h.id.rfind("item-", 0) != 0) ++failures;
      }
      ++searches;
    }
  };
  std::thread lexical(searcher, SearchMode::kLexical);
  std::thread hybrid(searcher, SearchMode::kHybrid);
  for (int round = 0; round < 40; ++round) {
    std::vector<Record> recs;
    for (int i = 0; i < 20; ++i) {
      recs.push_back(Doc("item-" + std::to_string((round * 7 + i) % 50),
                         "common words item round " + std::to_string(round)));
    }
    Upsert(recs, round);
    ASSERT_TRUE(c_->Delete(Ids{"item-" + std::to_string(round % 50)}).ok());
    if (round % 10 == 9) ASSERT_TRUE(c_->Compact().ok());
  }
  while (searches < 20 && failures == 0) std::this_thread::yield();
  stop = true;
  lexical.join();
  hybrid.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(c_->Describe().lexical_documents, c_->Describe().live_rows);
}

}  // namespace
}  // namespace zv::index
