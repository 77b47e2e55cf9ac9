// Embedder::CreateMulti and ParseDevices (issue 19): one encoder per device
// behind one Embedder.
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "embed/embedder.h"
#include "embed/embedder_impl.h"

namespace zv::embed {
namespace {

using internal::BorrowingJob;
using internal::CheckJob;
using internal::EmbedderImpl;
using internal::Job;
using internal::OwningJob;
using internal::Ready;
using internal::SplitJob;

// Several encoders (one per device, issue 19) behind one Embedder. Each job
// goes whole to the encoder with the fewest texts queued (ties rotate), a
// large one is cut into pieces for the least busy encoders; every encoder
// writes its rows straight to the caller's row pointers (the segment).
class MultiEmbedder : public Embedder {
 public:
  // Jobs of at least twice this many texts are split, into pieces of at least
  // this many (each piece still fills the encoder's length-bucketed batches).
  static constexpr size_t kSplitMinTexts = 256;

  explicit MultiEmbedder(std::vector<std::unique_ptr<EmbedderImpl>> parts)
      : parts_(std::move(parts)) {}

  const ModelInfo& info() const override { return parts_[0]->info(); }

  std::string device_description() const override {
    std::string out = std::to_string(parts_.size()) + " encoders:";
    for (size_t i = 0; i < parts_.size(); ++i) {
      out += (i ? "; [" : " [") + parts_[i]->device_description() + "]";
    }
    return out;
  }

  bool on_cuda() const override {
    return std::any_of(parts_.begin(), parts_.end(),
                       [](const auto& p) { return p->on_cuda(); });
  }

  LaneStats bulk_stats() const override {
    LaneStats sum;
    for (const auto& p : parts_) {
      const LaneStats s = p->bulk_stats();
      sum.lanes += s.lanes;
      sum.texts += s.texts;
      sum.tokenize_seconds += s.tokenize_seconds;
      sum.encode_seconds += s.encode_seconds;
    }
    return sum;
  }

  std::vector<LaneStats> encoder_stats() const override {
    std::vector<LaneStats> out;
    for (const auto& p : parts_) out.push_back(p->bulk_stats());
    return out;
  }

  using Embedder::EmbedInto;
  using Embedder::Submit;

  Status EmbedInto(std::span<const std::string_view> texts,
                   std::span<float* const> out_rows,
                   EmbedReport* report) override {
    return Submit(texts, out_rows, report).get();
  }

  std::future<Status> Submit(std::vector<std::string> texts,
                             std::vector<float*> out_rows,
                             EmbedReport* report) override {
    return Route(OwningJob(std::move(texts), std::move(out_rows), report));
  }

  std::future<Status> Submit(std::span<const std::string_view> texts,
                             std::span<float* const> out_rows,
                             EmbedReport* report) override {
    return Route(BorrowingJob(texts, out_rows, report));
  }

  std::vector<std::string_view> SplitToWindows(
      std::string_view text, int overlap_tokens) const override {
    return parts_[0]->SplitToWindows(text, overlap_tokens);
  }

  // Host rows: every encoder may write there.
  Status RegisterOutputMemory(void* data, size_t bytes) override {
    for (size_t i = 0; i < parts_.size(); ++i) {
      Status s = parts_[i]->RegisterOutputMemory(data, bytes);
      if (!s.ok()) {
        for (size_t j = 0; j < i; ++j) parts_[j]->UnregisterOutputMemory(data);
        return s;
      }
    }
    return OkStatus();
  }

  void UnregisterOutputMemory(void* data) override {
    for (const auto& p : parts_) p->UnregisterOutputMemory(data);
  }

  // The one CUDA device every encoder runs on, else -1.
  int cuda_device() const override {
    const int d = parts_[0]->cuda_device();
    for (const auto& p : parts_) {
      if (p->cuda_device() != d) return -1;
    }
    return d;
  }

  // Device memory: only the encoders on that device take it (each checks
  // where the memory lies); an error when none does.
  Status RegisterDeviceOutputMemory(void* device_data, size_t bytes) override {
    Status last = Embedder::RegisterDeviceOutputMemory(device_data, bytes);
    bool any = false;
    for (const auto& p : parts_) {
      if (p->cuda_device() < 0) continue;
      Status s = p->RegisterDeviceOutputMemory(device_data, bytes);
      any = any || s.ok();
      if (!s.ok()) last = std::move(s);
    }
    return any ? OkStatus() : last;
  }

