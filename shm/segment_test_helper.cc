// Child process for the multi-process segment tests.
//   segment_test_helper read <dir> <target_rows>   attach, follow the writer
//   until
//       target_rows are committed, checking every row; exit 0 if all whole.
//   segment_test_helper write <dir> <dim> <rpe>    create or reopen, append
//   rows in
//       random batches forever (killed by the test); prints committed counts.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

#include "shm/segment.h"
#include "shm/segment_test_util.h"

namespace {

using zv::shm::Reader;
using zv::shm::Writer;

int Read(const std::string& dir, uint64_t target) {
  auto reader = Reader::Attach(dir);
  if (!reader.ok()) {
    std::cerr << "attach: " << reader.status() << "\n";
    return 3;
  }
  std::cout << "attached"
            << std::endl;  // the test starts writing after this line
  uint64_t checked = 0;
  uint64_t refreshes = 0;
  while (checked < target) {
    auto committed = (*reader)->Refresh();
    if (!committed.ok()) {
      std::cerr << "refresh: " << committed.status() << "\n";
      return 4;
    }
    ++refreshes;
    for (; checked < *committed; ++checked) {
      std::string problem = zv::shm::testing::CheckRow(**reader, checked);
      if (!problem.empty()) {
        std::cerr << "torn row seen: " << problem << "\n";
        return 1;
      }
    }
  }
  std::cout << refreshes << std::endl;
  return 0;
}

int Write(const std::string& dir, uint32_t dim, uint64_t rpe) {
  auto opened = Writer::Open(dir);
  if (!opened.ok()) {
    zv::shm::SegmentOptions options;
    options.dim = dim;
    options.rows_per_extent = rpe;
    opened = Writer::Create(dir, options);
  }
  if (!opened.ok()) {
    std::cerr << "open: " << opened.status() << "\n";
    return 3;
  }
  Writer& w = **opened;
  std::mt19937_64 rng(::getpid());
  for (;;) {
    const uint64_t batch = 1 + rng() % 37;
    if (!w.Reserve(batch).ok()) return 5;
    const uint64_t first = w.committed();
    for (uint64_t r = first; r < first + batch; ++r)
      zv::shm::testing::FillRow(w, r);
    if (!w.Commit(first + batch).ok()) return 6;
    std::printf("%llu\n", static_cast<unsigned long long>(first + batch));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "read") {
    return Read(argv[2], std::strtoull(argv[3], nullptr, 10));
  }
  if (argc == 5 && std::string(argv[1]) == "write") {
    return Write(argv[2], std::strtoul(argv[3], nullptr, 10),
                 std::strtoull(argv[4], nullptr, 10));
  }
  std::cerr << "usage: segment_test_helper read DIR ROWS | write DIR DIM RPE\n";
  return 2;
}
