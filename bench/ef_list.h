// Parses the HNSW benchmarks' integer lists (--efs=A,B,... of index_bench and
// hnsw_search_bench, --search_prefetch=...). Benchmarks only.
#ifndef ZEROVEC_BENCH_EF_LIST_H_
#define ZEROVEC_BENCH_EF_LIST_H_

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

namespace zv::bench {

// False (with a message on stderr naming `flag`) unless `text` is a non-empty
// comma-separated list of integers in [lo, hi]; *out is replaced only on
// success.
inline bool ParseIntList(const char* flag, const char* text, long lo, long hi,
                         std::vector<int>* out) {
  std::vector<int> values;
  for (const char* p = text;;) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(p, &end, 10);
    if (end == p || errno != 0 || v < lo || v > hi ||
        (*end != ',' && *end != '\0')) {
      std::fprintf(stderr, "%s: expected values %ld..%ld as N,N,... got '%s'\n",
                   flag, lo, hi, text);
      return false;
    }
    values.push_back(static_cast<int>(v));
    if (*end == '\0') break;
    p = end + 1;
  }
  *out = std::move(values);
  return true;
}

// --efs: efSearch values in 1..65536.
inline bool ParseEfList(const char* text, std::vector<int>* out) {
  return ParseIntList("--efs", text, 1, 65536, out);
}

}  // namespace zv::bench

#endif  // ZEROVEC_BENCH_EF_LIST_H_
