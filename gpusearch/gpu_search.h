// Exact k-NN over a GPU-resident mirror of one collection's rows (issue 13).
//
// The segment stays the source of truth; a GpuMirror holds a copy of its rows
// in device memory, numbered like the segment's rows, plus a device tombstone
// bitmap. Search returns fp32 results equal to index::FlatSearch (same top-k
// rows, scores within 1e-4, row -1 / worst score padding a short list):
//   nq <= kScanMaxQueries: one bandwidth-bound pass over the mirror with a
//     fused per-block top-k kept in shared memory, then a small merge kernel;
//   more queries: cuBLAS SGEMM (fp32) over row blocks into a score tile, a
//     blocked running top-k over each tile, a merge, and an exact fp32
//     re-computation of the final k (L2 from norms is re-ranked exactly).
//
// Plain C++ (no CUDA types), so CPU-only code includes it. Without
// --config=cuda the library still links: BuiltWithCuda() is false and
// GpuMirror::Create returns UNAVAILABLE ("built without CUDA"); with CUDA but
// no device it returns UNAVAILABLE ("no CUDA device").
//
// Bitmaps (tombstones, masks) use index::RowBitmap's layout: uint64 words, row
// r is bit (r & 63) of word r >> 6.
#ifndef ZEROVEC_GPUSEARCH_GPU_SEARCH_H_
#define ZEROVEC_GPUSEARCH_GPU_SEARCH_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "shm/segment.h"

namespace zv::gpusearch {

// Up to this many queries take the scan kernel; more take the GEMM path.
inline constexpr size_t kScanMaxQueries = 8;
// Largest k a search accepts.
inline constexpr int kMaxK = 1024;

// True when this binary was built with --config=cuda.
bool BuiltWithCuda();
// Number of CUDA devices (0 without CUDA, a driver or a device).
int DeviceCount();

struct DeviceMemory {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};
// Free and total memory of `device`, for the server's budget decisions.
StatusOr<DeviceMemory> QueryDeviceMemory(int device = 0);

// Device bytes a mirror with room for `rows` rows of `row_stride` floats
// takes (rows, L2 norms, tombstone bitmap). The budget helper: a collection
// fits when MirrorBytesFor(expected rows) + SearchScratchBytes() * searchers
// is under the budget.
uint64_t MirrorBytesFor(uint64_t rows, uint32_t row_stride);
// Upper bound of the device scratch one concurrent search stream uses for a
// batch of up to `max_batch` queries at k <= kMaxK (score tile, candidates).
uint64_t SearchScratchBytes(uint32_t row_stride, size_t max_batch);

struct MirrorOptions {
  uint32_t dim = 0;
  uint32_t row_stride = 0;  // floats between rows, >= dim, multiple of 4
  shm::Metric metric = shm::Metric::kInnerProduct;
  uint64_t capacity_rows = 0;  // initial room; Append grows it (x1.5)
  int device = 0;
  // Searches running at once; more wait for one to finish. Each running
  // search holds a stream and scratch (SearchScratchBytes), so this bounds the
  // device memory searches take, whatever the number of caller threads.
  int max_concurrent_searches = 4;
};

// A filter's rows as a device bitmap, uploaded once per filter and passed to
// any number of searches of the mirror that made it. Rows at or past rows()
// (appended after the mask was built) never match. Immutable; any thread.
class GpuMask {
 public:
  ~GpuMask();
  GpuMask(const GpuMask&) = delete;
  GpuMask& operator=(const GpuMask&) = delete;
  uint64_t rows() const { return rows_; }
  uint64_t device_bytes() const { return (rows_ + 63) / 64 * 8; }
  const void* device_words() const { return words_; }
  int device() const { return device_; }

 private:
  friend class GpuMirror;
  GpuMask(void* words, uint64_t rows, int device)
      : words_(words), rows_(rows), device_(device) {}
  void* words_;
  uint64_t rows_;
  int device_;
};

// Thread safety: Search / SearchDevice / UploadMask from any number of threads
// at once (each search takes a stream, cuBLAS handle and scratch from a small
// pool). Writers (Append*, Tombstone*, Reset, Reserve) are serialised among
// themselves; an append copies into rows no search reads and then publishes
// the new row count, and a tombstone is one 8-byte word store, so searches
// wait for a writer only while the buffers are regrown (Append past capacity,
// Reserve) or reset; a writer regrowing waits for running searches. A search
// sees every row and tombstone whose writer call returned before it began.
// Device memory for query vectors (e.g. a CUDA encoder's output for text
// queries), laid out as SearchDevice reads them: `rows` rows of `row_stride`
// floats, zeroed at creation so the padding past dim stays zero. One user at a
// time.
class DeviceQueryBuffer {
 public:
  static StatusOr<std::unique_ptr<DeviceQueryBuffer>> Create(
      int device, uint64_t rows, uint32_t row_stride);
  ~DeviceQueryBuffer();
  DeviceQueryBuffer(const DeviceQueryBuffer&) = delete;
  DeviceQueryBuffer& operator=(const DeviceQueryBuffer&) = delete;
  float* row(uint64_t i) const { return data_ + i * row_stride_; }
  uint64_t rows() const { return rows_; }
  uint64_t bytes() const { return rows_ * row_stride_ * 4; }
  uint32_t row_stride() const { return row_stride_; }
  int device() const { return device_; }
  // Rows [0, n) into host memory as n x dim floats (padding dropped).
  Status ToHost(uint64_t n, uint32_t dim, float* host) const;

