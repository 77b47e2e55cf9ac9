#include "base/file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace zv {
namespace {

namespace fs = std::filesystem;

fs::path FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(tmp ? tmp : "/tmp") / ("file_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Every name in `dir`, sorted: pins down that no temporary file is left.
std::vector<std::string> Names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool FdIsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(ScopedFdTest, ClosesOnDestructionAndMovesOwnership) {
  const fs::path dir = FreshDir("scoped_fd");
  const int raw = ::open((dir / "f").c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(raw, 0);
  {
    ScopedFd a(raw);
    ScopedFd b(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(b.get(), raw);
    ScopedFd c;
    c = std::move(b);
    EXPECT_EQ(c.get(), raw);
    EXPECT_TRUE(FdIsOpen(raw));
  }
  EXPECT_FALSE(FdIsOpen(raw));

  const int kept = ::open((dir / "f").c_str(), O_RDONLY);
  ASSERT_GE(kept, 0);
  { EXPECT_EQ(ScopedFd(kept).release(), kept); }
  EXPECT_TRUE(FdIsOpen(kept));
  ::close(kept);
}

TEST(WriteFileAtomicallyTest, CreatesThenReplacesWithNoTempLeft) {
  const fs::path dir = FreshDir("replace");
  const fs::path path = dir / "CURRENT";
  ASSERT_TRUE(WriteFileAtomically(path, "gen.000001\n").ok());
  EXPECT_EQ(ReadAll(path), "gen.000001\n");
  // Shorter contents must not keep the old tail.
  const Status s = WriteFileAtomically(path, "gen.2\n", {.sync = true});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ReadAll(path), "gen.2\n");
  EXPECT_EQ(Names(dir), std::vector<std::string>{"CURRENT"});
}

TEST(WriteFileAtomicallyTest, WritesBinaryAndEmptyContents) {
  const fs::path dir = FreshDir("binary");
  std::string bytes(3 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(WriteFileAtomically(dir / "big", bytes).ok());
  EXPECT_EQ(ReadAll(dir / "big"), bytes);
  ASSERT_TRUE(WriteFileAtomically(dir / "empty", "").ok());
  EXPECT_EQ(fs::file_size(dir / "empty"), 0u);
}

TEST(WriteFileAtomicallyTest, AppliesModeThroughUmask) {
  const fs::path dir = FreshDir("mode");
  const mode_t old_umask = ::umask(022);
  const Status s = WriteFileAtomically(dir / "f", "x", {.mode = 0640});
  ::umask(old_umask);
  ASSERT_TRUE(s.ok()) << s;
  struct stat st {};
  ASSERT_EQ(::stat((dir / "f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST(WriteFileAtomicallyTest, MissingParentIsNotFoundNamingThePath) {
  const fs::path path = FreshDir("no_parent") / "missing" / "CURRENT";
  const Status s = WriteFileAtomically(path, "x");
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find(path.string()), std::string::npos) << s;
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos)
      << s;
}

TEST(WriteFileAtomicallyTest, UnwritableDirectoryKeepsOldFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes to a 0500 directory";
  const fs::path dir = FreshDir("read_only");
  ASSERT_TRUE(WriteFileAtomically(dir / "f", "old").ok());
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  const Status s = WriteFileAtomically(dir / "f", "new");
  fs::permissions(dir, fs::perms::owner_all);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find((dir / "f").string()), std::string::npos) << s;
  EXPECT_EQ(ReadAll(dir / "f"), "old");
  EXPECT_EQ(Names(dir), std::vector<std::string>{"f"});
}

// Fails even as root: the temporary name is taken by a non-empty directory.
TEST(WriteFileAtomicallyTest, BlockedTempNameKeepsOldFile) {
  const fs::path dir = FreshDir("blocked");
  ASSERT_TRUE(WriteFileAtomically(dir / "f", "old").ok());
  fs::create_directories(dir / "f.tmp" / "inside");
  const Status s = WriteFileAtomically(dir / "f", "new");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find((dir / "f").string()), std::string::npos) << s;
  EXPECT_EQ(ReadAll(dir / "f"), "old");
  EXPECT_TRUE(fs::is_directory(dir / "f.tmp" / "inside"));
}

// A write that fails halfway (file-size limit, EFBIG) leaves the old file and
// no temporary file, and reports RESOURCE_EXHAUSTED.
TEST(WriteFileAtomicallyTest, FailedWriteKeepsOldFileAndRemovesTemp) {
  const fs::path dir = FreshDir("efbig");
  ASSERT_TRUE(WriteFileAtomically(dir / "f", "old").ok());
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status s = WriteFileAtomically(dir / "f", std::string(1 << 20, 'n'));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find((dir / "f").string() + ": write"),
            std::string::npos)
      << s;
  EXPECT_EQ(ReadAll(dir / "f"), "old");
  EXPECT_EQ(Names(dir), std::vector<std::string>{"f"});
}

// Renaming a file over a directory fails: the directory stays.
TEST(WriteFileAtomicallyTest, FailedRenameRemovesTemp) {
  const fs::path dir = FreshDir("rename");
  fs::create_directories(dir / "target" / "inside");
  const Status s = WriteFileAtomically(dir / "target", "x", {.sync = true});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find((dir / "target").string() + ": rename"),
            std::string::npos)
      << s;
  EXPECT_EQ(Names(dir), std::vector<std::string>{"target"});
}

TEST(AtomicFileWriterTest, StreamsAndCommitsOnce) {
  const fs::path dir = FreshDir("writer");
  auto writer = AtomicFileWriter::Create(dir / "piece");
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ(writer->temp_path(), dir / "piece.tmp");
  ASSERT_TRUE(writer->Append("abc").ok());
  ASSERT_TRUE(writer->Append("def", 2).ok());
  EXPECT_FALSE(fs::exists(dir / "piece")) << "visible before Commit";
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_EQ(ReadAll(dir / "piece"), "abcde");
  EXPECT_EQ(writer->Commit().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Names(dir), std::vector<std::string>{"piece"});
}

TEST(AtomicFileWriterTest, DroppedWithoutCommitKeepsOldFile) {
  const fs::path dir = FreshDir("dropped");
  ASSERT_TRUE(WriteFileAtomically(dir / "f", "old").ok());
  {
    auto writer = AtomicFileWriter::Create(dir / "f");
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE(writer->Append("half of the new").ok());
    AtomicFileWriter moved(std::move(*writer));  // the moved-from one is inert
    EXPECT_TRUE(fs::exists(dir / "f.tmp"));
  }
  EXPECT_EQ(ReadAll(dir / "f"), "old");
  EXPECT_EQ(Names(dir), std::vector<std::string>{"f"});
}

TEST(AtomicFileWriterTest, OverwritesACrashedWritersTemp) {
  const fs::path dir = FreshDir("stale");
  { std::ofstream(dir / "f.tmp") << "stale partial"; }
  ASSERT_TRUE(WriteFileAtomically(dir / "f", "new").ok());
  EXPECT_EQ(ReadAll(dir / "f"), "new");
  EXPECT_EQ(Names(dir), std::vector<std::string>{"f"});
}

TEST(SyncDirectoryTest, MissingDirectoryNamesIt) {
  const fs::path dir = FreshDir("sync") / "gone";
  const Status s = SyncDirectory(dir);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find(dir.string()), std::string::npos) << s;
  EXPECT_TRUE(SyncDirectory(dir.parent_path()).ok());
}

