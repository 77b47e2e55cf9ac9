// Crash safety through the service: a client streams acknowledged Upserts to a
// `zerovec serve` process that is SIGKILLed at random points (22 times). After
// each restart every acknowledged id answers Get with its exact vector and
// document, the batch in flight at the kill is all-or-nothing, the live row
// count equals the number of distinct ids (no duplicate rows), and a search
// over all rows returns each id once. A co-located index::AttachedCollection
// stays attached through every crash: while the server is dead it keeps serving
// a consistent prefix, and after the restart Refresh() picks up the new writes
// without re-attaching.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "index/collection.h"
#include "tests/faults/fault_util.h"

namespace zv::faults {
namespace {

namespace pb = zerovec::v1;

constexpr uint32_t kDim = 8;
constexpr int kIds = 300;
constexpr int kKills = 22;
const char kName[] = "kill";

std::vector<float> VersionVector(int64_t version) {
  return VectorFor("v" + std::to_string(version), kDim);
}
std::string VersionText(const std::string& id, int64_t version) {
  return "doc " + id + " v" + std::to_string(version);
}

struct Batch {
  std::vector<std::pair<std::string, int64_t>> items;  // id, version
};

// The writer: unary Upserts until one fails; acknowledged batches go to
// `acked`.
class Writer {
 public:
  Writer(pb::ZeroVec::Stub* stub, int64_t* next_version, std::mt19937_64* rng)
      : stub_(stub), next_version_(next_version), rng_(rng) {}

  void Run(std::map<std::string, int64_t>* acked,
           std::optional<Batch>* in_flight, int* acked_batches) {
    while (true) {
      Batch b;
      std::set<std::string> used;
      const int n = 1 + (*rng_)() % 16;
      for (int j = 0; j < n; ++j) {
        std::string id = "id-" + std::to_string((*rng_)() % kIds);
        if (used.insert(id).second)
          b.items.emplace_back(id, (*next_version_)++);
      }
      pb::UpsertRequest req;
      req.set_collection(kName);
      for (const auto& [id, v] : b.items) {
        pb::Item* item = req.add_items();
        item->set_id(id);
        const auto vec = VersionVector(v);
        item->mutable_vector()->Add(vec.begin(), vec.end());
        item->set_text(VersionText(id, v));
        item->set_namespace_("ns" + std::to_string(v % 3));
      }
      pb::UpsertResponse resp;
      *in_flight = b;
      grpc::Status s =
          stub_->Upsert(Ctx(std::chrono::milliseconds(5000)).get(), req, &resp);
      if (!s.ok()) return;  // the server is gone: `b` stays in flight
      in_flight->reset();
      for (const auto& [id, v] : b.items) (*acked)[id] = v;
      ++*acked_batches;
    }
  }

