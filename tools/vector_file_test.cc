#include "tools/vector_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "base/test_util.h"

namespace zv::tools {
namespace {

namespace fs = std::filesystem;

fs::path TempDir() {
  static const fs::path dir = zv::testing::MakeTempDir("vector_file_test");
  return dir;
}

fs::path WriteFile(const std::string& name, const std::string& bytes) {
  const fs::path path = TempDir() / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), std::streamsize(bytes.size()));
  return path;
}

std::string FloatBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(float));
}

// A .npy file as the format spec lays it out: magic, version, little-endian
// header length, the dict padded with spaces and '\n' to a multiple of 64.
std::string Npy(const std::string& dict, const std::string& data,
                int major = 1) {
  const size_t preamble = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += char(major);
  out += char(0);
  const uint32_t len = uint32_t(header.size());
  out += char(len & 0xff);
  out += char(len >> 8 & 0xff);
  if (major != 1) {
    out += char(len >> 16 & 0xff);
    out += char(len >> 24 & 0xff);
  }
  return out + header + data;
}

std::string F4Dict(const std::string& shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
}

std::vector<float> Iota(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.5f * float(i) - 3.0f;
  return v;
}

std::string Fvecs(uint32_t rows, int32_t dim) {
  std::string out;
  for (uint32_t r = 0; r < rows; ++r) {
    out.append(reinterpret_cast<const char*>(&dim), 4);
    for (int32_t j = 0; j < dim; ++j) {
      const float x = float(r) * 100.0f + float(j);
      out.append(reinterpret_cast<const char*>(&x), 4);
    }
  }
  return out;
}

// Expects Open to fail with InvalidArgument and a message naming `path` and
// containing `what`.
void ExpectOpenError(const fs::path& path, const std::string& what,
                     const fs::path& ids = {}) {
  auto file = VectorFile::Open(path, ids);
  ASSERT_FALSE(file.ok()) << path;
  EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument)
      << file.status();
  EXPECT_NE(file.status().message().find(what), std::string::npos)
      << "want \"" << what << "\" in: " << file.status().message();
  const fs::path named = ids.empty() ? path : ids;
  EXPECT_NE(file.status().message().find(named.string()), std::string::npos)
      << file.status().message();
}

