// BERT forward pass in fp32 on the CPU: OpenBLAS sgemm (single-threaded) plus
// vectorised element-wise kernels (cpu_kernels.h); a batch's sequences are
// split into shards that run in parallel on a CpuPool. Used in CI and wherever
// no GPU exists. embed/-internal.
#ifndef ZEROVEC_EMBED_CPU_ENCODER_H_
#define ZEROVEC_EMBED_CPU_ENCODER_H_

#include <memory>
#include <vector>

#include "embed/checkpoint.h"
#include "embed/cpu_pool.h"
#include "embed/encoder.h"

namespace zv::embed {

class CpuEncoder : public Encoder {
 public:
  // `pool` may be shared by several encoders (tasks queue first come first
  // served); null runs everything on the calling thread. With a pool, BLAS is
  // made single-threaded (UseSingleThreadedBlas).
  CpuEncoder(std::shared_ptr<const Checkpoint> checkpoint,
             std::shared_ptr<CpuPool> pool = nullptr);

  std::string description() const override;
  Status Encode(const TokenBatch& batch, std::span<float* const> rows) override;

  // Makes OpenBLAS run each call on its caller's thread: parallelism comes from
  // the pool, and OpenBLAS's own threads would compete with it for the cores
  // (and spin while waiting). Process-wide; idempotent.
  static void UseSingleThreadedBlas();

 private:
  // Activations of one shard, grown to the largest shard seen: [T, H] x2,
  // [T, 3H], [T, I], [L, L].
  struct Scratch {
    std::vector<float> x, qkv, ctx, ffn, scores;
  };
  // Sequences [first, last) of `batch`, pooled into rows[first, last).
  void EncodeShard(const TokenBatch& batch, size_t first, size_t last,
                   std::span<float* const> rows, Scratch& s) const;
  void Attention(const TokenBatch& batch, size_t first, size_t last,
                 Scratch& s) const;
  void Pool(const float* x, int len, float* out) const;

  std::shared_ptr<const Checkpoint> ck_;
  std::shared_ptr<CpuPool> pool_;
  std::vector<Scratch> scratch_;  // one a shard
};

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_CPU_ENCODER_H_
