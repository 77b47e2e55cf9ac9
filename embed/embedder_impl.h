// The single-device Embedder behind embedder.h (internal to embed/): jobs,
// lanes (a worker thread with its own encoder) and EmbedderImpl, shared by
// embedder.cc (Embedder::Create) and multi_embedder.cc (several encoders
// behind one Embedder, issue 19).
#ifndef ZEROVEC_EMBED_EMBEDDER_IMPL_H_
#define ZEROVEC_EMBED_EMBEDDER_IMPL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "embed/checkpoint.h"
#include "embed/cpu_encoder.h"
#include "embed/embedder.h"
#include "embed/encoder.h"
#include "embed/tokenizer.h"
#ifdef ZEROVEC_WITH_CUDA
#include "embed/cuda_encoder.h"
#endif

namespace zv::embed::internal {

// Jobs of at most this many texts go to the interactive lane, so a query never
// waits behind a large ingest batch running on the bulk lane.
inline constexpr size_t kInteractiveMaxTexts = 64;
// Jobs with at least this many texts are tokenized on several threads.
inline constexpr size_t kParallelTokenizeMin = 256;
inline constexpr int kCudaBatchTokens = 65536;
inline constexpr int kCpuBatchTokens = 16384;
inline constexpr int kCudaBulkLanes = 2;
// On the CPU too: one lane tokenizes its next job while the other's shards
// keep the pool busy (and fill the pool while the other waits on its slowest
// shard).
inline constexpr int kCpuBulkLanes = 2;

// A job a MultiEmbedder split over its encoders: the last piece to finish
// fulfils the caller's future.
struct SplitJob {
  SplitJob(int pieces, EmbedReport* r) : left(pieces), report(r) {}
  void Finish(const Status& s, const EmbedReport& r) {
    std::unique_lock<std::mutex> lock(mu);
    if (!s.ok() && status.ok()) status = s;
    truncated += r.truncated;
    if (--left > 0) return;
    if (report) report->truncated = truncated;
    lock.unlock();
    done.set_value(status);
  }
  std::vector<std::string> owned;  // Submit's texts, kept for every piece
  std::mutex mu;
  int left;
  Status status = OkStatus();
  uint64_t truncated = 0;
  EmbedReport* report;
  std::promise<Status> done;
};

struct Job {
  std::vector<std::string> owned;  // Submit's texts (EmbedInto borrows instead)
  std::vector<std::string_view> texts;
  std::vector<float*> rows;
  EmbedReport* report = nullptr;  // filled before `done`, when set
  std::promise<Status> done;
  // Set: a piece of a split job, which is told instead of `done`.
  std::shared_ptr<SplitJob> split;
};

// A job over the caller's texts (EmbedInto and the span Submit borrow them).
inline std::unique_ptr<Job> BorrowingJob(
    std::span<const std::string_view> texts, std::span<float* const> out_rows,
    EmbedReport* report) {
  auto job = std::make_unique<Job>();
  job->texts.assign(texts.begin(), texts.end());
  job->rows.assign(out_rows.begin(), out_rows.end());
  job->report = report;
  return job;
}

// A job that owns its texts (Submit of a vector: the caller may free its own).
inline std::unique_ptr<Job> OwningJob(std::vector<std::string> texts,
                                      std::vector<float*> out_rows,
                                      EmbedReport* report) {
  auto job = std::make_unique<Job>();
  job->owned = std::move(texts);
  job->texts.assign(job->owned.begin(), job->owned.end());
  job->rows = std::move(out_rows);
  job->report = report;
  return job;
}

// Why a job cannot run (mismatched sizes, a null row); OK otherwise.
inline Status CheckJob(const Job& job) {
  if (job.texts.size() != job.rows.size()) {
    return InvalidArgumentError(
        "embed: " + std::to_string(job.texts.size()) + " texts but " +
        std::to_string(job.rows.size()) + " output rows");
  }
  for (float* row : job.rows) {
    if (row == nullptr) return InvalidArgumentError("embed: null output row");
  }
  return OkStatus();
}

inline std::future<Status> Ready(Status s) {
  std::promise<Status> p;
  p.set_value(std::move(s));
  return p.get_future();
}

// One worker thread with its own encoder (and so its own CUDA stream /
// scratch).
class Lane {
 public:
  // Large jobs are tokenized on up to `tokenize_threads` threads.
  Lane(std::unique_ptr<Encoder> encoder, const Tokenizer* tokenizer,
       int max_batch_tokens, int tokenize_threads = 8)
      : encoder_(std::move(encoder)),
        tokenizer_(tokenizer),
        max_batch_tokens_(max_batch_tokens),
        tokenize_threads_(tokenize_threads),
        thread_([this] { Run(); }) {}

