// Embedding throughput of the CUDA encoder on the GPU machine
// (bench/RESULTS.md, "GPU (H200)"). Reads the texts and token ids of
// bench/gpu/texts.jsonl (the same ids PyTorch gets), and for each bucket x
// batch size measures
//   encode_wall  CudaModel encoder's Encode() on those ids, wall clock around
//   the
//                blocking call (host staging, H2D, kernels, rows stored into
//                registered host memory, sync)
//   gpu          the encoder's own timer (CudaTimer::kTotal): CUDA events
//                around its forward pass (a graph replay for small batches)
//   e2e          Embedder::EmbedInto on the texts: tokenization + bucketing +
//                Encode, i.e. what a caller of embed/embedder.h gets
// plus per-phase GPU time (CudaTimer::kPhases: an event after each phase of
// the non-graph pass), the cuBLAS fp16/bf16 GEMM ceiling, the encoder's vectors
// against its old path (unfused, no graphs) in the same process, and the
// tokenizer against the ids file. ZV_CUDA_* variables pick the encoder's path
// (embed/cuda_encoder.h: CudaEncoderOptions::FromEnv), ZV_CUDA_PRECISION=fp8
// its FP8 GEMMs; the precision is in the JSON ("precision", and every run's).
// Every figure is a median of repeated runs after warm-up.
//   gpu_embed_bench --model DIR --label NAME --texts FILE --out FILE.json
//                   [--vectors-out FILE.json] [--batches 1,32,256,4096]
//                   [--skip-e2e 1]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/gpu/gpu_info.h"
#include "embed/checkpoint.h"
#include "embed/cuda_encoder.h"
#include "embed/embedder.h"
#include "embed/encoder.h"
#include "embed/tokenizer.h"

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace ze = zv::embed;

namespace {

struct Text {
  std::string text;
  std::vector<int32_t> ids;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "FATAL: %s\n", what.c_str());
  std::exit(1);
}
#define CHECK_OK(expr)                             \
  do {                                             \
    auto s_ = (expr);                              \
    if (!s_.ok()) Die(#expr ": " + s_.ToString()); \
  } while (0)

std::map<std::string, std::string> Args(int argc, char** argv) {
  std::map<std::string, std::string> a;
  for (int i = 1; i + 1 < argc; i += 2) a[argv[i]] = argv[i + 1];
  return a;
}

// Useful (unpadded) forward FLOPs: 2 per multiply-add in the four GEMMs of each
// layer plus QK^T and PV of attention. Embedding, LayerNorm, GELU and pooling
// are left out (they are not matrix work).
double ModelFlops(const ze::BertConfig& c, const std::vector<int>& lens) {
  const double h = c.hidden_size, f = c.intermediate_size;
  double total = 0;
  for (int L : lens) {
    total += c.num_layers * (2.0 * L * (3 * h * h + h * h + 2 * h * f) +
                             4.0 * L * double(L) * h);
  }
  return total;
}

int Reps(int batch) { return batch >= 4096 ? 5 : batch >= 256 ? 10 : 20; }

using Flags = std::map<std::string, std::string>;

// The texts of --texts, by bucket, buckets in file order.
struct Corpus {
  std::map<std::string, std::vector<Text>> buckets;
  std::vector<std::string> order;
};

// The CUDA encoder under test and the registered host rows it writes into.
struct EncoderRig {
  std::shared_ptr<ze::CudaModel> model;
  std::unique_ptr<ze::CudaEncoder> encoder;
  float* out_rows = nullptr;
  size_t out_bytes = 0;
  std::vector<float*> rows;
  std::string precision;  // "fp16" or "fp8"
};

std::vector<int> ParseBatches(Flags& args) {
  std::vector<int> batches = {1, 32, 256, 4096};
  if (args.count("--batches")) {
    batches.clear();
    std::stringstream ss(args["--batches"]);
    for (std::string x; std::getline(ss, x, ',');)
      batches.push_back(std::stoi(x));
  }
  return batches;
}

Corpus ReadTexts(const std::string& path) {
  Corpus c;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json r = json::parse(line);
    const std::string b = r["bucket"];
    if (!c.buckets.count(b)) c.order.push_back(b);
    c.buckets[b].push_back({r["text"], r["ids"].get<std::vector<int32_t>>()});
  }
  return c;
}

