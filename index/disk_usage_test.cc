// Small collections stay small (issue #12): an empty collection, and one with
// a row, costs well under 1 MiB of allocated disk (segment + RocksDB), while
// a collection grown across several geometrically sized extents still
// searches, reopens and attaches exactly.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "index/collection.h"
#include "index/test_util.h"

namespace zv::index {
namespace {

namespace fs = std::filesystem;
using testing::IdOf;
using testing::MakeTempDir;
using testing::RandomVectors;

constexpr uint64_t kMiB = 1024 * 1024;

// Disk blocks actually allocated under `dir` (st_blocks, so preallocation
// and fallocate count; sparse holes do not), with the largest file named.
uint64_t AllocatedBytes(const fs::path& dir, std::string* largest = nullptr) {
  uint64_t total = 0, max = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const uint64_t bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    total += bytes;
    if (largest && bytes >= max) {
      max = bytes;
      *largest = e.path().string() + " " + std::to_string(bytes);
    }
  }
  std::printf("allocated under %s: %llu bytes\n", dir.filename().c_str(),
              static_cast<unsigned long long>(total));
  return total;
}

std::vector<Record> Records(size_t first, size_t n) {
  std::vector<Record> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].id = IdOf(first + i);
    out[i].text = "document " + std::to_string(first + i);
  }
  return out;
}

size_t ExtentFiles(const fs::path& segment_dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(segment_dir)) {
    n += e.path().filename().string().rfind("vectors.", 0) == 0;
  }
  return n;
}

TEST(DiskUsageTest, EmptyAndOneRowCollectionsTakeUnderOneMiB) {
  const fs::path data = MakeTempDir("disk_usage");
  std::string largest;
  {
    auto db = Database::Open(data);
    ASSERT_TRUE(db.ok()) << db.status();
    CollectionOptions o;
    o.dim = 256;  // the bundled model's
    o.index.descriptor = "HNSW32";
    auto c = (*db)->CreateCollection("agent-1", o);
    ASSERT_TRUE(c.ok()) << c.status();
    // While open (preallocations live), then after one written row (the WAL).
    EXPECT_LT(AllocatedBytes(data, &largest), kMiB) << "largest: " << largest;
    const auto v = RandomVectors(1, 256, 1, true);
    ASSERT_TRUE((*c)->Upsert(Records(0, 1), v).ok());
    EXPECT_LT(AllocatedBytes(data, &largest), kMiB) << "largest: " << largest;
    o.dim = 384;
    ASSERT_TRUE((*db)->CreateCollection("agent-2", o).ok());
    EXPECT_LT(AllocatedBytes(data, &largest), kMiB) << "largest: " << largest;
  }
  EXPECT_LT(AllocatedBytes(data, &largest), kMiB) << "largest: " << largest;
  for (int reopen = 0; reopen < 5; ++reopen) {  // logs rotate, bounded
    auto db = Database::Open(data);
    ASSERT_TRUE(db.ok()) << db.status();
    auto c = (*db)->GetCollection("agent-1");
    ASSERT_TRUE(c.ok());
    EXPECT_EQ((*c)->Describe().rows, 1u);
  }
  EXPECT_LT(AllocatedBytes(data, &largest), kMiB) << "largest: " << largest;
}

TEST(DiskUsageTest, GrownCollectionSearchesReopensAndAttaches) {
  constexpr uint32_t kDim = 256;  // first extent 256 rows, then 512, 1024, ...
  constexpr size_t kRows = 3000;  // 4 extents: 256 + 512 + 1024 + 2048
  const fs::path data = MakeTempDir("disk_usage_grown");
  const auto vectors = RandomVectors(kRows, kDim, 7, true);
  auto expect_exact = [&](auto& searchable, const std::string& who) {
    for (size_t q : {size_t{0}, size_t{255}, size_t{256}, size_t{767},
                     size_t{768}, size_t{1791}, size_t{1792}, kRows - 1}) {
      SearchOptions so;
      so.k = 1;
      auto hits = searchable.Search(
          std::span<const float>(&vectors[q * kDim], kDim), so);
      ASSERT_TRUE(hits.ok()) << who << ": " << hits.status();
      ASSERT_EQ((*hits)[0].size(), 1u) << who;
      EXPECT_EQ((*hits)[0][0].id, IdOf(q)) << who << " query " << q;
    }
  };
  fs::path segment_dir;
  for (const char* index : {"Flat", "HNSW32"}) {
    SCOPED_TRACE(index);
    const std::string name = std::string("grown-") + index;
    {
      auto db = Database::Open(data);
      ASSERT_TRUE(db.ok()) << db.status();
      CollectionOptions o;
      o.dim = kDim;
      o.index.descriptor = index;
      auto c = (*db)->CreateCollection(name, o);
      ASSERT_TRUE(c.ok()) << c.status();
      for (size_t first = 0; first < kRows; first += 700) {  // odd batches
        const size_t n = std::min<size_t>(700, kRows - first);
        ASSERT_TRUE((*c)->Upsert(Records(first, n),
                                 std::span<const float>(&vectors[first * kDim],
                                                        n * kDim))
                        .ok());
      }
      segment_dir = (*c)->Describe().segment_dir;
      EXPECT_EQ(ExtentFiles(segment_dir), 4u);
      expect_exact(**c, "writer");
    }
    auto db = Database::Open(data);  // reopen
    ASSERT_TRUE(db.ok()) << db.status();
    auto c = (*db)->GetCollection(name);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ((*c)->Describe().rows, kRows);
    expect_exact(**c, "reopened");
    auto attached = AttachedCollection::Attach(data, name);
    ASSERT_TRUE(attached.ok()) << attached.status();
    EXPECT_EQ((*attached)->Describe().rows, kRows);
    expect_exact(**attached, "attached");
  }
}

}  // namespace
}  // namespace zv::index