  ~Lane() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  std::future<Status> Enqueue(std::unique_ptr<Job> job) {
    std::future<Status> f = job->done.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ += job->texts.size();
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
    return f;
  }

 private:
  void Run() {
    for (;;) {
      std::unique_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_ and drained
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      EmbedReport report;
      Status status = Process(*job, &report);
      if (job->report) *job->report = report;
      {
        std::lock_guard<std::mutex> lock(mu_);
        pending_ -= job->texts.size();
      }
      if (job->split) {
        job->split->Finish(status, report);
      } else {
        job->done.set_value(std::move(status));
      }
    }
  }

  Status Process(const Job& job, EmbedReport* report) {
    const auto t0 = std::chrono::steady_clock::now();
    const size_t n = job.texts.size();
    std::vector<std::vector<int32_t>> ids(n);
    std::vector<int> lengths(n);
    std::atomic<uint64_t> truncated{0};
    auto tokenize = [&](size_t first, size_t step) {
      uint64_t cut_here = 0;
      for (size_t i = first; i < n; i += step) {
        bool cut = false;
        ids[i] = tokenizer_->Encode(job.texts[i], &cut);
        lengths[i] = static_cast<int>(ids[i].size());
        cut_here += cut;
      }
      truncated.fetch_add(cut_here, std::memory_order_relaxed);
    };
    // Tokenizing a large job would otherwise take longer than encoding it on a
    // GPU.
    const size_t workers =
        n < kParallelTokenizeMin
            ? 1
            : std::clamp<size_t>(std::thread::hardware_concurrency(), 1,
                                 tokenize_threads_);
    if (workers == 1) {
      tokenize(0, 1);
    } else {
      std::vector<std::future<void>> parts;
      for (size_t w = 0; w < workers; ++w) {
        parts.push_back(std::async(std::launch::async, tokenize, w, workers));
      }
      for (auto& p : parts) p.get();
    }
    report->truncated = truncated.load(std::memory_order_relaxed);
    const auto t1 = std::chrono::steady_clock::now();
    std::vector<float*> rows;
    Status status = OkStatus();
    for (const auto& bucket : BucketByLength(lengths, max_batch_tokens_)) {
      TokenBatch batch;
      rows.clear();
      for (size_t i : bucket) {
        batch.Add(ids[i]);
        rows.push_back(job.rows[i]);
      }
      status = encoder_->Encode(batch, rows);
      if (!status.ok()) break;
    }
    const auto t2 = std::chrono::steady_clock::now();
    tokenize_ns_ += std::chrono::nanoseconds(t1 - t0).count();
    encode_ns_ += std::chrono::nanoseconds(t2 - t1).count();
    texts_ += n;
    return status;
  }

 public:
  void AddStats(LaneStats* s) const {
    s->lanes += 1;
    s->texts += texts_.load();
    s->tokenize_seconds += tokenize_ns_.load() * 1e-9;
    s->encode_seconds += encode_ns_.load() * 1e-9;
  }

  // Texts queued or in progress (for picking the least busy lane).
  size_t pending() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_;
  }

 private:
  std::unique_ptr<Encoder> encoder_;
  const Tokenizer* tokenizer_;
  const int max_batch_tokens_;
  const size_t tokenize_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;
  size_t pending_ = 0;
  bool stop_ = false;
  std::atomic<int64_t> tokenize_ns_{0}, encode_ns_{0};
  std::atomic<uint64_t> texts_{0};
  std::thread thread_;  // last: starts after the members it reads
};

class EmbedderImpl : public Embedder {
 public:
  EmbedderImpl(std::shared_ptr<const Checkpoint> ck, Tokenizer tokenizer)
      : ck_(std::move(ck)),
        tokenizer_(std::move(tokenizer)),
        info_(ck_->Info()) {}

