// BERT forward pass on the CPU: the linear layers on oneDNN (cpu_gemm.h; fp32,
// or bf16 weights and activations with fp32 accumulation), attention on
// OpenBLAS sgemm, element-wise kernels vectorised (cpu_kernels.h); a batch's
// sequences are split into shards that run in parallel on a CpuPool, each GEMM
// on its shard's thread. Used in CI and wherever no GPU exists.
// embed/-internal.
#ifndef ZEROVEC_EMBED_CPU_ENCODER_H_
#define ZEROVEC_EMBED_CPU_ENCODER_H_

#include <memory>
#include <vector>

#include "embed/checkpoint.h"
#include "embed/cpu_gemm.h"
#include "embed/cpu_pool.h"
#include "embed/encoder.h"

namespace zv::embed {

// A checkpoint's linear weights packed for oneDNN in one precision; read-only,
// so the encoders of one model (an embedder's lanes) share one copy.
struct CpuPackedModel {
  struct Layer {
    cpu::PackedWeight qkv, attn_out, ffn_in, ffn_out;
  };
  cpu::Precision precision;
  std::vector<Layer> layers;
};

class CpuEncoder : public Encoder {
 public:
  // Errors when oneDNN has no matmul for `precision` on this CPU.
  static StatusOr<std::shared_ptr<const CpuPackedModel>> Pack(
      const Checkpoint& ck, cpu::Precision precision);

  // `pool` may be shared by several encoders (tasks queue first come first
  // served); null runs everything on the calling thread. With a pool, BLAS is
  // made single-threaded (UseSingleThreadedBlas). `packed`: Pack(*checkpoint,
  // ...); null packs here at cpu::DefaultPrecision() (fp32 if that fails).
  CpuEncoder(std::shared_ptr<const Checkpoint> checkpoint,
             std::shared_ptr<CpuPool> pool = nullptr,
             std::shared_ptr<const CpuPackedModel> packed = nullptr);

  std::string description() const override;
  Status Encode(const TokenBatch& batch, std::span<float* const> rows) override;

  // Makes OpenBLAS run each call on its caller's thread: parallelism comes from
  // the pool, and OpenBLAS's own threads would compete with it for the cores
  // (and spin while waiting). Process-wide; idempotent.
  static void UseSingleThreadedBlas();

  // Requires a packed model (description() says when there is none).
  cpu::Precision precision() const { return packed_->precision; }

 private:
  // Activations of one shard, grown to the largest shard seen: [T, H] x2,
  // [T, 3H], [T, I], [L, L]; in bf16, the GEMM inputs x, ctx ([T, H]) and
  // ffn ([T, I]) as bf16 bits. Plus the shard's oneDNN primitives.
  struct Scratch {
    std::vector<float> x, qkv, ctx, ffn, scores;
    std::vector<uint16_t> x16, ctx16, ffn16;
    cpu::GemmContext gemm;
  };
  void Grow(Scratch& s, int t) const;
  void Embed(const TokenBatch& batch, size_t first, size_t last,
             Scratch& act) const;
  void Qkv(size_t layer, Scratch& act, int r0, int r1,
           cpu::GemmContext& g) const;
  void Tail(size_t layer, Scratch& act, int r0, int r1,
            cpu::GemmContext& g) const;
  void Attention(const TokenBatch& batch, size_t first, size_t last,
                 size_t part, size_t parts, Scratch& act,
                 std::vector<float>& scores) const;
  // Sequences [first, last) of `batch`, pooled into rows[first, last).
  void EncodeShard(const TokenBatch& batch, size_t first, size_t last,
                   std::span<float* const> rows, Scratch& s) const;
  // The whole batch, each step split over `parts` pool tasks; errors[p] is
  // what part p threw.
  void EncodeSplit(const TokenBatch& batch, std::span<float* const> rows,
                   size_t parts, std::vector<std::string>& errors);
  void Pool(const float* x, int len, float* out) const;

  std::shared_ptr<const Checkpoint> ck_;
  std::shared_ptr<CpuPool> pool_;
  std::shared_ptr<const CpuPackedModel> packed_;
  std::vector<Scratch> scratch_;  // one a shard
};

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_CPU_ENCODER_H_
