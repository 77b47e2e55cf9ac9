#include "index/gpu_mirror.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <vector>

#include "gpusearch/gpu_search.h"

namespace zv::index {
namespace {

// Concurrent searches whose scratch the budget reserves per mirror (the
// server's coalescing keeps the number of GPU searches in flight low).
constexpr uint64_t kBudgetSearchers = 4;
// Largest batch one search hands the GPU (service Limits::max_batch default).
constexpr size_t kBudgetBatch = 1024;
// Room a new mirror keeps past its rows, so the first upserts do not regrow.
constexpr uint64_t kMinHeadroomRows = 65536;
// Filter masks a mirror keeps (a mask is rows / 8 bytes: 1.25 MB at 10M).
constexpr size_t kCachedMasks = 16;

std::string GiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1ull << 30));
  return buf;
}

}  // namespace

// ------------------------------------------------------------------ budget

StatusOr<std::shared_ptr<GpuBudget>> GpuBudget::Create(
    const GpuSearchOptions& o) {
  if (!gpusearch::BuiltWithCuda()) {
    return FailedPreconditionError(
        "GPU search: this binary was built without CUDA");
  }
  if (o.device < 0 || o.device >= gpusearch::DeviceCount()) {
    return FailedPreconditionError(
        "GPU search: no CUDA device " + std::to_string(o.device) + " (" +
        std::to_string(gpusearch::DeviceCount()) + " present)");
  }
  uint64_t budget = o.memory_bytes;
  if (budget == 0) {  // auto: most of what is free now (after the model)
    ZV_ASSIGN_OR_RETURN(auto mem, gpusearch::QueryDeviceMemory(o.device));
    budget = mem.free_bytes / 10 * 8;
  }
  return std::shared_ptr<GpuBudget>(new GpuBudget(o, budget));
}

uint64_t GpuBudget::used_bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return used_;
}

bool GpuBudget::Take(uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  if (bytes > budget_ - used_) return false;
  used_ += bytes;
  return true;
}

void GpuBudget::Give(uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  used_ -= std::min(used_, bytes);
}

void GpuBudget::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << line << "\n";
  }
}

// ------------------------------------------------------------------ mirror

GenerationMirror::GenerationMirror(std::shared_ptr<GpuBudget> budget,
                                   std::unique_ptr<gpusearch::GpuMirror> mirror,
                                   uint64_t charged)
    : budget_(std::move(budget)),
      mirror_(std::move(mirror)),
      charged_(charged) {}

GenerationMirror::~GenerationMirror() {
  mirror_.reset();  // device memory first, then the budget it held
  budget_->Give(charged_);
}

uint64_t GenerationMirror::ChargeFor(uint64_t capacity) const {
  const uint32_t stride = mirror_->options().row_stride;
  return gpusearch::MirrorBytesFor(capacity, stride) +
         kBudgetSearchers * gpusearch::SearchScratchBytes(stride, kBudgetBatch);
}

StatusOr<std::unique_ptr<GenerationMirror>> GenerationMirror::Build(
    std::shared_ptr<GpuBudget> budget, const shm::SegmentView& view) {
  const shm::SegmentInfo& info = view.info();
  const uint64_t committed = view.committed();
  gpusearch::MirrorOptions mo;
  mo.dim = info.dim;
  mo.row_stride = info.row_stride;
  mo.metric = info.metric;
  mo.capacity_rows =
      committed + std::max<uint64_t>(kMinHeadroomRows, committed / 8);
  mo.device = budget->device();
  mo.max_concurrent_searches = kBudgetSearchers;  // the scratch charged below
  const uint64_t charge =
      gpusearch::MirrorBytesFor(mo.capacity_rows, mo.row_stride) +
      kBudgetSearchers *
          gpusearch::SearchScratchBytes(mo.row_stride, kBudgetBatch);
  if (!budget->Take(charge)) {
    return ResourceExhaustedError(
        "needs " + GiB(charge) + " of GPU memory, " +
        GiB(budget->budget_bytes() - budget->used_bytes()) + " of the " +
        GiB(budget->budget_bytes()) + " budget left");
  }
  auto created = gpusearch::GpuMirror::Create(mo);
  if (!created.ok()) {
    budget->Give(charge);
    return created.status();
  }
  std::unique_ptr<GenerationMirror> m(
      new GenerationMirror(budget, std::move(created).value(), charge));
  ZV_RETURN_IF_ERROR(m->CatchUp(view));
  if (view.TombstoneCount() > 0) {
    std::vector<uint64_t> words((committed + 63) / 64, 0);
    for (uint64_t r = 0; r < committed; ++r) {
      if (view.IsTombstoned(r)) words[r >> 6] |= uint64_t{1} << (r & 63);
    }
    ZV_RETURN_IF_ERROR(m->mirror_->SetTombstones(words.data(), committed));
  }
  return m;
}

Status GenerationMirror::EnsureCapacity(uint64_t want) {
  const uint64_t cap = mirror_->capacity_rows();
  if (want <= cap) return OkStatus();
  // Grow as the mirror would (x1.5), but charged to the budget first.
  const uint64_t new_cap = std::max<uint64_t>(want, cap + cap / 2);
  const uint64_t extra = ChargeFor(new_cap) - ChargeFor(cap);
  if (!budget_->Take(extra)) {
    return ResourceExhaustedError("growing to " + std::to_string(new_cap) +
                                  " rows needs " + GiB(extra) +
                                  " more GPU memory than the budget has");
  }
  charged_ += extra;
  return mirror_->Reserve(new_cap);
}

