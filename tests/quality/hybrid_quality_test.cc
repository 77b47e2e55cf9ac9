// Hybrid search quality (issue 17), through a real lexical collection (Xapian
// BM25 + flat dense index) and the bundled model's C++ CPU encoder:
//  - gloss -> lemma recall@10 over the held-out WordNet synsets (the set of
//    model_quality_test): hybrid >= max(dense, lexical), all printed. BM25 is
//    weak here (a gloss rarely contains its lemma), and at equal weights RRF
//    drags the fused ranking below dense alone (printed); with the lexical
//    ranking weighted 0.25 (FusionOptions, per request) hybrid is at least
//    both, and that is what is asserted;
//  - queries naming an exact rare token (case numbers planted in everyday
//    texts), bare and inside a sentence: hybrid at the default 1:1 finds them
//    where dense alone mostly cannot.
#include <cstdio>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "embed/embedder.h"
#include "gtest/gtest.h"
#include "index/collection.h"
#include "index/test_util.h"
#include "nlohmann/json.hpp"
#include "tests/quality/quality_util.h"

namespace zv {
namespace {

using quality::CpuEmbedder;
using quality::Embed;

// A lexical collection holding `docs` (id "d<i>") with their embeddings.
std::shared_ptr<index::Collection> Load(index::Database& db,
                                        const std::string& name,
                                        const std::vector<std::string>& docs,
                                        const std::vector<float>& vectors,
                                        uint32_t dim) {
  index::CollectionOptions o;
  o.dim = dim;
  o.lexical = true;
  auto c = db.CreateCollection(name, o);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  constexpr size_t kBatch = 1024;
  for (size_t first = 0; first < docs.size(); first += kBatch) {
    const size_t n = std::min(kBatch, docs.size() - first);
    std::vector<index::Record> recs(n);
    for (size_t i = 0; i < n; ++i) {
      recs[i].id = "d" + std::to_string(first + i);
      recs[i].text = docs[first + i];
    }
    Status s = (*c)->Upsert(
        recs, std::span<const float>(vectors.data() + first * dim, n * dim));
    EXPECT_TRUE(s.ok()) << s;
  }
  return *c;
}

// Per query, whether its target doc id is in the top k.
std::vector<bool> Found(index::Collection& c, index::SearchMode mode,
                        const std::vector<std::string>& queries,
                        const std::vector<float>& query_vectors, uint32_t dim,
                        const std::vector<std::string>& targets, int k,
                        double lexical_weight = 1) {
  std::vector<bool> found(queries.size(), false);
  constexpr size_t kChunk = 256;
  for (size_t first = 0; first < queries.size(); first += kChunk) {
    const size_t n = std::min(kChunk, queries.size() - first);
    index::SearchOptions o;
    o.k = k;
    o.mode = mode;
    o.fusion.lexical_weight = lexical_weight;
    if (mode != index::SearchMode::kDense) {
      o.query_texts.assign(queries.begin() + first,
                           queries.begin() + first + n);
    }
    std::span<const float> q;
    if (mode != index::SearchMode::kLexical) {
      q = std::span<const float>(query_vectors.data() + first * dim, n * dim);
    }
    auto hits = c.Search(q, o);
    EXPECT_TRUE(hits.ok()) << hits.status();
    if (!hits.ok()) return found;
    for (size_t i = 0; i < n; ++i) {
      for (const index::Hit& h : (*hits)[i]) {
        if (h.id == targets[first + i]) found[first + i] = true;
      }
    }
  }
  return found;
}

double Rate(const std::vector<bool>& v) {
  size_t n = 0;
  for (bool b : v) n += b;
  return v.empty() ? 0 : double(n) / v.size();
}

TEST(HybridQualityTest, GlossToLemmaHybridRecallAtLeastBothAlone) {
  std::vector<std::string> queries, docs, targets;
  std::unordered_map<std::string, int> doc_index;
  std::ifstream in("tests/data/heldout_gloss_lemma.jsonl");
  ASSERT_TRUE(in.good());
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    const std::string doc = j["doc"];
    auto [it, added] = doc_index.emplace(doc, docs.size());
    if (added) docs.push_back(doc);
    queries.push_back(j["query"]);
    targets.push_back("d" + std::to_string(it->second));
  }
  ASSERT_GT(queries.size(), 5000u);
  auto embedder = CpuEmbedder();
  ASSERT_NE(embedder, nullptr);
  const uint32_t dim = embedder->info().dim;
  const auto doc_vectors = Embed(*embedder, docs);
  const auto query_vectors = Embed(*embedder, queries);
  auto db =
      index::Database::Open(index::testing::MakeTempDir("hybrid_quality"));
  ASSERT_TRUE(db.ok());
  auto c = Load(**db, "wordnet", docs, doc_vectors, dim);
  ASSERT_NE(c, nullptr);

