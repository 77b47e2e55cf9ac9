// Corrupted files on open: a data directory with a truncated extent, flipped
// header bytes, a missing extent, or missing / garbled RocksDB files (CURRENT,
// MANIFEST, SST). `zerovec serve` must refuse to start with an error that names
// the damaged file; it must never crash, never start with silently wrong
// answers, and never delete the collection's files while failing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <functional>

#include "index/collection.h"
#include "tests/faults/fault_util.h"

namespace zv::faults {
namespace {

namespace fs = std::filesystem;
constexpr uint32_t kDim = 8;
constexpr int kRows = 100;  // two extents of 64 rows

// A valid data dir: collection "c" with 100 rows, opened twice so RocksDB has
// flushed an SST.
const fs::path& Golden() {
  static const fs::path dir = [] {
    const fs::path d = MakeTempDir("corrupt_golden") / "data";
    {
      auto db = index::Database::Open(d);
      EXPECT_TRUE(db.ok()) << db.status();
      index::CollectionOptions o;
      o.dim = kDim;
      o.rows_per_extent = 64;
      auto c = (*db)->CreateCollection("c", o);
      EXPECT_TRUE(c.ok()) << c.status();
      std::vector<index::Record> recs(kRows);
      std::vector<float> vecs;
      for (int i = 0; i < kRows; ++i) {
        recs[i].id = "id-" + std::to_string(i);
        recs[i].text = "text " + std::to_string(i);
        const auto v = VectorFor(recs[i].id, kDim);
        vecs.insert(vecs.end(), v.begin(), v.end());
      }
      EXPECT_TRUE((*c)->Upsert(recs, vecs).ok());
    }
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(index::Database::Open(d).ok());
    return d;
  }();
  return dir;
}

fs::path Copy(const std::string& name) {
  const fs::path dst = MakeTempDir("corrupt_" + name) / "data";
  fs::copy(Golden(), dst, fs::copy_options::recursive);
  return dst;
}

fs::path Find(const fs::path& root,
              const std::function<bool(const fs::path&)>& pred) {
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && pred(e.path())) return e.path();
  }
  return {};
}

fs::path Extent(const fs::path& data, int n) {
  char name[32];
  snprintf(name, sizeof(name), "vectors.%05d", n);
  return Find(data, [&](const fs::path& p) { return p.filename() == name; });
}

void FlipByte(const fs::path& file, size_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

size_t CountFiles(const fs::path& root) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(root))
    n += e.is_regular_file();
  return n;
}

// Serves `data`, expecting a start failure whose message names `file`.
void ExpectCleanFailureNaming(const fs::path& data, const std::string& file) {
  const size_t segment_files = CountFiles(data / "collections");
  bool started = false;
  const std::string log = ServeExpectingFailure(data, &started);
  EXPECT_FALSE(started) << "the server started on a corrupt data dir (" << file
                        << ")";
  EXPECT_EQ(log.find("AddressSanitizer"), std::string::npos) << log;
  EXPECT_EQ(log.find("runtime error"), std::string::npos) << log;
  EXPECT_NE(log.find("status 256"), std::string::npos)
      << "expected a clean exit(1), not a signal: " << log;
  EXPECT_NE(log.find(file), std::string::npos)
      << "the error should name " << file << ": " << log;
  EXPECT_EQ(CountFiles(data / "collections"), segment_files)
      << "a failed start must not delete collection files";
}

TEST(CorruptOpenTest, GoldenCopyServes) {
  const fs::path data = Copy("golden");
  ServeOptions so;
  so.data_dir = data;
  std::string error;
  auto server = ServerProcess::Start(so, &error);
  ASSERT_NE(server, nullptr) << error;
  EXPECT_EQ(Describe(server->stub(), "c").live_rows(),
            static_cast<uint64_t>(kRows));
}

TEST(CorruptOpenTest, TruncatedExtent) {
  const fs::path data = Copy("truncated");
  const fs::path ext = Extent(data, 1);
  ASSERT_FALSE(ext.empty());
  fs::resize_file(ext, fs::file_size(ext) / 2);
  ExpectCleanFailureNaming(data, "vectors.00001");
}

TEST(CorruptOpenTest, FlippedHeaderBytes) {
  for (size_t offset :
       {0, 12, 16, 20, 32, 56}) {  // magic, dim, stride, rows, checksum
    SCOPED_TRACE("offset " + std::to_string(offset));
    const fs::path data = Copy("flipped" + std::to_string(offset));
    FlipByte(Extent(data, 0), offset);
    ExpectCleanFailureNaming(data, "vectors.00000");
  }
}

TEST(CorruptOpenTest, FlippedHeaderOfSecondExtent) {
  const fs::path data = Copy("flipped_ext1");
  FlipByte(Extent(data, 1), 16);
  ExpectCleanFailureNaming(data, "vectors.00001");
}

