// Co-located attach: while a server ingests, a separate `zerovec attach`
// process searches the segment read-only and sees only whole, committed rows;
// once ingest stops, its results equal the server's Search for the same query.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "tests/integration/test_util.h"

namespace zv::testing {
namespace {

namespace pb = zerovec::v1;
constexpr uint32_t kDim = 16;

// Runs `zerovec attach ... --json` and returns its parsed output.
nlohmann::json RunAttach(const std::filesystem::path& data,
                         const std::filesystem::path& qfile, int k) {
  const std::string cmd = "tools/zerovec attach --data " + data.string() +
                          " --collection live --vector-file " + qfile.string() +
                          " -k " + std::to_string(k) + " --json";
  FILE* pipe = popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int rc = pclose(pipe);
  EXPECT_EQ(rc, 0) << cmd;
  auto doc = nlohmann::json::parse(out, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << out;
  return doc;
}

float Dot(const std::vector<float>& a, const std::vector<float>& b) {
  float s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(AttachTest, AttachedReaderSeesCommittedRowsAndMatchesServer) {
  service::ServerOptions options;
  options.data_dir = MakeTempDir("attach_test");
  RunningServer rs = StartServer(options);
  ASSERT_NE(rs.server, nullptr);
  {
    grpc::ClientContext ctx;
    pb::CreateCollectionRequest req;
    req.set_name("live");
    req.set_dim(kDim);
    pb::CreateCollectionResponse resp;
    ASSERT_TRUE(rs.stub->CreateCollection(&ctx, req, &resp).ok());
  }
  const std::vector<float> query = VectorFor("the query", kDim);
  const std::filesystem::path qfile = options.data_dir / "query.txt";
  {
    std::ofstream out(qfile);
    for (float x : query) out << x << " ";
  }
  // A writer ingests batches of known vectors; `sent` holds every id it has
  // sent.
  std::mutex mu;
  std::set<std::string> sent;
  std::atomic<bool> stop{false};
  std::atomic<int> batches{0};
  std::thread writer([&] {
    for (int b = 0; !stop.load() && b < 400; ++b) {
      pb::UpsertRequest req;
      req.set_collection("live");
      for (int i = 0; i < 50; ++i) {
        const std::string id = "r" + std::to_string(b * 50 + i);
        *req.add_items() = VectorItem(id, VectorFor(id, kDim));
        std::lock_guard<std::mutex> lock(mu);
        sent.insert(id);
      }
      grpc::ClientContext ctx;
      pb::UpsertResponse resp;
      ASSERT_TRUE(rs.stub->Upsert(&ctx, req, &resp).ok());
      batches.fetch_add(1);
    }
  });
  while (batches.load() < 2)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (int round = 0; round < 4; ++round) {
    nlohmann::json doc = RunAttach(options.data_dir, qfile, 5);
    ASSERT_TRUE(doc.contains("hits"));
    EXPECT_EQ(doc["hits"].size(), 5u);
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& hit : doc["hits"]) {
      const std::string id = hit["id"];
      EXPECT_TRUE(sent.count(id)) << "attach returned an id never sent: " << id;
      // The score equals the full stored vector's: no torn or partial rows.
      EXPECT_NEAR(hit["score"].get<float>(), Dot(query, VectorFor(id, kDim)),
                  1e-5)
          << id;
    }
  }
  stop = true;
  writer.join();

  nlohmann::json attached = RunAttach(options.data_dir, qfile, 10);
  grpc::ClientContext ctx;
  pb::SearchRequest req;
  req.set_collection("live");
  req.set_k(10);
  req.mutable_query()->mutable_vector()->mutable_values()->Add(query.begin(),
                                                               query.end());
  pb::SearchResponse resp;
  ASSERT_TRUE(rs.stub->Search(&ctx, req, &resp).ok());
  ASSERT_EQ(attached["hits"].size(), static_cast<size_t>(resp.hits_size()));
  for (int i = 0; i < resp.hits_size(); ++i) {
    EXPECT_EQ(attached["hits"][i]["id"], resp.hits(i).id()) << i;
    EXPECT_NEAR(attached["hits"][i]["score"].get<float>(), resp.hits(i).score(),
                1e-6)
        << i;
  }
  std::printf("ingested %d batches while attaching\n", batches.load());
}

}  // namespace
}  // namespace zv::testing
