// GPU search through the server (issue 13): a real server on 127.0.0.1 with
// --gpu-memory, its answers checked against the CPU's exact search of the same
// segment (an attached reader in this process), for vector and text queries,
// with filters, after upserts, replacements, deletes and a compaction, with
// coalescing on and off; and a budget too small for the collection. Skips
// without a CUDA build or device (CI).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gpusearch/gpu_search.h"
#include "index/collection.h"
#include "tests/integration/test_util.h"

namespace zv {
namespace {

namespace pb = zerovec::v1;
using testing::MakeTempDir;
using testing::RunningServer;
using testing::StartServer;
using testing::VectorFor;

constexpr uint32_t kDim = 64;
// Over the searcher's selective-filter limit (4096 matching rows, answered by
// a CPU scan of just those), so filtered searches take the GPU too.
constexpr int kRows = 20000;
// Each mirror's charge includes four searches' scratch at a batch of 1,024
// (~0.6 GB each: score tile and candidates), so a budget for one small
// collection still needs a few GB.
constexpr uint64_t kBudget = 8ull << 30;

#define SKIP_WITHOUT_GPU()                                          \
  if (!gpusearch::BuiltWithCuda() || gpusearch::DeviceCount() == 0) \
  GTEST_SKIP() << "no CUDA build or device"

struct Logged {
  std::mutex mu;
  std::vector<std::string> lines;
  std::string All() {
    std::lock_guard<std::mutex> l(mu);
    std::string out;
    for (const auto& line : lines) out += line + "\n";
    return out;
  }
  bool Has(const std::string& s) {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& line : lines)
      if (line.find(s) != std::string::npos) return true;
    return false;
  }
};

service::ServerOptions GpuOptions(const std::filesystem::path& data,
                                  uint64_t bytes, int window_us,
                                  Logged* logged) {
  service::ServerOptions o;
  o.data_dir = data;
  o.model_dir = testing::BundledModelDir();
  o.gpu.enabled = true;
  o.gpu.memory_bytes = bytes;
  o.gpu.batch_window = std::chrono::microseconds(window_us);
  o.log = [logged](const std::string& line) {
    std::lock_guard<std::mutex> l(logged->mu);
    logged->lines.push_back(line);
  };
  return o;
}

pb::CollectionInfo Describe(RunningServer& s, const std::string& name) {
  grpc::ClientContext ctx;
  pb::DescribeCollectionRequest req;
  req.set_name(name);
  pb::CollectionInfo info;
  EXPECT_TRUE(s.stub->DescribeCollection(&ctx, req, &info).ok());
  return info;
}

void Create(RunningServer& s, const std::string& name, uint32_t dim) {
  grpc::ClientContext ctx;
  pb::CreateCollectionRequest req;
  req.set_name(name);
  req.set_dim(dim);
  req.set_index("Flat");
  pb::CreateCollectionResponse resp;
  ASSERT_TRUE(s.stub->CreateCollection(&ctx, req, &resp).ok());
}

// Rows `first..first+n` (ids "v<i>", namespace a/b, color of i % 3); `salt`
// changes the vectors (replacements).
void UpsertRange(RunningServer& s, int first, int n, const std::string& salt) {
  for (int b = first; b < first + n; b += 1000) {
    grpc::ClientContext ctx;
    pb::UpsertRequest req;
    req.set_collection("vec");
    for (int i = b; i < std::min(first + n, b + 1000); ++i) {
      const std::string id = "v" + std::to_string(i);
      *req.add_items() = testing::VectorItem(id, VectorFor(id + salt, kDim),
                                             i % 2 ? "a" : "b");
      (*req.mutable_items()->rbegin()->mutable_metadata())["color"] =
          std::to_string(i % 3);
    }
    pb::UpsertResponse resp;
    ASSERT_TRUE(s.stub->Upsert(&ctx, req, &resp).ok());
  }
}

struct Case {
  std::vector<float> vector;  // or:
  std::string text;
  index::Filter filter;
};

pb::SearchRequest RequestOf(const std::string& coll, const Case& c, int k) {
  pb::SearchRequest req;
  req.set_collection(coll);
  req.set_k(k);
  if (!c.text.empty()) {
    req.mutable_query()->set_text(c.text);
  } else {
    *req.mutable_query()->mutable_vector()->mutable_values() = {
        c.vector.begin(), c.vector.end()};
  }
  if (c.filter.ns) req.mutable_filter()->set_namespace_(*c.filter.ns);
  for (const auto& [k2, v] : c.filter.metadata_equals)
    (*req.mutable_filter()->mutable_metadata_equals())[k2] = v;
  return req;
}

// The CPU's exact answer: the segment searched by an attached reader.
std::vector<index::Hit> CpuAnswer(const std::filesystem::path& data,
                                  const std::string& coll,
                                  const std::vector<float>& q,
                                  const index::Filter& f, int k) {
  auto att = index::AttachedCollection::Attach(data, coll);
  EXPECT_TRUE(att.ok()) << att.status().ToString();
  if (!att.ok()) return {};
  index::SearchOptions o;
  o.k = k;
  o.filter = f;
  auto r = (*att)->Search(q, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->at(0) : std::vector<index::Hit>{};
}

std::vector<float> Embed(RunningServer& s, const std::string& text) {
  grpc::ClientContext ctx;
  pb::EmbedRequest req;
  req.add_texts(text);
  pb::EmbedResponse resp;
  EXPECT_TRUE(s.stub->Embed(&ctx, req, &resp).ok());
  const auto& v = resp.vectors(0).values();
  return {v.begin(), v.end()};
}

void ExpectSame(const pb::SearchResponse& got,
                const std::vector<index::Hit>& want, float tol,
                const std::string& what) {
  ASSERT_EQ(got.hits_size(), static_cast<int>(want.size())) << what;
  for (size_t j = 0; j < want.size(); ++j) {
    EXPECT_EQ(got.hits(j).id(), want[j].id) << what << " hit " << j;
    EXPECT_NEAR(got.hits(j).score(), want[j].score, tol)
        << what << " hit " << j;
  }
}

std::vector<Case> VectorCases() {
  std::vector<Case> cases;
  for (int i = 0; i < 6; ++i) {
    Case c;
    c.vector = VectorFor("q" + std::to_string(i), kDim);
    if (i % 3 == 1) c.filter.ns = "a";
    if (i % 3 == 2) c.filter.metadata_equals["color"] = "1";
    cases.push_back(c);
  }
  return cases;
}

// Every case served (concurrently, `threads` callers) equals the CPU answer.
void CheckAgainstCpu(RunningServer& s, const std::filesystem::path& data,
                     const std::string& stage, int threads = 1) {
  const std::vector<Case> cases = VectorCases();
  std::vector<std::vector<index::Hit>> want;
  for (const Case& c : cases)
    want.push_back(CpuAnswer(data, "vec", c.vector, c.filter, 10));
  std::vector<std::thread> pool;
  std::atomic<int> failed_rpcs{0};
  std::mutex mu;
  std::vector<std::pair<size_t, pb::SearchResponse>> got;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i = 0; i < cases.size(); ++i) {
        const size_t c = (i + t) % cases.size();
        grpc::ClientContext ctx;
        pb::SearchResponse resp;
        if (!s.stub->Search(&ctx, RequestOf("vec", cases[c], 10), &resp).ok()) {
          ++failed_rpcs;
          continue;
        }
        std::lock_guard<std::mutex> l(mu);
        got.emplace_back(c, std::move(resp));
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(failed_rpcs.load(), 0) << stage;
  for (const auto& [c, resp] : got)
    ExpectSame(resp, want[c], 1e-4f, stage + " case " + std::to_string(c));
}

uint64_t GpuSearches(RunningServer& s) {
  return Describe(s, "vec").gpu_searches();
}

TEST(GpuServeTest, MirrorFollowsUpsertsDeletesAndCompaction) {
  SKIP_WITHOUT_GPU();
  const auto data = MakeTempDir("gpu_serve");
  Logged logged;
  RunningServer s = StartServer(GpuOptions(data, kBudget, 0, &logged));
  ASSERT_NE(s.server, nullptr);
  Create(s, "vec", kDim);
  UpsertRange(s, 0, kRows, "");
  ASSERT_TRUE(Describe(s, "vec").gpu_mirrored()) << logged.All();
  EXPECT_TRUE(logged.Has("'vec' mirrored on the GPU"));
  uint64_t before = GpuSearches(s);
  CheckAgainstCpu(s, data, "after upserts");
  EXPECT_EQ(GpuSearches(s), before + 6);  // every case ran on the GPU

  UpsertRange(s, 100, 600, "-replaced");  // replacements tombstone old rows
  {
    grpc::ClientContext ctx;
    pb::DeleteRequest req;
    req.set_collection("vec");
    for (int i = 1000; i < 1500; ++i) req.add_ids("v" + std::to_string(i));
    pb::DeleteResponse resp;
    ASSERT_TRUE(s.stub->Delete(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.deleted(), 500u);
  }
  // A deleted row that was the best hit must not come back.
  Case deleted;
  deleted.vector = VectorFor("v1234", kDim);
  grpc::ClientContext dctx;
  pb::SearchResponse dresp;
  ASSERT_TRUE(s.stub->Search(&dctx, RequestOf("vec", deleted, 5), &dresp).ok());
  for (const auto& h : dresp.hits()) EXPECT_NE(h.id(), "v1234");
  CheckAgainstCpu(s, data, "after replacements and deletes");

  const uint64_t generation = Describe(s, "vec").generation();
  {
    grpc::ClientContext ctx;
    pb::CompactRequest req;
    req.set_collection("vec");
    pb::CompactResponse resp;
    ASSERT_TRUE(s.stub->Compact(&ctx, req, &resp).ok());
  }
  const pb::CollectionInfo after = Describe(s, "vec");
  EXPECT_EQ(after.generation(), generation + 1);
  EXPECT_EQ(after.tombstones(), 0u);
  EXPECT_TRUE(after.gpu_mirrored());
  before = GpuSearches(s);
  CheckAgainstCpu(s, data, "after compaction");
  EXPECT_EQ(GpuSearches(s), before + 6);
  UpsertRange(s, kRows, 3000, "");  // appends past the compacted rows
  CheckAgainstCpu(s, data, "after compaction and upserts");

  // Restart: the mirror is rebuilt from the segment.
  s = RunningServer();
  s = StartServer(GpuOptions(data, kBudget, 0, &logged));
  ASSERT_NE(s.server, nullptr);
  EXPECT_TRUE(Describe(s, "vec").gpu_mirrored());
  CheckAgainstCpu(s, data, "after restart");
}

TEST(GpuServeTest, CoalescedSearchesEqualTheCpu) {
  SKIP_WITHOUT_GPU();
  const auto data = MakeTempDir("gpu_coalesce");
  Logged logged;
  RunningServer s = StartServer(GpuOptions(data, kBudget, 1000, &logged));
  ASSERT_NE(s.server, nullptr);
  Create(s, "vec", kDim);
  UpsertRange(s, 0, kRows, "");
  ASSERT_TRUE(Describe(s, "vec").gpu_mirrored()) << logged.All();
  CheckAgainstCpu(s, data, "coalescing, 1 client");
  CheckAgainstCpu(s, data, "coalescing, 48 clients", 48);
  grpc::ClientContext ctx;
  pb::StatsResponse stats;
  ASSERT_TRUE(s.stub->Stats(&ctx, pb::StatsRequest(), &stats).ok());
  EXPECT_GT(stats.gpu_batches(), 0u);
  // 48 callers at once: some shared a batch.
  EXPECT_LT(stats.gpu_batches(), stats.gpu_batched_queries());
  // Off: the same answers.
  s = RunningServer();
  s = StartServer(GpuOptions(data, kBudget, 0, &logged));
  ASSERT_NE(s.server, nullptr);
  CheckAgainstCpu(s, data, "coalescing off, 48 clients", 48);
}

// The stored vector of `id` is what the model makes of `text`.
void ExpectStored(RunningServer& s, const std::string& coll,
                  const std::string& id, const std::string& text) {
  grpc::ClientContext ctx;
  pb::GetRequest req;
  req.set_collection(coll);
  req.add_ids(id);
  req.set_include_vectors(true);
  pb::GetResponse resp;
  ASSERT_TRUE(s.stub->Get(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.items_size(), 1) << id;
  const std::vector<float> want = Embed(s, text);
  ASSERT_EQ(resp.items(0).vector_size(), static_cast<int>(want.size()));
  std::vector<float> got(resp.items(0).vector().begin(),
                         resp.items(0).vector().end());
  EXPECT_GT(
      testing::Cosine(got.data(), want.data(), static_cast<int>(want.size())),
      0.999)
      << id;
}

// Text and vector items in one request: the text rows come from the device,
// the vector rows from the host, interleaved in the mirror. Each vector item
// is found by its own vector on the GPU; each text item is stored as embedded.
void UpsertMixed(RunningServer& s, const std::string& coll) {
  grpc::ClientContext ctx;
  pb::UpsertRequest req;
  req.set_collection(coll);
  std::vector<std::vector<float>> vectors(10);
  for (int i = 0; i < 10; ++i) {
    pb::Item* item = req.add_items();
    item->set_id("m" + std::to_string(i));
    if (i % 2 == 0) {
      item->set_text("mixed request text number " + std::to_string(i));
    } else {
      vectors[i] = Embed(s, "a vector item about volcano " + std::to_string(i));
      *item->mutable_vector() = {vectors[i].begin(), vectors[i].end()};
    }
  }
  pb::UpsertResponse resp;
  ASSERT_TRUE(s.stub->Upsert(&ctx, req, &resp).ok());
  for (int i = 0; i < 10; ++i) {
    const std::string id = "m" + std::to_string(i);
    if (i % 2 == 0) {
      ExpectStored(s, coll, id, req.items(i).text());
      continue;
    }
    Case c;
    c.vector = vectors[i];
    grpc::ClientContext sctx;
    pb::SearchResponse got;
    ASSERT_TRUE(s.stub->Search(&sctx, RequestOf(coll, c, 1), &got).ok());
    ASSERT_EQ(got.hits_size(), 1);
    EXPECT_EQ(got.hits(0).id(), id);
    EXPECT_NEAR(got.hits(0).score(), 1.0f, 1e-4f) << id;
  }
}

TEST(GpuServeTest, TextQueriesEqualTheCpu) {
  SKIP_WITHOUT_GPU();
  if (testing::BundledModelDir().empty()) GTEST_SKIP() << "no bundled model";
  const auto data = MakeTempDir("gpu_text");
  Logged logged;
  RunningServer s = StartServer(GpuOptions(data, kBudget, 500, &logged));
  ASSERT_NE(s.server, nullptr);
  const std::vector<float> probe = Embed(s, "probe");
  Create(s, "txt", static_cast<uint32_t>(probe.size()));
  const char* words[] = {"river",   "mountain", "aircraft", "happiness",
                         "running", "ocean",    "engine",   "forest"};
  grpc::ClientContext ctx;
  pb::UpsertRequest req;
  req.set_collection("txt");
  for (int i = 0; i < 400; ++i) {
    pb::Item* item = req.add_items();
    item->set_id("t" + std::to_string(i));
    item->set_text(std::string(words[i % 8]) + " number " + std::to_string(i) +
                   " and " + words[(i / 8) % 8]);
  }
  pb::UpsertResponse resp;
  ASSERT_TRUE(s.stub->Upsert(&ctx, req, &resp).ok());
  ASSERT_TRUE(Describe(s, "txt").gpu_mirrored()) << logged.All();
  // The encoder wrote them into the mirror; the segment got copies.
  EXPECT_EQ(Describe(s, "txt").gpu_rows_from_device(), 400u);
  for (int i : {0, 7, 399}) {
    ExpectStored(s, "txt", "t" + std::to_string(i), req.items(i).text());
  }
  UpsertMixed(s, "txt");
  EXPECT_EQ(Describe(s, "txt").gpu_rows_from_device(), 405u);
  for (const char* q : {"a large stream of water", "flying machine"}) {
    Case c;
    c.text = q;
    grpc::ClientContext sctx;
    pb::SearchResponse got;
    ASSERT_TRUE(s.stub->Search(&sctx, RequestOf("txt", c, 10), &got).ok());
    ExpectSame(got, CpuAnswer(data, "txt", Embed(s, q), {}, 10), 1e-3f, q);
  }
  EXPECT_GT(Describe(s, "txt").gpu_searches(), 0u);
}

TEST(GpuServeTest, CollectionOverBudgetSearchesOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const auto data = MakeTempDir("gpu_budget");
  Logged logged;
  RunningServer s = StartServer(GpuOptions(data, 1 << 20, 0, &logged));
  ASSERT_NE(s.server, nullptr);
  Create(s, "vec", kDim);
  UpsertRange(s, 0, 2000, "");
  const pb::CollectionInfo info = Describe(s, "vec");
  EXPECT_FALSE(info.gpu_mirrored());
  EXPECT_EQ(info.gpu_mirror_bytes(), 0u);
  EXPECT_TRUE(logged.Has("'vec' (0 rows) searches on the CPU"));
  CheckAgainstCpu(s, data, "CPU fallback");
  EXPECT_EQ(GpuSearches(s), 0u);
}

}  // namespace
}  // namespace zv
