#include "shm/segment.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "shm/segment_test_util.h"

extern char** environ;

namespace zv::shm {
namespace {

namespace fs = std::filesystem;
using testing::CheckRow;
using testing::FillRow;
using testing::RowId;

fs::path FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(tmp ? tmp : "/tmp") / ("segment_test_" + name);
  fs::remove_all(dir);
  return dir;
}

std::unique_ptr<Writer> MakeWriter(const fs::path& dir, uint32_t dim,
                                   uint64_t rpe) {
  SegmentOptions options;
  options.dim = dim;
  options.rows_per_extent = rpe;
  auto writer = Writer::Create(dir, options);
  EXPECT_TRUE(writer.ok()) << writer.status();
  return std::move(writer).value();
}

void AppendRows(Writer& w, uint64_t n) {
  ASSERT_TRUE(w.Reserve(n).ok());
  const uint64_t first = w.committed();
  for (uint64_t r = first; r < first + n; ++r) FillRow(w, r);
  ASSERT_TRUE(w.Commit(first + n).ok());
}

// Path of the helper binary in Bazel's runfiles (cwd is the runfiles workspace
// root).
std::string HelperPath() { return "shm/segment_test_helper"; }

// A child process with its stdout on a pipe.
struct Child {
  pid_t pid = -1;
  int stdout_fd = -1;
};

Child Spawn(std::vector<std::string> args) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  Child child;
  EXPECT_EQ(::posix_spawn(&child.pid, argv[0], &actions, nullptr, argv.data(),
                          environ),
            0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  child.stdout_fd = fds[0];
  return child;
}

// Reads one line of the child's stdout (empty at EOF).
std::string ReadLine(const Child& child) {
  std::string line;
  char c;
  while (::read(child.stdout_fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

int WaitExit(const Child& child) {
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  if (child.stdout_fd >= 0) ::close(child.stdout_fd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(SegmentTest, LayoutRoundTrip) {
  const fs::path dir = FreshDir("roundtrip");
  {
    auto w =
        MakeWriter(dir, 20, 8);  // dim 20 -> stride 32: padding must read zero
    EXPECT_EQ(w->info().row_stride, 32u);
    AppendRows(*w, 5);
    AppendRows(*w, 6);  // crosses into a second extent
    ASSERT_TRUE(w->Tombstone(3).ok());
    ASSERT_TRUE(w->Tombstone(3).ok());  // idempotent
    EXPECT_EQ(w->TombstoneCount(), 1u);
    w->SetGeneration(7);
  }
  EXPECT_TRUE(fs::exists(dir / "vectors.00001"));
  auto r = Reader::Attach(dir);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->info().dim, 20u);
  EXPECT_EQ((*r)->info().rows_per_extent, 8u);
  EXPECT_EQ((*r)->info().metric, Metric::kInnerProduct);
  EXPECT_EQ((*r)->committed(), 11u);
  EXPECT_EQ((*r)->Generation(), 7u);
  EXPECT_FALSE((*r)->Retired());
  for (uint64_t row = 0; row < 11; ++row)
    EXPECT_EQ(CheckRow(**r, row), "") << row;
  EXPECT_TRUE((*r)->IsTombstoned(3));
  EXPECT_FALSE((*r)->IsTombstoned(4));
  auto blocks = (*r)->Blocks();
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].count, 8u);
  EXPECT_EQ(blocks[1].first_row, 8u);
  EXPECT_EQ(blocks[1].count, 3u);
  EXPECT_EQ(blocks[1].ids[0], RowId(8));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(blocks[1].rows) % 64, 0u);

  // Reopened for writing, it continues where it stopped.
  auto w = Writer::Open(dir);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->committed(), 11u);
  AppendRows(**w, 2);
  ASSERT_TRUE((*r)->Refresh().ok());
  EXPECT_EQ((*r)->committed(), 13u);
  EXPECT_EQ(CheckRow(**r, 12), "");
}

TEST(SegmentTest, GrowthKeepsRowsReaderHoldsInPlace) {
  const fs::path dir = FreshDir("growth");
  auto w = MakeWriter(dir, 16, 4);
  AppendRows(*w, 3);
  auto r = Reader::Attach(dir);
  ASSERT_TRUE(r.ok());
  const float* held = (*r)->Row(1);
  const float first_value = held[0];
  for (int i = 0; i < 50; ++i) AppendRows(*w, 3);  // ~38 new extents
  ASSERT_TRUE((*r)->Refresh().ok());
  EXPECT_EQ((*r)->committed(), 153u);
  EXPECT_EQ((*r)->Row(1), held);  // never remapped
  EXPECT_EQ(held[0], first_value);
  for (uint64_t row = 0; row < 153; ++row) ASSERT_EQ(CheckRow(**r, row), "");
}

// Extents double from first_extent_rows up to rows_per_extent; every row and
// block boundary lands where a reader (in this process, fresh or refreshed)
// expects, across reopen.
TEST(SegmentTest, ExtentsGrowGeometricallyToTheCap) {
  const fs::path dir = FreshDir("geometric");
  SegmentOptions options;
  options.dim = 20;
  options.rows_per_extent = 48;  // not a power of two: the last step is capped
  options.first_extent_rows = 4;
  auto created = Writer::Create(dir, options);
  ASSERT_TRUE(created.ok()) << created.status();
  auto& w = **created;
  AppendRows(w, 1);
  auto r = Reader::Attach(dir);
  ASSERT_TRUE(r.ok()) << r.status();
  const float* held = (*r)->Row(0);
  std::mt19937_64 rng(3);
  while (w.committed() < 400) AppendRows(w, 1 + rng() % 37);
  const uint64_t n = w.committed();
  // 4, 8, 16, 32, then 48 each.
  const std::vector<uint64_t> want = {4,  8,  16, 32, 48, 48, 48,
                                      48, 48, 48, 48, 48, 48};
  uint64_t capacity = 0, extents = 0;
  while (capacity < n) capacity += want[extents++];
  EXPECT_EQ(w.MappedRanges().size(), extents);
  EXPECT_FALSE(fs::exists(dir / ExtentFileName(extents)));
  for (uint64_t i = 0; i < extents; ++i) {
    const uint64_t rows = want[i];
    const uint64_t bytes =
        4096 + rows * 32 * 4 + rows * 8 + (rows + 63) / 64 * 8;
    EXPECT_EQ(fs::file_size(dir / ExtentFileName(i)),
              (bytes + 4095) / 4096 * 4096)
        << i;
  }
  ASSERT_TRUE((*r)->Refresh().ok());
  EXPECT_EQ((*r)->Row(0), held);  // never remapped
  auto fresh = Reader::Attach(dir);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ((*fresh)->info().first_extent_rows, 4u);
  for (const auto* view : {static_cast<const SegmentView*>(r->get()),
                           static_cast<const SegmentView*>(fresh->get())}) {
    ASSERT_EQ(view->committed(), n);
    for (uint64_t row = 0; row < n; ++row)
      ASSERT_EQ(CheckRow(*view, row), "") << row;
    const auto blocks = view->Blocks();
    ASSERT_EQ(blocks.size(), extents);
    uint64_t first = 0;
    for (size_t i = 0; i < blocks.size(); ++i) {
      EXPECT_EQ(blocks[i].first_row, first);
      EXPECT_EQ(blocks[i].count, std::min(want[i], n - first));
      EXPECT_EQ(blocks[i].rows, view->Row(first));
      EXPECT_EQ(blocks[i].ids[0], RowId(first));
      first += want[i];
    }
  }
  ASSERT_TRUE(w.Tombstone(n - 1).ok());
  ASSERT_TRUE(w.Tombstone(4).ok());  // first row of extent 1
  EXPECT_TRUE((*fresh)->IsTombstoned(4));
  EXPECT_FALSE((*fresh)->IsTombstoned(3));
  EXPECT_TRUE((*fresh)->IsTombstoned(n - 1));
  created->reset();
  auto reopened = Writer::Open(dir);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  AppendRows(**reopened, 100);
  ASSERT_TRUE((*fresh)->Refresh().ok());
  for (uint64_t row = 0; row < n + 100; ++row)
    ASSERT_EQ(CheckRow(**fresh, row), "") << row;
}

// The default extent 0 holds about 256 KiB of rows, whatever the cap.
TEST(SegmentTest, DefaultFirstExtentIsSmall) {
  for (uint32_t dim : {4u, 256u, 384u, 1536u, 65536u}) {
    const fs::path dir = FreshDir("small_" + std::to_string(dim));
    auto w = MakeWriter(dir, dim, 65536);
    const uint64_t rows = w->info().first_extent_rows;
    EXPECT_GE(rows, 1u) << dim;
    EXPECT_LE(rows * w->info().row_stride * 4, 256u * 1024) << dim;
    EXPECT_GT(rows * 2 * w->info().row_stride * 4, 256u * 1024) << dim;
    struct stat st {};
    ASSERT_EQ(::stat((dir / "vectors.00000").c_str(), &st), 0);
    EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 300u * 1024) << dim;
  }
  SegmentOptions options;
  options.dim = 8;
  options.rows_per_extent = 16;
  options.first_extent_rows = 17;
  EXPECT_EQ(Writer::Create(FreshDir("first_too_big"), options).status().code(),
            StatusCode::kInvalidArgument);
}

