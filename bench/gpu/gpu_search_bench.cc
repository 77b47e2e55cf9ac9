// GPU exact search (gpusearch/gpu_search.h) against its floors, in one process:
//   gpu_search_bench [--rows N] [--dim D] [--queries Q] [--batch B]
//                    [--metric ip|l2] [--k K] [--check C]
// 1. device copy bandwidth -> the HBM floor of one scan of the mirror;
// 2. N unit rows generated on the device, appended device to device, copied
//    to the host and uploaded again from there (a restart's rebuild);
// 3. single-query latency (p50/p99 over Q queries) against the floor;
// 4. a batch of B queries: QPS against cuBLAS SGEMM alone over the same
//    row tiles and shapes;
// 5. C single and C batch queries against an exact CPU scan (all cores; its
//    time per query printed beside);
// 6. with --hnsw-m M (> 0): CPU HNSW (hnswlib, M, --hnsw-efc, built on all
//    cores) over the same rows, efSearch doubled from 16 until recall@k
//    against the exact scan reaches 0.95: one query's latency (one thread)
//    and QPS over the batch (all cores) at that width.
// Prints one "RESULT {...}" JSON line at the end.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "bench/gpu/gen_rows.h"
#include "gpusearch/gpu_search.h"

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

#define CHECK_CUDA(expr)                                               \
  do {                                                                 \
    const cudaError_t e_ = (expr);                                     \
    if (e_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)
#define CHECK_OK(expr)                                                \
  do {                                                                \
    const ::zv::Status s_ = (expr);                                   \
    if (!s_.ok()) {                                                   \
      std::fprintf(stderr, "%s: %s\n", #expr, s_.ToString().c_str()); \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)

struct Flags {
  uint64_t rows = 1000000;
  uint32_t dim = 384;
  int queries = 200;
  int batch = 1000;
  bool l2 = false;
  int k = 10;
  int check = 5;
  int hnsw_m = 0;  // 0: no CPU HNSW
  int hnsw_efc = 64;
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--rows")
      f.rows = std::stoull(v);
    else if (a == "--dim")
      f.dim = std::stoul(v);
    else if (a == "--queries")
      f.queries = std::stoi(v);
    else if (a == "--batch")
      f.batch = std::stoi(v);
    else if (a == "--metric")
      f.l2 = v == "l2";
    else if (a == "--k")
      f.k = std::stoi(v);
    else if (a == "--check")
      f.check = std::stoi(v);
    else if (a == "--hnsw-m")
      f.hnsw_m = std::stoi(v);
    else if (a == "--hnsw-efc")
      f.hnsw_efc = std::stoi(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      std::exit(2);
    }
  }
  return f;
}

// Read + write bytes per second of a 1 GiB device-to-device copy (best of 5).
double CopyBandwidth() {
  const size_t bytes = 1ull << 30;
  void *a, *b;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int i = 0; i < 6; ++i) {
    CHECK_CUDA(cudaEventRecord(e0));
    CHECK_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (i > 0) best = std::min(best, ms);
  }
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / (best * 1e-3);
}

// Exact top-k of nq queries over host rows, all cores; (score, row) best first.
using Hit = std::pair<float, int64_t>;
std::vector<std::vector<Hit>> CpuExact(const float* rows, uint64_t n,
                                       uint32_t stride, const float* q, int nq,
                                       int k, bool l2) {
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  // Per thread and query: a heap whose top is the worst kept hit.
  auto worse = [l2](const Hit& a, const Hit& b) {
    return l2 ? a.first < b.first : a.first > b.first;
  };
  using Heap = std::priority_queue<Hit, std::vector<Hit>, decltype(worse)>;
  std::vector<std::vector<Heap>> heaps(threads,
                                       std::vector<Heap>(nq, Heap(worse)));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const uint64_t b = n * t / threads, e = n * (t + 1) / threads;
      for (uint64_t r = b; r < e; ++r) {
        const float* x = rows + r * stride;
        for (int j = 0; j < nq; ++j) {
          const float* y = q + size_t(j) * stride;
          float s = 0.f;
          for (uint32_t d = 0; d < stride; ++d) {
            s += l2 ? (x[d] - y[d]) * (x[d] - y[d]) : x[d] * y[d];
          }
          Heap& h = heaps[t][j];
          if (int(h.size()) < k) {
            h.emplace(s, int64_t(r));
          } else if (l2 ? s < h.top().first : s > h.top().first) {
            h.pop();
            h.emplace(s, int64_t(r));
          }
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  std::vector<std::vector<Hit>> out(nq);
  for (int j = 0; j < nq; ++j) {
    for (auto& per : heaps) {
      for (; !per[j].empty(); per[j].pop()) out[j].push_back(per[j].top());
    }
    std::sort(out[j].begin(), out[j].end(), [l2](const Hit& a, const Hit& b) {
      return l2 ? a.first < b.first : a.first > b.first;
    });
    out[j].resize(std::min<size_t>(k, out[j].size()));
  }
  return out;
}

struct Agreement {
  double recall = 0;    // |gpu ∩ cpu| / k, averaged
  int exact_lists = 0;  // lists with the same rows in the same order
  double max_diff = 0;  // largest score difference at equal positions
};

void Compare(const std::vector<std::vector<Hit>>& cpu, const float* dist,
             const int64_t* rows, int k, Agreement* a) {
  for (size_t j = 0; j < cpu.size(); ++j) {
    int hit = 0;
    bool same = true;
    for (int i = 0; i < k; ++i) {
      const int64_t r = rows[j * k + i];
      for (const Hit& h : cpu[j]) hit += h.second == r;
      same &= i < int(cpu[j].size()) && cpu[j][i].second == r;
      if (i < int(cpu[j].size())) {
        a->max_diff = std::max<double>(
            a->max_diff, std::fabs(cpu[j][i].first - dist[j * k + i]));
      }
    }
    a->recall += double(hit) / k;
    a->exact_lists += same;
  }
}

// Everything measured, for the summary lines.
struct Measured {
  double bw = 0, floor_ms = 0, mirror_gb = 0;
  double append_dev_ms = 0, upload_ms = 0;
  double p50 = 0, p99 = 0;
  double batch_ms = 1e30, gemm_ms = 1e30;
  double cpu_ms = 0;
  Agreement single, batch;
  int checked = 0;
};

// Appends device rows `gen` to `mirror`, copies them to `host` and rebuilds a
// second mirror from there (a restart's upload), timing both appends.
void LoadMirror(const Flags& f, uint32_t stride, const float* gen,
                zv::gpusearch::GpuMirror& mirror, float* host, Measured* m) {
  auto t0 = Clock::now();
  CHECK_OK(mirror.AppendDevice(gen, f.rows, nullptr));
  m->append_dev_ms = Ms(t0, Clock::now());
  CHECK_CUDA(
      cudaMemcpy(host, gen, f.rows * stride * 4ull, cudaMemcpyDeviceToHost));
  auto second = zv::gpusearch::GpuMirror::Create(mirror.options());
  CHECK_OK(second.status());
  t0 = Clock::now();
  CHECK_OK((*second)->AppendHost(host, f.rows));
  m->upload_ms = Ms(t0, Clock::now());
}

// p50 / p99 of one query at a time; results of query i at dist/rows[i * k].
void TimeSingle(const zv::gpusearch::GpuMirror& mirror, const float* q, int nq,
                uint32_t stride, int k, float* dist, int64_t* rows,
                Measured* m) {
  for (int i = 0; i < 5; ++i) {
    CHECK_OK(mirror.Search(q, 1, k, nullptr, dist, rows));
  }
  std::vector<double> lat;
  for (int i = 0; i < nq; ++i) {
    const auto t0 = Clock::now();
    CHECK_OK(mirror.Search(q + size_t(i) * stride, 1, k, nullptr,
                           dist + size_t(i) * k, rows + size_t(i) * k));
    lat.push_back(Ms(t0, Clock::now()));
  }
  std::sort(lat.begin(), lat.end());
  m->p50 = lat[lat.size() / 2];
  m->p99 = lat[lat.size() * 99 / 100];
}

// Best of 3 batch searches (after one warm-up).
void TimeBatch(const zv::gpusearch::GpuMirror& mirror, const float* q, int nq,
               int k, float* dist, int64_t* rows, Measured* m) {
  CHECK_OK(mirror.Search(q, nq, k, nullptr, dist, rows));
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    CHECK_OK(mirror.Search(q, nq, k, nullptr, dist, rows));
    m->batch_ms = std::min(m->batch_ms, Ms(t0, Clock::now()));
  }
}

// SGEMM alone over the row tiles and shapes the search uses (best of 3).
void TimeGemm(const float* rows, uint64_t n, uint32_t stride,
              const float* q_dev, int nq, Measured* m) {
  const uint64_t cols = std::min<uint64_t>(
      std::clamp<uint64_t>((64ull << 20) / nq, 4096, 1 << 20) & ~uint64_t{255},
      (n + 3) / 4 * 4);
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) std::exit(1);
  float* scores = nullptr;
  CHECK_CUDA(cudaMalloc(&scores, cols * nq * 4));
  const float one = 1.f, zero = 0.f;
  for (int rep = 0; rep < 3; ++rep) {
    CHECK_CUDA(cudaDeviceSynchronize());
    const auto t0 = Clock::now();
    for (uint64_t r0 = 0; r0 < n; r0 += cols) {
      const uint64_t mm = std::min<uint64_t>(cols, n - r0);
      if (cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, int(mm), nq, int(stride),
                      &one, rows + r0 * stride, int(stride), q_dev, int(stride),
                      &zero, scores, int(cols)) != CUBLAS_STATUS_SUCCESS) {
        std::exit(1);
      }
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    m->gemm_ms = std::min(m->gemm_ms, Ms(t0, Clock::now()));
  }
  cudaFree(scores);
  cublasDestroy(blas);
}

void Print(const Flags& f, uint32_t stride, const std::string& mirror_desc,
           const Measured& m) {
  const double tflop = 2.0 * f.rows * f.batch * stride / 1e12;
  const int c = m.checked;
  std::printf(
      "%s\nappend device->device %.1f ms; rebuild from host rows %.1f ms"
      " (%.1f GB/s)\n",
      mirror_desc.c_str(), m.append_dev_ms, m.upload_ms,
      m.mirror_gb / (m.upload_ms * 1e-3));
  std::printf(
      "single query k=%d: p50 %.3f ms, p99 %.3f ms = %.2fx the HBM floor"
      " (%.0f GB/s)\n",
      f.k, m.p50, m.p99, m.p50 / m.floor_ms, m.mirror_gb / (m.p50 * 1e-3));
  std::printf(
      "batch %d k=%d: %.1f ms = %.0f QPS; SGEMM alone %.1f ms (%.1f TFLOP/s);"
      " search at %.0f%% of the GEMM rate\n",
      f.batch, f.k, m.batch_ms, f.batch / (m.batch_ms * 1e-3), m.gemm_ms,
      tflop / (m.gemm_ms * 1e-3), 100 * m.gemm_ms / m.batch_ms);
  std::printf(
      "CPU exact scan (%u threads): %.1f ms a query; recall vs CPU: single"
      " %.3f (%d/%d lists identical), batch %.3f (%d/%d); max |score diff|"
      " %.2g / %.2g\n",
      std::thread::hardware_concurrency(), m.cpu_ms, m.single.recall / c,
      m.single.exact_lists, c, m.batch.recall / c, m.batch.exact_lists, c,
      m.single.max_diff, m.batch.max_diff);
  std::printf(
      "RESULT {\"rows\": %llu, \"dim\": %u, \"metric\": \"%s\", \"k\": %d,"
      " \"copy_gbps\": %.0f, \"floor_ms\": %.3f, \"single_p50_ms\": %.3f,"
      " \"single_p99_ms\": %.3f, \"floor_ratio\": %.2f, \"batch\": %d,"
      " \"batch_ms\": %.1f, \"batch_qps\": %.0f, \"gemm_ms\": %.1f,"
      " \"gemm_fraction\": %.2f, \"recall_single\": %.3f,"
      " \"recall_batch\": %.3f, \"cpu_flat_ms\": %.1f, \"upload_ms\": %.0f,"
      " \"append_device_ms\": %.1f}\n",
      (unsigned long long)f.rows, f.dim, f.l2 ? "l2" : "ip", f.k, m.bw / 1e9,
      m.floor_ms, m.p50, m.p99, m.p50 / m.floor_ms, f.batch, m.batch_ms,
      f.batch / (m.batch_ms * 1e-3), m.gemm_ms, m.gemm_ms / m.batch_ms,
      m.single.recall / c, m.batch.recall / c, m.cpu_ms, m.upload_ms,
      m.append_dev_ms);
}

// Runs fn(i) for i in [0, n) on every core.
template <typename Fn>
void ParallelFor(uint64_t n, Fn fn) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<uint64_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (uint64_t i; (i = next.fetch_add(1)) < n;) fn(i);
    });
  }
  for (auto& th : pool) th.join();
}

