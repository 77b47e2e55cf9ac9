// GpuMirror in a build without CUDA (no --config=cuda): the library links, and
// every entry point says why there is no GPU search, so callers fall back to
// the CPU. Nothing here can be constructed: Create always fails.
#include "gpusearch/gpu_search.h"

namespace zv::gpusearch {
namespace {

Status NoCuda() {
  return UnavailableError(
      "GPU search: built without CUDA (build with --config=cuda)");
}

}  // namespace

struct GpuMirror::Impl {};

bool BuiltWithCuda() { return false; }
int DeviceCount() { return 0; }
StatusOr<DeviceMemory> QueryDeviceMemory(int) { return NoCuda(); }
uint64_t MirrorBytesFor(uint64_t rows, uint32_t row_stride) {
  return rows * row_stride * 4 + rows * 4 + (rows + 63) / 64 * 8;
}
uint64_t SearchScratchBytes(uint32_t, size_t) { return 0; }

StatusOr<std::unique_ptr<GpuMirror>> GpuMirror::Create(const MirrorOptions&) {
  return NoCuda();
}
GpuMirror::GpuMirror(const MirrorOptions& o, std::unique_ptr<Impl> impl)
    : options_(o), impl_(std::move(impl)) {}
GpuMirror::~GpuMirror() = default;
GpuMask::~GpuMask() = default;

Status GpuMirror::AppendHost(const float*, uint64_t) { return NoCuda(); }
Status GpuMirror::AppendDevice(const void*, uint64_t, void*) {
  return NoCuda();
}
Status GpuMirror::Reserve(uint64_t) { return NoCuda(); }
StatusOr<float*> GpuMirror::StageRows(uint64_t) { return NoCuda(); }
Status GpuMirror::WriteStaged(uint64_t, const float*, uint64_t) {
  return NoCuda();
}
Status GpuMirror::ReadStaged(uint64_t, uint64_t, float*) const {
  return NoCuda();
}
Status GpuMirror::CommitStaged(uint64_t) { return NoCuda(); }
StatusOr<std::unique_ptr<DeviceQueryBuffer>> DeviceQueryBuffer::Create(
    int, uint64_t, uint32_t) {
  return NoCuda();
}
DeviceQueryBuffer::~DeviceQueryBuffer() = default;
Status DeviceQueryBuffer::ToHost(uint64_t, uint32_t, float*) const {
  return NoCuda();
}
Status GpuMirror::Tombstone(uint64_t) { return NoCuda(); }
Status GpuMirror::SetTombstones(const uint64_t*, uint64_t) { return NoCuda(); }
StatusOr<std::unique_ptr<GpuMask>> GpuMirror::UploadMask(const uint64_t*,
                                                         uint64_t) const {
  return NoCuda();
}
Status GpuMirror::Search(const float*, size_t, int, const GpuMask*, float*,
                         int64_t*) const {
  return NoCuda();
}
Status GpuMirror::SearchDevice(const void*, size_t, int, const GpuMask*, void*,
                               float*, int64_t*) const {
  return NoCuda();
}
Status GpuMirror::Reset() { return NoCuda(); }
uint64_t GpuMirror::rows() const { return 0; }
uint64_t GpuMirror::capacity_rows() const { return 0; }
uint64_t GpuMirror::device_bytes() const { return 0; }
std::string GpuMirror::description() const { return "built without CUDA"; }

}  // namespace zv::gpusearch