// Tokenization alone at the largest batch: one thread, and the Embedder's
// split (min(hardware threads, 8) workers for jobs of >= 256 texts).
void TimeTokenizer(const ze::Tokenizer& tok, Corpus& corpus, int max_batch,
                   json& out) {
  for (const auto& b : corpus.order) {
    const auto& v = corpus.buckets[b];
    std::vector<std::string_view> texts;
    for (int i = 0; i < max_batch; ++i) texts.push_back(v[i % v.size()].text);
    std::vector<double> one, par;
    const size_t workers =
        std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
    for (int r = 0; r < 4; ++r) {
      auto t0 = Clock::now();
      size_t sink = 0;
      for (auto s : texts) sink += tok.Encode(s).size();
      auto t1 = Clock::now();
      std::vector<std::future<size_t>> parts;
      for (size_t w = 0; w < workers; ++w)
        parts.push_back(std::async(std::launch::async, [&, w] {
          size_t n = 0;
          for (size_t i = w; i < texts.size(); i += workers)
            n += tok.Encode(texts[i]).size();
          return n;
        }));
      for (auto& p : parts) sink -= p.get();
      auto t2 = Clock::now();
      if (sink != 0) Die("tokenizer count mismatch");
      if (r) {
        one.push_back(Ms(t0, t1));
        par.push_back(Ms(t1, t2));
      }
    }
    out["tokenize"][b] = {{"batch", max_batch},
                          {"one_thread_ms", Median(one)},
                          {"threads", workers},
                          {"parallel_ms", Median(par)}};
    std::printf("tokenize %s x%d: %.2f ms on 1 thread, %.2f ms on %zu\n",
                b.c_str(), max_batch, Median(one), Median(par), workers);
  }
}

// Our tokenizer against the ids file (reference tokenizer), then its speed.
void CheckTokenizer(const ze::Checkpoint& ck, Corpus& corpus, int max_batch,
                    json& out) {
  auto tok = ze::Tokenizer::Create(ck.vocab, ck.tokenizer_options);
  CHECK_OK(tok.status());
  int checked = 0, mismatched = 0;
  for (const auto& b : corpus.order)
    for (const auto& t : corpus.buckets[b]) {
      ++checked;
      if (tok->Encode(t.text) != t.ids) ++mismatched;
    }
  out["tokenizer_check"] = {{"texts", checked}, {"mismatched", mismatched}};
  std::printf("tokenizer: %d of %d texts differ from the reference ids\n",
              mismatched, checked);
  TimeTokenizer(*tok, corpus, max_batch, out);
}

// GEMM ceiling through the encoder's own cuBLAS call; returns the larger.
double MeasureGemmCeiling(json& out) {
  auto fp16 = zvbench::GemmTflops("fp16", 8192, 10);
  auto bf16 = zvbench::GemmTflops("bf16", 8192, 10);
  CHECK_OK(fp16.status());
  CHECK_OK(bf16.status());
  out["gemm_ceiling_tflops"] = {
      {"fp16", *fp16},
      {"bf16", *bf16},
      {"n", 8192},
      {"call", "cublasGemmEx, fp32 accumulate, random data"}};
  std::printf("GEMM ceiling 8192^3: fp16 %.0f TFLOP/s, bf16 %.0f TFLOP/s\n",
              *fp16, *bf16);
  return std::max(out["gemm_ceiling_tflops"]["fp16"].get<double>(),
                  out["gemm_ceiling_tflops"]["bf16"].get<double>());
}

