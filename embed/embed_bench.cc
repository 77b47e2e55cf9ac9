// Throughput of Embedder::EmbedInto (tokenization + encoder + pooled rows
// written), on "medium" texts (about 25-55 tokens). Usage:
//   embed_bench MODEL_DIR|--minilm-random [cpu|cuda|auto] [seconds_per_point]
// --minilm-random regenerates tests/data/minilm_random's weights (run from the
// repo root) and benchmarks that all-MiniLM-L6-v2-shaped model. The texts
// follow the same rule as embed/tools/torch_bench.py so the two compare.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "embed/embedder.h"
#include "embed/testing/test_checkpoint.h"

namespace {

const char* const kWords[64] = {
    "the",    "of",      "and",    "to",     "in",     "is",    "was",
    "for",    "on",      "with",   "as",     "by",     "at",    "from",
    "his",    "an",      "were",   "are",    "which",  "this",  "be",
    "has",    "had",     "it",     "one",    "their",  "first", "after",
    "new",    "who",     "they",   "two",    "her",    "she",   "been",
    "other",  "when",    "time",   "during", "year",   "city",  "school",
    "team",   "world",   "film",   "music",  "river",  "house", "system",
    "water",  "history", "series", "season", "league", "album", "war",
    "state",  "people",  "family", "church", "game",   "group", "road",
    "station"};

std::string MediumText(int i) {
  const int n = 20 + (i * 37) % 30;
  std::string t;
  for (int j = 0; j < n; ++j) {
    if (j) t += ' ';
    t += kWords[(i * 131 + j * 17) % 64];
  }
  return t + ".";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [cpu|cuda|auto] [seconds]\n",
                 argv[0]);
    return 2;
  }
  zv::embed::EmbedderOptions opt;
  opt.model_dir = argv[1];
  if (opt.model_dir == "--minilm-random") {
    auto dir = zv::embed::testing::MakeMiniLmRandom();
    if (!dir.ok()) {
      std::fprintf(stderr, "%s\n", dir.status().ToString().c_str());
      return 1;
    }
    opt.model_dir = *dir;
  }
  const std::string dev = argc > 2 ? argv[2] : "auto";
  opt.device = dev == "cpu"    ? zv::embed::DevicePreference::kCpu
               : dev == "cuda" ? zv::embed::DevicePreference::kCuda
                               : zv::embed::DevicePreference::kAuto;
  const double seconds = argc > 3 ? std::stod(argv[3]) : 3.0;
  auto emb = zv::embed::Embedder::Create(opt);
  if (!emb.ok()) {
    std::fprintf(stderr, "%s\n", emb.status().ToString().c_str());
    return 1;
  }
  const int dim = (*emb)->info().dim;
  std::printf("model %s dim %d layers %d on %s\n", (*emb)->info().name.c_str(),
              dim, (*emb)->info().num_layers,
              (*emb)->device_description().c_str());
  for (int batch : {1, 32, 4096}) {
    std::vector<std::string> texts;
    for (int i = 0; i < batch; ++i) texts.push_back(MediumText(i));
    std::vector<std::string_view> views(texts.begin(), texts.end());
    std::vector<float> out(size_t(batch) * dim);
    std::vector<float*> rows;
    for (int i = 0; i < batch; ++i) rows.push_back(&out[size_t(i) * dim]);
    if (!(*emb)->EmbedInto(views, rows).ok()) return 1;  // warm-up
    using Clock = std::chrono::steady_clock;
    int iters = 0;
    const auto t0 = Clock::now();
    double elapsed = 0;
    do {
      auto s = (*emb)->EmbedInto(views, rows);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      ++iters;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (elapsed < seconds);
    std::printf(
        "batch %5d: %10.0f sentences/s  (%.3f ms a batch, %d batches)\n", batch,
        double(batch) * iters / elapsed, 1e3 * elapsed / iters, iters);
  }
  return 0;
}
