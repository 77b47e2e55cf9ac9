// Parses the HNSW benchmarks' --efs=A,B,... (index_bench, hnsw_search_bench):
// efSearch values in 1..65536, comma-separated. Benchmarks only.
#ifndef ZEROVEC_BENCH_EF_LIST_H_
#define ZEROVEC_BENCH_EF_LIST_H_

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

namespace zv::bench {

// False (with a message on stderr) unless `text` is a non-empty list of
// integers in range; *out is replaced only on success.
inline bool ParseEfList(const char* text, std::vector<int>* out) {
  std::vector<int> efs;
  for (const char* p = text;;) {
    char* end = nullptr;
    errno = 0;
    const long ef = std::strtol(p, &end, 10);
    if (end == p || errno != 0 || ef < 1 || ef > 65536 ||
        (*end != ',' && *end != '\0')) {
      std::fprintf(stderr,
                   "--efs: expected efSearch values 1..65536 as N,N,..."
                   " got '%s'\n",
                   text);
      return false;
    }
    efs.push_back(static_cast<int>(ef));
    if (*end == '\0') break;
    p = end + 1;
  }
  *out = std::move(efs);
  return true;
}

}  // namespace zv::bench

#endif  // ZEROVEC_BENCH_EF_LIST_H_
