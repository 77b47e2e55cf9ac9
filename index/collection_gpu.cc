// CollectionImpl's GPU mirror (index/gpu_mirror.h): built when GPU search is
// enabled or compaction makes a generation, followed on every publish and
// delete, dropped (back to the CPU, with a log line) when it cannot follow.
#include <chrono>
#include <cstdio>

#include "index/collection_impl.h"

namespace zv::index {

void CollectionImpl::EnableGpu(std::vector<std::shared_ptr<GpuBudget>> budgets,
                               uint64_t stripe_rows) {
  std::lock_guard<std::mutex> writer_lock(write_mu_);
  gpu_parts_ = std::move(budgets);
  gpu_ = gpu_parts_.empty() ? nullptr : gpu_parts_.front();
  gpu_stripe_rows_ = stripe_rows;
  if (dropped_ || !g_) return;
  BuildMirror(g_.get());
}

void CollectionImpl::BuildMirror(Generation* g) {
  if (!gpu_) return;
  const auto start = std::chrono::steady_clock::now();
  auto built =
      gpu_parts_.size() == 1
          ? GenerationMirror::Build(gpu_, *g->writer)
          : GenerationMirror::Build(gpu_parts_, *g->writer, gpu_stripe_rows_);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!built.ok()) {
    gpu_->Log(
        "collection '" + meta_.name + "' (" +
        std::to_string(g->writer->committed()) +
        " rows) searches on the CPU: GPU mirror: " + built.status().ToString());
    return;
  }
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3f", s);
  gpu_->Log("collection '" + meta_.name + "' mirrored on the GPU in " + secs +
            " s: " + (*built)->description());
  // Uploaded outside mu_ (searches go on, on the CPU): only writers, which
  // wait on write_mu_, change the rows it copied. Published with mu_ held.
  std::unique_lock<RwLock> l(mu_, std::defer_lock);
  if (g == g_.get()) l.lock();
  g->mirror = std::move(built).value();
}

void CollectionImpl::MirrorPublished(Generation& g,
                                     const std::vector<uint64_t>& replaced) {
  if (!g.mirror) return;
  Status s = g.mirror->CatchUp(*g.writer);
  for (size_t i = 0; s.ok() && i < replaced.size(); ++i) {
    s = g.mirror->Tombstone(replaced[i]);
  }
  if (!s.ok()) DropMirror(g, s);
}

void CollectionImpl::DropMirror(Generation& g, const Status& why) {
  gpu_->Log("collection '" + meta_.name +
            "' searches on the CPU from now on: GPU mirror: " + why.ToString());
  g.mirror.reset();
}

}  // namespace zv::index
