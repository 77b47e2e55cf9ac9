// The encoder alone on a corpus's texts (a benchmark, not a test): loads every
// text of a JSONL / text corpus into memory, then embeds them all into a RAM
// buffer through the public Embedder (tokenization + encoder + pooled rows),
// with chunks in flight as `zerovec build` submits them. No segment, RocksDB
// or index: the ceiling `zerovec build` is measured against.
//
//   embed_corpus_bench --input passages.jsonl [--model DIR] [--device cuda]
//       [--chunk 16384] [--limit N] [--repeat 2] [--threads N] [--out V.npy]
// --threads: the CPU encoder's threads (default: every core).
// --out: also writes the embeddings (one row a text, in corpus order) as a
// float32 .npy file (the real-embedding HNSW set, bench/realembed).
#include <chrono>
#include <cstdio>
#include <deque>
#include <future>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bench/npy_writer.h"
#include "embed/checkpoint.h"
#include "embed/embedder.h"
#include "embed/tokenizer.h"
#include "tools/corpus_reader.h"

namespace {

using Clock = std::chrono::steady_clock;

// Reads up to `limit` texts of the corpus at `path`; false (after printing
// why) on error.
bool ReadTexts(const std::string& path, size_t limit,
               std::vector<std::string>& texts) {
  auto reader =
      zv::tools::CorpusReader::Open(path, zv::tools::GuessCorpusFormat(path));
  if (!reader.ok()) {
    std::fprintf(stderr, "%s\n", reader.status().message().c_str());
    return false;
  }
  zv::tools::CorpusRecord rec;
  while (texts.size() < limit) {
    auto more = (*reader)->Next(&rec);
    if (!more.ok()) {
      std::fprintf(stderr, "%s\n", more.status().message().c_str());
      return false;
    }
    if (!*more) break;
    texts.push_back(std::move(rec.text));
  }
  return true;
}

// Tokenization alone, one thread: the CPU cost per text that every pipeline
// stage around the encoder competes with. False (after printing why) on error.
bool TimeTokenizerAlone(const std::string& model,
                        const std::vector<std::string>& texts) {
  auto ck = zv::embed::LoadCheckpoint(model);
  if (!ck.ok()) {
    std::fprintf(stderr, "%s\n", ck.status().message().c_str());
    return false;
  }
  auto tokenizer =
      zv::embed::Tokenizer::Create((*ck)->vocab, (*ck)->tokenizer_options);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", tokenizer.status().message().c_str());
    return false;
  }
  const size_t n = std::min<size_t>(texts.size(), 200000);
  size_t tokens = 0;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < n; ++i) tokens += tokenizer->Encode(texts[i]).size();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf(
      "tokenizer alone, 1 thread: %zu texts, %.1f tokens each, %.2f us a "
      "text = %.0f texts/s\n",
      n, static_cast<double>(tokens) / std::max<size_t>(n, 1),
      secs * 1e6 / std::max<size_t>(n, 1), n / secs);
  return true;
}

// Embeds every text once, in chunks submitted as `zerovec build` does; false
// (after printing why) on error.
bool EmbedAllOnce(zv::embed::Embedder& embedder,
                  const std::vector<std::string_view>& views,
                  const std::vector<float*>& rows, size_t chunk) {
  std::deque<std::future<zv::Status>> inflight;
  for (size_t first = 0; first < views.size(); first += chunk) {
    const size_t n = std::min(chunk, views.size() - first);
    inflight.push_back(
        embedder.Submit(std::span<const std::string_view>(&views[first], n),
                        std::span<float* const>(&rows[first], n)));
    // As in zerovec build: a bounded number of chunks in flight.
    if (inflight.size() >= 4) {
      zv::Status s = inflight.front().get();
      inflight.pop_front();
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.message().c_str());
        return false;
      }
    }
  }
  for (auto& f : inflight) {
    zv::Status s = f.get();
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  zv::embed::UseFastBlasKernels(argv);
  std::map<std::string, std::string> kv;
  for (int i = 1; i + 1 < argc; i += 2) kv[argv[i]] = argv[i + 1];
  if (!kv.count("--input")) {
    std::fprintf(stderr,
                 "usage: embed_corpus_bench --input FILE [--model DIR] "
                 "[--device auto|cpu|cuda[:N]] [--chunk 16384] [--limit N] "
                 "[--repeat 2] [--threads N] [--out V.npy]\n");
    return 2;
  }
  const std::string model =
      kv.count("--model") ? kv["--model"] : "models/zerovec-mini";
  const size_t chunk = kv.count("--chunk") ? std::stoul(kv["--chunk"]) : 16384;
  const size_t limit = kv.count("--limit") ? std::stoul(kv["--limit"]) : ~0ul;
  const int repeat = kv.count("--repeat") ? std::stoi(kv["--repeat"]) : 2;

  const auto t_read = Clock::now();
  std::vector<std::string> texts;
  if (!ReadTexts(kv["--input"], limit, texts)) return 1;
  const double read_s =
      std::chrono::duration<double>(Clock::now() - t_read).count();

  if (!TimeTokenizerAlone(model, texts)) return 1;

  auto options = zv::embed::ParseDevice(
      kv.count("--device") ? kv["--device"] : std::string("auto"));
  if (!options.ok()) {
    std::fprintf(stderr, "%s\n", options.status().message().c_str());
    return 2;
  }
  options->model_dir = model;
  if (kv.count("--threads")) options->cpu_threads = std::stoi(kv["--threads"]);
  auto embedder = zv::embed::Embedder::Create(*options);
  if (!embedder.ok()) {
    std::fprintf(stderr, "%s\n", embedder.status().message().c_str());
    return 1;
  }
  const size_t dim = (*embedder)->info().dim;
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<float> out(texts.size() * dim);
  std::vector<float*> rows(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) rows[i] = &out[i * dim];
  std::printf("texts %zu (read+parse %.2f s), model %s, device %s\n",
              texts.size(), read_s, model.c_str(),
              (*embedder)->device_description().c_str());
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    if (!EmbedAllOnce(**embedder, views, rows, chunk)) return 1;
    const double secs =
        std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("run %d: %zu texts in %.3f s = %.0f docs/s\n", r, texts.size(),
                secs, texts.size() / secs);
    std::fflush(stdout);
  }
  if (kv.count("--out")) {
    if (!zv::bench::WriteNpy(kv["--out"], out.data(), texts.size(), dim)) {
      std::fprintf(stderr, "cannot write %s\n", kv["--out"].c_str());
      return 1;
    }
    std::printf("wrote %s: %zu x %zu float32\n", kv["--out"].c_str(),
                texts.size(), dim);
  }
  return 0;
}