// The first n texts of bucket b (cycled) as one batch of ids.
ze::TokenBatch BatchOf(Corpus& corpus, const std::string& b, int n,
                       std::vector<int>* lens) {
  ze::TokenBatch tb;
  const auto& v = corpus.buckets[b];
  for (int i = 0; i < n; ++i) {
    tb.Add(v[i % v.size()].ids);
    if (lens) lens->push_back(int(v[i % v.size()].ids.size()));
  }
  return tb;
}

EncoderRig CreateEncoder(std::shared_ptr<const ze::Checkpoint> ck,
                         int max_tokens, int max_batch, json& out) {
  const int h = ck->config.hidden_size;
  EncoderRig rig;
  auto model_or = ze::CudaModel::Create(ck, max_tokens);
  CHECK_OK(model_or.status());
  rig.model = *model_or;
  auto enc_or = rig.model->NewCudaEncoder(ze::CudaEncoderOptions::FromEnv());
  CHECK_OK(enc_or.status());
  rig.encoder = std::move(*enc_or);
  out["encoder_options"] = rig.encoder->options().ToString();
  rig.precision = ze::CudaPrecisionName(rig.encoder->options().precision);
  out["precision"] = rig.precision;
  rig.out_bytes = (size_t(max_batch) * h * 4 + 4095) / 4096 * 4096;
  rig.out_rows = static_cast<float*>(std::aligned_alloc(4096, rig.out_bytes));
  std::memset(rig.out_rows, 0, rig.out_bytes);
  CHECK_OK(rig.model->RegisterOutputMemory(rig.out_rows, rig.out_bytes));
  out["sink"] = rig.model->SinkMode();
  out["device"] = rig.encoder->description();
  std::printf("%s\n", rig.encoder->description().c_str());
  for (int i = 0; i < max_batch; ++i)
    rig.rows.push_back(rig.out_rows + size_t(i) * h);
  return rig;
}

// Vectors of the first 64 texts a bucket (for the PyTorch comparison), and
// the encoder against its old path (unfused, no padding or graphs) on the
// same model: each bucket twice, so small batches also replay their graph.
void CompareBaseline(Flags& args, Corpus& corpus, int h, EncoderRig& rig,
                     json& out) {
  ze::CudaEncoderOptions old_path;
  old_path.fused = false;
  old_path.small_batch = 0;
  auto base_or = rig.model->NewCudaEncoder(old_path);
  CHECK_OK(base_or.status());
  auto& base = **base_or;
  json vecs;
  double worst = 0, min_cos = 1;
  for (const auto& b : corpus.order) {
    // At most the rig's rows: a run with --batches 1,32 has 32.
    const int n = std::min<int>(
        {64, int(corpus.buckets[b].size()), int(rig.rows.size())});
    // Graphs capture on a shape's second use; the last run (n) is kept.
    for (int n_run :
         {1, 1, 1, std::min(32, n), std::min(32, n), std::min(32, n), n}) {
      auto tb = BatchOf(corpus, b, n_run, nullptr);
      std::vector<float> ref(size_t(n_run) * h);
      std::vector<float*> ref_rows;
      for (int i = 0; i < n_run; ++i) ref_rows.push_back(&ref[size_t(i) * h]);
      for (int i = 0; i < n_run * h; ++i) rig.out_rows[i] = NAN;  // poison
      CHECK_OK(rig.encoder->Encode(
          tb, std::span<float* const>(rig.rows.data(), n_run)));
      CHECK_OK(base.Encode(tb, ref_rows));
      for (int i = 0; i < n_run; ++i) {
        const float* v = rig.out_rows + size_t(i) * h;
        double dot = 0, nv = 0, nr = 0;
        for (int d = 0; d < h; ++d) {
          if (!std::isfinite(v[d]))
            Die("encoder left a row unwritten / non-finite");
          worst = std::max<double>(worst, std::fabs(v[d] - ref_rows[i][d]));
          dot += double(v[d]) * ref_rows[i][d];
          nv += double(v[d]) * v[d];
          nr += double(ref_rows[i][d]) * ref_rows[i][d];
        }
        min_cos = std::min(min_cos, dot / std::sqrt(nv * nr + 1e-30));
      }
    }
    for (int i = 0; i < n; ++i) {
      vecs[b].push_back(std::vector<float>(rig.out_rows + size_t(i) * h,
                                           rig.out_rows + size_t(i + 1) * h));
    }
  }
  out["baseline"] = base.description();
  out["baseline_vs_encoder_max_abs_diff"] = worst;
  out["baseline_vs_encoder_min_cosine"] = min_cos;
  std::printf(
      "encoder vs its old path (%s): max |diff| %.3g, min cosine %.7f\n",
      base.description().c_str(), worst, min_cos);
  // Recorded, not fatal, so the figures still come out; the vectors against
  // PyTorch (torch_gpu_bench.py --ours-vectors) are the check that counts.
  if (min_cos < 0.9999) std::printf("WARNING: encoder differs from old path\n");
  if (args.count("--vectors-out"))
    std::ofstream(args["--vectors-out"]) << vecs.dump();
}

