// Security checks over gRPC against a real `zerovec serve`: collection names
// with path separators, "..", NUL bytes or over-long are INVALID_ARGUMENT on
// every RPC that takes one (and create nothing on disk); another uid can
// neither attach a collection nor read any file of the data directory (skipped
// where the test cannot switch uid).
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "index/collection.h"
#include "tests/faults/fault_util.h"

namespace zv::faults {
namespace {

namespace fs = std::filesystem;
namespace pb = zerovec::v1;
constexpr uint32_t kDim = 4;

std::vector<std::string> BadNames() {
  return {"a/b",
          "/etc",
          "..",
          "../x",
          "x/..",
          ".",
          "a..b",
          "..\\x",
          std::string("x\0y", 3),
          std::string(1, '\0'),
          "",
          std::string(65, 'a'),
          std::string(4096, 'b'),
          "a b",
          "-x",
          "\xc3\xa9t\xc3\xa9",
          "x\n",
          "%2e%2e%2f"};
}

// Every RPC that takes a collection name answers INVALID_ARGUMENT for `name`.
void ExpectEveryRpcRejects(zerovec::v1::ZeroVec::Stub* stub,
                           const std::string& name) {
  SCOPED_TRACE("name \"" + name.substr(0, 40) + "\" (" +
               std::to_string(name.size()) + " bytes)");
  auto expect_invalid = [&](const grpc::Status& s, const char* rpc) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << rpc << ": " << s.error_code() << " " << s.error_message();
  };
  {
    pb::CreateCollectionRequest r;
    r.set_name(name);
    r.set_dim(kDim);
    pb::CreateCollectionResponse resp;
    expect_invalid(stub->CreateCollection(Ctx().get(), r, &resp),
                   "CreateCollection");
  }
  {
    pb::DropCollectionRequest r;
    r.set_name(name);
    pb::DropCollectionResponse resp;
    expect_invalid(stub->DropCollection(Ctx().get(), r, &resp),
                   "DropCollection");
  }
  {
    grpc::Status s;
    Describe(stub, name, &s);
    expect_invalid(s, "DescribeCollection");
  }
  const auto v = VectorFor("q", kDim);
  {
    pb::UpsertRequest r;
    r.set_collection(name);
    pb::Item* item = r.add_items();
    item->set_id("x");
    item->mutable_vector()->Add(v.begin(), v.end());
    pb::UpsertResponse resp;
    expect_invalid(stub->Upsert(Ctx().get(), r, &resp), "Upsert");
    auto ctx = Ctx();
    auto writer = stub->UpsertStream(ctx.get(), &resp);
    writer->Write(r);
    writer->WritesDone();
    expect_invalid(writer->Finish(), "UpsertStream");
  }
  {
    pb::SearchRequest r;
    r.set_collection(name);
    r.mutable_query()->mutable_vector()->mutable_values()->Add(v.begin(),
                                                               v.end());
    pb::SearchResponse resp;
    expect_invalid(stub->Search(Ctx().get(), r, &resp), "Search");
    pb::SearchBatchRequest b;
    b.set_collection(name);
    *b.add_queries() = r.query();
    pb::SearchBatchResponse bresp;
    expect_invalid(stub->SearchBatch(Ctx().get(), b, &bresp), "SearchBatch");
  }
  {
    pb::GetRequest r;
    r.set_collection(name);
    r.add_ids("x");
    pb::GetResponse resp;
    expect_invalid(stub->Get(Ctx().get(), r, &resp), "Get");
    pb::DeleteRequest d;
    d.set_collection(name);
    d.add_ids("x");
    pb::DeleteResponse dresp;
    expect_invalid(stub->Delete(Ctx().get(), d, &dresp), "Delete");
  }
  if (!name.empty()) {  // an empty collection means "all" for Stats
    pb::StatsRequest r;
    r.set_collection(name);
    pb::StatsResponse resp;
    expect_invalid(stub->Stats(Ctx().get(), r, &resp), "Stats");
  }
}

TEST(SecurityTest, TraversalNamesAreInvalidArgumentOnEveryRpc) {
  const fs::path root = MakeTempDir("security_names");
  ServeOptions so;
  so.data_dir = root / "data";
  std::string error;
  auto server = ServerProcess::Start(so, &error);
  ASSERT_NE(server, nullptr) << error;
  auto* stub = server->stub();
  ASSERT_TRUE(CreateCollection(stub, "ok", kDim).ok());

  for (const std::string& name : BadNames()) {
    ExpectEveryRpcRejects(stub, name);
  }
  // Nothing was created outside the data directory, nor inside beyond "ok".
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(root))
    entries.push_back(e.path().filename());
  for (const auto& e : entries) {
    EXPECT_TRUE(e == "data" || e.find(".serve") != std::string::npos)
        << "stray file " << e;
  }
  for (const auto& e : fs::directory_iterator(so.data_dir / "collections")) {
    EXPECT_EQ(e.path().filename(), "ok");
  }
  pb::ListCollectionsRequest lr;
  pb::ListCollectionsResponse lresp;
  ASSERT_TRUE(stub->ListCollections(Ctx().get(), lr, &lresp).ok());
  ASSERT_EQ(lresp.collections_size(), 1);
  EXPECT_EQ(lresp.collections(0).name(), "ok");
}

// Runs `fn` in a child that dropped to uid/gid 65534; its exit code, or -1 when
// the uid cannot be switched here.
// Runs fn in a child as uid/gid 65534 with `groups` as its supplementary
// groups; -1 where the uid cannot be switched.
int RunAsNobody(const std::function<int()>& fn,
                const std::vector<gid_t>& groups = {}) {
  if (::geteuid() != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(groups.size(), groups.data()) != 0 ||
        ::setgid(65534) != 0 || ::setuid(65534) != 0)
      ::_exit(100);
    ::_exit(fn());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 100) return -1;
  return WEXITSTATUS(status);
}

