// The C++ side of bench/embed_cpu_compare.py: times embed::Embedder (CPU)
// over a fixed text set at given batch sizes and writes a JSON summary plus the
// vectors it made (for the cosine check against PyTorch).
//
//   cpu_embed_bench --model DIR --texts FILE --out JSON [--vectors-out F32FILE]
//                   [--batches 1,32] [--reps 7] [--warmup 2] [--threads N]
//                   [--precision auto|fp32|bf16]
//
// FILE holds one text a line. One rep embeds every text of FILE once, in
// consecutive batches of the given size; the figure is the median rep time.
// Threads: --threads N (the CPU encoder's pool; BLAS runs single-threaded in
// it), else OPENBLAS_NUM_THREADS from the environment, else every core.
// --precision: the CPU encoder's GEMMs (EmbedderOptions::cpu_precision).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "embed/embedder.h"

namespace {

std::string Arg(int argc, char** argv, const std::string& name,
                const std::string& def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == "--" + name) return argv[i + 1];
  return def;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<int> ParseBatches(const std::string& csv) {
  std::vector<int> batches;
  std::stringstream ss(csv);
  std::string item;
  while (std::getline(ss, item, ',')) batches.push_back(std::stoi(item));
  return batches;
}

std::vector<std::string> ReadTexts(const std::string& path) {
  std::vector<std::string> texts;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) texts.push_back(line);
  return texts;
}

// Embeds every text once in consecutive batches of `batch`; false on error.
bool OnePass(zv::embed::Embedder& emb,
             const std::vector<std::string_view>& views,
             const std::vector<float*>& rows, int batch) {
  const size_t n = views.size();
  for (size_t i = 0; i < n; i += batch) {
    const size_t m = std::min<size_t>(batch, n - i);
    auto s = emb.EmbedInto({views.data() + i, m}, {rows.data() + i, m});
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return false;
    }
  }
  return true;
}

// Times `reps` passes (after `warmup`) at one batch size into `secs`.
bool TimeBatch(zv::embed::Embedder& emb,
               const std::vector<std::string_view>& views,
               const std::vector<float*>& rows, int batch, int warmup, int reps,
               std::vector<double>& secs) {
  for (int w = 0; w < warmup; ++w)
    if (!OnePass(emb, views, rows, batch)) return false;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!OnePass(emb, views, rows, batch)) return false;
    secs.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count());
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  zv::embed::UseFastBlasKernels(argv);
  const std::string model = Arg(argc, argv, "model", "");
  const std::string texts_path = Arg(argc, argv, "texts", "");
  const std::string out_path = Arg(argc, argv, "out", "");
  if (model.empty() || texts_path.empty() || out_path.empty()) {
    std::fprintf(stderr,
                 "usage: %s --model DIR --texts FILE --out JSON "
                 "[--vectors-out F] [--batches 1,32] [--reps 7] [--warmup 2]\n",
                 argv[0]);
    return 2;
  }
  const int reps = std::stoi(Arg(argc, argv, "reps", "7"));
  const int warmup = std::stoi(Arg(argc, argv, "warmup", "2"));
  const std::vector<int> batches =
      ParseBatches(Arg(argc, argv, "batches", "1,32"));
  const std::vector<std::string> texts = ReadTexts(texts_path);
  if (texts.empty()) {
    std::fprintf(stderr, "no texts in %s\n", texts_path.c_str());
    return 1;
  }

  zv::embed::EmbedderOptions opt;
  opt.model_dir = model;
  opt.device = zv::embed::DevicePreference::kCpu;
  const char* env_threads = std::getenv("OPENBLAS_NUM_THREADS");
  opt.cpu_threads =
      std::stoi(Arg(argc, argv, "threads", env_threads ? env_threads : "0"));
  const std::string precision = Arg(argc, argv, "precision", "auto");
  if (precision == "fp32") {
    opt.cpu_precision = zv::embed::CpuPrecision::kFp32;
  } else if (precision == "bf16") {
    opt.cpu_precision = zv::embed::CpuPrecision::kBf16;
  } else if (precision != "auto") {
    std::fprintf(stderr, "--precision: auto, fp32 or bf16\n");
    return 2;
  }
  auto emb = zv::embed::Embedder::Create(opt);
  if (!emb.ok()) {
    std::fprintf(stderr, "%s\n", emb.status().ToString().c_str());
    return 1;
  }
  const int dim = (*emb)->info().dim;
  const size_t n = texts.size();
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<float> out(n * dim);
  std::vector<float*> rows(n);
  for (size_t i = 0; i < n; ++i) rows[i] = &out[i * dim];

  std::ostringstream json;
  json << "{\"device\":\"" << (*emb)->device_description()
       << "\",\"dim\":" << dim << ",\"texts\":" << n << ",\"results\":[";
  bool first = true;
  for (int batch : batches) {
    std::vector<double> secs;
    if (!TimeBatch(**emb, views, rows, batch, warmup, reps, secs)) return 1;
    const double med = Median(secs);
    std::fprintf(stderr, "batch %d: median %.4f s a pass of %zu texts\n", batch,
                 med, n);
    json << (first ? "" : ",") << "{\"batch\":" << batch
         << ",\"median_pass_s\":" << med << ",\"reps\":" << reps
         << ",\"all_pass_s\":[";
    for (size_t i = 0; i < secs.size(); ++i) json << (i ? "," : "") << secs[i];
    json << "]}";
    first = false;
  }
  json << "]}\n";
  std::ofstream(out_path) << json.str();
  const std::string vec_path = Arg(argc, argv, "vectors-out", "");
  if (!vec_path.empty()) {
    std::ofstream v(vec_path, std::ios::binary);
    v.write(reinterpret_cast<const char*>(out.data()),
            static_cast<std::streamsize>(out.size() * sizeof(float)));
  }
  return 0;
}
