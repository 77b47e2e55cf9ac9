// The bundled default model's quality bar (issue 3), measured by the same C++
// embedder that serves queries:
//  - recall@10 of gloss -> lemma retrieval over all held-out WordNet synsets,
//  against a
//    lexical BM25 baseline on the same data (both printed; the model must be
//    clearly better);
//  - nearest neighbours of everyday queries over the demo corpus (printed; the
//  answer a
//    person would pick must be near the top).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "embed/embedder.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/quality/quality_util.h"

namespace zv {
namespace {

using quality::kModel;

struct Pair {
  std::string query, doc;
};

std::vector<nlohmann::json> ReadJsonl(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

using quality::CpuEmbedder;
using quality::Embed;

// Indices of the k highest scores, best first.
std::vector<int> TopK(const float* scores, int n, int k) {
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return scores[a] > scores[b]; });
  idx.resize(k);
  return idx;
}

// Lower-cased alphanumeric words (ASCII; WordNet glosses are ASCII).
std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text + " ") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word.push_back(
          static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  return words;
}

// Okapi BM25 (k1 1.2, b 0.75) scores of one query against every document.
class Bm25 {
 public:
  explicit Bm25(const std::vector<std::string>& docs) {
    double total = 0;
    for (const auto& d : docs) {
      std::unordered_map<std::string, int> tf;
      for (auto& w : Words(d)) ++tf[w];
      int len = 0;
      for (auto& [w, c] : tf) {
        len += c;
        ++df_[w];
      }
      total += len;
      lengths_.push_back(len);
      tfs_.push_back(std::move(tf));
    }
    avg_len_ = total / docs.size();
  }
  std::vector<float> Score(const std::string& query) const {
    std::vector<float> scores(tfs_.size(), 0.0f);
    const double n = tfs_.size();
    for (const auto& w : Words(query)) {
      auto it = df_.find(w);
      if (it == df_.end()) continue;
      const double idf =
          std::log(1 + (n - it->second + 0.5) / (it->second + 0.5));
      for (size_t d = 0; d < tfs_.size(); ++d) {
        auto t = tfs_[d].find(w);
        if (t == tfs_[d].end()) continue;
        const double f = t->second;
        scores[d] +=
            idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * lengths_[d] / avg_len_));
      }
    }
    return scores;
  }

 private:
  std::vector<std::unordered_map<std::string, int>> tfs_;
  std::vector<int> lengths_;
  std::unordered_map<std::string, int> df_;
  double avg_len_ = 1;
};

struct HeldOutScore {
  size_t queries = 0, docs = 0;
  double model_recall = 0, bm25_recall = 0;
};

// Recall@10 of gloss -> lemma retrieval over all held-out WordNet synsets, for
// `model` through the C++ CPU encoder and for BM25 (words) on the same data.
HeldOutScore ScoreHeldOut(const char* model) {
  std::vector<Pair> pairs;
  for (auto& j : ReadJsonl("tests/data/heldout_gloss_lemma.jsonl")) {
    pairs.push_back({j["query"], j["doc"]});
  }
  EXPECT_GT(pairs.size(), 5000u);
  std::vector<std::string> docs;
  std::unordered_map<std::string, int> doc_index;
  for (auto& p : pairs) {
    if (doc_index.emplace(p.doc, docs.size()).second) docs.push_back(p.doc);
  }
  std::vector<std::string> queries;
  for (auto& p : pairs) queries.push_back(p.query);
  HeldOutScore score;
  score.queries = queries.size();
  score.docs = docs.size();
  auto embedder = CpuEmbedder(model);
  if (embedder == nullptr || queries.empty()) return score;
  const int dim = embedder->info().dim;
  const std::vector<float> q = Embed(*embedder, queries);
  const std::vector<float> d = Embed(*embedder, docs);

  constexpr int kK = 10;
  constexpr size_t kChunk = 512;
  size_t model_hits = 0, bm25_hits = 0;
  std::vector<float> scores(kChunk * docs.size());
  const Bm25 bm25(docs);
  for (size_t first = 0; first < queries.size(); first += kChunk) {
    const size_t n = std::min(kChunk, queries.size() - first);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, docs.size(), dim,
                1.0f, q.data() + first * dim, dim, d.data(), dim, 0.0f,
                scores.data(), docs.size());
    for (size_t i = 0; i < n; ++i) {
      const int target = doc_index.at(pairs[first + i].doc);
      auto top = TopK(scores.data() + i * docs.size(), docs.size(), kK);
      model_hits += std::find(top.begin(), top.end(), target) != top.end();
      auto lexical = bm25.Score(queries[first + i]);
      auto top_lexical = TopK(lexical.data(), docs.size(), kK);
      bm25_hits += std::find(top_lexical.begin(), top_lexical.end(), target) !=
                   top_lexical.end();
    }
  }
  score.model_recall = double(model_hits) / queries.size();
  score.bm25_recall = double(bm25_hits) / queries.size();
  std::printf("held-out synsets: %zu queries, %zu documents\n", score.queries,
              score.docs);
  std::printf("recall@10  %s (C++ CPU encoder): %.3f\n", model,
              score.model_recall);
  std::printf("recall@10  BM25 (words):                   %.3f\n",
              score.bm25_recall);
  return score;
}

TEST(ModelQualityTest, HeldOutGlossToLemmaRecallBeatsBm25) {
  const HeldOutScore mini = ScoreHeldOut(kModel);
  // Training-time evaluation (PyTorch, same split): 0.588 vs 0.187.
  EXPECT_GT(mini.model_recall, 0.5);
  EXPECT_GT(mini.model_recall, mini.bm25_recall + 0.2);
}

