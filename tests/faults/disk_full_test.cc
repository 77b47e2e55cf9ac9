// Disk full during ingest. Two ways to run out of space:
//  - RLIMIT_FSIZE on the server process (always runs): the collection's extents
//    are larger than the limit, so reserving the next extent (posix_fallocate)
//    fails with EFBIG once the first one is full;
//  - a small tmpfs mounted under the test dir (runs where the test may mount,
//    skipped otherwise): ENOSPC from the segment or the meta store.
// Either way the Upsert that needs the space answers RESOURCE_EXHAUSTED,
// nothing acknowledged is lost, the server keeps answering reads, and once
// space returns (restart without the limit / a larger mount) writes succeed
// again.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "index/collection.h"
#include "tests/faults/fault_util.h"

namespace zv::faults {
namespace {

namespace fs = std::filesystem;
namespace pb = zerovec::v1;
const char kName[] = "full";

// Creates the collection in-process (the API has no rows_per_extent).
void CreateSmallExtentCollection(const fs::path& data, uint32_t dim,
                                 uint64_t rows_per_extent) {
  auto db = index::Database::Open(data);
  ASSERT_TRUE(db.ok()) << db.status();
  index::CollectionOptions o;
  o.dim = dim;
  o.rows_per_extent = rows_per_extent;
  ASSERT_TRUE((*db)->CreateCollection(kName, o).ok());
}

pb::UpsertRequest Batch(int first, int n, uint32_t dim) {
  pb::UpsertRequest req;
  req.set_collection(kName);
  for (int i = first; i < first + n; ++i) {
    pb::Item* item = req.add_items();
    item->set_id("id-" + std::to_string(i));
    const auto v = VectorFor(item->id(), dim);
    item->mutable_vector()->Add(v.begin(), v.end());
    item->set_text("document " + std::to_string(i));
  }
  return req;
}

// Upserts batches until one fails; returns how many items were acknowledged and
// the failing status.
int IngestUntilFull(pb::ZeroVec::Stub* stub, uint32_t dim, int batch,
                    int max_items, grpc::Status* failure) {
  int acked = 0;
  while (acked < max_items) {
    pb::UpsertResponse resp;
    grpc::Status s = stub->Upsert(Ctx().get(), Batch(acked, batch, dim), &resp);
    if (!s.ok()) {
      *failure = s;
      return acked;
    }
    acked += batch;
  }
  return acked;
}

// Every acknowledged id is there with its document and exact vector.
void ExpectAllPresent(pb::ZeroVec::Stub* stub, int acked, uint32_t dim) {
  for (int first = 0; first < acked; first += 500) {
    pb::GetRequest req;
    req.set_collection(kName);
    req.set_include_vectors(true);
    for (int i = first; i < std::min(acked, first + 500); ++i)
      req.add_ids("id-" + std::to_string(i));
    pb::GetResponse resp;
    grpc::Status s = stub->Get(Ctx().get(), req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.items_size(), req.ids_size()) << "acknowledged items lost";
    for (const auto& item : resp.items()) {
      EXPECT_EQ(item.text(), "document " + item.id().substr(3));
      EXPECT_EQ(std::vector<float>(item.vector().begin(), item.vector().end()),
                VectorFor(item.id(), dim));
    }
  }
  EXPECT_EQ(Describe(stub, kName).live_rows(), static_cast<uint64_t>(acked));
}

TEST(DiskFullTest, FileSizeLimitIsResourceExhaustedAndRecovers) {
  constexpr uint32_t kDim =
      1024;  // a row is 4 KiB: extents dwarf the meta files
  constexpr uint64_t kRowsPerExtent = 256;  // ~1 MiB an extent at the cap
  // Extent 0 holds 64 rows (256 KiB, the default first extent); extent 1, 128
  // rows, is just over the limit, which is above any meta file.
  constexpr uint64_t kFirstExtentRows = 64;
  constexpr uint64_t kLimit = 512 << 10;
  const fs::path data = MakeTempDir("disk_full_rlimit") / "data";
  CreateSmallExtentCollection(data, kDim, kRowsPerExtent);
  if (HasFatalFailure()) return;

  ServeOptions so;
  so.data_dir = data;
  so.file_size_limit = kLimit;
  std::string error;
  auto server = ServerProcess::Start(so, &error);
  ASSERT_NE(server, nullptr) << error;
  grpc::Status failure;
  const int acked = IngestUntilFull(server->stub(), kDim, 32, 4096, &failure);
  EXPECT_EQ(acked, static_cast<int>(kFirstExtentRows))
      << "the first extent holds 64 rows";
  EXPECT_EQ(failure.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << "EFBIG from posix_fallocate must be RESOURCE_EXHAUSTED, got "
      << failure.error_code() << ": " << failure.error_message();
  EXPECT_NE(failure.error_message().find("vectors.00001"), std::string::npos)
      << "the error names the extent it could not reserve: "
      << failure.error_message();
  ASSERT_TRUE(server->Running()) << "the server died: " << server->Log();
  // Still serving reads, nothing acknowledged lost; a second try fails the
  // same.
  ExpectAllPresent(server->stub(), acked, kDim);
  pb::UpsertResponse resp;
  EXPECT_FALSE(
      server->stub()->Upsert(Ctx().get(), Batch(acked, 1, kDim), &resp).ok());
  server->Stop();

  // Space returns: restart without the limit.
  so.file_size_limit.reset();
  server = ServerProcess::Start(so, &error);
  ASSERT_NE(server, nullptr) << error;
  ExpectAllPresent(server->stub(), acked, kDim);
  grpc::Status s =
      server->stub()->Upsert(Ctx().get(), Batch(acked, 64, kDim), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectAllPresent(server->stub(), acked + 64, kDim);
}

TEST(DiskFullTest, SmallTmpfsIsResourceExhaustedAndRecovers) {
  const fs::path mnt = MakeTempDir("disk_full_tmpfs");
  if (::geteuid() != 0 ||
      ::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=2m,mode=0700") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno)
                 << ")";
  }
  struct Unmount {
    fs::path p;
    ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
  } unmount{mnt};
  constexpr uint32_t kDim = 256;
  const fs::path data = mnt / "data";
  CreateSmallExtentCollection(data, kDim, 128);  // ~130 KiB extents
  if (HasFatalFailure()) return;

  ServeOptions so;
  so.data_dir = data;
  std::string error;
  auto server = ServerProcess::Start(so, &error);
  ASSERT_NE(server, nullptr) << error;
  grpc::Status failure;
  const int acked = IngestUntilFull(server->stub(), kDim, 16, 100000, &failure);
  EXPECT_GT(acked, 0);
  EXPECT_EQ(failure.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << failure.error_code() << ": " << failure.error_message();
  ASSERT_TRUE(server->Running()) << "the server died: " << server->Log();
  ExpectAllPresent(server->stub(), acked, kDim);
  server->Stop();

  ASSERT_EQ(
      ::mount("tmpfs", mnt.c_str(), "tmpfs", MS_REMOUNT, "size=64m,mode=0700"),
      0)
      << std::strerror(errno);
  server = ServerProcess::Start(so, &error);
  ASSERT_NE(server, nullptr) << "restart after space returned: " << error;
  ExpectAllPresent(server->stub(), acked, kDim);
  pb::UpsertResponse resp;
  grpc::Status s =
      server->stub()->Upsert(Ctx().get(), Batch(acked, 64, kDim), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectAllPresent(server->stub(), acked + 64, kDim);
  server->Stop();
}

}  // namespace
}  // namespace zv::faults