bool HaveNumpy() {
  return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

// Runs python with numpy as `np`; `code` may use `d`, the temp directory
// (with a trailing '/'). One interpreter for many files: numpy is slow to load.
void RunNumpy(const std::string& code) {
  const std::string cmd =
      "/usr/bin/python3 -c \"import sys; import numpy as np; d = "
      "sys.argv[1]; " +
      code + "\" '" + TempDir().string() + "/'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(VectorFileTest, ReadsFilesWrittenByNumpy) {
  if (!HaveNumpy()) GTEST_SKIP() << "no numpy in /usr/bin/python3";
  RunNumpy(
      "a = (np.arange(35, dtype='<f4') * 0.25 - 1).reshape(5, 7); "
      "np.save(d + 'np0.npy', a); "
      "[np.lib.format.write_array(open(d + 'np%d.npy' % v, 'wb'), a, "
      "version=(v, 0)) for v in (1, 2, 3)]");
  for (int n = 0; n < 4; ++n) {
    const std::string writer =
        n == 0 ? "np.save" : "version " + std::to_string(n);
    const fs::path path = TempDir() / ("np" + std::to_string(n) + ".npy");
    auto file = VectorFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    const VectorFile& f = **file;
    EXPECT_EQ(f.format(), VectorFileFormat::kNpy);
    ASSERT_EQ(f.rows(), 5u);
    ASSERT_EQ(f.dim(), 7u);
    for (uint64_t r = 0; r < 5; ++r) {
      for (uint32_t j = 0; j < 7; ++j) {
        EXPECT_EQ(f.Row(r)[j], float(r * 7 + j) * 0.25f - 1) << writer;
      }
    }
    EXPECT_EQ(f.Row(5), nullptr);
    EXPECT_EQ(f.Id(0), "0");
    EXPECT_EQ(f.Id(4), "4");
    std::vector<float> all(35);
    ASSERT_TRUE(f.CopyRows(0, 5, all.data()).ok());
    EXPECT_EQ(std::memcmp(all.data(), f.Row(0), all.size() * 4), 0);
  }
}

TEST(VectorFileTest, RejectsNumpyFilesItCannotRead) {
  if (!HaveNumpy()) GTEST_SKIP() << "no numpy in /usr/bin/python3";
  RunNumpy(
      "z = np.zeros((3, 4), dtype='<f4'); "
      "np.save(d + 'f8.npy', np.zeros((3, 4))); "
      "np.save(d + 'be.npy', z.astype('>f4')); "
      "np.save(d + 'i4.npy', z.astype('<i4')); "
      "np.save(d + 'fortran.npy', np.asfortranarray(z)); "
      "np.save(d + 'one_d.npy', z[0]); "
      "np.save(d + 'three_d.npy', np.zeros((2, 3, 4), dtype='<f4')); "
      "np.save(d + 'structured.npy', "
      "np.zeros((3, 4), dtype=[('a', '<f4'), ('b', '<f4')])); "
      "np.save(d + 'dim0.npy', np.zeros((3, 0), dtype='<f4')); "
      "np.save(d + 'cut.npy', np.ones((10, 8), dtype='<f4')); "
      "open(d + 'cut.npy', 'r+b').truncate(10 * 8 * 4 + 128 - 1)");
  const std::pair<const char*, const char*> cases[] = {
      {"f8.npy", "dtype '<f8'"},
      {"be.npy", "dtype '>f4'"},
      {"i4.npy", "dtype '<i4'"},
      {"fortran.npy", "fortran_order is True"},
      {"one_d.npy", "shape (4,) is 1-D"},
      {"three_d.npy", "shape (2, 3, 4) is 3-D"},
      {"structured.npy", "structured dtypes"},
      {"dim0.npy", "dim 0 out of range"},
      // Truncated: numpy's own file less its last byte.
      {"cut.npy", "truncated: shape (10, 8) needs 320 bytes"},
  };
  for (const auto& [name, error] : cases) {
    SCOPED_TRACE(name);
    ExpectOpenError(TempDir() / name, error);
  }
}

TEST(VectorFileTest, ReadsHandWrittenNpyAllVersionsAndZeroRows) {
  const std::vector<float> v = Iota(12);
  for (int major : {1, 2, 3}) {
    const fs::path path =
        WriteFile("v" + std::to_string(major) + ".npy",
                  Npy(F4Dict("(4, 3)"), FloatBytes(v), major));
    auto file = VectorFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_EQ((*file)->rows(), 4u);
    ASSERT_EQ((*file)->dim(), 3u);
    EXPECT_EQ((*file)->Row(3)[2], v[11]);
  }
  // Key order, quote style, no trailing comma and Python 2 'L' suffixes are
  // all things numpy has written at some point.
  auto odd = VectorFile::Open(WriteFile(
      "odd.npy", Npy("{\"shape\": (4L, 3L), \"fortran_order\": False, "
                     "\"descr\": \"<f4\"}",
                     FloatBytes(v))));
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_EQ((*odd)->rows(), 4u);
  auto empty =
      VectorFile::Open(WriteFile("zero.npy", Npy(F4Dict("(0, 3)"), "")));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)->rows(), 0u);
  EXPECT_EQ((*empty)->Row(0), nullptr);
  EXPECT_TRUE((*empty)->CopyRows(0, 0, nullptr).ok());
}