uint64_t Fnv1a64(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

// Rewrites page 0 of a version 2 extent (first_extent_rows == rows_per_extent)
// as version 1 wrote it: the 64-byte header, shared state at byte 64.
void DowngradeToV1(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << file;
  std::vector<unsigned char> page(4096), v1(4096, 0);
  f.read(reinterpret_cast<char*>(page.data()), page.size());
  // magic .. rows_per_extent (40 bytes), extent_index (v2 @48), uuid (v2 @64).
  std::memcpy(v1.data(), page.data(), 40);
  const uint32_t version = 1;
  std::memcpy(v1.data() + 8, &version, 4);
  std::memcpy(v1.data() + 40, page.data() + 48, 8);
  std::memcpy(v1.data() + 48, page.data() + 64, 8);
  const uint64_t checksum = Fnv1a64(v1.data(), 56);
  std::memcpy(v1.data() + 56, &checksum, 8);
  // committed (v2 @128 -> v1 @64), extent count, generation, tombstones,
  // retired (v2 @192.. -> v1 @128..).
  std::memcpy(v1.data() + 64, page.data() + 128, 8);
  std::memcpy(v1.data() + 128, page.data() + 192, 32);
  f.seekp(0);
  f.write(reinterpret_cast<const char*>(v1.data()), v1.size());
}

// A version 1 segment (fixed-size extents, made before geometric growth)
// still attaches, reopens and grows, in version 1.
TEST(SegmentTest, Version1SegmentsStillReadAndGrow) {
  const fs::path dir = FreshDir("v1");
  {
    SegmentOptions options;
    options.dim = 20;
    options.rows_per_extent = 8;
    options.first_extent_rows = 8;
    auto w = Writer::Create(dir, options);
    ASSERT_TRUE(w.ok()) << w.status();
    AppendRows(**w, 13);
    ASSERT_TRUE((*w)->Tombstone(9).ok());
    (*w)->SetGeneration(5);
  }
  DowngradeToV1(dir / "vectors.00000");
  DowngradeToV1(dir / "vectors.00001");
  auto r = Reader::Attach(dir);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->committed(), 13u);
  EXPECT_EQ((*r)->Generation(), 5u);
  EXPECT_EQ((*r)->TombstoneCount(), 1u);
  EXPECT_TRUE((*r)->IsTombstoned(9));
  for (uint64_t row = 0; row < 13; ++row) ASSERT_EQ(CheckRow(**r, row), "");
  {
    auto w = Writer::Open(dir);
    ASSERT_TRUE(w.ok()) << w.status();
    AppendRows(**w, 20);  // extents 2 and 3, written as version 1
  }
  ASSERT_TRUE((*r)->Refresh().ok());
  EXPECT_EQ((*r)->committed(), 33u);
  for (uint64_t row = 0; row < 33; ++row) ASSERT_EQ(CheckRow(**r, row), "");
  for (const char* name : {"vectors.00002", "vectors.00003"}) {
    std::ifstream in(dir / name, std::ios::binary);
    uint32_t version = 0;
    in.seekg(8);
    in.read(reinterpret_cast<char*>(&version), 4);
    EXPECT_EQ(version, 1u) << name;
    EXPECT_EQ(fs::file_size(dir / name), fs::file_size(dir / "vectors.00000"));
  }
  auto fresh = Reader::Attach(dir);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ((*fresh)->Blocks().size(), 5u);
  for (uint64_t row = 0; row < 33; ++row) ASSERT_EQ(CheckRow(**fresh, row), "");
}