  ~EmbedderImpl() override {
    interactive_.reset();  // joins workers before the model goes
    bulk_.clear();
  }

  // Texts queued or being embedded on every lane (a MultiEmbedder's queue
  // depth for this encoder).
  size_t pending() const {
    size_t n = interactive_->pending();
    for (const auto& lane : bulk_) n += lane->pending();
    return n;
  }

  Status Init(const EmbedderOptions& options) {
    int max_tokens = options.max_batch_tokens;
#ifdef ZEROVEC_WITH_CUDA
    if (options.device != DevicePreference::kCpu &&
        CudaModel::DeviceAvailable(options.cuda_device)) {
      if (max_tokens <= 0) max_tokens = kCudaBatchTokens;
      max_tokens = std::max(max_tokens, info_.max_length);
      auto model = CudaModel::Create(ck_, max_tokens, options.cuda_device);
      if (model.ok()) {
        cuda_ = *std::move(model);
        cuda_precision_ =
            CudaPrecisionName(options.gpu_precision == GpuPrecision::kAuto
                                  ? CudaEncoderOptions::FromEnv().precision
                              : options.gpu_precision == GpuPrecision::kFp8
                                  ? CudaPrecision::kFp8
                                  : CudaPrecision::kFp16);
        auto new_encoder = [&]() {
          if (options.gpu_precision == GpuPrecision::kAuto) {
            return cuda_->NewEncoder();
          }
          return cuda_->NewEncoder(options.gpu_precision == GpuPrecision::kFp8
                                       ? CudaPrecision::kFp8
                                       : CudaPrecision::kFp16);
        };
        ZV_ASSIGN_OR_RETURN(auto encoder, new_encoder());
        interactive_ =
            std::make_unique<Lane>(std::move(encoder), &tokenizer_, max_tokens);
        // Two bulk lanes, each on its own stream: one tokenizes and stages
        // its next job while the other's batch runs on the GPU.
        for (int i = 0; i < kCudaBulkLanes; ++i) {
          ZV_ASSIGN_OR_RETURN(encoder, new_encoder());
          bulk_.push_back(std::make_unique<Lane>(std::move(encoder),
                                                 &tokenizer_, max_tokens));
        }
        return OkStatus();
      }
      if (options.device == DevicePreference::kCuda ||
          model.status().code() != StatusCode::kUnimplemented) {
        return model.status();
      }
      // kAuto and a shape the CUDA kernels do not cover: run on the CPU.
      cpu_note_ = "; " + model.status().message();
    }
#endif
    if (options.device == DevicePreference::kCuda) {
#ifdef ZEROVEC_WITH_CUDA
      return FailedPreconditionError(
          "embedder: --device cuda:" + std::to_string(options.cuda_device) +
          " requested but no such CUDA device is present (" +
          std::to_string(CudaModel::DeviceCount()) + " found)");
#else
      return FailedPreconditionError(
          "embedder: --device cuda requested but this zerovec was built "
          "without CUDA (build with --config=cuda)");
#endif
    }
    if (max_tokens <= 0) max_tokens = kCpuBatchTokens;
    max_tokens = std::max(max_tokens, info_.max_length);
    cpu::Precision precision = cpu::DefaultPrecision();
    if (options.cpu_precision == CpuPrecision::kFp32) {
      precision = cpu::Precision::kFp32;
    } else if (options.cpu_precision == CpuPrecision::kBf16) {
      if (!cpu::Bf16Native()) {
        return FailedPreconditionError(
            "embedder: bf16 on the CPU needs AVX512-BF16 or AMX (oneDNN sees " +
            cpu::GemmIsa() + ")");
      }
      precision = cpu::Precision::kBf16;
    }
    auto packed = CpuEncoder::Pack(*ck_, precision);
    if (!packed.ok()) return packed.status();
    auto pool = std::make_shared<CpuPool>(options.cpu_threads);
    auto cpu = std::make_unique<CpuEncoder>(ck_, pool, *packed);
    cpu_note_ = cpu->description() + cpu_note_;
    // Tokenizing stays within the cores given too.
    const int tokenize_threads = std::min(8, pool->threads());
    interactive_ = std::make_unique<Lane>(std::move(cpu), &tokenizer_,
                                          max_tokens, tokenize_threads);
    for (int i = 0; i < kCpuBulkLanes; ++i) {
      bulk_.push_back(std::make_unique<Lane>(
          std::make_unique<CpuEncoder>(ck_, pool, *packed), &tokenizer_,
          max_tokens, tokenize_threads));
    }
    return OkStatus();
  }

