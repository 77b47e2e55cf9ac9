// BERT forward pass on a CUDA GPU (fp16 storage, fp32 accumulation), built only
// with
// --config=cuda (ZEROVEC_WITH_CUDA). Plain C++ header: no CUDA types leak out.
// embed/-internal.
#ifndef ZEROVEC_EMBED_CUDA_ENCODER_H_
#define ZEROVEC_EMBED_CUDA_ENCODER_H_

#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"
#include "embed/checkpoint.h"
#include "embed/encoder.h"

namespace zv::embed {

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

  // A new encoder on its own stream; encoders run concurrently.
  StatusOr<std::unique_ptr<Encoder>> NewEncoder();

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