TEST(SegmentTest, CommitRulesAndSingleWriter) {
  const fs::path dir = FreshDir("rules");
  auto w = MakeWriter(dir, 8, 16);
  EXPECT_FALSE(w->Commit(1).ok());  // nothing reserved
  ASSERT_TRUE(w->Reserve(2).ok());
  EXPECT_EQ(w->Commit(3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w->Tombstone(0).code(),
            StatusCode::kOutOfRange);  // not committed yet
  auto second = Writer::Open(dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  SegmentOptions options;
  options.dim = 8;
  EXPECT_EQ(
      Writer::Create(FreshDir("baddim"), SegmentOptions{}).status().code(),
      StatusCode::kInvalidArgument);
  w.reset();
  EXPECT_EQ(Writer::Create(dir, options).status().code(),
            StatusCode::kAlreadyExists);
}

TEST(SegmentTest, ReaderInAnotherProcessSeesOnlyWholeRows) {
  const fs::path dir = FreshDir("concurrent");
  auto w = MakeWriter(dir, 48, 256);
  AppendRows(*w, 1);
  constexpr uint64_t kTarget = 60000;
  Child reader =
      Spawn({HelperPath(), "read", dir.string(), std::to_string(kTarget)});
  ASSERT_EQ(ReadLine(reader), "attached");
  std::mt19937_64 rng(42);
  uint64_t commits = 0;
  while (w->committed() < kTarget) {
    const uint64_t batch =
        std::min<uint64_t>(1 + rng() % 23, kTarget - w->committed());
    AppendRows(*w, batch);
    if (++commits % 64 == 0) std::this_thread::yield();
  }
  EXPECT_GT(commits, 4000u);
  const uint64_t refreshes = std::stoull("0" + ReadLine(reader));
  EXPECT_EQ(WaitExit(reader), 0);
  // The reader must have followed the writer, not just read the final state.
  EXPECT_GT(refreshes, 100u);
}

TEST(SegmentTest, WriterKilledMidBatchLeavesConsistentPrefixAndRecovers) {
  const fs::path dir = FreshDir("kill");
  std::mt19937_64 rng(7);
  uint64_t last_seen = 0;
  for (int round = 0; round < 8; ++round) {
    Child writer = Spawn({HelperPath(), "write", dir.string(), "24", "64"});
    // Once it committed its first batch (under TSan on a loaded machine its
    // start-up alone can outlast the delay below, and then it never created
    // the segment), let it run for a random while, then kill it wherever it
    // is.
    ASSERT_FALSE(ReadLine(writer).empty()) << "round " << round;
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 80));
    ::kill(writer.pid, SIGKILL);
    EXPECT_EQ(WaitExit(writer), 128 + SIGKILL);

    auto r = Reader::Attach(dir);
    ASSERT_TRUE(r.ok()) << r.status();
    const uint64_t committed = (*r)->committed();
    EXPECT_GE(committed, last_seen) << "round " << round;
    for (uint64_t row = 0; row < committed; ++row)
      ASSERT_EQ(CheckRow(**r, row), "");
    last_seen = committed;
  }
  EXPECT_GT(last_seen, 0u);
  // The writer's lock died with it: a new writer takes over and appends.
  auto w = Writer::Open(dir);
  ASSERT_TRUE(w.ok()) << w.status();
  AppendRows(**w, 5);
  auto r = Reader::Attach(dir);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->committed(), last_seen + 5);
  for (uint64_t row = 0; row < last_seen + 5; ++row)
    ASSERT_EQ(CheckRow(**r, row), "");
}

