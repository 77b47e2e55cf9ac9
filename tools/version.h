// The zerovec release version, printed by `zerovec --version`.
#ifndef ZEROVEC_TOOLS_VERSION_H_
#define ZEROVEC_TOOLS_VERSION_H_

namespace zv::tools {

// A constant rather than Bazel's workspace status: stamping would relink the
// binary (and rerun every test that uses it) on each commit.
inline constexpr char kVersion[] = "0.1.0";

}  // namespace zv::tools

#endif  // ZEROVEC_TOOLS_VERSION_H_
