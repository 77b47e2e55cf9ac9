// The encoder interface behind Embedder: packed token batches in, pooled rows
// out. embed/-internal.
#ifndef ZEROVEC_EMBED_ENCODER_H_
#define ZEROVEC_EMBED_ENCODER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace zv::embed {

// Variable-length sequences packed back to back, no padding: sequence i is
// ids[offsets[i], offsets[i+1]).
struct TokenBatch {
  std::vector<int32_t> ids;
  std::vector<int32_t> offsets{0};

  size_t size() const { return offsets.size() - 1; }
  int length(size_t i) const { return offsets[i + 1] - offsets[i]; }
  void Add(std::span<const int32_t> seq) {
    ids.insert(ids.end(), seq.begin(), seq.end());
    offsets.push_back(static_cast<int32_t>(ids.size()));
  }
};

// One encoder serves one worker at a time (it owns scratch memory and, on CUDA,
// a stream); workers that run concurrently each get their own, sharing the
// weights.
class Encoder {
 public:
  virtual ~Encoder() = default;
  virtual std::string description() const = 0;
  // Writes sequence i's pooled (and, as configured, L2-normalised) vector to
  // rows[i].
  virtual Status Encode(const TokenBatch& batch,
                        std::span<float* const> rows) = 0;
};

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_ENCODER_H_