// Each case damages a good segment one way; attach must fail with a clear
// message.
class BadSegmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto w = MakeWriter(dir_, 16, 8);
    AppendRows(*w, 12);
  }
  void Poke(const fs::path& file, off_t offset, const void* data, size_t n) {
    int fd = ::open(file.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, data, n, offset), static_cast<ssize_t>(n));
    ::close(fd);
  }
  void ExpectAttachFails(StatusCode code, const std::string& substring) {
    auto r = Reader::Attach(dir_);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status();
    EXPECT_NE(r.status().message().find(substring), std::string::npos)
        << r.status();
  }
  fs::path dir_;
};

TEST_F(BadSegmentTest, TruncatedExtent) {
  fs::resize_file(dir_ / "vectors.00001", 5000);
  ExpectAttachFails(StatusCode::kDataLoss, "vectors.00001: size is 5000");
}

TEST_F(BadSegmentTest, TruncatedBelowHeader) {
  fs::resize_file(dir_ / "vectors.00000", 100);
  ExpectAttachFails(StatusCode::kDataLoss, "truncated");
}

TEST_F(BadSegmentTest, FlippedHeaderByte) {
  const uint32_t dim = 17;
  Poke(dir_ / "vectors.00000", 16, &dim, sizeof(dim));
  ExpectAttachFails(StatusCode::kDataLoss, "checksum mismatch");
}

TEST_F(BadSegmentTest, WrongVersion) {
  const uint32_t version = 99;
  Poke(dir_ / "vectors.00000", 8, &version, sizeof(version));
  ExpectAttachFails(StatusCode::kFailedPrecondition, "format version 99");
}

TEST_F(BadSegmentTest, ForeignFile) {
  std::ofstream(dir_ / "vectors.00000", std::ios::trunc)
      << std::string(8192, 'x');
  ExpectAttachFails(StatusCode::kInvalidArgument, "not a ZeroVec segment");
}

