// Helpers shared by the tests (and benchmarks) of every module: fresh temp
// directories and vector comparisons. The one home for such helpers; module
// test utilities (index/test_util.h, embed/testing/, tests/integration/) build
// on these instead of writing their own.
#ifndef ZEROVEC_BASE_TEST_UTIL_H_
#define ZEROVEC_BASE_TEST_UTIL_H_

#include <filesystem>
#include <string>

namespace zv::testing {

// A fresh, empty, uniquely named directory under TEST_TMPDIR (Bazel's
// per-test scratch) or /tmp; aborts if it cannot be made.
std::filesystem::path MakeTempDir(const std::string& name);

// Cosine similarity of two n-vectors, accumulated in double.
double Cosine(const float* a, const float* b, int n);

}  // namespace zv::testing

#endif  // ZEROVEC_BASE_TEST_UTIL_H_
