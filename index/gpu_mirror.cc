#include "index/gpu_mirror.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <thread>
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

StatusOr<std::vector<std::shared_ptr<GpuBudget>>> CreateGpuBudgets(
    const GpuSearchOptions& options) {
  std::vector<int> devices = options.devices;
  if (devices.empty()) devices.push_back(options.device);
  std::vector<std::shared_ptr<GpuBudget>> out;
  for (int d : devices) {
    GpuSearchOptions o = options;
    o.device = d;
    const auto repeats = std::count(devices.begin(), devices.end(), d);
    if (repeats > 1 && o.memory_bytes == 0 && gpusearch::BuiltWithCuda() &&
        d >= 0 && d < gpusearch::DeviceCount()) {
      ZV_ASSIGN_OR_RETURN(auto mem, gpusearch::QueryDeviceMemory(d));
      o.memory_bytes = mem.free_bytes / 10 * 8 / repeats;
    }
    ZV_ASSIGN_OR_RETURN(auto budget, GpuBudget::Create(o));
    budget->Log("GPU search on cuda:" + std::to_string(d) + ", " +
                std::to_string(budget->budget_bytes() >> 20) + " MiB budget" +
                (devices.size() > 1
                     ? " (part " + std::to_string(out.size()) + " of " +
                           std::to_string(devices.size()) + " of each mirror)"
                     : ""));
    out.push_back(std::move(budget));
  }
  return out;
}

// ------------------------------------------------------------------ mirror

MirrorMask::~MirrorMask() = default;

GenerationMirror::Part::Part(std::shared_ptr<GpuBudget> b,
                             std::unique_ptr<gpusearch::GpuMirror> m,
                             uint64_t c)
    : budget(std::move(b)), mirror(std::move(m)), charged(c) {}
GenerationMirror::Part::Part(Part&&) noexcept = default;
GenerationMirror::Part::~Part() = default;

GenerationMirror::GenerationMirror(StripeLayout layout) : layout_(layout) {}

GenerationMirror::~GenerationMirror() {
  for (Part& p : parts_) {
    p.mirror.reset();  // device memory first, then the budget it held
    p.budget->Give(p.charged);
  }
}

uint64_t GenerationMirror::ChargeFor(uint64_t capacity) const {
  const uint32_t stride = mirror_->options().row_stride;
  return gpusearch::MirrorBytesFor(capacity, stride) +
         kBudgetSearchers * gpusearch::SearchScratchBytes(stride, kBudgetBatch);
}

StatusOr<std::unique_ptr<GenerationMirror>> GenerationMirror::Build(
    std::vector<std::shared_ptr<GpuBudget>> budgets,
    const shm::SegmentView& view, uint64_t stripe_rows) {
  if (budgets.empty()) return InvalidArgumentError("GPU mirror: no devices");
  if (stripe_rows == 0 || stripe_rows % 64 != 0) {
    return InvalidArgumentError("GPU mirror: stripe rows " +
                                std::to_string(stripe_rows) +
                                " is not a positive multiple of 64");
  }
  const shm::SegmentInfo& info = view.info();
  const uint64_t committed = view.committed();
  const StripeLayout layout(static_cast<int>(budgets.size()), stripe_rows);
  std::unique_ptr<GenerationMirror> m(new GenerationMirror(layout));
  for (size_t i = 0; i < budgets.size(); ++i) {
    std::shared_ptr<GpuBudget>& budget = budgets[i];
    const uint64_t rows = layout.RowsIn(static_cast<int>(i), committed);
    gpusearch::MirrorOptions mo;
    mo.dim = info.dim;
    mo.row_stride = info.row_stride;
    mo.metric = info.metric;
    mo.capacity_rows = rows + std::max<uint64_t>(kMinHeadroomRows, rows / 8);
    mo.device = budget->device();
    mo.max_concurrent_searches = kBudgetSearchers;  // the scratch charged below
    const uint64_t charge =
        gpusearch::MirrorBytesFor(mo.capacity_rows, mo.row_stride) +
        kBudgetSearchers *
            gpusearch::SearchScratchBytes(mo.row_stride, kBudgetBatch);
    if (!budget->Take(charge)) {
      return ResourceExhaustedError(
          "needs " + GiB(charge) +
          " of GPU memory on cuda:" + std::to_string(budget->device()) + ", " +
          GiB(budget->budget_bytes() - budget->used_bytes()) + " of the " +
          GiB(budget->budget_bytes()) + " budget left");
    }
    auto created = gpusearch::GpuMirror::Create(mo);
    if (!created.ok()) {
      budget->Give(charge);
      return created.status();
    }
    m->parts_.push_back(Part{budget, std::move(created).value(), charge});
  }
  m->mirror_ = m->parts_[0].mirror.get();
  ZV_RETURN_IF_ERROR(m->CatchUp(view));
  if (view.TombstoneCount() > 0) {
    std::vector<uint64_t> words((committed + 63) / 64, 0);
    for (uint64_t r = 0; r < committed; ++r) {
      if (view.IsTombstoned(r)) words[r >> 6] |= uint64_t{1} << (r & 63);
    }
    if (m->parts_.size() == 1) {
      ZV_RETURN_IF_ERROR(m->mirror_->SetTombstones(words.data(), committed));
    } else {
      for (int p = 0; p < layout.parts(); ++p) {
        const std::vector<uint64_t> local =
            layout.PartWords(words.data(), committed, p);
        ZV_RETURN_IF_ERROR(m->parts_[p].mirror->SetTombstones(
            local.data(), layout.RowsIn(p, committed)));
      }
    }
  }
  return m;
}

