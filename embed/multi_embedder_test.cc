// Several encoders behind one Embedder (Embedder::CreateMulti, issue 19), on
// CPU encoders ("cpu,cpu"): the vectors equal one encoder's, the work lands on
// every encoder, concurrent submitters get their own rows, truncation reports
// add up over a split job; and ParseDevices' answers and errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "embed/embedder.h"
#include "embed/testing/test_checkpoint.h"

namespace zv::embed {
namespace {

namespace fs = std::filesystem;
using testing::Cosine;

constexpr int kDim = 32;  // the tiny checkpoint's hidden size

fs::path TinyModelDir() {
  static fs::path dir = [] {
    fs::path d = testing::MakeTempDir("multi_embedder");
    EXPECT_TRUE(testing::WriteTinyBert(d, {}).ok());
    return d;
  }();
  return dir;
}

// Sets ZEROVEC_TESTING_REPEAT_DEVICES for one scope.
struct RepeatDevices {
  explicit RepeatDevices(bool on) {
    if (on) {
      setenv("ZEROVEC_TESTING_REPEAT_DEVICES", "1", 1);
    } else {
      unsetenv("ZEROVEC_TESTING_REPEAT_DEVICES");
    }
  }
  ~RepeatDevices() { unsetenv("ZEROVEC_TESTING_REPEAT_DEVICES"); }
};

EmbedderOptions Base() {
  EmbedderOptions o;
  o.model_dir = TinyModelDir();
  o.cpu_threads = 1;
  return o;
}

std::unique_ptr<Embedder> Single() {
  EmbedderOptions o = Base();
  o.device = DevicePreference::kCpu;
  auto e = Embedder::Create(o);
  EXPECT_TRUE(e.ok()) << e.status();
  return std::move(e).value();
}

std::unique_ptr<Embedder> CpuCpu() {
  RepeatDevices repeat(true);
  auto devices = ParseDevices("cpu,cpu", Base());
  EXPECT_TRUE(devices.ok()) << devices.status();
  auto e = Embedder::CreateMulti(*devices);
  EXPECT_TRUE(e.ok()) << e.status();
  return std::move(e).value();
}

std::vector<std::string> Texts(int n, const std::string& salt) {
  std::vector<std::string> texts;
  for (int i = 0; i < n; ++i) {
    texts.push_back("the " + salt + " dog " + std::string(i % 9, 'a') +
                    " ran " + std::to_string(i));
  }
  return texts;
}

std::vector<float*> RowsOf(std::vector<float>& out, size_t n) {
  std::vector<float*> rows;
  for (size_t i = 0; i < n; ++i) rows.push_back(&out[i * kDim]);
  return rows;
}

// Each row equal to the reference's, bit for bit or at cosine > 0.99999 (the
// CPU GEMM's blocking may differ with the thread count).
void ExpectSameVectors(const std::vector<float>& got,
                       const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < got.size() / kDim; ++r) {
    if (std::equal(&got[r * kDim], &got[r * kDim] + kDim, &want[r * kDim])) {
      continue;
    }
    ASSERT_GT(Cosine(&got[r * kDim], &want[r * kDim], kDim), 0.99999)
        << "row " << r;
  }
}

TEST(ParseDevicesTest, ListsAndAll) {
  RepeatDevices repeat(false);
  auto cpu = ParseDevices("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_EQ(cpu->size(), 1u);
  EXPECT_EQ((*cpu)[0].device, DevicePreference::kCpu);
  auto two = ParseDevices("cuda:0,cuda:1", Base());
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].device, DevicePreference::kCuda);
  EXPECT_EQ((*two)[0].cuda_device, 0);
  EXPECT_EQ((*two)[1].cuda_device, 1);
  EXPECT_EQ((*two)[1].model_dir, TinyModelDir());  // the base's fields kept
  auto all = ParseDevices("all");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_GE(all->size(), 1u);
  // Every CUDA device, or the CPU where there is none (CI).
  for (const EmbedderOptions& o : *all) {
    EXPECT_EQ(o.device, all->size() == 1 && o.device == DevicePreference::kCpu
                            ? DevicePreference::kCpu
                            : DevicePreference::kCuda);
  }
}

TEST(ParseDevicesTest, RepeatsOnlyForTests) {
  {
    RepeatDevices repeat(false);
    auto twice = ParseDevices("cuda:0,cuda:0");
    ASSERT_FALSE(twice.ok());
    EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(twice.status().message().find("listed twice"), std::string::npos)
        << twice.status();
    EXPECT_NE(twice.status().message().find("ZEROVEC_TESTING_REPEAT_DEVICES"),
              std::string::npos);
    EXPECT_FALSE(ParseDevices("cpu,cpu").ok());
    EXPECT_FALSE(ParseDevices("cuda,cuda:0").ok());  // cuda is cuda:0
  }
  RepeatDevices repeat(true);
  auto twice = ParseDevices("cpu,cpu");
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ(twice->size(), 2u);
}

TEST(ParseDevicesTest, BadValuesSayWhatIsWrong) {
  RepeatDevices repeat(false);
  for (const char* bad :
       {"", "gpu", "cuda:x", "cuda:", "cpu,,cpu", "cpu,", "all,cpu", "auto",
        "cuda:0;cuda:1", "cuda:123456789"}) {
    auto parsed = ParseDevices(bad);
    ASSERT_FALSE(parsed.ok()) << "\"" << bad << "\"";
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message().rfind("--devices: ", 0), 0u)
        << parsed.status();
  }
}