TEST(VectorFileTest, RejectsBadNpyBytes) {
  const std::string data = FloatBytes(Iota(12));
  const std::string good = Npy(F4Dict("(4, 3)"), data);
  struct Case {
    const char* name;
    std::string bytes;
    const char* error;
  } cases[] = {
      {"magic.npy", "\x93NUMPX" + good.substr(6), "bad magic"},
      {"short.npy", good.substr(0, 8), "truncated"},
      {"v4.npy", Npy(F4Dict("(4, 3)"), data, 4), "version 4.0"},
      {"header_cut.npy", good.substr(0, 40), "runs past the end"},
      {"data_cut.npy", good.substr(0, good.size() - 1),
       "truncated: shape (4, 3) needs 48 bytes of float32 data, 47"},
      {"extra.npy", good + "xx", "2 unexpected bytes after the data"},
      {"big.npy", Npy(F4Dict("(4611686018427387904, 384)"), data),
       "is too large"},
      {"overflow.npy", Npy(F4Dict("(99999999999999999999, 3)"), data),
       "overflows"},
      {"dim.npy", Npy(F4Dict("(1, 65537)"), data), "dim 65537 out of range"},
      {"f2.npy",
       Npy("{'descr': '<f2', 'fortran_order': False, 'shape': (4, 3)}", data),
       "dtype '<f2'"},
      {"nokey.npy", Npy("{'descr': '<f4', 'shape': (4, 3)}", data),
       "has no 'fortran_order'"},
      {"dupkey.npy",
       Npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
           "'shape': (4, 3)}",
           data),
       "repeats key 'descr'"},
      {"extrakey.npy",
       Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), "
           "'x': 1}",
           data),
       "unexpected key 'x'"},
      {"notdict.npy", Npy("[1, 2]", data), "does not start with '{'"},
      {"bool.npy",
       Npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (4, 3)}", data),
       "must be True or False"},
      {"shape.npy",
       Npy("{'descr': '<f4', 'fortran_order': False, 'shape': [4, 3]}", data),
       "must be a tuple"},
      {"neg.npy", Npy(F4Dict("(-4, 3)"), data), "must be integers"},
      {"unterminated.npy", Npy("{'descr: '<f4'}", data), "expected ':'"},
      {"after.npy", Npy(F4Dict("(4, 3)") + " 1", data), "after its '}'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectOpenError(WriteFile(c.name, c.bytes), c.error);
  }
  // A header length that leaves the floats unaligned.
  std::string odd = good;
  odd[8] = char(odd[8] + 1);
  odd.insert(10 + 117, " ");
  ExpectOpenError(WriteFile("align.npy", odd), "not a multiple of 4");
}