Status GenerationMirror::EnsureCapacity(Part& p, uint64_t want) {
  const uint64_t cap = p.mirror->capacity_rows();
  if (want <= cap) return OkStatus();
  // Grow as the mirror would (x1.5), but charged to the budget first.
  const uint64_t new_cap = std::max<uint64_t>(want, cap + cap / 2);
  const uint64_t extra = ChargeFor(new_cap) - ChargeFor(cap);
  if (!p.budget->Take(extra)) {
    return ResourceExhaustedError("growing to " + std::to_string(new_cap) +
                                  " rows needs " + GiB(extra) +
                                  " more GPU memory than the budget of cuda:" +
                                  std::to_string(p.budget->device()) + " has");
  }
  p.charged += extra;
  return p.mirror->Reserve(new_cap);
}

Status GenerationMirror::AppendSplit(const shm::SegmentView& view,
                                     uint64_t have, uint64_t want) {
  for (int p = 0; p < layout_.parts(); ++p) {
    ZV_RETURN_IF_ERROR(EnsureCapacity(parts_[p], layout_.RowsIn(p, want)));
  }
  const uint32_t stride = view.info().row_stride;
  // Each extent block's rows go in runs that stay within one stripe.
  for (const shm::RowBlock& b : view.Blocks(want)) {
    const uint64_t end = b.first_row + b.count;
    for (uint64_t r = std::max(have, b.first_row); r < end;) {
      const uint64_t run_end = std::min(end, layout_.StripeEnd(r));
      Part& part = parts_[layout_.PartOf(r)];
      if (part.mirror->rows() != layout_.LocalRow(r)) {
        return InternalError("GPU mirror: part on cuda:" +
                             std::to_string(part.budget->device()) + " has " +
                             std::to_string(part.mirror->rows()) +
                             " rows, row " + std::to_string(r) + " is its " +
                             std::to_string(layout_.LocalRow(r)));
      }
      ZV_RETURN_IF_ERROR(part.mirror->AppendHost(
          b.rows + (r - b.first_row) * stride, run_end - r));
      r = run_end;
    }
  }
  return OkStatus();
}

Status GenerationMirror::CatchUp(const shm::SegmentView& view) {
  const uint64_t have = rows(), want = view.committed();
  const uint64_t staged = staged_on_device_.size();
  std::vector<uint8_t> on_device = std::move(staged_on_device_);
  staged_on_device_.clear();
  if (want <= have) return OkStatus();
  if (parts_.size() > 1) {
    ZV_RETURN_IF_ERROR(AppendSplit(view, have, want));
  } else if (staged > 0 && staged_first_ == have && want == have + staged) {
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
    ZV_RETURN_IF_ERROR(EnsureCapacity(parts_[0], want));
    // One copy per extent block (the segment's rows are contiguous there).
    for (const shm::RowBlock& b : view.Blocks(want)) {
      const uint64_t end = b.first_row + b.count;
      if (end <= have) continue;
      const uint64_t skip = have > b.first_row ? have - b.first_row : 0;
      ZV_RETURN_IF_ERROR(mirror_->AppendHost(
          b.rows + skip * view.info().row_stride, b.count - skip));
    }
  }
  if (rows() != want) {
    return InternalError("GPU mirror: has " + std::to_string(rows()) +
                         " rows, the segment " + std::to_string(want));
  }
  return OkStatus();
}