 private:
  DeviceQueryBuffer(float* data, uint64_t rows, uint32_t row_stride, int device)
      : data_(data), rows_(rows), row_stride_(row_stride), device_(device) {}
  float* data_;
  uint64_t rows_;
  uint32_t row_stride_;
  int device_;
};

class GpuMirror {
 public:
  static StatusOr<std::unique_ptr<GpuMirror>> Create(const MirrorOptions& o);
  ~GpuMirror();
  GpuMirror(const GpuMirror&) = delete;
  GpuMirror& operator=(const GpuMirror&) = delete;

  // Appends n host rows (n x row_stride floats; padding floats must be zero,
  // as in the segment) as rows [rows(), rows() + n), through pinned staging
  // buffers in large copies.
  Status AppendHost(const float* rows, uint64_t n);
  // Appends n rows already on this device (n x row_stride floats, e.g. the
  // encoder's output), device to device on our stream after work queued on
  // `cuda_stream` (a cudaStream_t; null = the legacy default stream).
  Status AppendDevice(const void* device_rows, uint64_t n, void* cuda_stream);
  // Makes room for `rows` rows without appending.
  Status Reserve(uint64_t rows);

  // Rows written on the device before they are appended (a GPU encoder's
  // output, issue 13): StageRows(n) makes room for rows [rows(), rows() + n),
  // zeroes them (so row padding is zero, as in the segment) and returns the
  // device address of row rows(); the caller writes any of them there (row i
  // at + i * row_stride floats), fills the rest with WriteStaged, may read
  // them back with ReadStaged (e.g. into the segment), and CommitStaged(n)
  // appends them as AppendHost would. Staged rows are invisible to searches
  // until committed; a new StageRows or Append* replaces them. Writers only.
  StatusOr<float*> StageRows(uint64_t n);
  Status WriteStaged(uint64_t offset, const float* host_rows, uint64_t n);
  Status ReadStaged(uint64_t offset, uint64_t n, float* host_rows) const;
  Status CommitStaged(uint64_t n);

  // Marks one row deleted; the next search skips it.
  Status Tombstone(uint64_t row);
  // Replaces the tombstone bitmap of rows [0, nrows) (nrows <= rows()).
  Status SetTombstones(const uint64_t* words, uint64_t nrows);

  // Uploads a filter bitmap over rows [0, nrows).
  StatusOr<std::unique_ptr<GpuMask>> UploadMask(const uint64_t* words,
                                                uint64_t nrows) const;

  // Exact top-k of nq host queries (nq x row_stride floats, zero padded like
  // index::PadQueries) into host arrays dist / rows (nq x k, best first).
  // IP scores are inner products, L2 scores squared distances. `mask` may be
  // null (all live rows).
  Status Search(const float* queries, size_t nq, int k, const GpuMask* mask,
                float* dist, int64_t* rows) const;
  // The same with queries already in device memory (e.g. the encoder's
  // output), ordered after work queued on `cuda_stream`.
  Status SearchDevice(const void* device_queries, size_t nq, int k,
                      const GpuMask* mask, void* cuda_stream, float* dist,
                      int64_t* rows) const;

  // Drops every row and tombstone (compaction: Reset, then append again);
  // keeps the device allocation.
  Status Reset();

  uint64_t rows() const;
  uint64_t capacity_rows() const;
  // Device bytes held by the mirror itself (not the search scratch).
  uint64_t device_bytes() const;
  const MirrorOptions& options() const { return options_; }
  // e.g. "cuda:0 NVIDIA H200, 1000000 rows x 384, IP, 1.5 GiB".
  std::string description() const;

  struct Impl;

 private:
  GpuMirror(const MirrorOptions& o, std::unique_ptr<Impl> impl);
  MirrorOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zv::gpusearch

#endif  // ZEROVEC_GPUSEARCH_GPU_SEARCH_H_