// A fresh folder under /tmp, 0755 (searchable by everyone, as a data dir's
// parent often is, so only the data dir's own permissions can stop another
// uid), removed at scope exit.
struct PublicTmpDir {
  explicit PublicTmpDir(const std::string& prefix)
      : path(fs::path("/tmp") / (prefix + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
    ::chmod(path.c_str(), 0755);
  }
  ~PublicTmpDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

TEST(SecurityTest, AnotherUidCannotAttachOrReadTheDataDir) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another uid";
  // Under /tmp (searchable by everyone, as a data dir often is) so that only
  // the data dir's own permissions can stop another uid.
  const PublicTmpDir tmp("zv-security-");
  const fs::path& root = tmp.path;
  ServeOptions so;
  so.data_dir = root / "data";
  std::string error;
  auto server = ServerProcess::Start(so, &error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_TRUE(CreateCollection(server->stub(), "secret", kDim).ok());
  pb::UpsertRequest up;
  up.set_collection("secret");
  pb::Item* item = up.add_items();
  item->set_id("s1");
  const auto v = VectorFor("s1", kDim);
  item->mutable_vector()->Add(v.begin(), v.end());
  item->set_text("the secret document text");
  pb::UpsertResponse resp;
  ASSERT_TRUE(server->stub()->Upsert(Ctx().get(), up, &resp).ok());

  const int attach = RunAsNobody([&] {
    auto a = index::AttachedCollection::Attach(so.data_dir, "secret");
    if (a.ok()) return 0;
    return a.status().code() == StatusCode::kPermissionDenied ? 1 : 2;
  });
  if (attach == -1) GTEST_SKIP() << "cannot switch uid here (user namespace)";
  EXPECT_NE(attach, 0) << "another uid attached the collection";

  // No file under the data dir may be readable by another uid (RocksDB's WAL
  // and SSTs hold the documents).
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(so.data_dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    const int readable = RunAsNobody([&] {
      const int fd = ::open(f.c_str(), O_RDONLY);
      return fd >= 0 ? 0 : 1;
    });
    EXPECT_EQ(readable, 1) << "another uid can read "
                           << f.lexically_relative(so.data_dir) << " (mode "
                           << std::oct
                           << static_cast<int>(fs::status(f).permissions())
                           << ")";
  }
}

// --group: a reader running as another uid in the group attaches while the
// server writes (new WAL records, new collections), one outside it cannot.
TEST(SecurityTest, GroupMemberAttachesWhileServing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another uid";
  struct group* g = ::getgrnam("users");
  if (g == nullptr) g = ::getgrnam("nogroup");
  if (g == nullptr) GTEST_SKIP() << "no users/nogroup group to share with";
  const std::string group = g->gr_name;
  const gid_t gid = g->gr_gid;
  const PublicTmpDir tmp("zv-security-group-");
  const fs::path& root = tmp.path;
  ServeOptions so;
  so.data_dir = root / "data";
  so.extra_flags = {"--group", group};
  std::string error;
  auto server = ServerProcess::Start(so, &error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_TRUE(CreateCollection(server->stub(), "shared", kDim).ok());
  auto upsert = [&](const std::string& id) {
    pb::UpsertRequest up;
    up.set_collection("shared");
    pb::Item* item = up.add_items();
    item->set_id(id);
    const auto v = VectorFor(id, kDim);
    item->mutable_vector()->Add(v.begin(), v.end());
    item->set_text("shared document " + id);
    pb::UpsertResponse resp;
    return server->stub()->Upsert(Ctx().get(), up, &resp).ok();
  };
  // 0: attached and `id` is the top hit for its own vector.
  auto attach_finds = [&](const std::string& id) {
    auto a = index::AttachedCollection::Attach(so.data_dir, "shared");
    if (!a.ok()) {
      return a.status().code() == StatusCode::kPermissionDenied ? 1 : 2;
    }
    index::SearchOptions options;
    options.k = 1;
    const auto v = VectorFor(id, kDim);
    auto hits = (*a)->Search(v, options);
    return hits.ok() && !(*hits)[0].empty() && (*hits)[0][0].id == id ? 0 : 3;
  };
  ASSERT_TRUE(upsert("s1"));
  const int first = RunAsNobody([&] { return attach_finds("s1"); }, {gid});
  if (first == -1) GTEST_SKIP() << "cannot switch uid here (user namespace)";
  EXPECT_EQ(first, 0) << "a member of " << group << " could not attach";
  ASSERT_TRUE(upsert("s2"));
  EXPECT_EQ(RunAsNobody([&] { return attach_finds("s2"); }, {gid}), 0)
      << "a member does not see a row written after the first attach";
  EXPECT_EQ(RunAsNobody([&] { return attach_finds("s1"); }), 1)
      << "outside the group, attach must be PERMISSION_DENIED";

  for (const auto& e : fs::recursive_directory_iterator(so.data_dir)) {
    struct stat st {};
    ASSERT_EQ(::lstat(e.path().c_str(), &st), 0);
    const auto rel = e.path().lexically_relative(so.data_dir);
    EXPECT_EQ(st.st_gid, gid) << rel;
    if (S_ISDIR(st.st_mode)) {
      EXPECT_EQ(st.st_mode & 07777, 02750u) << rel;
    } else {
      EXPECT_EQ(st.st_mode & 07777, 0640u) << rel;
    }
  }
}

}  // namespace
}  // namespace zv::faults