TEST_F(BadSegmentTest, ExtentFromAnotherSegment) {
  const fs::path other = FreshDir("other_segment");
  auto w = MakeWriter(other, 16, 8);
  AppendRows(*w, 12);
  fs::copy_file(other / "vectors.00001", dir_ / "vectors.00001",
                fs::copy_options::overwrite_existing);
  ExpectAttachFails(StatusCode::kDataLoss, "belongs to another segment");
}

// An extent whose header (checksum intact) claims another geometry than
// extent 0 would be mapped past its end: refused.
TEST_F(BadSegmentTest, ExtentWithOtherGeometry) {
  const fs::path other = FreshDir("other_geometry");
  SegmentOptions options;
  options.dim = 16;
  options.rows_per_extent = 8;
  options.first_extent_rows = 2;  // dir_ has 8: extent 1 holds 4, not 8
  auto w = Writer::Create(other, options);
  ASSERT_TRUE(w.ok()) << w.status();
  AppendRows(**w, 12);
  // Give it dir_'s uuid (bytes 64..71) and a matching checksum (FNV-1a-64).
  uint64_t uuid = 0;
  {
    std::ifstream in(dir_ / "vectors.00000", std::ios::binary);
    in.seekg(64);
    in.read(reinterpret_cast<char*>(&uuid), sizeof(uuid));
  }
  const fs::path victim = other / "vectors.00001";
  Poke(victim, 64, &uuid, sizeof(uuid));
  unsigned char header[72];
  {
    std::ifstream in(victim, std::ios::binary);
    in.read(reinterpret_cast<char*>(header), sizeof(header));
  }
  const uint64_t h = Fnv1a64(header, sizeof(header));
  Poke(victim, 72, &h, sizeof(h));
  fs::copy_file(victim, dir_ / "vectors.00001",
                fs::copy_options::overwrite_existing);
  ExpectAttachFails(StatusCode::kDataLoss, "belongs to another segment");
}

TEST_F(BadSegmentTest, CommittedCountPastCapacity) {
  const uint64_t committed = 1u << 30;
  // The shared state (committed count first) starts at byte 128 of extent 0.
  Poke(dir_ / "vectors.00000", 128, &committed, sizeof(committed));
  ExpectAttachFails(StatusCode::kDataLoss, "exceeds the extents' capacity");
}

TEST(SegmentTest, MissingDirectoryIsNotFound) {
  auto r = Reader::Attach(FreshDir("does_not_exist"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(SegmentTest, FilesAreOwnerOnlyByDefault) {
  const fs::path dir = FreshDir("perms");
  auto w = MakeWriter(dir, 8, 4);
  AppendRows(*w, 9);
  for (const char* name :
       {"vectors.00000", "vectors.00001", "vectors.00002", "LOCK"}) {
    struct stat st {};
    ASSERT_EQ(::stat((dir / name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << name;
  }
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(SegmentTest, GroupOptionGivesGroupRead) {
  struct group* g = ::getgrgid(::getegid());
  ASSERT_NE(g, nullptr);
  const fs::path dir = FreshDir("group");
  SegmentOptions options;
  options.dim = 8;
  options.rows_per_extent = 4;
  options.group = g->gr_name;
  auto w = Writer::Create(dir, options);
  ASSERT_TRUE(w.ok()) << w.status();
  AppendRows(**w, 6);
  for (const char* name : {"vectors.00000", "vectors.00001"}) {
    struct stat st {};
    ASSERT_EQ(::stat((dir / name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0640u) << name;
    EXPECT_EQ(st.st_gid, g->gr_gid);
  }
  struct stat dir_st {};
  ASSERT_EQ(::stat(dir.c_str(), &dir_st), 0);
  EXPECT_EQ(dir_st.st_mode & 07777, 02750u);
  EXPECT_EQ(dir_st.st_gid, g->gr_gid);
  options.group = "no-such-group-zerovec";
  EXPECT_EQ(Writer::Create(FreshDir("badgroup"), options).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SegmentTest, OtherUserCannotAttach) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another uid";
  const fs::path dir = FreshDir("otheruser");
  auto w = MakeWriter(dir, 8, 4);
  AppendRows(*w, 2);
  // A forked child drops to uid/gid 65534 (nobody) and tries to attach.
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0)
      ::_exit(10);  // no second uid
    auto r = Reader::Attach(dir);
    ::_exit(r.ok()
                ? 0
                : (r.status().code() == StatusCode::kPermissionDenied ? 1 : 2));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 10)
    GTEST_SKIP() << "cannot switch uid here (user namespace)";
  EXPECT_EQ(WEXITSTATUS(status), 1)
      << "attach by another uid must be PERMISSION_DENIED";
}

}  // namespace
}  // namespace zv::shm
