// The CPU encoder's linear layers on oneDNN's matmul (Debian's libdnnl 2.6):
// weights packed once at load into the blocked layout its brgemm kernels read
// (OpenBLAS re-packs them on every call), fp32 or bf16 (fp32 accumulation),
// with the bias, GELU or residual sum fused into the GEMM. oneDNN picks its
// kernels from the CPU at run time (AVX-512, AVX512-BF16, AMX; AVX2 and SSE4.1
// otherwise). Calls run on their caller's thread only. embed/-internal.
#ifndef ZEROVEC_EMBED_CPU_GEMM_H_
#define ZEROVEC_EMBED_CPU_GEMM_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace zv::embed::cpu {

enum class Precision { kFp32, kBf16 };

const char* PrecisionName(Precision p);
// oneDNN's CPU instruction set here: "avx512_core_amx", "avx512_core_bf16", ...
std::string GemmIsa();
// True when oneDNN has native bf16 kernels on this CPU (AVX512-BF16 or AMX);
// elsewhere bf16 would be emulated and slower than fp32.
bool Bf16Native();
// The precision the encoder uses by default: bf16 where native, else fp32.
// ZEROVEC_CPU_PRECISION=fp32|bf16 overrides it (bf16 only where native).
Precision DefaultPrecision();

// fp32 -> bf16, rounding to nearest even (as torch's .to(bfloat16)).
void ToBf16(const float* x, size_t n, uint16_t* out);

// One torch.nn.Linear's weight W[n, k] (row-major, [out, in]), packed once;
// read-only afterwards, so one copy serves every thread.
class PackedWeight {
 public:
  PackedWeight(const std::vector<float>& w, int n, int k, Precision p);
  ~PackedWeight();
  PackedWeight(PackedWeight&&) noexcept;
  PackedWeight& operator=(PackedWeight&&) noexcept;

  int n() const { return n_; }
  int k() const { return k_; }
  Precision precision() const { return precision_; }

 private:
  friend class GemmContext;
  struct Impl;
  int n_ = 0, k_ = 0;
  Precision precision_ = Precision::kFp32;
  std::unique_ptr<Impl> impl_;
};

// What the GEMM does after x W^T (+ bias):
enum class Epilogue {
  kStore,       // y = x W^T + bias
  kAccumulate,  // y += x W^T + bias (a residual)
  kGelu,        // y = GELU(x W^T + bias), erf form
};

// One thread's GEMM state: primitives cached by shape, their scratchpad.
// Not thread-safe; one per shard of the encoder.
class GemmContext {
 public:
  GemmContext();
  ~GemmContext();
  GemmContext(GemmContext&&) noexcept;
  GemmContext& operator=(GemmContext&&) noexcept;

  // y[m, n] = epilogue(x[m, k] W^T + bias). x is fp32 when w is fp32, bf16
  // (uint16_t bits) when w is bf16; y is fp32, or bf16 when y_bf16 (only
  // with kStore/kGelu). bias may be null.
  void Linear(const void* x, int m, const PackedWeight& w, const float* bias,
              Epilogue epilogue, void* y, bool y_bf16 = false);

  // The oneDNN implementation the last Linear ran ("brg:avx512_core_amx").
  const std::string& last_impl() const { return last_impl_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string last_impl_;
};

}  // namespace zv::embed::cpu

#endif  // ZEROVEC_EMBED_CPU_GEMM_H_