Status GenerationMirror::CatchUp(const shm::SegmentView& view) {
  const uint64_t have = mirror_->rows(), want = view.committed();
  const uint64_t staged = staged_on_device_.size();
  std::vector<uint8_t> on_device = std::move(staged_on_device_);
  staged_on_device_.clear();
  if (want <= have) return OkStatus();
  if (staged > 0 && staged_first_ == have && want == have + staged) {
    // The encoder's rows are in place; copy the others from the segment.
    const uint32_t stride = view.info().row_stride;
    for (uint64_t i = 0; i < staged;) {
      if (on_device[i]) {
        ++i;
        continue;
      }
      uint64_t j = i + 1;  // a run of host rows, contiguous in the segment
      while (j < staged && !on_device[j] &&
             view.Row(have + j) == view.Row(have + j - 1) + stride) {
        ++j;
      }
      ZV_RETURN_IF_ERROR(mirror_->WriteStaged(i, view.Row(have + i), j - i));
      i = j;
    }
    ZV_RETURN_IF_ERROR(mirror_->CommitStaged(staged));
    staged_count_ += std::count(on_device.begin(), on_device.end(), 1);
  } else {
    ZV_RETURN_IF_ERROR(EnsureCapacity(want));
    // One copy per extent block (the segment's rows are contiguous there).
    for (const shm::RowBlock& b : view.Blocks(want)) {
      const uint64_t end = b.first_row + b.count;
      if (end <= have) continue;
      const uint64_t skip = have > b.first_row ? have - b.first_row : 0;
      ZV_RETURN_IF_ERROR(mirror_->AppendHost(
          b.rows + skip * view.info().row_stride, b.count - skip));
    }
  }
  if (mirror_->rows() != want) {
    return InternalError("GPU mirror: has " + std::to_string(mirror_->rows()) +
                         " rows, the segment " + std::to_string(want));
  }
  return OkStatus();
}

StatusOr<float*> GenerationMirror::StageRows(uint64_t first, uint64_t n) {
  staged_on_device_.clear();
  if (first != mirror_->rows()) {
    return FailedPreconditionError("GPU mirror: staging at row " +
                                   std::to_string(first) + ", mirror has " +
                                   std::to_string(mirror_->rows()));
  }
  ZV_RETURN_IF_ERROR(EnsureCapacity(first + n));
  ZV_ASSIGN_OR_RETURN(float* base, mirror_->StageRows(n));
  staged_first_ = first;
  return base;
}

Status GenerationMirror::ReadStaged(uint64_t offset, uint64_t n,
                                    float* host_rows) const {
  return mirror_->ReadStaged(offset, n, host_rows);
}

void GenerationMirror::MarkStaged(std::vector<uint8_t> on_device) {
  staged_on_device_ = std::move(on_device);
}

int GenerationMirror::device() const { return mirror_->options().device; }
uint32_t GenerationMirror::row_stride() const {
  return mirror_->options().row_stride;
}

Status GenerationMirror::Tombstone(uint64_t row) {
  return mirror_->Tombstone(row);
}

Status GenerationMirror::Search(const float* queries,
                                const float* device_queries, size_t nq,
                                const gpusearch::GpuMask* mask,
                                TopK* top) const {
  if (device_queries != nullptr) {
    return mirror_->SearchDevice(device_queries, nq, top->k, mask, nullptr,
                                 top->dist.data(), top->rows.data());
  }
  return mirror_->Search(queries, nq, top->k, mask, top->dist.data(),
                         top->rows.data());
}

StatusOr<std::unique_ptr<gpusearch::GpuMask>> GenerationMirror::UploadMask(
    const RowBitmap& bitmap) const {
  return mirror_->UploadMask(bitmap.words().data(), bitmap.limit());
}

std::optional<GenerationMirror::CachedMask> GenerationMirror::FindMask(
    const std::string& key, uint64_t rows, uint64_t tombstones) const {
  std::lock_guard<std::mutex> l(masks_mu_);
  for (auto it = masks_.begin(); it != masks_.end(); ++it) {
    if (it->key == key && it->rows == rows && it->tombstones == tombstones) {
      CachedMask found = it->cached;
      std::rotate(it, it + 1, masks_.end());  // most recently used last
      return found;
    }
  }
  return std::nullopt;
}

StatusOr<GenerationMirror::CachedMask> GenerationMirror::AddMask(
    const std::string& key, uint64_t rows, uint64_t tombstones,
    const RowBitmap& bitmap) const {
  ZV_ASSIGN_OR_RETURN(std::unique_ptr<gpusearch::GpuMask> uploaded,
                      UploadMask(bitmap));
  CachedMask cached{
      std::shared_ptr<const gpusearch::GpuMask>(std::move(uploaded)),
      bitmap.count()};
  std::lock_guard<std::mutex> l(masks_mu_);
  // Entries for this filter at an older state can never match again.
  std::erase_if(masks_, [&](const MaskEntry& e) { return e.key == key; });
  if (masks_.size() >= kCachedMasks) masks_.erase(masks_.begin());
  masks_.push_back(MaskEntry{key, rows, tombstones, cached});
  return cached;
}

uint64_t GenerationMirror::rows() const { return mirror_->rows(); }

std::string GenerationMirror::description() const {
  return mirror_->description();
}

}  // namespace zv::index
