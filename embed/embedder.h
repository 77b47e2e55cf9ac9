// Text -> vectors. The one public header of embed/.
//
// An Embedder loads a BERT-family checkpoint folder (config.json, vocab.txt,
// model.safetensors, optional sentence-transformers modules.json/1_Pooling) and
// runs it on CUDA when built with --config=cuda and a GPU is present, else on
// the CPU. Output rows are written where the caller points: normally rows of a
// shm segment.
#ifndef ZEROVEC_EMBED_EMBEDDER_H_
#define ZEROVEC_EMBED_EMBEDDER_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "embed/model_info.h"  // Pooling, ModelInfo

namespace zv::embed {

enum class DevicePreference { kAuto, kCpu, kCuda };

// The CPU encoder's GEMMs: fp32, or bf16 weights and activations with fp32
// accumulation (min cosine >= 0.999 against fp32 on the reference sentences;
// bench/RESULTS.md). kAuto: bf16 where the CPU has native bf16 (AVX512-BF16 or
// AMX), else fp32; the environment's ZEROVEC_CPU_PRECISION=fp32|bf16 overrides
// kAuto.
enum class CpuPrecision { kAuto, kFp32, kBf16 };

// The CUDA encoder's GEMM inputs: fp16, or e4m3 (FP8) for the QKV and FFN
// GEMMs (embed/cuda_encoder.h). kAuto: ZV_CUDA_PRECISION=fp16|fp8 from the
// environment, else fp16.
enum class GpuPrecision { kAuto, kFp16, kFp8 };

struct EmbedderOptions {
  std::filesystem::path model_dir;
  DevicePreference device = DevicePreference::kAuto;
  // Which CUDA device (cudaSetDevice ordinal) when running on CUDA.
  int cuda_device = 0;
  // Upper bound on tokens in one length-bucketed batch (bounds activation
  // memory); 0 picks by device: 65536 on CUDA (large GEMMs keep the GPU busy),
  // 16384 on the CPU.
  int max_batch_tokens = 0;
  // Threads the CPU encoder computes on (one pool shared by its lanes; BLAS
  // runs single-threaded inside it); 0: every core this process may use.
  int cpu_threads = 0;
  CpuPrecision cpu_precision = CpuPrecision::kAuto;
  GpuPrecision gpu_precision = GpuPrecision::kAuto;
};

// OpenBLAS picks its kernels from the CPU's cpuid model and falls back to
// generic SSE3 ones ("Prescott") for a model it does not know, which is what
// virtual machines often report: on the H200 host's vCPUs (AVX-512) that made
// the CPU encoder 3.6x slower (bench/RESULTS.md). Call first in main(): when
// OPENBLAS_CORETYPE is unset, OpenBLAS chose a generic core and the CPU has
// AVX-512 (or AVX2+FMA), it sets OPENBLAS_CORETYPE=SkylakeX (Haswell) and
// re-executes the program (OpenBLAS reads it only when it loads). Returns
// only when nothing needed doing or the re-exec failed.
void UseFastBlasKernels(char** argv);

// Parses a --device value: "auto", "cpu", "cuda" or "cuda:N".
StatusOr<EmbedderOptions> ParseDevice(const std::string& flag,
                                      EmbedderOptions options = {});

// Parses a --devices value: "all" (every CUDA device present; the CPU when
// there is none) or a comma-separated list of "cpu", "cuda" (cuda:0) and
// "cuda:N", e.g. "cuda:0,cuda:1". One EmbedderOptions per device, each a copy
// of `options` with the device set. A device listed twice is an error unless
// the environment has ZEROVEC_TESTING_REPEAT_DEVICES=1 (tests run the
// several-encoder path on one GPU, or on the CPU, with "cuda:0,cuda:0" or
// "cpu,cpu").
StatusOr<std::vector<EmbedderOptions>> ParseDevices(
    const std::string& flag, EmbedderOptions options = {});

// Where the bulk lanes' time went since the Embedder was made (for a build's
// closing report: whether the encoder or what feeds it was the limit).
struct LaneStats {
  int lanes = 0;
  uint64_t texts = 0;
  double tokenize_seconds = 0;  // wall time tokenizing, summed over lanes
  double encode_seconds = 0;    // wall time in the encoder, summed over lanes
};

// What one embedding call noticed about its texts.
struct EmbedReport {
  // Texts longer than info().max_length tokens (incl. [CLS]/[SEP]): each was
  // embedded from its first max_length tokens only.
  uint64_t truncated = 0;
};

class Embedder {
 public:
  virtual ~Embedder() = default;

