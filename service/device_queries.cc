#include "service/device_queries.h"

#include <algorithm>

namespace zv::service {

// Every buffer holds at least this many rows, so one fits most requests.
constexpr size_t kMinRows = 64;

StatusOr<std::unique_ptr<gpusearch::DeviceQueryBuffer>>
DeviceQueryPool::Acquire(size_t rows, uint32_t row_stride) {
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if ((*it)->row_stride() == row_stride && (*it)->rows() >= rows) {
        auto b = std::move(*it);
        idle_.erase(it);
        return b;
      }
    }
  }
  return gpusearch::DeviceQueryBuffer::Create(
      embedder_->cuda_device(), std::max(rows, kMinRows), row_stride);
}

void DeviceQueryPool::Release(
    std::unique_ptr<gpusearch::DeviceQueryBuffer> buffer) {
  std::lock_guard<std::mutex> l(mu_);
  if (idle_.size() < max_buffers_) idle_.push_back(std::move(buffer));
}

StatusOr<std::unique_ptr<gpusearch::DeviceQueryBuffer>> DeviceQueryPool::Embed(
    std::span<const std::string_view> texts, uint32_t dim, uint32_t row_stride,
    float* host, embed::EmbedReport* report) {
  if (embedder_ == nullptr || embedder_->cuda_device() < 0) {
    return FailedPreconditionError("device queries: no CUDA encoder");
  }
  ZV_ASSIGN_OR_RETURN(auto buffer, Acquire(texts.size(), row_stride));
  // Rows keep zero padding: the encoder writes dim floats of each row only.
  std::vector<float*> rows(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) rows[i] = buffer->row(i);
  Status s =
      embedder_->RegisterDeviceOutputMemory(buffer->row(0), buffer->bytes());
  if (s.ok()) {
    s = embedder_->Submit(texts, rows, report).get();
    embedder_->UnregisterOutputMemory(buffer->row(0));
  }
  if (s.ok()) s = buffer->ToHost(texts.size(), dim, host);
  if (!s.ok()) return s;  // the buffer is dropped: its contents are unknown
  return buffer;
}

}  // namespace zv::service
