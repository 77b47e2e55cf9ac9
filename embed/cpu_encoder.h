// BERT forward pass in fp32 on the CPU: OpenBLAS sgemm plus plain loops. Used
// in CI and wherever no GPU exists. embed/-internal.
#ifndef ZEROVEC_EMBED_CPU_ENCODER_H_
#define ZEROVEC_EMBED_CPU_ENCODER_H_

#include <memory>

#include "embed/checkpoint.h"
#include "embed/encoder.h"

namespace zv::embed {

class CpuEncoder : public Encoder {
 public:
  explicit CpuEncoder(std::shared_ptr<const Checkpoint> checkpoint);

  std::string description() const override { return "cpu (openblas fp32)"; }
  Status Encode(const TokenBatch& batch, std::span<float* const> rows) override;

 private:
  void Attention(const TokenBatch& batch);

  std::shared_ptr<const Checkpoint> ck_;
  // Scratch, grown to the largest batch seen: [T, H], [T, 3H], [T, I], [L, L].
  std::vector<float> x_, qkv_, ctx_, tmp_, ffn_, scores_;
};

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_CPU_ENCODER_H_
