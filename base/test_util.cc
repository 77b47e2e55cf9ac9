#include "base/test_util.h"

#include <cmath>
#include <cstdlib>
#include <string>

namespace zv::testing {

std::filesystem::path MakeTempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string pattern =
      (std::filesystem::path(base ? base : "/tmp") / (name + ".XXXXXX"))
          .string();
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  // mkdtemp makes it 0700; tests that switch to another uid (security_test)
  // must be able to reach what lies below it.
  std::filesystem::permissions(pattern,
                               std::filesystem::perms::owner_all |
                                   std::filesystem::perms::group_read |
                                   std::filesystem::perms::group_exec |
                                   std::filesystem::perms::others_read |
                                   std::filesystem::perms::others_exec);
  return pattern;
}

double Cosine(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) {
    ab += double{a[i]} * b[i];
    aa += double{a[i]} * a[i];
    bb += double{b[i]} * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

}  // namespace zv::testing