// Issue 13's CPU HNSW beside the GPU: hnswlib over the same host rows.
void CpuHnsw(const Flags& f, uint32_t stride, const float* host, const float* q,
             int nq, const float* bq) {
  std::unique_ptr<hnswlib::SpaceInterface<float>> space;
  if (f.l2) {
    space = std::make_unique<hnswlib::L2Space>(stride);
  } else {
    space = std::make_unique<hnswlib::InnerProductSpace>(stride);
  }
  hnswlib::HierarchicalNSW<float> index(space.get(), f.rows, f.hnsw_m,
                                        f.hnsw_efc);
  auto t0 = Clock::now();
  index.addPoint(host, 0);
  ParallelFor(f.rows - 1, [&](uint64_t i) {
    index.addPoint(host + (i + 1) * stride, i + 1);
  });
  const double build_s = Ms(t0, Clock::now()) / 1e3;
  const auto exact = CpuExact(host, f.rows, stride, q, nq, f.k, f.l2);
  std::printf("CPU HNSW (hnswlib M %d efC %d, %u threads): built in %.1f s\n",
              f.hnsw_m, f.hnsw_efc, std::thread::hardware_concurrency(),
              build_s);
  for (int ef = 16; ef <= 4096; ef *= 2) {
    index.setEf(ef);
    double hits = 0;
    std::vector<double> lat;
    for (int j = 0; j < nq; ++j) {
      const auto a = Clock::now();
      auto top = index.searchKnn(q + size_t(j) * stride, f.k);
      lat.push_back(Ms(a, Clock::now()));
      for (; !top.empty(); top.pop()) {
        for (const Hit& h : exact[j])
          hits += h.second == int64_t(top.top().second);
      }
    }
    std::sort(lat.begin(), lat.end());
    const double recall = hits / (double(nq) * f.k);
    t0 = Clock::now();
    ParallelFor(f.batch,
                [&](uint64_t j) { index.searchKnn(bq + j * stride, f.k); });
    const double batch_ms = Ms(t0, Clock::now());
    std::printf(
        "CPU HNSW ef %d: recall@%d %.3f, one query p50 %.3f ms, batch %d on"
        " all cores %.1f ms = %.0f QPS\n",
        ef, f.k, recall, lat[lat.size() / 2], f.batch, batch_ms,
        f.batch / (batch_ms * 1e-3));
    if (recall >= 0.95) {
      std::printf(
          "RESULT_HNSW {\"rows\": %llu, \"m\": %d, \"efc\": %d,"
          " \"build_s\": %.1f, \"ef\": %d, \"recall\": %.3f,"
          " \"p50_ms\": %.3f, \"qps\": %.0f}\n",
          (unsigned long long)f.rows, f.hnsw_m, f.hnsw_efc, build_s, ef, recall,
          lat[lat.size() / 2], f.batch / (batch_ms * 1e-3));
      return;
    }
  }
  std::printf("CPU HNSW: recall 0.95 not reached by ef 4096\n");
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = ParseFlags(argc, argv);
  if (!zv::gpusearch::BuiltWithCuda() || zv::gpusearch::DeviceCount() == 0) {
    std::fprintf(stderr, "gpu_search_bench: needs a CUDA build and device\n");
    return 1;
  }
  const uint32_t stride = (f.dim + 15) / 16 * 16;
  const size_t row_bytes = size_t(stride) * 4;
  const int k = f.k;
  Measured m;
  m.mirror_gb = double(f.rows) * row_bytes / 1e9;
  CHECK_CUDA(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  m.bw = CopyBandwidth();
  m.floor_ms = f.rows * row_bytes / m.bw * 1e3;
  std::printf(
      "device %s, copy bandwidth %.0f GB/s (read+write), mirror %.2f GB"
      " -> HBM floor %.3f ms\n",
      prop.name, m.bw / 1e9, m.mirror_gb, m.floor_ms);

  // Rows and queries (other random unit vectors) generated on the device.
  float* gen = nullptr;
  CHECK_CUDA(cudaMalloc(&gen, f.rows * row_bytes));
  CHECK_CUDA(
      cudaError_t(zv::bench::GenerateUnitRows(gen, f.rows, f.dim, stride, 1)));
  const int nq_all = f.queries + f.batch;
  float* qdev = nullptr;
  CHECK_CUDA(cudaMalloc(&qdev, size_t(nq_all) * row_bytes));
  CHECK_CUDA(
      cudaError_t(zv::bench::GenerateUnitRows(qdev, nq_all, f.dim, stride, 2)));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> q(size_t(nq_all) * stride);
  CHECK_CUDA(cudaMemcpy(q.data(), qdev, q.size() * 4, cudaMemcpyDeviceToHost));
  const float* bq = q.data() + size_t(f.queries) * stride;

  const auto metric =
      f.l2 ? zv::shm::Metric::kL2 : zv::shm::Metric::kInnerProduct;
  auto mirror_or =
      zv::gpusearch::GpuMirror::Create({f.dim, stride, metric, f.rows, 0});
  CHECK_OK(mirror_or.status());
  auto& mirror = **mirror_or;
  std::unique_ptr<float[]> host(new float[f.rows * stride]);
  LoadMirror(f, stride, gen, mirror, host.get(), &m);

  std::vector<float> sdist(size_t(f.queries) * k), dist(size_t(f.batch) * k);
  std::vector<int64_t> srows(sdist.size()), rows(dist.size());
  TimeSingle(mirror, q.data(), f.queries, stride, k, sdist.data(), srows.data(),
             &m);
  TimeBatch(mirror, bq, f.batch, k, dist.data(), rows.data(), &m);
  TimeGemm(gen, f.rows, stride, qdev + size_t(f.queries) * stride, f.batch, &m);

  // Against the exact CPU scan.
  const auto t0 = Clock::now();
  CpuExact(host.get(), f.rows, stride, q.data(), 1, k, f.l2);
  m.cpu_ms = Ms(t0, Clock::now());
  m.checked = std::min({f.check, f.queries, f.batch});
  Compare(CpuExact(host.get(), f.rows, stride, q.data(), m.checked, k, f.l2),
          sdist.data(), srows.data(), k, &m.single);
  Compare(CpuExact(host.get(), f.rows, stride, bq, m.checked, k, f.l2),
          dist.data(), rows.data(), k, &m.batch);
  Print(f, stride, mirror.description(), m);
  if (f.hnsw_m > 0) CpuHnsw(f, stride, host.get(), q.data(), 50, bq);
  cudaFree(qdev);
  cudaFree(gen);
  return 0;
}