// Real text never trained on (tools/model/make_manpage_eval.py): 227 questions
// from man pages' NAME lines, 4,478 passages from their bodies; a question is
// answered when a top-10 passage comes from its page. Dense and BM25 printed
// for the model; the bar asserted is a regression guard (the measured hit@10,
// 165, less a margin), not issue 20's "dense >= BM25", which it does not meet
// (BM25 208/227; the zerovec-l6 candidate reaches 198: tools/model/README.md).
struct ManPageScore {
  int queries = 0, dense_hit10 = 0, dense_hit1 = 0, bm25_hit10 = 0;
};

ManPageScore ScoreManPages(const char* model) {
  std::vector<std::string> passages, passage_page, queries, query_page;
  for (auto& j : ReadJsonl("tests/data/manpages/eval.jsonl")) {
    auto& texts = j["kind"] == "query" ? queries : passages;
    auto& pages = j["kind"] == "query" ? query_page : passage_page;
    texts.push_back(j["text"]);
    pages.push_back(j["page"]);
  }
  ManPageScore score;
  score.queries = static_cast<int>(queries.size());
  auto embedder = CpuEmbedder(model);
  if (embedder == nullptr) return score;
  const int dim = embedder->info().dim;
  const std::vector<float> p = Embed(*embedder, passages);
  const std::vector<float> q = Embed(*embedder, queries);
  const Bm25 bm25(passages);
  std::vector<float> scores(passages.size());
  auto hit = [&](const std::vector<int>& top, size_t qi, size_t k) {
    for (size_t r = 0; r < std::min(k, top.size()); ++r) {
      if (passage_page[top[r]] == query_page[qi]) return 1;
    }
    return 0;
  };
  for (size_t i = 0; i < queries.size(); ++i) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, passages.size(), dim, 1.0f,
                p.data(), dim, q.data() + i * dim, 1, 0.0f, scores.data(), 1);
    auto top = TopK(scores.data(), passages.size(), 10);
    score.dense_hit10 += hit(top, i, 10);
    score.dense_hit1 += hit(top, i, 1);
    auto lexical = bm25.Score(queries[i]);
    score.bm25_hit10 += hit(TopK(lexical.data(), passages.size(), 10), i, 10);
  }
  std::printf(
      "man pages, %s (C++ CPU encoder): %d questions, %zu passages: dense "
      "hit@10 %d (hit@1 %d), BM25 (words) hit@10 %d\n",
      model, score.queries, passages.size(), score.dense_hit10,
      score.dense_hit1, score.bm25_hit10);
  return score;
}

TEST(ModelQualityTest, ManPageQuestionsFindTheirPage) {
  const ManPageScore mini = ScoreManPages(kModel);
  ASSERT_GE(mini.queries, 200);
  EXPECT_GE(mini.dense_hit10, 150);
  EXPECT_GE(mini.bm25_hit10, 190);  // the baseline itself, as measured
}

// Issue 20's bars for the larger model, models/zerovec-l6
// (tools/model/README.md), when that folder is there: held-out recall@10 >=
// 0.75 and, on the man pages, dense hit@10 >= BM25 hit@10. Skipped without it
// (it is git-ignored until it becomes the default; then this test holds it to
// the bars).
constexpr char kL6[] = "models/zerovec-l6";

TEST(ModelQualityTest, ZerovecL6MeetsIssue20Bars) {
  if (!std::filesystem::exists(std::string(kL6) + "/model.safetensors")) {
    GTEST_SKIP() << kL6 << " is not here (train it: tools/model/device_l6.sh)";
  }
  const HeldOutScore held = ScoreHeldOut(kL6);
  EXPECT_GE(held.model_recall, 0.75);
  const ManPageScore man = ScoreManPages(kL6);
  ASSERT_GE(man.queries, 200);
  EXPECT_GE(man.dense_hit10, man.bm25_hit10);
}

TEST(ModelQualityTest, EverydayQueriesFindWhatAPersonWouldPick) {
  std::vector<std::string> ids, texts;
  for (auto& j : ReadJsonl("data/demo/corpus.jsonl")) {
    ids.push_back(j["id"]);
    texts.push_back(j["text"]);
  }
  ASSERT_EQ(texts.size(), 5000u);
  auto embedder = CpuEmbedder();
  ASSERT_NE(embedder, nullptr);
  const int dim = embedder->info().dim;
  const std::vector<float> corpus = Embed(*embedder, texts);

  struct Case {
    std::string query, expected_id;  // expected in the top 3
  };
  const std::vector<Case> cases = {
      {"a vehicle with two wheels that you pedal", "wn-n-02834778"},  // bicycle
      {"feeling very happy", "wn-n-07527352"},                        // joy
      {"a tool for cutting wood", "wn-n-02764044"},                   // axe
      {"to run away quickly", "wn-v-02075480"},                       // flee
      {"a musical instrument with black and white keys",
       "wn-n-03928116"},                                   // piano
      {"the meal eaten in the evening", "wn-n-07575984"},  // supper
  };
  std::vector<std::string> queries;
  for (auto& c : cases) queries.push_back(c.query);
  const std::vector<float> q = Embed(*embedder, queries);
  std::vector<float> scores(texts.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, texts.size(), dim, 1.0f,
                corpus.data(), dim, q.data() + i * dim, 1, 0.0f, scores.data(),
                1);
    auto top = TopK(scores.data(), texts.size(), 3);
    std::printf("\nquery: %s\n", cases[i].query.c_str());
    bool found = false;
    for (int r : top) {
      std::printf("  %.3f %s %.70s\n", scores[r], ids[r].c_str(),
                  texts[r].c_str());
      found |= ids[r] == cases[i].expected_id;
    }
    EXPECT_TRUE(found) << cases[i].query << ": expected "
                       << cases[i].expected_id << " in the top 3";
  }
}

}  // namespace
}  // namespace zv