StatusOr<float*> GenerationMirror::StageRows(uint64_t first, uint64_t n) {
  staged_on_device_.clear();
  if (!can_stage()) {
    return FailedPreconditionError(
        "GPU mirror: split over several devices, rows come from the segment");
  }
  if (first != mirror_->rows()) {
    return FailedPreconditionError("GPU mirror: staging at row " +
                                   std::to_string(first) + ", mirror has " +
                                   std::to_string(mirror_->rows()));
  }
  ZV_RETURN_IF_ERROR(EnsureCapacity(parts_[0], first + n));
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

int GenerationMirror::device() const {
  return parts_.size() == 1 ? mirror_->options().device : -1;
}
uint32_t GenerationMirror::row_stride() const {
  return mirror_->options().row_stride;
}

Status GenerationMirror::Tombstone(uint64_t row) {
  if (parts_.size() == 1) return mirror_->Tombstone(row);
  return parts_[layout_.PartOf(row)].mirror->Tombstone(layout_.LocalRow(row));
}

Status GenerationMirror::Search(const float* queries,
                                const float* device_queries, size_t nq,
                                const MirrorMask* mask, TopK* top) const {
  if (parts_.size() > 1) return SearchSplit(queries, nq, mask, top);
  const gpusearch::GpuMask* m = mask ? mask->parts[0].get() : nullptr;
  if (device_queries != nullptr) {
    return mirror_->SearchDevice(device_queries, nq, top->k, m, nullptr,
                                 top->dist.data(), top->rows.data());
  }
  return mirror_->Search(queries, nq, top->k, m, top->dist.data(),
                         top->rows.data());
}

// Every part searched at once, one host thread per part past the first (the
// caller's thread takes part 0): a thread start costs microseconds against a
// GPU search's tens to hundreds, and a pool would serialise concurrent
// searches that each GpuMirror runs side by side. The k-sized answers are
// merged on the host: a few KB per part, so a device gather (peer copies or
// NCCL, which Debian 12 does not package) could only add latency.
Status GenerationMirror::SearchSplit(const float* queries, size_t nq,
                                     const MirrorMask* mask, TopK* top) const {
  const int n = layout_.parts();
  std::vector<TopK> tops;
  tops.reserve(n);
  for (int p = 0; p < n; ++p) tops.emplace_back(nq, top->k, top->metric);
  std::vector<Status> status(n, OkStatus());
  auto search = [&](int p) {
    const gpusearch::GpuMirror& part = *parts_[p].mirror;
    // A part with no rows, or none the mask selects: nothing to find there.
    if (part.rows() == 0 || (mask && !mask->parts[p])) return;
    status[p] =
        part.Search(queries, nq, top->k, mask ? mask->parts[p].get() : nullptr,
                    tops[p].dist.data(), tops[p].rows.data());
    layout_.ToGlobalRows(p, tops[p].rows.data(), tops[p].rows.size());
  };
  std::vector<std::thread> threads;
  for (int p = 1; p < n; ++p) threads.emplace_back(search, p);
  search(0);
  for (std::thread& t : threads) t.join();
  for (const Status& s : status) ZV_RETURN_IF_ERROR(s);
  std::vector<const TopK*> parts;
  for (const TopK& t : tops) parts.push_back(&t);
  TopK merged(nq, top->k, top->metric);
  MergePartTops(parts, &merged);
  *top = std::move(merged);
  return OkStatus();
}

StatusOr<std::unique_ptr<MirrorMask>> GenerationMirror::UploadMask(
    const RowBitmap& bitmap) const {
  auto mask = std::make_unique<MirrorMask>();
  if (parts_.size() == 1) {
    ZV_ASSIGN_OR_RETURN(
        auto m, mirror_->UploadMask(bitmap.words().data(), bitmap.limit()));
    mask->parts.push_back(std::move(m));
    return mask;
  }
  for (int p = 0; p < layout_.parts(); ++p) {
    if (layout_.RowsIn(p, bitmap.limit()) == 0) {
      mask->parts.push_back(nullptr);
      continue;
    }
    const std::vector<uint64_t> local =
        layout_.PartWords(bitmap.words().data(), bitmap.limit(), p);
    ZV_ASSIGN_OR_RETURN(auto m,
                        parts_[p].mirror->UploadMask(
                            local.data(), layout_.RowsIn(p, bitmap.limit())));
    mask->parts.push_back(std::move(m));
  }
  return mask;
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
  ZV_ASSIGN_OR_RETURN(std::unique_ptr<MirrorMask> uploaded, UploadMask(bitmap));
  CachedMask cached{std::shared_ptr<const MirrorMask>(std::move(uploaded)),
                    bitmap.count()};
  std::lock_guard<std::mutex> l(masks_mu_);
  // Entries for this filter at an older state can never match again.
  std::erase_if(masks_, [&](const MaskEntry& e) { return e.key == key; });
  if (masks_.size() >= kCachedMasks) masks_.erase(masks_.begin());
  masks_.push_back(MaskEntry{key, rows, tombstones, cached});
  return cached;
}

uint64_t GenerationMirror::rows() const {
  uint64_t rows = 0;
  for (const Part& p : parts_) rows += p.mirror->rows();
  return rows;
}

uint64_t GenerationMirror::charged_bytes() const {
  uint64_t bytes = 0;
  for (const Part& p : parts_) bytes += p.charged;
  return bytes;
}

std::string GenerationMirror::description() const {
  if (parts_.size() == 1) return mirror_->description();
  std::string out = "split over " + std::to_string(parts_.size()) +
                    " GPUs in stripes of " +
                    std::to_string(layout_.stripe_rows()) + " rows:";
  for (size_t p = 0; p < parts_.size(); ++p) {
    out += (p ? "; " : " ") + parts_[p].mirror->description();
  }
  return out;
}

}  // namespace zv::index