// Per-phase GPU time from the encoder's timer: median of 3 timed runs.
json EncoderPhases(ze::CudaEncoder& enc, const ze::TokenBatch& tb,
                   std::span<float* const> rows) {
  json phases;
  std::map<std::string, std::vector<double>> per;
  enc.SetTimer(ze::CudaTimer::kPhases);
  for (int i = 0; i < 3; ++i) {
    CHECK_OK(enc.Encode(tb, rows));
    for (auto& [k, v] : enc.LastTimings().phases_ms) per[k].push_back(v);
  }
  enc.SetTimer(ze::CudaTimer::kOff);
  for (auto& [k, v] : per) phases[k] = Median(v);
  return phases;
}

// What the throughput phase holds fixed across runs.
struct ThroughputSetup {
  const ze::BertConfig* cfg;
  int max_batch;
  double ceiling;
};

// One bucket x batch: encoder on ids (wall, timer off), then its GPU time
// (timer on) and, at some batches, its phases.
void MeasureEncodeRun(Corpus& corpus, const std::string& b, int B,
                      const ThroughputSetup& setup, EncoderRig& rig,
                      json& out) {
  auto& enc = *rig.encoder;
  std::vector<int> lens;
  auto tb = BatchOf(corpus, b, B, &lens);
  const double tokens = tb.ids.size();
  const double flops = ModelFlops(*setup.cfg, lens);
  const double ceiling = setup.ceiling;
  std::span<float* const> r(rig.rows.data(), B);
  const int reps = Reps(B);
  // The first pass of a shape also plans its GEMMs (cuBLASLt's heuristic,
  // FP8 trials): its wall time is reported on its own.
  const auto first = Clock::now();
  CHECK_OK(enc.Encode(tb, r));
  const double first_ms = Ms(first, Clock::now());
  CHECK_OK(enc.Encode(tb, r));
  std::vector<double> wall;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    CHECK_OK(enc.Encode(tb, r));
    wall.push_back(Ms(t0, Clock::now()));
  }
  enc.SetTimer(ze::CudaTimer::kTotal);
  std::vector<double> gpu;
  bool graph = false;
  for (int i = 0; i < reps; ++i) {
    CHECK_OK(enc.Encode(tb, r));
    gpu.push_back(enc.LastTimings().total_ms);
    graph = enc.LastTimings().graph;
  }
  enc.SetTimer(ze::CudaTimer::kOff);
  json phases;
  if (B == 1 || B == 32 || B == 256 || B == setup.max_batch)
    phases = EncoderPhases(enc, tb, r);
  const double wm = Median(wall), gm = Median(gpu);
  json rec = {
      {"impl", "zerovec-cuda"},
      {"precision", rig.precision},
      {"bucket", b},
      {"batch", B},
      {"tokens", tokens},
      {"reps", reps},
      {"encode_wall_ms", wm},
      {"first_encode_wall_ms", first_ms},
      {"gpu_ms", gm},
      {"sentences_per_s_wall", B / (wm / 1e3)},
      {"tokens_per_s_wall", tokens / (wm / 1e3)},
      {"sentences_per_s_gpu", B / (gm / 1e3)},
      {"tokens_per_s_gpu", tokens / (gm / 1e3)},
      {"model_gflop", flops / 1e9},
      {"tflops_gpu", flops / (gm / 1e3) / 1e12},
      {"fraction_of_gemm_ceiling_gpu", flops / (gm / 1e3) / 1e12 / ceiling},
      {"fraction_of_gemm_ceiling_wall", flops / (wm / 1e3) / 1e12 / ceiling},
      {"graph", graph}};
  if (!phases.is_null()) rec["phases_ms"] = phases;
  out["runs"].push_back(rec);
  std::printf(
      "%-6s B=%5d %s encode %9.3f ms (%9.0f sent/s)  gpu %9.3f ms (%9.0f "
      "sent/s, %5.1f TFLOP/s, %4.1f %% of ceiling)\n",
      b.c_str(), B, rig.precision.c_str(), wm, B / (wm / 1e3), gm,
      B / (gm / 1e3), flops / (gm / 1e3) / 1e12,
      100 * flops / (gm / 1e3) / 1e12 / ceiling);
  if (!phases.is_null()) {
    double sum = 0;
    std::string line;
    for (auto& [k, v] : phases.items()) {
      sum += v.get<double>();
      char buf[64];
      std::snprintf(buf, sizeof buf, " %s %.3f", k.c_str(), v.get<double>());
      line += buf;
    }
    std::printf("    phases (ms, non-graph pass):%s; sum %.3f\n", line.c_str(),
                sum);
  }
  std::fflush(stdout);
}

