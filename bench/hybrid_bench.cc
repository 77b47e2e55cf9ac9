// Hybrid search benchmark (issue 17): ingest rate of a collection with the
// lexical (Xapian) index on and off, then single-query search latency in
// dense, lexical and hybrid modes on the lexical one. Texts are drawn from the
// demo corpus' vocabulary (Zipf-like: words in corpus frequency), vectors are
// clustered synthetic ones (embedding 100k texts on 2 cores would be the
// benchmark otherwise). Prints a markdown table.
//
//   bazel run -c opt //bench:hybrid_bench -- --rows=100000 [--queries=300]
//     [--index=Flat|HNSW32] [--corpus=data/demo/corpus.jsonl]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "index/collection.h"
#include "index/test_util.h"

extern "C" void openblas_set_num_threads(int);

namespace zv::index {
namespace {

constexpr uint32_t kDim = 384;
constexpr int kK = 10;
constexpr size_t kBatch = 1000;

struct Flags {
  size_t rows = 100000;
  size_t queries = 300;
  std::string index = "Flat";
  std::string corpus = "data/demo/corpus.jsonl";
};

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

// Every word of the corpus' "text" fields, with repeats (so sampling is by
// frequency).
std::vector<std::string> CorpusWords(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> words;
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("\"text\":");
    if (at == std::string::npos) continue;
    size_t i = line.find('"', at + 7);  // the value's opening quote
    if (i == std::string::npos) continue;
    std::string word;
    for (++i; i < line.size() && line[i] != '"'; ++i) {
      const char c = line[i];
      if (std::isalpha(static_cast<unsigned char>(c))) {
        word.push_back(static_cast<char>(std::tolower(c)));
      } else if (!word.empty()) {
        words.push_back(std::move(word));
        word.clear();
      }
    }
  }
  return words;
}

std::string RandomText(const std::vector<std::string>& words, int n,
                       std::mt19937_64& rng) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    if (i) text += ' ';
    text += words[rng() % words.size()];
  }
  return text;
}

// Upserts `rows` documents in batches; returns rows per second.
double Ingest(Collection& c, const std::vector<std::string>& words,
              size_t rows) {
  std::mt19937_64 rng(7);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t first = 0; first < rows; first += kBatch) {
    const size_t n = std::min(kBatch, rows - first);
    std::vector<Record> recs(n);
    for (size_t i = 0; i < n; ++i) {
      recs[i].id = "doc-" + std::to_string(first + i);
      recs[i].text = RandomText(words, 12 + rng() % 30, rng);
    }
    const auto vecs = testing::ClusteredVectors(n, kDim, 64, first + 1);
    if (Status s = c.Upsert(recs, vecs); !s.ok()) {
      std::fprintf(stderr, "upsert: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
  return rows / Since(t0);
}

struct Latency {
  double p50_ms = 0, p95_ms = 0, qps = 0;
};

Latency Measure(const Collection& c, SearchMode mode,
                const std::vector<std::string>& texts,
                const std::vector<float>& vectors, int k = kK) {
  std::vector<double> ms;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t q = 0; q < texts.size(); ++q) {
    SearchOptions o;
    o.k = k;
    o.mode = mode;
    if (mode != SearchMode::kDense) o.query_texts = {texts[q]};
    std::span<const float> v;
    if (mode != SearchMode::kLexical) {
      v = std::span<const float>(vectors.data() + q * kDim, kDim);
    }
    const auto t = std::chrono::steady_clock::now();
    auto hits = c.Search(v, o);
    ms.push_back(Since(t) * 1e3);
    if (!hits.ok()) {
      std::fprintf(stderr, "search: %s\n", hits.status().ToString().c_str());
      std::exit(1);
    }
  }
  Latency l;
  l.qps = texts.size() / Since(t0);
  std::sort(ms.begin(), ms.end());
  l.p50_ms = ms[ms.size() / 2];
  l.p95_ms = ms[ms.size() * 95 / 100];
  return l;
}

int Run(const Flags& f) {
  const auto words = CorpusWords(f.corpus);
  if (words.empty()) {
    std::fprintf(stderr, "%s: no words\n", f.corpus.c_str());
    return 1;
  }
  const auto dir = testing::MakeTempDir("hybrid_bench");
  auto db = Database::Open(dir);
  if (!db.ok()) return 1;
  double rate[2] = {0, 0};
  std::shared_ptr<Collection> lexical;
  for (int on = 0; on < 2; ++on) {
    CollectionOptions o;
    o.dim = kDim;
    o.index.descriptor = f.index;
    o.lexical = on;
    auto c = (*db)->CreateCollection(on ? "lexical" : "dense", o);
    if (!c.ok()) return 1;
    rate[on] = Ingest(**c, words, f.rows);
    (void)(*c)->FinishIndexing(0, /*one_graph=*/false);
    if (on) lexical = *c;
    std::fprintf(stderr, "ingested %zu rows, lexical %s: %.0f rows/s\n", f.rows,
                 on ? "on" : "off", rate[on]);
  }
  std::mt19937_64 rng(99);
  std::vector<std::string> texts;
  for (size_t q = 0; q < f.queries; ++q) {
    texts.push_back(RandomText(words, 3 + rng() % 4, rng));
  }
  const auto vectors = testing::ClusteredVectors(f.queries, kDim, 64, 12345);
  std::printf(
      "| rows | index | ingest rows/s lexical off | on | mode | p50 ms "
      "| p95 ms | QPS (1 thread) |\n|---|---|---|---|---|---|---|---|\n");
  for (SearchMode mode :
       {SearchMode::kDense, SearchMode::kLexical, SearchMode::kHybrid}) {
    const Latency l = Measure(*lexical, mode, texts, vectors);
    const char* name = mode == SearchMode::kDense     ? "dense"
                       : mode == SearchMode::kLexical ? "lexical"
                                                      : "hybrid";
    std::printf("| %zu | %s | %.0f | %.0f | %s | %.2f | %.2f | %.0f |\n",
                f.rows, f.index.c_str(), rate[0], rate[1], name, l.p50_ms,
                l.p95_ms, l.qps);
  }
  // Hybrid's dense side alone: k = the fusion depth (kDefaultFusionDepth).
  const Latency deep = Measure(*lexical, SearchMode::kDense, texts, vectors,
                               kDefaultFusionDepth);
  std::printf("| %zu | %s | %.0f | %.0f | dense, k %d | %.2f | %.2f | %.0f |\n",
              f.rows, f.index.c_str(), rate[0], rate[1], kDefaultFusionDepth,
              deep.p50_ms, deep.p95_ms, deep.qps);
  std::error_code ec;
  lexical.reset();
  db->reset();
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace
}  // namespace zv::index

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  zv::index::Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      return a.compare(0, n, name) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = value("--rows=")) {
      f.rows = std::stoull(v);
    } else if (const char* v = value("--queries=")) {
      f.queries = std::stoull(v);
    } else if (const char* v = value("--index=")) {
      f.index = v;
    } else if (const char* v = value("--corpus=")) {
      f.corpus = v;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  return zv::index::Run(f);
}