TEST(MultiEmbedderTest, OneDeviceIsThePlainEmbedder) {
  EmbedderOptions o = Base();
  o.device = DevicePreference::kCpu;
  auto one = Embedder::CreateMulti({o});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)->device_description(), Single()->device_description());
  EXPECT_EQ((*one)->encoder_stats().size(), 1u);
  EXPECT_FALSE(Embedder::CreateMulti({}).ok());
}

TEST(MultiEmbedderTest, VectorsEqualOneEncodersAndWorkLandsOnBoth) {
  auto single = Single();
  auto multi = CpuCpu();
  EXPECT_NE(multi->device_description().find("2 encoders"), std::string::npos)
      << multi->device_description();
  EXPECT_EQ(multi->info().dim, kDim);
  EXPECT_FALSE(multi->on_cuda());
  EXPECT_EQ(multi->cuda_device(), -1);

  // A large job (split over both encoders) and bulk jobs one after another.
  const std::vector<std::string> big = Texts(1200, "big");
  std::vector<float> want(big.size() * kDim), got(big.size() * kDim);
  ASSERT_TRUE(single->Submit(big, RowsOf(want, big.size())).get().ok());
  ASSERT_TRUE(multi->Submit(big, RowsOf(got, big.size())).get().ok());
  ExpectSameVectors(got, want);
  std::vector<LaneStats> per = multi->encoder_stats();
  ASSERT_EQ(per.size(), 2u);
  EXPECT_GT(per[0].texts, 0u);
  EXPECT_GT(per[1].texts, 0u);
  EXPECT_EQ(per[0].texts + per[1].texts, big.size());
  EXPECT_EQ(multi->bulk_stats().texts, big.size());
  EXPECT_EQ(multi->bulk_stats().lanes, per[0].lanes + per[1].lanes);

  // Small (interactive) jobs alternate between idle encoders; borrowed texts.
  const std::vector<std::string> small = Texts(40, "small");
  std::vector<std::string_view> views(small.begin(), small.end());
  std::vector<float> want_small(small.size() * kDim);
  ASSERT_TRUE(single->EmbedInto(views, RowsOf(want_small, small.size())).ok());
  for (int round = 0; round < 4; ++round) {
    std::vector<float> out(small.size() * kDim);
    ASSERT_TRUE(multi->EmbedInto(views, RowsOf(out, small.size())).ok());
    ExpectSameVectors(out, want_small);
  }
}

TEST(MultiEmbedderTest, ConcurrentSubmittersGetTheirOwnRows) {
  auto single = Single();
  auto multi = CpuCpu();
  constexpr int kThreads = 4;
  std::vector<std::vector<std::string>> texts(kThreads);
  std::vector<std::vector<float>> want(kThreads), got(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    // 30 (interactive), 200 (bulk, whole), 700 (split) texts.
    texts[t] = Texts(t % 3 == 0   ? 30
                     : t % 3 == 1 ? 200
                                  : 700,
                     "t" + std::to_string(t));
    want[t].resize(texts[t].size() * kDim);
    got[t].resize(texts[t].size() * kDim);
    ASSERT_TRUE(
        single->Submit(texts[t], RowsOf(want[t], texts[t].size())).get().ok());
  }
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        std::vector<std::string_view> views(texts[t].begin(), texts[t].end());
        std::vector<float*> rows = RowsOf(got[t], texts[t].size());
        if (round % 2 == 0) {
          failures[t] += !multi->Submit(texts[t], rows).get().ok();
        } else {
          failures[t] += !multi->EmbedInto(views, rows).ok();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], 0);
    ExpectSameVectors(got[t], want[t]);
  }
  const std::vector<LaneStats> per = multi->encoder_stats();
  EXPECT_GT(per[0].texts, 0u);
  EXPECT_GT(per[1].texts, 0u);
}

TEST(MultiEmbedderTest, SplitJobReportsEveryPiecesTruncation) {
  auto multi = CpuCpu();
  const int window = multi->info().max_length;
  std::string fits, longer;
  for (int i = 0; i < window - 2; ++i) fits += "dog ";
  longer = fits + "dog";
  std::vector<std::string> texts;
  for (int i = 0; i < 900; ++i) texts.push_back(i % 3 == 0 ? longer : fits);
  std::vector<float> out(texts.size() * kDim);
  EmbedReport report;
  report.truncated = 777;  // overwritten
  ASSERT_TRUE(
      multi->Submit(texts, RowsOf(out, texts.size()), &report).get().ok());
  EXPECT_EQ(report.truncated, 300u);
}

TEST(MultiEmbedderTest, ArgumentErrors) {
  auto multi = CpuCpu();
  std::vector<float> out(kDim);
  std::vector<std::string> two = {"a", "b"};
  EXPECT_EQ(multi->Submit(two, {out.data()}).get().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(multi->Submit({"a"}, {nullptr}).get().code(),
            StatusCode::kInvalidArgument);
  // Host output memory registers with every encoder (a no-op on the CPU);
  // device memory needs a CUDA encoder.
  EXPECT_TRUE(multi->RegisterOutputMemory(out.data(), out.size() * 4).ok());
  multi->UnregisterOutputMemory(out.data());
  EXPECT_EQ(multi->RegisterDeviceOutputMemory(out.data(), 4).code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace zv::embed
