// Search throughput of an HNSW collection with and without one writer (a
// benchmark, not a test): builds --rows rows (dim 384, embedding-like), waits
// for the pieces, then runs --threads search threads for --seconds alone and
// again while one thread upserts batches of --batch rows. Public API only.
//
//   writer_search_bench [--rows 40000] [--threads 2] [--seconds 5]
//                       [--batch 256] [--rate ROWS_PER_S (0: as fast as
//                       it can)]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "index/collection.h"
#include "index/test_util.h"

namespace zv::index {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kDim = 384;

struct Load {
  double qps = 0, p50 = 0, p99 = 0, max = 0;
  size_t written = 0;
};

Load Run(Collection& c, const std::vector<float>& data, size_t* next_row,
         size_t max_rows, int threads, double seconds, size_t batch,
         double rate, bool writer) {
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(threads);
  std::vector<std::thread> ts;
  const size_t first_row = *next_row;
  std::thread w;
  if (writer) {
    w = std::thread([&] {
      const auto start = Clock::now();
      while (!stop && *next_row + batch <= max_rows) {
        if (rate > 0) {  // paced: batch k starts at k * batch / rate
          std::this_thread::sleep_until(
              start + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(
                              (*next_row - first_row) / rate)));
        }
        std::vector<Record> recs(batch);
        for (size_t i = 0; i < batch; ++i)
          recs[i].id = "w" + std::to_string(*next_row + i);
        if (!c.Upsert(recs,
                      std::span(data).subspan(*next_row * kDim, batch * kDim))
                 .ok())
          std::abort();
        *next_row += batch;
      }
    });
  }
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      const auto q = testing::RandomVectors(64, kDim, 100 + t, true);
      SearchOptions o;
      o.k = 10;
      for (size_t i = 0; !stop; ++i) {
        const auto t0 = Clock::now();
        auto r = c.Search(std::span(q).subspan((i % 64) * kDim, kDim), o);
        if (!r.ok()) std::abort();
        lat[t].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0)
                .count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : ts) t.join();
  if (w.joinable()) w.join();
  std::vector<double> all;
  for (const auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  Load out;
  out.qps = all.size() / seconds;
  out.p50 = all[all.size() / 2];
  out.p99 = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  out.max = all.back();
  out.written = *next_row - first_row;
  return out;
}

int Main(std::map<std::string, std::string> flags) {
  auto get = [&](const char* k, double d) {
    return flags.count(k) ? std::atof(flags[k].c_str()) : d;
  };
  const size_t rows = static_cast<size_t>(get("--rows", 40000));
  const int threads = static_cast<int>(get("--threads", 2));
  const double seconds = get("--seconds", 5);
  const size_t batch = static_cast<size_t>(get("--batch", 256));
  const double rate = get("--rate", 0);
  const size_t max_rows = rows * 4;
  const auto data = testing::LatentClustered(max_rows, 0, kDim, 1000, 16, 3);
  auto db = Database::Open(testing::MakeTempDir("writer_search_bench"));
  if (!db.ok()) return 1;
  CollectionOptions o;
  o.dim = kDim;
  o.index.descriptor = "HNSW32";
  auto c = (*db)->CreateCollection("b", o);
  if (!c.ok()) return 1;
  size_t next = 0;
  for (; next < rows; next += 5000) {
    const size_t n = std::min<size_t>(5000, rows - next);
    std::vector<Record> recs(n);
    for (size_t i = 0; i < n; ++i) recs[i].id = "w" + std::to_string(next + i);
    if (!(*c)->Upsert(recs, std::span(data).subspan(next * kDim, n * kDim))
             .ok())
      return 1;
  }
  next = rows;
  const auto t0 = Clock::now();
  if (!(*c)->FinishIndexing(0, /*one_graph=*/false).ok()) return 1;
  std::printf("%zu rows x %u, pieces built in %.1f s (1 build thread)\n", rows,
              kDim, std::chrono::duration<double>(Clock::now() - t0).count());
  for (bool writer : {false, true}) {
    const Load l =
        Run(**c, data, &next, max_rows, threads, seconds, batch, rate, writer);
    std::printf(
        "%-22s %d search threads: %7.0f searches/s  p50 %.2f ms  p99 %.2f ms"
        "  max %.1f ms  (%zu rows upserted, %.0f rows/s)\n",
        writer ? "with one writer" : "alone", threads, l.qps, l.p50, l.p99,
        l.max, l.written, l.written / seconds);
  }
  return 0;
}

}  // namespace
}  // namespace zv::index

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  return zv::index::Main(flags);
}
