// BERT forward pass on a CUDA GPU (fp16 storage, fp32 accumulation), built only
// with --config=cuda (ZEROVEC_WITH_CUDA). Plain C++ header: no CUDA types leak
// out. embed/-internal.
#ifndef ZEROVEC_EMBED_CUDA_ENCODER_H_
#define ZEROVEC_EMBED_CUDA_ENCODER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "embed/checkpoint.h"
#include "embed/encoder.h"

namespace zv::embed {

// The GEMMs' input precision (accumulation is fp32 in all of them; the
// residual stream, LayerNorm and attention stay fp16).
//   kFp16: fp16 weights and activations (the default).
//   kFp8:  e4m3 weights (per-tensor scale, quantized once per model) and
//          activations for the QKV, FFN-up and FFN-down GEMMs: the LayerNorm
//          kernels write the e4m3 copy of their output, the FFN-up GEMM's
//          GELU epilogue writes e4m3; scales are static bounds derived from
//          the weights (embed/cuda_fp8.cuh). The output projection stays fp16
//          (its input is attention's output). Needs the fused path; a shape
//          cuBLASLt has no FP8 algorithm for runs in fp16 (description() says
//          so). Vectors: see bench/RESULTS.md for its min cosine.
enum class CudaPrecision { kFp16, kFp8 };

// "fp16" or "fp8"; ParseCudaPrecision accepts those (and "e4m3").
const char* CudaPrecisionName(CudaPrecision p);
StatusOr<CudaPrecision> ParseCudaPrecision(const std::string& name);
// "qkv,up,down" (any non-empty subset, comma-separated) <-> the
// CudaEncoderOptions::fp8_gemms bits.
StatusOr<int> ParseFp8Gemms(const std::string& list);
std::string Fp8GemmsName(int bits);
// "6-11" / "0,2,4-5" (layers 0-63) <-> the CudaEncoderOptions::fp8_layers
// bits.
StatusOr<uint64_t> ParseFp8Layers(const std::string& list);
std::string Fp8LayersName(uint64_t bits);

// How one CUDA encoder runs a batch. The defaults are the fast path; each
// lever can be turned off (here or through the environment, see FromEnv) so a
// failure of the fast path can be told apart from one of the old path.
struct CudaEncoderOptions {
  // cuBLASLt GEMMs with the FFN-up bias + GELU in the epilogue (cuBLASLt's
  // GELU: tanh form), the K bias dropped and the V bias folded into the
  // output-projection bias, vectorised LayerNorm. false: the cuBLAS GEMMs and
  // separate bias/GELU/LayerNorm kernels of before.
  bool fused = true;
  // Batches of at most this many sequences are padded to a shape bucket
  // (tokens and longest sequence rounded up; padding rows are never read
  // back) so that their CUDA graphs can be reused. 0: no padding, no graphs.
  int small_batch = 32;
  // Replay small batches as CUDA graphs (captured on a shape's second use).
  bool graphs = true;
  // Graphs kept per encoder; the least recently used is dropped beyond this.
  int max_graphs = 48;
  CudaPrecision precision = CudaPrecision::kFp16;
  // kFp8 only: cuBLASLt's FP8 fast accumulation (no periodic promotion of the
  // tensor cores' partial sums to fp32).
  bool fp8_fast_accum = false;
  // kFp8 only: which GEMMs run in e4m3 (kFp8Qkv | kFp8Up | kFp8Down; the
  // output projection always runs in fp16); the others run in fp16.
  static constexpr int kFp8Qkv = 1, kFp8Up = 2, kFp8Down = 4;
  int fp8_gemms = kFp8Qkv | kFp8Up | kFp8Down;
  // kFp8 only: the layers (bit i: layer i) whose fp8_gemms run in e4m3; the
  // other layers run wholly in fp16. Each e4m3 GEMM costs about the same
  // accuracy, so fewer of them trade speed for it.
  uint64_t fp8_layers = ~uint64_t{0};

