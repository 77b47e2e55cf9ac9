#include "embed/embedder.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "embed/checkpoint.h"
#include "embed/cpu_encoder.h"
#include "embed/encoder.h"
#include "embed/tokenizer.h"
#ifdef ZEROVEC_WITH_CUDA
#include "embed/cuda_encoder.h"
#endif

namespace zv::embed {
namespace {

// Jobs of at most this many texts go to the interactive lane, so a query never
// waits behind a large ingest batch running on the bulk lane.
constexpr size_t kInteractiveMaxTexts = 64;
// Jobs with at least this many texts are tokenized on several threads.
constexpr size_t kParallelTokenizeMin = 256;

struct Job {
  std::vector<std::string> owned;  // Submit's texts (EmbedInto borrows instead)
  std::vector<std::string_view> texts;
  std::vector<float*> rows;
  std::promise<Status> done;
};

// One worker thread with its own encoder (and so its own CUDA stream /
// scratch).
class Lane {
 public:
  Lane(std::unique_ptr<Encoder> encoder, const Tokenizer* tokenizer,
       int max_batch_tokens)
      : encoder_(std::move(encoder)),
        tokenizer_(tokenizer),
        max_batch_tokens_(max_batch_tokens),
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
      job->done.set_value(Process(*job));
    }
  }

  Status Process(const Job& job) {
    const size_t n = job.texts.size();
    std::vector<std::vector<int32_t>> ids(n);
    std::vector<int> lengths(n);
    auto tokenize = [&](size_t first, size_t step) {
      for (size_t i = first; i < n; i += step) {
        ids[i] = tokenizer_->Encode(job.texts[i]);
        lengths[i] = static_cast<int>(ids[i].size());
      }
    };
    // Tokenizing a large job would otherwise take longer than encoding it on a
    // GPU.
    const size_t workers =
        n < kParallelTokenizeMin
            ? 1
            : std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
    if (workers == 1) {
      tokenize(0, 1);
    } else {
      std::vector<std::future<void>> parts;
      for (size_t w = 0; w < workers; ++w) {
        parts.push_back(std::async(std::launch::async, tokenize, w, workers));
      }
      for (auto& p : parts) p.get();
    }
    std::vector<float*> rows;
    for (const auto& bucket : BucketByLength(lengths, max_batch_tokens_)) {
      TokenBatch batch;
      rows.clear();
      for (size_t i : bucket) {
        batch.Add(ids[i]);
        rows.push_back(job.rows[i]);
      }
      ZV_RETURN_IF_ERROR(encoder_->Encode(batch, rows));
    }
    return OkStatus();
  }

  std::unique_ptr<Encoder> encoder_;
  const Tokenizer* tokenizer_;
  const int max_batch_tokens_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;
  bool stop_ = false;
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
    bulk_.reset();
  }

  Status Init(const EmbedderOptions& options) {
    const int max_tokens = std::max(options.max_batch_tokens, info_.max_length);
    std::unique_ptr<Encoder> lanes[2];
#ifdef ZEROVEC_WITH_CUDA
    if (options.device != DevicePreference::kCpu &&
        CudaModel::DeviceAvailable()) {
      auto model = CudaModel::Create(ck_, max_tokens);
      if (model.ok()) {
        cuda_ = *std::move(model);
        for (auto& lane : lanes) {
          ZV_ASSIGN_OR_RETURN(lane, cuda_->NewEncoder());
        }
      } else if (options.device == DevicePreference::kCuda ||
                 model.status().code() != StatusCode::kUnimplemented) {
        return model.status();
      } else {  // kAuto and a shape the CUDA kernels do not cover: run on the
                // CPU
        cpu_note_ = "; " + model.status().message();
      }
    }
#endif
    if (!lanes[0]) {
      if (options.device == DevicePreference::kCuda) {
        return FailedPreconditionError(
            "embedder: CUDA requested but this build has no CUDA support or no "
            "device is present");
      }
      for (auto& lane : lanes) lane = std::make_unique<CpuEncoder>(ck_);
      cpu_note_ = lanes[0]->description() + cpu_note_;
    }
    interactive_ =
        std::make_unique<Lane>(std::move(lanes[0]), &tokenizer_, max_tokens);
    bulk_ =
        std::make_unique<Lane>(std::move(lanes[1]), &tokenizer_, max_tokens);
    return OkStatus();
  }

  const ModelInfo& info() const override { return info_; }

  std::string device_description() const override {
#ifdef ZEROVEC_WITH_CUDA
    if (cuda_) return cuda_->description();
#endif
    return cpu_note_;
  }

  Status EmbedInto(std::span<const std::string_view> texts,
                   std::span<float* const> out_rows) override {
    auto job = std::make_unique<Job>();
    job->texts.assign(texts.begin(), texts.end());
    job->rows.assign(out_rows.begin(), out_rows.end());
    return Dispatch(std::move(job)).get();
  }

  std::future<Status> Submit(std::vector<std::string> texts,
                             std::vector<float*> out_rows) override {
    auto job = std::make_unique<Job>();
    job->owned = std::move(texts);
    job->texts.assign(job->owned.begin(), job->owned.end());
    job->rows = std::move(out_rows);
    return Dispatch(std::move(job));
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

 private:
  std::future<Status> Dispatch(std::unique_ptr<Job> job) {
    if (job->texts.size() != job->rows.size()) {
      std::promise<Status> p;
      p.set_value(InvalidArgumentError(
          "embed: " + std::to_string(job->texts.size()) + " texts but " +
          std::to_string(job->rows.size()) + " output rows"));
      return p.get_future();
    }
    for (float* row : job->rows) {
      if (row == nullptr) {
        std::promise<Status> p;
        p.set_value(InvalidArgumentError("embed: null output row"));
        return p.get_future();
      }
    }
    Lane& lane =
        job->texts.size() <= kInteractiveMaxTexts ? *interactive_ : *bulk_;
    return lane.Enqueue(std::move(job));
  }

  std::shared_ptr<const Checkpoint> ck_;
  Tokenizer tokenizer_;
  ModelInfo info_;
  std::string
      cpu_note_;  // CPU description (and why not CUDA, where it was asked)
#ifdef ZEROVEC_WITH_CUDA
  std::shared_ptr<CudaModel> cuda_;
#endif
  std::unique_ptr<Lane> interactive_, bulk_;
};

}  // namespace

StatusOr<std::unique_ptr<Embedder>> Embedder::Create(
    const EmbedderOptions& options) {
  ZV_ASSIGN_OR_RETURN(std::shared_ptr<const Checkpoint> ck,
                      LoadCheckpoint(options.model_dir));
  ZV_ASSIGN_OR_RETURN(Tokenizer tokenizer,
                      Tokenizer::Create(ck->vocab, ck->tokenizer_options));
  auto embedder =
      std::make_unique<EmbedderImpl>(std::move(ck), std::move(tokenizer));
  ZV_RETURN_IF_ERROR(embedder->Init(options));
  return std::unique_ptr<Embedder>(std::move(embedder));
}

}  // namespace zv::embed