 private:
  // Encoder indices, least queued texts first; equal depths in an order that
  // rotates from call to call, so idle encoders take turns.
  std::vector<size_t> ByQueueDepth() {
    const size_t n = parts_.size();
    const size_t start = next_.fetch_add(1, std::memory_order_relaxed) % n;
    std::vector<std::pair<size_t, size_t>> depth;  // (pending, rotated index)
    for (size_t i = 0; i < n; ++i) {
      const size_t idx = (start + i) % n;
      depth.emplace_back(parts_[idx]->pending(), i);
    }
    std::stable_sort(
        depth.begin(), depth.end(),
        [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<size_t> order;
    for (const auto& [pending, i] : depth) order.push_back((start + i) % n);
    return order;
  }

  std::future<Status> Route(std::unique_ptr<Job> job) {
    if (job->report) *job->report = EmbedReport();
    if (Status s = CheckJob(*job); !s.ok()) return Ready(std::move(s));
    const std::vector<size_t> order = ByQueueDepth();
    const size_t n = job->texts.size();
    const size_t pieces = std::min(parts_.size(), n / kSplitMinTexts);
    if (pieces < 2) return parts_[order[0]]->Dispatch(std::move(job));
    auto split =
        std::make_shared<SplitJob>(static_cast<int>(pieces), job->report);
    split->owned = std::move(job->owned);  // the views still point into it
    std::future<Status> done = split->done.get_future();
    for (size_t i = 0; i < pieces; ++i) {
      const size_t lo = n * i / pieces, hi = n * (i + 1) / pieces;
      auto piece = std::make_unique<Job>();
      piece->texts.assign(job->texts.begin() + lo, job->texts.begin() + hi);
      piece->rows.assign(job->rows.begin() + lo, job->rows.begin() + hi);
      piece->split = split;
      parts_[order[i]]->Dispatch(std::move(piece));  // `split` reports
    }
    return done;
  }

  std::vector<std::unique_ptr<EmbedderImpl>> parts_;
  std::atomic<size_t> next_{0};
};

// Cores this process may run on.
int AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int CudaDeviceCount() {
#ifdef ZEROVEC_WITH_CUDA
  return CudaModel::DeviceCount();
#else
  return 0;
#endif
}

}  // namespace

StatusOr<std::vector<EmbedderOptions>> ParseDevices(const std::string& flag,
                                                    EmbedderOptions base) {
  std::vector<EmbedderOptions> out;
  if (flag == "all") {
    const int count = CudaDeviceCount();
    if (count == 0) {
      base.device = DevicePreference::kCpu;
      base.cuda_device = 0;
      out.push_back(base);
    }
    for (int d = 0; d < count; ++d) {
      base.device = DevicePreference::kCuda;
      base.cuda_device = d;
      out.push_back(base);
    }
    return out;
  }
  const bool repeats_allowed = [] {
    const char* v = std::getenv("ZEROVEC_TESTING_REPEAT_DEVICES");
    return v != nullptr && std::string(v) == "1";
  }();
  std::vector<std::string> seen;
  size_t start = 0;
  for (;;) {
    const size_t comma = flag.find(',', start);
    std::string item = flag.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item == "cuda") item = "cuda:0";
    if (item.empty() || item == "auto" || item == "all") {
      return InvalidArgumentError(
          "--devices: expected \"all\" or a comma-separated list of cpu and "
          "cuda:N, got \"" +
          flag + "\"");
    }
    auto parsed = ParseDevice(item, base);
    if (!parsed.ok()) {
      return InvalidArgumentError("--devices: \"" + item +
                                  "\" is not cpu or cuda:N (in \"" + flag +
                                  "\")");
    }
    if (std::find(seen.begin(), seen.end(), item) != seen.end() &&
        !repeats_allowed) {
      return InvalidArgumentError(
          "--devices: " + item + " is listed twice in \"" + flag +
          "\" (one encoder per device; ZEROVEC_TESTING_REPEAT_DEVICES=1 "
          "allows repeats, for tests)");
    }
    seen.push_back(item);
    out.push_back(*parsed);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

StatusOr<std::unique_ptr<Embedder>> Embedder::CreateMulti(
    std::vector<EmbedderOptions> devices) {
  if (devices.empty()) {
    return InvalidArgumentError("embedder: no devices to embed on");
  }
  if (devices.size() == 1) return Create(devices[0]);
  // CPU encoders share the cores rather than each taking all of them.
  const auto cpus = std::count_if(devices.begin(), devices.end(),
                                  [](const EmbedderOptions& o) {
                                    return o.device == DevicePreference::kCpu;
                                  });
  ZV_ASSIGN_OR_RETURN(std::shared_ptr<const Checkpoint> ck,
                      LoadCheckpoint(devices[0].model_dir));
  std::vector<std::unique_ptr<EmbedderImpl>> parts;
  for (EmbedderOptions& o : devices) {
    if (o.device == DevicePreference::kCpu && o.cpu_threads == 0 && cpus > 1) {
      o.cpu_threads = std::max<int>(1, AvailableCores() / cpus);
    }
    ZV_ASSIGN_OR_RETURN(Tokenizer tokenizer,
                        Tokenizer::Create(ck->vocab, ck->tokenizer_options));
    auto part = std::make_unique<EmbedderImpl>(ck, std::move(tokenizer));
    ZV_RETURN_IF_ERROR(part->Init(o));
    parts.push_back(std::move(part));
  }
  return std::unique_ptr<Embedder>(new MultiEmbedder(std::move(parts)));
}

}  // namespace zv::embed