  // Overrides from the environment: ZV_CUDA_FUSED=0, ZV_CUDA_GRAPHS=0,
  // ZV_CUDA_SMALL_BATCH=N, ZV_CUDA_MAX_GRAPHS=N, ZV_CUDA_PRECISION=fp16|fp8,
  // ZV_CUDA_FP8_GEMMS=qkv,up,down (any non-empty subset),
  // ZV_CUDA_FP8_LAYERS=6-11 (layers and ranges, comma-separated; an unknown
  // value of any of these is ignored with a warning on stderr),
  // ZV_CUDA_FP8_FAST_ACCUM=1.
  static CudaEncoderOptions FromEnv();
  // e.g. "fp16, fused, graphs<=32 (48 kept)".
  std::string ToString() const;
};

// GPU time of an encoder's last Encode, from CUDA events (off by default).
enum class CudaTimer {
  kOff,
  kTotal,   // two events around the forward pass (after the inputs' copy)
  kPhases,  // an event after every phase; runs the non-graph path
};

struct CudaTimings {
  double total_ms = 0;  // first event to last; 0 when the timer is off
  // Per phase, summed over layers, in pass order: embeddings, qkv, attention,
  // out_proj_ln, ffn_up_gelu, ffn_down_ln, pool. Empty unless kPhases.
  std::vector<std::pair<std::string, double>> phases_ms;
  bool graph = false;  // the pass was a CUDA graph replay
};

// The encoder CudaModel hands out, with its timer.
class CudaEncoder : public Encoder {
 public:
  virtual void SetTimer(CudaTimer timer) = 0;
  // Timings of the last Encode that succeeded.
  virtual CudaTimings LastTimings() const = 0;
  virtual const CudaEncoderOptions& options() const = 0;
};

// Device weights and the registry of host output memory, shared by the
// per-worker encoders (each of which owns a CUDA stream, a cuBLAS handle and
// scratch memory).
class CudaModel : public std::enable_shared_from_this<CudaModel> {
 public:
  // True when CUDA device `ordinal` is usable (driver present, device exists).
  static bool DeviceAvailable(int ordinal = 0);
  // Number of CUDA devices (0 without a driver).
  static int DeviceCount();
  // Uploads the weights as fp16 to device `ordinal`. Batches are at most
  // max_batch_tokens tokens.
  static StatusOr<std::shared_ptr<CudaModel>> Create(
      std::shared_ptr<const Checkpoint> checkpoint, int max_batch_tokens,
      int ordinal = 0);
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  // A new encoder on its own stream (options from CudaEncoderOptions::FromEnv);
  // encoders run concurrently.
  StatusOr<std::unique_ptr<Encoder>> NewEncoder();
  // As NewEncoder, with the precision given (the other options from the
  // environment).
  StatusOr<std::unique_ptr<Encoder>> NewEncoder(CudaPrecision precision);
  StatusOr<std::unique_ptr<CudaEncoder>> NewCudaEncoder(
      const CudaEncoderOptions& options);

  // Pins [data, data+bytes) with cudaHostRegister so the pooling kernel stores
  // rows there directly. When the mapping cannot be registered (e.g. a
  // file-backed MAP_SHARED mapping the kernel refuses to long-term pin), rows
  // into it are staged through a pinned buffer instead; that is not an error,
  // and SinkMode() says so.
  Status RegisterOutputMemory(void* data, size_t bytes);
  void UnregisterOutputMemory(void* data);
  // Declares device memory of this model's device that output rows may point
  // into (e.g. a GPU search mirror): rows there are stored as they are, never
  // staged. UnregisterOutputMemory(device_data) ends it.
  Status RegisterDeviceOutputMemory(void* device_data, size_t bytes);
  int ordinal() const;
  // "host-registered", "pinned-staging" or "pinned-staging (cudaHostRegister:
  // ...)".
  std::string SinkMode() const;
  // e.g. "cuda:0 NVIDIA H200 fp16, sink=host-registered".
  std::string description() const;

  struct Impl;

 private:
  CudaModel();
  std::unique_ptr<Impl> impl_;
};

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_CUDA_ENCODER_H_