  static StatusOr<std::unique_ptr<Embedder>> Create(
      const EmbedderOptions& options);
  // One encoder per entry of `devices` (ParseDevices; each with its own
  // streams, pinned buffers and lanes, the model's weights on each device),
  // behind one Embedder (issue 19): every Submit / EmbedInto goes to the
  // encoder with the fewest texts queued, a large one (512+ texts) is cut into
  // pieces for several, and each encoder writes its rows straight to the
  // caller's row pointers. Host output memory is registered with every
  // encoder, device output memory with those on its device; bulk_stats() sums
  // them; device_description() lists them. CPU entries with cpu_threads 0
  // share the cores. One entry: exactly Create(devices[0]).
  static StatusOr<std::unique_ptr<Embedder>> CreateMulti(
      std::vector<EmbedderOptions> devices);

  virtual const ModelInfo& info() const = 0;
  // "cpu (openblas)" or "cuda:0 NVIDIA H200, sink=host-registered" etc.
  virtual std::string device_description() const = 0;
  // True when the encoder runs on a CUDA device.
  virtual bool on_cuda() const = 0;
  virtual LaneStats bulk_stats() const = 0;
  // bulk_stats() of each encoder (one entry unless CreateMulti made several).
  virtual std::vector<LaneStats> encoder_stats() const {
    return {bulk_stats()};
  }

  // Embeds texts[i] into out_rows[i] (each >= info().dim floats). Blocks until
  // done. With `report`, also says what was truncated.
  Status EmbedInto(std::span<const std::string_view> texts,
                   std::span<float* const> out_rows) {
    return EmbedInto(texts, out_rows, nullptr);
  }
  virtual Status EmbedInto(std::span<const std::string_view> texts,
                           std::span<float* const> out_rows,
                           EmbedReport* report) = 0;

  // Asynchronous form: the returned future resolves when all rows are written.
  // Texts and row pointers (and `report`, filled before the future resolves)
  // must stay valid until then. Query and ingest work submitted from
  // different threads do not wait on each other (separate streams/workers).
  std::future<Status> Submit(std::vector<std::string> texts,
                             std::vector<float*> out_rows) {
    return Submit(std::move(texts), std::move(out_rows), nullptr);
  }
  virtual std::future<Status> Submit(std::vector<std::string> texts,
                                     std::vector<float*> out_rows,
                                     EmbedReport* report) = 0;
  // Borrowing form: the texts' characters are not copied.
  std::future<Status> Submit(std::span<const std::string_view> texts,
                             std::span<float* const> out_rows) {
    return Submit(texts, out_rows, nullptr);
  }
  virtual std::future<Status> Submit(std::span<const std::string_view> texts,
                                     std::span<float* const> out_rows,
                                     EmbedReport* report) = 0;

  // `text` in pieces the model's window holds, for storing a long text as
  // several rows: the whole text when it fits in info().max_length tokens,
  // else overlapping spans of it cut at whitespace (consecutive spans share
  // about `overlap_tokens` tokens). The spans point into `text`.
  virtual std::vector<std::string_view> SplitToWindows(
      std::string_view text, int overlap_tokens) const = 0;

  // Declares host memory that output rows will point into (e.g. a segment's
  // extent mappings) so a GPU encoder can store rows there directly instead of
  // staging them. A no-op on the CPU; idempotent per range. The range must stay
  // mapped until UnregisterOutputMemory(data) (or the Embedder's destruction)
  // and no embedding into it may be in flight then. segment_sink.h wraps this
  // for shm segments.
  virtual Status RegisterOutputMemory(void* data, size_t bytes) {
    return OkStatus();
  }
  virtual void UnregisterOutputMemory(void* data) {}

  // The CUDA device the encoder runs on; -1 on the CPU (and for several
  // encoders not all on one device).
  virtual int cuda_device() const { return -1; }
  // Declares memory of that device (cudaMalloc'd, e.g. a GPU search mirror's
  // rows or a query buffer) that output rows may point into, so vectors
  // computed on the GPU stay there (issue 13). FAILED_PRECONDITION unless the
  // encoder runs on CUDA. Ended by UnregisterOutputMemory(device_data); no
  // embedding into it may be in flight then.
  virtual Status RegisterDeviceOutputMemory(void* device_data, size_t bytes) {
    return FailedPreconditionError(
        "embed: device output memory needs the CUDA encoder");
  }
};

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_EMBEDDER_H_