 private:
  pb::ZeroVec::Stub* stub_;
  int64_t* next_version_;
  std::mt19937_64* rng_;
};

// Server versions of `ids` via Get (id -> version parsed from the text), with
// exact vector checks.
std::map<std::string, int64_t> ServerVersions(
    pb::ZeroVec::Stub* stub, const std::vector<std::string>& ids) {
  std::map<std::string, int64_t> out;
  pb::GetRequest req;
  req.set_collection(kName);
  for (const auto& id : ids) req.add_ids(id);
  req.set_include_vectors(true);
  pb::GetResponse resp;
  grpc::Status s = stub->Get(Ctx().get(), req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  for (const auto& item : resp.items()) {
    const size_t at = item.text().rfind(" v");
    EXPECT_NE(at, std::string::npos) << item.text();
    if (at == std::string::npos) continue;
    const int64_t v = std::stoll(item.text().substr(at + 2));
    EXPECT_EQ(item.text(), VersionText(item.id(), v));
    const auto want = VersionVector(v);
    EXPECT_EQ(std::vector<float>(item.vector().begin(), item.vector().end()),
              want)
        << item.id() << " v" << v
        << ": vector differs from the acknowledged one";
    EXPECT_TRUE(out.emplace(item.id(), v).second)
        << "Get returned " << item.id() << " twice";
  }
  return out;
}

// Every row of the collection by a k=1000 search: ids must be distinct.
std::vector<std::string> AllHitIds(pb::ZeroVec::Stub* stub) {
  pb::SearchRequest req;
  req.set_collection(kName);
  const auto q = VectorFor("any query", kDim);
  req.mutable_query()->mutable_vector()->mutable_values()->Add(q.begin(),
                                                               q.end());
  req.set_k(1000);
  pb::SearchResponse resp;
  grpc::Status s = stub->Search(Ctx().get(), req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  std::vector<std::string> ids;
  for (const auto& h : resp.hits()) ids.push_back(h.id());
  return ids;
}

// The attached reader's view is a consistent prefix: every hit is an id the
// client wrote, its score is the exact inner product with that version's
// vector.
void CheckReaderView(index::AttachedCollection& reader,
                     const std::map<std::string, std::set<int64_t>>& possible) {
  const auto q = VectorFor("reader query", kDim);
  index::SearchOptions so;
  so.k = 50;
  so.include_documents = true;
  auto hits = reader.Search(q, so);
  ASSERT_TRUE(hits.ok()) << hits.status();
  std::set<std::string> seen;
  for (const auto& h : hits->at(0)) {
    EXPECT_TRUE(seen.insert(h.id).second) << "reader sees " << h.id << " twice";
    auto it = possible.find(h.id);
    ASSERT_NE(it, possible.end()) << "reader sees unknown id " << h.id;
    const size_t at = h.record.text.rfind(" v");
    ASSERT_NE(at, std::string::npos) << h.record.text;
    const int64_t v = std::stoll(h.record.text.substr(at + 2));
    EXPECT_TRUE(it->second.count(v))
        << h.id << " v" << v << " was never written";
    const auto vec = VersionVector(v);
    float dot = 0;
    for (uint32_t i = 0; i < kDim; ++i) dot += vec[i] * q[i];
    EXPECT_NEAR(h.score, dot, 1e-4) << h.id << ": row and document disagree";
  }
}

// After restart `kill`: the in-flight batch is all-or-nothing (added to
// `acked` if it was applied), every acknowledged id holds its last version, and
// the live rows and a search over all rows match `acked` exactly.
void VerifyAfterRestart(
    pb::ZeroVec::Stub* stub, int kill, const std::optional<Batch>& in_flight,
    const std::map<std::string, std::set<int64_t>>& possible,
    std::map<std::string, int64_t>* acked, int* applied_in_flight) {
  std::vector<std::string> ids;
  for (const auto& [id, v] : possible) ids.push_back(id);
  const auto have = ServerVersions(stub, ids);
  if (in_flight) {
    int applied = 0;
    for (const auto& [id, v] : in_flight->items) {
      auto it = have.find(id);
      applied += it != have.end() && it->second == v;
    }
    EXPECT_TRUE(applied == 0 ||
                applied == static_cast<int>(in_flight->items.size()))
        << "kill " << kill << ": the in-flight batch is partly applied ("
        << applied << "/" << in_flight->items.size() << ")";
    if (applied > 0) {
      ++*applied_in_flight;
      for (const auto& [id, v] : in_flight->items) (*acked)[id] = v;
    }
  }
  for (const auto& [id, v] : *acked) {
    auto it = have.find(id);
    ASSERT_NE(it, have.end())
        << "kill " << kill << ": acknowledged id " << id << " lost";
    EXPECT_EQ(it->second, v)
        << "kill " << kill << ": " << id << " has an old version";
  }
  EXPECT_EQ(have.size(), acked->size())
      << "kill " << kill << ": unexpected ids";
  const pb::CollectionInfo info = Describe(stub, kName);
  EXPECT_EQ(info.live_rows(), acked->size())
      << "kill " << kill << ": duplicate or lost rows";
  const auto hit_ids = AllHitIds(stub);
  EXPECT_EQ(std::set<std::string>(hit_ids.begin(), hit_ids.end()).size(),
            hit_ids.size())
      << "kill " << kill << ": a search returns an id twice";
  EXPECT_EQ(hit_ids.size(), acked->size());
}

// One new write through the restarted server: the reader that stayed attached
// sees it after Refresh() without re-attaching.
void WriteMarkerAndCheckReader(
    pb::ZeroVec::Stub* stub, index::AttachedCollection& reader, int kill,
    int64_t* next_version, std::map<std::string, int64_t>* acked,
    std::map<std::string, std::set<int64_t>>* possible) {
  pb::UpsertRequest req;
  req.set_collection(kName);
  const std::string marker = "marker-" + std::to_string(kill);
  const int64_t mv = (*next_version)++;
  pb::Item* item = req.add_items();
  item->set_id(marker);
  const auto vec = VersionVector(mv);
  item->mutable_vector()->Add(vec.begin(), vec.end());
  item->set_text(VersionText(marker, mv));
  pb::UpsertResponse resp;
  ASSERT_TRUE(stub->Upsert(Ctx().get(), req, &resp).ok());
  (*acked)[marker] = mv;
  (*possible)[marker].insert(mv);
  Status refreshed = reader.Refresh();
  ASSERT_TRUE(refreshed.ok())
      << "kill " << kill
      << ": attached reader refresh after restart: " << refreshed;
  EXPECT_EQ(reader.Describe().live_rows, acked->size()) << "kill " << kill;
  index::SearchOptions opts;
  opts.k = 1;
  auto found = reader.Search(vec, opts);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->at(0).size(), 1u);
  EXPECT_EQ(found->at(0)[0].id, marker)
      << "kill " << kill << ": reader misses the new write";
  CheckReaderView(reader, *possible);
}

TEST(KillTest, AcknowledgedUpsertsSurviveSigkillAndReaderStaysAttached) {
  const auto dir = MakeTempDir("kill_test");
  const auto data = dir / "data";
  ServeOptions so;
  so.data_dir = data;
  std::string error;
  auto server = ServerProcess::Start(so, &error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_TRUE(CreateCollection(server->stub(), kName, kDim).ok());

  std::mt19937_64 rng(20261202);
  int64_t next_version = 1;
  std::map<std::string, int64_t> acked;
  // Every version each id may hold (for the reader, which may lag).
  std::map<std::string, std::set<int64_t>> possible;
  std::unique_ptr<index::AttachedCollection> reader;
  int total_batches = 0, applied_in_flight = 0;

  for (int kill = 0; kill <= kKills; ++kill) {
    // 1. Write until killed (the last round ends with a clean stop instead).
    std::optional<Batch> in_flight;
    int batches = 0;
    std::thread writer([&] {
      Writer(server->stub(), &next_version, &rng)
          .Run(&acked, &in_flight, &batches);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + rng() % 300));
    if (kill < kKills) {
      server->Kill();
    } else {
      server->Stop();
    }
    writer.join();
    total_batches += batches;
    for (const auto& [id, v] : acked) possible[id].insert(v);
    if (in_flight) {
      for (const auto& [id, v] : in_flight->items) possible[id].insert(v);
    }

    // 2. While the server is dead, an attached reader still answers from a
    //    consistent prefix.
    if (!reader) {
      auto attached = index::AttachedCollection::Attach(data, kName);
      ASSERT_TRUE(attached.ok()) << attached.status();
      reader = std::move(attached).value();
    }
    ASSERT_TRUE(reader->Refresh().ok());
    CheckReaderView(*reader, possible);

    // 3. Restart; resolve the in-flight batch (all-or-nothing); check every id.
    server = ServerProcess::Start(so, &error);
    ASSERT_NE(server, nullptr) << "restart " << kill << ": " << error;
    ASSERT_NO_FATAL_FAILURE(VerifyAfterRestart(
        server->stub(), kill, in_flight, possible, &acked, &applied_in_flight));

    // 4. The reader that stayed attached sees the restarted server's writes.
    ASSERT_NO_FATAL_FAILURE(WriteMarkerAndCheckReader(
        server->stub(), *reader, kill, &next_version, &acked, &possible));
    if (::testing::Test::HasFatalFailure()) return;
  }
  RecordProperty("acknowledged_batches", total_batches);
  RecordProperty("in_flight_batches_applied", applied_in_flight);
  EXPECT_GT(total_batches, kKills)
      << "too few writes between kills to mean anything";
  std::cerr << "kill test: " << kKills << " kills, " << total_batches
            << " acknowledged batches, " << acked.size() << " ids, "
            << applied_in_flight << " in-flight batches found applied\n";
}

}  // namespace
}  // namespace zv::faults
