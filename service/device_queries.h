// Text queries embedded straight into GPU memory (issue 13): the CUDA encoder
// writes the query vectors into a device buffer and the collection's GPU
// mirror searches them there, so a text query does not travel device -> host
// -> device between the encoder and the search.
#ifndef ZEROVEC_SERVICE_DEVICE_QUERIES_H_
#define ZEROVEC_SERVICE_DEVICE_QUERIES_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "embed/embedder.h"
#include "gpusearch/gpu_search.h"

namespace zv::service {

// Device buffers for query vectors, reused across requests (a cudaMalloc per
// query would cost more than the search). Thread-safe.
class DeviceQueryPool {
 public:
  // Buffers on the embedder's CUDA device; at most `max_buffers` kept idle.
  DeviceQueryPool(embed::Embedder* embedder, size_t max_buffers = 64)
      : embedder_(embedder), max_buffers_(max_buffers) {}

  // A buffer holding the embedded texts (row i = texts[i], zero padded to
  // `row_stride`), its rows copied to `host` (texts.size() x dim) as well
  // for the paths that search on the CPU. Give it back with Release.
  StatusOr<std::unique_ptr<gpusearch::DeviceQueryBuffer>> Embed(
      std::span<const std::string_view> texts, uint32_t dim,
      uint32_t row_stride, float* host, embed::EmbedReport* report);
  void Release(std::unique_ptr<gpusearch::DeviceQueryBuffer> buffer);

 private:
  StatusOr<std::unique_ptr<gpusearch::DeviceQueryBuffer>> Acquire(
      size_t rows, uint32_t row_stride);

  embed::Embedder* embedder_;
  const size_t max_buffers_;
  std::mutex mu_;
  std::vector<std::unique_ptr<gpusearch::DeviceQueryBuffer>> idle_;
};

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_DEVICE_QUERIES_H_