TEST(VectorFileTest, ReadsFvecs) {
  const fs::path path = WriteFile("v.fvecs", Fvecs(3, 5));
  auto file = VectorFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const VectorFile& f = **file;
  EXPECT_EQ(f.format(), VectorFileFormat::kFvecs);
  ASSERT_EQ(f.rows(), 3u);
  ASSERT_EQ(f.dim(), 5u);
  EXPECT_EQ(f.Row(2)[4], 204.0f);
  EXPECT_EQ(f.Row(1)[0], 100.0f);
  // Into a padded destination, as a segment's row stride is.
  std::vector<float> out(2 * 8, -1.0f);
  ASSERT_TRUE(f.CopyRows(1, 2, out.data(), 8).ok());
  EXPECT_EQ(out[0], 100.0f);
  EXPECT_EQ(out[4], 104.0f);
  EXPECT_EQ(out[5], -1.0f);  // padding untouched
  EXPECT_EQ(out[8], 200.0f);
  std::vector<float> packed(15);
  ASSERT_TRUE(f.CopyRows(0, 3, packed.data()).ok());
  EXPECT_EQ(packed[14], 204.0f);
  EXPECT_EQ(f.CopyRows(2, 2, packed.data()).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(f.CopyRows(4, 0, packed.data()).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(f.CopyRows(0, 1, packed.data(), 4).code(),
            StatusCode::kInvalidArgument);
}

TEST(VectorFileTest, RejectsBadFvecs) {
  std::string mixed = Fvecs(2, 4) + Fvecs(1, 4);
  const int32_t other = 3;
  std::memcpy(&mixed[2 * 20], &other, 4);  // row 2 claims dim 3, same size
  const std::string good = Fvecs(3, 4);
  struct Case {
    const char* name;
    std::string bytes;
    const char* error;
  } cases[] = {
      {"mixed.fvecs", mixed, "row 2: dim 3, row 0 has 4"},
      {"cut.fvecs", good.substr(0, good.size() - 2),
       "not a whole number of rows of 20 bytes"},
      {"tiny.fvecs", good.substr(0, 3), "truncated"},
      {"zero.fvecs", std::string(8, '\0'), "dim 0 out of range"},
      {"negative.fvecs", std::string(8, '\xff'), "dim -1 out of range"},
      {"huge.fvecs", Fvecs(1, 65537), "dim 65537 out of range"},
      {"empty.fvecs", "", "empty file"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectOpenError(WriteFile(c.name, c.bytes), c.error);
  }
}

TEST(VectorFileTest, IdsSidecar) {
  const fs::path fvecs = WriteFile("ids.fvecs", Fvecs(3, 2));
  // CRLF ends and a missing final newline are both fine.
  auto file = VectorFile::Open(
      fvecs, WriteFile("ok.ids", "doc-a\r\nd\xc3\xa9j\xc3\xa0 vu\nlast"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Id(0), "doc-a");
  EXPECT_EQ((*file)->Id(1), "d\xc3\xa9j\xc3\xa0 vu");
  EXPECT_EQ((*file)->Id(2), "last");
  ASSERT_TRUE(VectorFile::Open(fvecs, WriteFile("nl.ids", "a\nb\nc\n")).ok());

  struct Case {
    const char* name;
    std::string bytes;
    const char* error;
  } cases[] = {
      {"few.ids", "a\nb\n", "few.ids: 2 ids, but"},
      {"none.ids", "", "none.ids: 0 ids, but"},
      {"many.ids", "a\nb\nc\nd\n", "many.ids:4: more ids than the 3 rows"},
      {"blank.ids", "a\n\nc\n", "blank.ids:2: empty id"},
      {"trailing.ids", "a\nb\nc\n\n", "trailing.ids:4: more ids"},
      {"crlf_blank.ids", "a\r\n\r\nc\r\n", "crlf_blank.ids:2: empty id"},
      {"long.ids", "a\n" + std::string(513, 'x') + "\nc",
       "long.ids:2: id longer than 512 bytes"},
      {"utf8.ids", "a\nb\xff\nc", "utf8.ids:2: id is not valid UTF-8"},
      {"overlong.ids", "a\n\xc0\xaf\nc", "overlong.ids:2: id is not valid"},
      {"surrogate.ids", "a\nb\n\xed\xa0\x80", "surrogate.ids:3: id is not"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectOpenError(fvecs, c.error, WriteFile(c.name, c.bytes));
  }
  // An id of exactly 512 bytes is fine.
  EXPECT_TRUE(
      VectorFile::Open(
          fvecs, WriteFile("max.ids", "a\n" + std::string(512, 'x') + "\nc"))
          .ok());
  EXPECT_EQ(VectorFile::Open(fvecs, TempDir() / "missing.ids").status().code(),
            StatusCode::kNotFound);
}

TEST(VectorFileTest, OpenErrors) {
  EXPECT_EQ(VectorFile::Open(TempDir() / "missing.npy").status().code(),
            StatusCode::kNotFound);
  ExpectOpenError(WriteFile("v.bin", Fvecs(1, 2)), "expected a .npy or");
  const fs::path dir = TempDir() / "dir.npy";
  fs::create_directories(dir);
  ExpectOpenError(dir, "not a regular file");
}

}  // namespace
}  // namespace zv::tools