  const ModelInfo& info() const override { return info_; }

  std::string device_description() const override {
#ifdef ZEROVEC_WITH_CUDA
    if (cuda_) return cuda_->description() + ", " + cuda_precision_ + " GEMMs";
#endif
    return cpu_note_;
  }

  bool on_cuda() const override {
#ifdef ZEROVEC_WITH_CUDA
    return cuda_ != nullptr;
#else
    return false;
#endif
  }

  LaneStats bulk_stats() const override {
    LaneStats s;
    for (const auto& lane : bulk_) lane->AddStats(&s);
    return s;
  }

  using Embedder::EmbedInto;
  using Embedder::Submit;

  Status EmbedInto(std::span<const std::string_view> texts,
                   std::span<float* const> out_rows,
                   EmbedReport* report) override {
    return Dispatch(BorrowingJob(texts, out_rows, report)).get();
  }

  std::future<Status> Submit(std::vector<std::string> texts,
                             std::vector<float*> out_rows,
                             EmbedReport* report) override {
    return Dispatch(OwningJob(std::move(texts), std::move(out_rows), report));
  }

  std::future<Status> Submit(std::span<const std::string_view> texts,
                             std::span<float* const> out_rows,
                             EmbedReport* report) override {
    return Dispatch(BorrowingJob(texts, out_rows, report));
  }

  std::vector<std::string_view> SplitToWindows(
      std::string_view text, int overlap_tokens) const override {
    return tokenizer_.SplitToWindows(text, overlap_tokens);
  }

  Status RegisterOutputMemory(void* data, size_t bytes) override {
#ifdef ZEROVEC_WITH_CUDA
    if (cuda_) return cuda_->RegisterOutputMemory(data, bytes);
#endif
    return OkStatus();
  }

  void UnregisterOutputMemory(void* data) override {
#ifdef ZEROVEC_WITH_CUDA
    if (cuda_) cuda_->UnregisterOutputMemory(data);
#endif
  }

  int cuda_device() const override {
#ifdef ZEROVEC_WITH_CUDA
    if (cuda_) return cuda_->ordinal();
#endif
    return -1;
  }

  Status RegisterDeviceOutputMemory(void* device_data, size_t bytes) override {
#ifdef ZEROVEC_WITH_CUDA
    if (cuda_) return cuda_->RegisterDeviceOutputMemory(device_data, bytes);
#endif
    return Embedder::RegisterDeviceOutputMemory(device_data, bytes);
  }

  std::future<Status> Dispatch(std::unique_ptr<Job> job) {
    if (job->report) *job->report = EmbedReport();
    if (Status s = CheckJob(*job); !s.ok()) return Ready(std::move(s));
    if (job->texts.size() <= kInteractiveMaxTexts) {
      return interactive_->Enqueue(std::move(job));
    }
    // The bulk lane with the least queued work takes the job.
    Lane* lane = bulk_.front().get();
    for (const auto& l : bulk_) {
      if (l->pending() < lane->pending()) lane = l.get();
    }
    return lane->Enqueue(std::move(job));
  }

 private:
  std::shared_ptr<const Checkpoint> ck_;
  Tokenizer tokenizer_;
  ModelInfo info_;
  std::string
      cpu_note_;  // CPU description (and why not CUDA, where it was asked)
#ifdef ZEROVEC_WITH_CUDA
  std::shared_ptr<CudaModel> cuda_;
  std::string cuda_precision_;  // "fp16" or "fp8"
#endif
  std::unique_ptr<Lane> interactive_;
  std::vector<std::unique_ptr<Lane>> bulk_;
};

}  // namespace zv::embed::internal

#endif  // ZEROVEC_EMBED_EMBEDDER_IMPL_H_