// The encoder's GEMM shapes alone at the largest batch of each bucket.
void MeasureGemmShapes(Corpus& corpus, const ze::BertConfig& cfg, int max_batch,
                       json& out) {
  const int h = cfg.hidden_size;
  for (const auto& b : corpus.order) {
    const int t = BatchOf(corpus, b, max_batch, nullptr).ids.size();
    const int f = cfg.intermediate_size;
    json s;
    for (auto [name, n, k] : {std::tuple{"qkv", 3 * h, h},
                              {"attn_out", h, h},
                              {"ffn_in", f, h},
                              {"ffn_out", h, f}}) {
      auto r = zvbench::ShapeTflops(t, n, k, 5);
      CHECK_OK(r.status());
      s[name] = *r;
    }
    out["gemm_shapes_tflops"][b] = s;
  }
}

// One bucket x batch through Embedder::EmbedInto (texts in, rows out).
void MeasureEmbedRun(ze::Embedder& emb, Corpus& corpus, const std::string& b,
                     int B, int mbt, EncoderRig& rig, json& out) {
  const auto& v = corpus.buckets[b];
  std::vector<std::string_view> texts;
  double tokens = 0;
  for (int i = 0; i < B; ++i) {
    texts.push_back(v[i % v.size()].text);
    tokens += v[i % v.size()].ids.size();
  }
  std::span<float* const> r(rig.rows.data(), B);
  const int reps = Reps(B);
  for (int w = 0; w < 2; ++w) CHECK_OK(emb.EmbedInto(texts, r));
  std::vector<double> wall;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    CHECK_OK(emb.EmbedInto(texts, r));
    wall.push_back(Ms(t0, Clock::now()));
  }
  const double wm = Median(wall);
  out["runs"].push_back({{"impl", "zerovec-e2e"},
                         {"max_batch_tokens", mbt},
                         {"bucket", b},
                         {"batch", B},
                         {"tokens", tokens},
                         {"reps", reps},
                         {"ms", wm},
                         {"sentences_per_s", B / (wm / 1e3)},
                         {"tokens_per_s", tokens / (wm / 1e3)}});
  std::printf("e2e(mbt %d) %-6s B=%5d %9.3f ms (%9.0f sent/s)\n", mbt,
              b.c_str(), B, wm, B / (wm / 1e3));
  std::fflush(stdout);
}