TEST(CorruptOpenTest, MissingExtent) {
  const fs::path data = Copy("missing_extent");
  fs::remove(Extent(data, 1));
  ExpectCleanFailureNaming(data, "vectors.00001");
}

TEST(CorruptOpenTest, MissingRocksDbCurrent) {
  const fs::path data = Copy("missing_current");
  ASSERT_TRUE(fs::remove(data / "meta" / "CURRENT"));
  // The store refuses to start a fresh, empty catalog over the old files, and
  // says which file is gone.
  ExpectCleanFailureNaming(data, (data / "meta" / "CURRENT").string());
}

// A kill -9 inside the very first open (RocksDB writes CURRENT last when it
// creates a store) leaves LOCK, LOG, IDENTITY and the first MANIFEST without
// CURRENT. Nothing was ever written, so the next open starts afresh; the
// same directory with a table file in it is damage and is refused.
TEST(CorruptOpenTest, InterruptedFirstOpenStartsAfresh) {
  const fs::path data = MakeTempDir("corrupt_first_open") / "data";
  const fs::path meta = data / "meta";
  fs::create_directories(meta);
  for (const char* name : {"LOCK", "LOG", "IDENTITY", "000001.dbtmp"})
    std::ofstream(meta / name) << "x";
  std::ofstream(meta / "MANIFEST-000001") << "partial manifest";
  {
    auto db = index::Database::Open(data);
    ASSERT_TRUE(db.ok()) << db.status();
    EXPECT_TRUE((*db)->ListCollections().empty());
  }
  EXPECT_TRUE(fs::exists(meta / "CURRENT"));

  const fs::path damaged = MakeTempDir("corrupt_first_open_sst") / "data";
  fs::create_directories(damaged / "meta");
  for (const char* name : {"LOCK", "LOG", "IDENTITY", "000007.sst"})
    std::ofstream(damaged / "meta" / name) << "x";
  auto db = index::Database::Open(damaged);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kDataLoss) << db.status();
  EXPECT_TRUE(fs::exists(damaged / "meta" / "000007.sst"));
}

TEST(CorruptOpenTest, GarbledRocksDbCurrent) {
  const fs::path data = Copy("garbled_current");
  std::ofstream(data / "meta" / "CURRENT", std::ios::trunc)
      << "MANIFEST-999999\n";
  ExpectCleanFailureNaming(data, "MANIFEST-999999");
}

TEST(CorruptOpenTest, MissingRocksDbManifest) {
  const fs::path data = Copy("missing_manifest");
  const fs::path manifest = Find(data / "meta", [](const fs::path& p) {
    return p.filename().string().rfind("MANIFEST-", 0) == 0;
  });
  ASSERT_FALSE(manifest.empty());
  std::string current;
  std::ifstream(data / "meta" / "CURRENT") >> current;
  fs::remove(data / "meta" / current);
  ExpectCleanFailureNaming(data, current);
}

TEST(CorruptOpenTest, MissingRocksDbSst) {
  const fs::path data = Copy("missing_sst");
  const fs::path sst = Find(
      data / "meta", [](const fs::path& p) { return p.extension() == ".sst"; });
  if (sst.empty()) GTEST_SKIP() << "RocksDB flushed no SST here";
  fs::remove(sst);
  // RocksDB names the table by number (it also tries the .ldb spelling).
  ExpectCleanFailureNaming(data, sst.stem().string());
}

// collections/<name>/CURRENT only mirrors the catalog's generation: a missing
// one is rewritten at open and the collection serves exactly as before.
TEST(CorruptOpenTest, MissingCollectionCurrentIsRebuiltFromCatalog) {
  const fs::path data = Copy("missing_coll_current");
  const fs::path cur = data / "collections" / "c" / "CURRENT";
  if (!fs::exists(cur)) GTEST_SKIP() << "no collection CURRENT in this layout";
  fs::remove(cur);
  ServeOptions so;
  so.data_dir = data;
  std::string error;
  auto server = ServerProcess::Start(so, &error);
  ASSERT_NE(server, nullptr) << error;
  EXPECT_TRUE(fs::exists(cur));
  EXPECT_EQ(Describe(server->stub(), "c").live_rows(),
            static_cast<uint64_t>(kRows));
  zerovec::v1::SearchRequest req;
  req.set_collection("c");
  const auto v = VectorFor("id-77", kDim);
  req.mutable_query()->mutable_vector()->mutable_values()->Add(v.begin(),
                                                               v.end());
  req.set_k(1);
  zerovec::v1::SearchResponse resp;
  ASSERT_TRUE(server->stub()->Search(Ctx().get(), req, &resp).ok());
  ASSERT_EQ(resp.hits_size(), 1);
  EXPECT_EQ(resp.hits(0).id(), "id-77");
}

}  // namespace
}  // namespace zv::faults
