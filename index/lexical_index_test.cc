#include "index/lexical_index.h"

#include <set>

#include "gtest/gtest.h"
#include "index/test_util.h"

namespace zv::index {
namespace {

const auto kAll = [](const std::string&) { return true; };

std::vector<std::string> Ids(const std::vector<LexicalHit>& hits) {
  std::vector<std::string> ids;
  for (const auto& h : hits) ids.push_back(h.id);
  return ids;
}

TEST(LexicalIndexTest, StemmedBm25SearchReplaceAndRemoveById) {
  const auto dir = testing::MakeTempDir("lexical") / "lexical";
  auto writer = LexicalWriter::Open(dir, /*sync=*/false);
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto& w = **writer;
  ASSERT_TRUE(w.Put("a", "The cats were running across the garden").ok());
  ASSERT_TRUE(w.Put("b", "A dog sleeps in the garden all day").ok());
  ASSERT_TRUE(w.Put("c", "Invoice ZX-4471 from the supplier").ok());
  ASSERT_TRUE(w.Commit("s1").ok());
  auto searcher = LexicalSearcher::Open(dir);
  ASSERT_TRUE(searcher.ok()) << searcher.status();
  auto& s = **searcher;

  // Stemming: "cat run" matches "cats were running".
  auto hits = s.Search("cat run", 10, kAll);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_EQ(Ids(*hits), std::vector<std::string>{"a"});
  // BM25: the rarer term decides; both garden docs match "garden".
  hits = s.Search("garden dog", 10, kAll);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 2u);
  EXPECT_EQ((*hits)[0].id, "b");
  EXPECT_GT((*hits)[0].weight, (*hits)[1].weight);
  // A code with a hyphen, and query syntax that is just text here.
  hits = s.Search("zx-4471", 10, kAll);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_EQ(Ids(*hits), std::vector<std::string>{"c"});
  hits = s.Search("\"garden AND NOT (", 10, kAll);
  ASSERT_TRUE(hits.ok()) << hits.status();
  // `accept` filters candidates before the top k.
  hits = s.Search("garden", 1, [](const std::string& id) { return id != "a"; });
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(Ids(*hits), std::vector<std::string>{"b"});

  // Replace and remove by id; the searcher sees them after Refresh.
  ASSERT_TRUE(w.Put("a", "nothing about felines now").ok());
  ASSERT_TRUE(w.Remove("b").ok());
  ASSERT_TRUE(w.Put("d", "").ok());  // empty text: nothing indexed
  ASSERT_TRUE(w.Commit("s2").ok());
  s.Refresh();
  hits = s.Search("cat garden", 10, kAll);
  ASSERT_TRUE(hits.ok());
  EXPECT_TRUE(hits->empty());
  EXPECT_EQ(*s.documents(), 2u);
  EXPECT_EQ(*w.Stamp(), "s2");

  std::set<std::string> seen;
  ASSERT_TRUE(w.ForEach([&](const std::string& id, uint64_t fp) {
                 seen.insert(id);
                 if (id == "a")
                   EXPECT_EQ(fp, TextFingerprint("nothing about felines now"));
                 return OkStatus();
               }).ok());
  EXPECT_EQ(seen, (std::set<std::string>{"a", "c"}));
}

TEST(LexicalIndexTest, LongIdsAreKeyedUniquely) {
  const auto dir = testing::MakeTempDir("lexical") / "lexical";
  auto w = LexicalWriter::Open(dir, false);
  ASSERT_TRUE(w.ok());
  const std::string long_a(500, 'x'), long_b = std::string(499, 'x') + "y";
  ASSERT_TRUE((*w)->Put(long_a, "alpha").ok());
  ASSERT_TRUE((*w)->Put(long_b, "beta").ok());
  ASSERT_TRUE((*w)->Put(long_a, "gamma").ok());  // replaces, not adds
  ASSERT_TRUE((*w)->Commit("").ok());
  EXPECT_EQ((*w)->documents(), 2u);
  auto s = LexicalSearcher::Open(dir);
  ASSERT_TRUE(s.ok());
  auto hits = (*s)->Search("gamma", 5, kAll);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(Ids(*hits), std::vector<std::string>{long_a});
}

TEST(LexicalIndexTest, MissingDatabaseIsAnError) {
  auto s = LexicalSearcher::Open(testing::MakeTempDir("lexical") / "none");
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace zv::index