  constexpr int kK = 10;
  const double dense = Rate(Found(*c, index::SearchMode::kDense, queries,
                                  query_vectors, dim, targets, kK));
  const double lexical = Rate(Found(*c, index::SearchMode::kLexical, queries,
                                    query_vectors, dim, targets, kK));
  const double hybrid_equal =
      Rate(Found(*c, index::SearchMode::kHybrid, queries, query_vectors, dim,
                 targets, kK));
  constexpr double kLexicalWeight = 0.25;
  const double hybrid =
      Rate(Found(*c, index::SearchMode::kHybrid, queries, query_vectors, dim,
                 targets, kK, kLexicalWeight));
  std::printf("held-out synsets: %zu gloss queries, %zu lemma documents\n",
              queries.size(), docs.size());
  std::printf("recall@10  dense (zerovec-mini):        %.3f\n", dense);
  std::printf("recall@10  lexical (Xapian BM25):       %.3f\n", lexical);
  std::printf("recall@10  hybrid (RRF k 60, 1:1):      %.3f\n", hybrid_equal);
  std::printf("recall@10  hybrid (RRF k 60, 1:0.5):    %.3f\n",
              Rate(Found(*c, index::SearchMode::kHybrid, queries, query_vectors,
                         dim, targets, kK, 0.5)));
  std::printf("recall@10  hybrid (RRF k 60, 1:%.2f):   %.3f\n", kLexicalWeight,
              hybrid);
  EXPECT_GE(hybrid, std::max(dense, lexical));
}

TEST(HybridQualityTest, ExactRareTokensFoundByHybridNotByDense) {
  // Case numbers planted in 100 of 3000 everyday texts (demo corpus), asked
  // for by number alone and in a sentence.
  std::vector<std::string> docs;
  std::ifstream in("data/demo/corpus.jsonl");
  ASSERT_TRUE(in.good());
  for (std::string line; std::getline(in, line) && docs.size() < 3000;) {
    if (!line.empty()) docs.push_back(nlohmann::json::parse(line)["text"]);
  }
  ASSERT_EQ(docs.size(), 3000u);
  std::vector<std::string> bare, sentence, targets;
  for (int i = 0; i < 100; ++i) {
    const size_t d = 17 + i * 29;
    const std::string code = "QZ" + std::to_string(90000 + i * 137);
    docs[d] += " (case " + code + ")";
    targets.push_back("d" + std::to_string(d));
    bare.push_back(code);
    sentence.push_back("what do we know about case " + code);
  }
  auto embedder = CpuEmbedder();
  ASSERT_NE(embedder, nullptr);
  const uint32_t dim = embedder->info().dim;
  const auto doc_vectors = Embed(*embedder, docs);
  auto db = index::Database::Open(index::testing::MakeTempDir("rare_tokens"));
  ASSERT_TRUE(db.ok());
  auto c = Load(**db, "cases", docs, doc_vectors, dim);
  ASSERT_NE(c, nullptr);

  std::printf("rare tokens: %zu queries, %zu documents\n", bare.size(),
              docs.size());
  for (const auto* queries : {&bare, &sentence}) {
    const auto query_vectors = Embed(*embedder, *queries);
    const auto dense = Found(*c, index::SearchMode::kDense, *queries,
                             query_vectors, dim, targets, 10);
    const auto lexical = Found(*c, index::SearchMode::kLexical, *queries,
                               query_vectors, dim, targets, 10);
    const auto hybrid = Found(*c, index::SearchMode::kHybrid, *queries,
                              query_vectors, dim, targets, 10);
    int hybrid_only = 0;
    for (size_t i = 0; i < hybrid.size(); ++i) {
      hybrid_only += hybrid[i] && !dense[i];
    }
    std::printf(
        "\"%s\": hit@10 dense %.2f, lexical %.2f, hybrid %.2f; "
        "found by hybrid, not dense: %d\n",
        (*queries)[0].c_str(), Rate(dense), Rate(lexical), Rate(hybrid),
        hybrid_only);
    // Measured: bare 1.00 (dense 0.23); in a sentence 0.79 (lexical 0.96:
    // RRF lets items that both rankings like a little outrank the one the
    // lexical side is sure of). Bars a little under those.
    EXPECT_GE(Rate(hybrid), queries == &bare ? 0.95 : 0.75);
    EXPECT_GE(hybrid_only, static_cast<int>(queries->size()) / 2);
  }
}

}  // namespace
}  // namespace zv