// End to end through embed/embedder.h: texts in, rows in registered memory
// (one registration at a time: cudaHostRegister refuses a second).
void MeasureEndToEnd(Flags& args, Corpus& corpus,
                     const std::vector<int>& batches, int max_batch,
                     int max_tokens, EncoderRig& rig, json& out) {
  rig.model->UnregisterOutputMemory(rig.out_rows);
  for (int mbt : {16384, max_tokens}) {
    ze::EmbedderOptions opt;
    opt.model_dir = args["--model"];
    opt.device = ze::DevicePreference::kCuda;
    opt.max_batch_tokens = mbt;
    auto emb_or = ze::Embedder::Create(opt);
    CHECK_OK(emb_or.status());
    auto& emb = **emb_or;
    CHECK_OK(emb.RegisterOutputMemory(rig.out_rows, rig.out_bytes));
    out["e2e_device"][std::to_string(mbt)] = emb.device_description();
    std::printf("e2e embedder: %s\n", emb.device_description().c_str());
    for (const auto& b : corpus.order) {
      for (int B : batches) {
        if (mbt != 16384 && B < max_batch)
          continue;  // large buckets: largest batch only
        MeasureEmbedRun(emb, corpus, b, B, mbt, rig, out);
      }
    }
    emb.UnregisterOutputMemory(rig.out_rows);
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto args = Args(argc, argv);
  for (const char* k : {"--model", "--texts", "--out", "--label"})
    if (!args.count(k)) Die(std::string("missing ") + k);
  const std::vector<int> batches = ParseBatches(args);
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  Corpus corpus = ReadTexts(args["--texts"]);

  auto ck_or = ze::LoadCheckpoint(args["--model"]);
  CHECK_OK(ck_or.status());
  std::shared_ptr<const ze::Checkpoint> ck = *ck_or;
  const ze::BertConfig& cfg = ck->config;
  const int h = cfg.hidden_size;

  json out;
  out["label"] = args["--label"];
  out["gpu"] = zvbench::GpuName();
  out["cuda"] = zvbench::DriverAndRuntime();
  out["config"] = {{"layers", cfg.num_layers},
                   {"hidden", h},
                   {"heads", cfg.num_heads},
                   {"ffn", cfg.intermediate_size},
                   {"vocab", cfg.vocab_size}};

  CheckTokenizer(*ck, corpus, max_batch, out);
  const double ceiling = MeasureGemmCeiling(out);

  int max_tokens = 0;
  for (const auto& b : corpus.order)
    max_tokens = std::max<int>(
        max_tokens, BatchOf(corpus, b, max_batch, nullptr).ids.size());
  EncoderRig rig = CreateEncoder(ck, max_tokens, max_batch, out);

  CompareBaseline(args, corpus, h, rig, out);
  // Throughput: encoder on ids, and its GPU time from its own timer.
  const ThroughputSetup setup{&cfg, max_batch, ceiling};
  for (const auto& b : corpus.order)
    for (int B : batches) MeasureEncodeRun(corpus, b, B, setup, rig, out);
  // After the passes: what the encoder settled on (e.g. a fallback it noted).
  out["device_after_runs"] = rig.encoder->description();
  std::printf("after the runs: %s\n", rig.encoder->description().c_str());
  MeasureGemmShapes(corpus, cfg, max_batch, out);
  if (args["--skip-e2e"] != "1")
    MeasureEndToEnd(args, corpus, batches, max_batch, max_tokens, rig, out);

  std::ofstream(args["--out"]) << out.dump(1);
  std::printf("wrote %s\n", args["--out"].c_str());
  return 0;
}