TEST(MappedFileTest, MapsContents) {
  const fs::path dir = FreshDir("map");
  ASSERT_TRUE(WriteFileAtomically(dir / "f", "safetensors").ok());
  auto file = MappedFile::Open(dir / "f");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->size(), 11u);
  EXPECT_EQ(file->view(), "safetensors");
  EXPECT_EQ(static_cast<char>(file->data()[4]), 't');

  MappedFile moved = std::move(*file);
  EXPECT_EQ(file->data(), nullptr);
  EXPECT_EQ(file->size(), 0u);
  EXPECT_EQ(moved.view(), "safetensors");
  // The mapping outlives the file's name.
  fs::remove(dir / "f");
  EXPECT_EQ(moved.view(), "safetensors");
}

TEST(MappedFileTest, EmptyFileMapsToNothing) {
  const fs::path dir = FreshDir("map_empty");
  ASSERT_TRUE(WriteFileAtomically(dir / "empty", "").ok());
  auto file = MappedFile::Open(dir / "empty");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->size(), 0u);
  EXPECT_EQ(file->data(), nullptr);
  EXPECT_TRUE(file->view().empty());
}

TEST(MappedFileTest, ErrorsNameThePath) {
  const fs::path dir = FreshDir("map_errors");
  auto missing = MappedFile::Open(dir / "missing");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find((dir / "missing").string()),
            std::string::npos)
      << missing.status();
  auto directory = MappedFile::Open(dir);
  EXPECT_EQ(directory.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(directory.status().message().find("not a regular file"),
            std::string::npos)
      << directory.status();
}

}  // namespace
}  // namespace zv
