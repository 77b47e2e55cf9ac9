// Benchmark-only mirror of embed/cuda_encoder.cu's Encode(): the same kernels
// (embed/cuda_kernels.cuh, included verbatim), the same launch shapes and the
// same cuBLAS calls, but on a stream this program owns, so it can put CUDA
// events around the whole GPU part and around each phase. The encoder itself
// exposes no stream; embed/ is not edited for the benchmark. The bench checks
// that the mirror's vectors equal the real encoder's before it reports them.
#ifndef ZEROVEC_BENCH_GPU_MIRROR_H_
#define ZEROVEC_BENCH_GPU_MIRROR_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "embed/checkpoint.h"
#include "embed/encoder.h"

namespace zvbench {

// Milliseconds of GPU time by phase, summed over layers.
using PhaseMs = std::map<std::string, double>;

class Mirror {
 public:
  static zv::StatusOr<std::unique_ptr<Mirror>> Create(
      const zv::embed::Checkpoint& ck, int max_tokens, int max_seqs);
  ~Mirror();

  // Uploads a batch's ids/positions/offsets (not timed by Run).
  zv::Status Prepare(const zv::embed::TokenBatch& batch);
  // Runs the forward pass of the prepared batch; returns GPU milliseconds
  // between events around everything (H2D of the inputs included when
  // with_h2d). With phases != nullptr, also records an event between every
  // launch and adds each phase's time.
  zv::StatusOr<double> Run(bool with_h2d, PhaseMs* phases);
  // Pooled rows of the last Run (mapped pinned memory), b x hidden.
  const float* rows() const;

 private:
  Mirror();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Dense GEMM rate through cublasGemmEx (fp32 accumulation, the encoder's call)
// on random data, n x n x n, median of reps after warm-up; dtype "fp16"/"bf16".
zv::StatusOr<double> GemmTflops(const std::string& dtype, int n, int reps);

// Rate of the encoder's own GEMM shape y[t,n] = x[t,k] w[n,k]^T, fp16.
zv::StatusOr<double> ShapeTflops(int t, int n, int k, int reps);

std::string GpuName();
std::string DriverAndRuntime();

}  // namespace zvbench

#endif  // ZEROVEC_BENCH_GPU_MIRROR_H_
