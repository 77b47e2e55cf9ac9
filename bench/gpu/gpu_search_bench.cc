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
//    time per query printed beside).
// Prints one "RESULT {...}" JSON line at the end.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
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

}  // namespace

int main(int argc, char** argv) {
  const Flags f = ParseFlags(argc, argv);
  if (!zv::gpusearch::BuiltWithCuda() || zv::gpusearch::DeviceCount() == 0) {
    std::fprintf(stderr, "gpu_search_bench: needs a CUDA build and device\n");
    return 1;
  }
  const uint32_t stride = (f.dim + 15) / 16 * 16;
  const size_t row_bytes = size_t(stride) * 4;
  const double mirror_gb = double(f.rows) * row_bytes / 1e9;
  CHECK_CUDA(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const double bw = CopyBandwidth();
  const double floor_ms = f.rows * row_bytes / bw * 1e3;
  std::printf(
      "device %s, copy bandwidth %.0f GB/s (read+write), mirror %.2f GB"
      " -> HBM floor %.3f ms\n",
      prop.name, bw / 1e9, mirror_gb, floor_ms);

  // Rows on the device, appended device to device.
  float* gen = nullptr;
  CHECK_CUDA(cudaMalloc(&gen, f.rows * row_bytes));
  CHECK_CUDA(
      cudaError_t(zv::bench::GenerateUnitRows(gen, f.rows, f.dim, stride, 1)));
  CHECK_CUDA(cudaDeviceSynchronize());
  const auto metric =
      f.l2 ? zv::shm::Metric::kL2 : zv::shm::Metric::kInnerProduct;
  auto mirror_or =
      zv::gpusearch::GpuMirror::Create({f.dim, stride, metric, f.rows, 0});
  CHECK_OK(mirror_or.status());
  auto& mirror = **mirror_or;
  auto t0 = Clock::now();
  CHECK_OK(mirror.AppendDevice(gen, f.rows, nullptr));
  const double append_dev_ms = Ms(t0, Clock::now());

  // To the host, and a second mirror rebuilt from there (a restart).
  std::unique_ptr<float[]> host(new float[f.rows * stride]);
  CHECK_CUDA(
      cudaMemcpy(host.get(), gen, f.rows * row_bytes, cudaMemcpyDeviceToHost));
  double upload_ms;
  {
    auto second =
        zv::gpusearch::GpuMirror::Create({f.dim, stride, metric, f.rows, 0});
    CHECK_OK(second.status());
    t0 = Clock::now();
    CHECK_OK((*second)->AppendHost(host.get(), f.rows));
    upload_ms = Ms(t0, Clock::now());
  }
  std::printf(
      "%s\nappend device->device %.1f ms; rebuild from host rows %.1f ms"
      " (%.1f GB/s)\n",
      mirror.description().c_str(), append_dev_ms, upload_ms,
      mirror_gb / (upload_ms * 1e-3));

  // Queries: other random unit vectors.
  const int nq_all = f.queries + f.batch;
  float* qdev = nullptr;
  CHECK_CUDA(cudaMalloc(&qdev, size_t(nq_all) * row_bytes));
  CHECK_CUDA(
      cudaError_t(zv::bench::GenerateUnitRows(qdev, nq_all, f.dim, stride, 2)));
  std::vector<float> q(size_t(nq_all) * stride);
  CHECK_CUDA(cudaMemcpy(q.data(), qdev, q.size() * 4, cudaMemcpyDeviceToHost));

  // Single queries.
  const int k = f.k;
  std::vector<float> dist(size_t(std::max(f.queries, f.batch)) * k);
  std::vector<int64_t> rows(dist.size());
  std::vector<float> sdist(size_t(f.queries) * k);
  std::vector<int64_t> srows(sdist.size());
  for (int i = 0; i < 5; ++i) {
    CHECK_OK(mirror.Search(q.data(), 1, k, nullptr, dist.data(), rows.data()));
  }
  std::vector<double> lat;
  for (int i = 0; i < f.queries; ++i) {
    t0 = Clock::now();
    CHECK_OK(mirror.Search(q.data() + size_t(i) * stride, 1, k, nullptr,
                           sdist.data() + size_t(i) * k,
                           srows.data() + size_t(i) * k));
    lat.push_back(Ms(t0, Clock::now()));
  }
  std::sort(lat.begin(), lat.end());
  const double p50 = lat[lat.size() / 2], p99 = lat[lat.size() * 99 / 100];
  std::printf(
      "single query k=%d: p50 %.3f ms, p99 %.3f ms = %.2fx the HBM floor"
      " (%.0f GB/s)\n",
      k, p50, p99, p50 / floor_ms, mirror_gb / (p50 * 1e-3));

  // Batch, and SGEMM alone over the same row tiles.
  const float* bq = q.data() + size_t(f.queries) * stride;
  CHECK_OK(mirror.Search(bq, f.batch, k, nullptr, dist.data(), rows.data()));
  double batch_ms = 1e30;
  for (int i = 0; i < 3; ++i) {
    t0 = Clock::now();
    CHECK_OK(mirror.Search(bq, f.batch, k, nullptr, dist.data(), rows.data()));
    batch_ms = std::min(batch_ms, Ms(t0, Clock::now()));
  }
  const uint64_t cols = std::min<uint64_t>(
      std::clamp<uint64_t>((64ull << 20) / f.batch, 4096, 1 << 20) &
          ~uint64_t{255},
      (f.rows + 3) / 4 * 4);
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return 1;
  float* scores = nullptr;
  CHECK_CUDA(cudaMalloc(&scores, cols * f.batch * 4));
  const float one = 1.f, zero = 0.f;
  double gemm_ms = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    CHECK_CUDA(cudaDeviceSynchronize());
    t0 = Clock::now();
    for (uint64_t r0 = 0; r0 < f.rows; r0 += cols) {
      const uint64_t m = std::min<uint64_t>(cols, f.rows - r0);
      if (cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, int(m), f.batch,
                      int(stride), &one, gen + r0 * stride, int(stride),
                      qdev + size_t(f.queries) * stride, int(stride), &zero,
                      scores, int(cols)) != CUBLAS_STATUS_SUCCESS) {
        return 1;
      }
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    gemm_ms = std::min(gemm_ms, Ms(t0, Clock::now()));
  }
  const double tflop = 2.0 * f.rows * f.batch * stride / 1e12;
  std::printf(
      "batch %d k=%d: %.1f ms = %.0f QPS; SGEMM alone %.1f ms (%.1f TFLOP/s);"
      " search at %.0f%% of the GEMM rate\n",
      f.batch, k, batch_ms, f.batch / (batch_ms * 1e-3), gemm_ms,
      tflop / (gemm_ms * 1e-3), 100 * gemm_ms / batch_ms);

  // Against the exact CPU scan.
  t0 = Clock::now();
  CpuExact(host.get(), f.rows, stride, q.data(), 1, k, f.l2);
  const double cpu_ms = Ms(t0, Clock::now());
  const int c = std::min({f.check, f.queries, f.batch});
  auto cpu_single = CpuExact(host.get(), f.rows, stride, q.data(), c, k, f.l2);
  auto cpu_batch = CpuExact(host.get(), f.rows, stride, bq, c, k, f.l2);
  Agreement single, batch;
  Compare(cpu_single, sdist.data(), srows.data(), k, &single);
  Compare(cpu_batch, dist.data(), rows.data(), k, &batch);
  std::printf(
      "CPU exact scan (%u threads): %.1f ms a query; recall vs CPU: single"
      " %.3f (%d/%d lists identical), batch %.3f (%d/%d); max |score diff|"
      " %.2g / %.2g\n",
      std::thread::hardware_concurrency(), cpu_ms, single.recall / c,
      single.exact_lists, c, batch.recall / c, batch.exact_lists, c,
      single.max_diff, batch.max_diff);
  std::printf(
      "RESULT {\"rows\": %llu, \"dim\": %u, \"metric\": \"%s\", \"k\": %d,"
      " \"copy_gbps\": %.0f, \"floor_ms\": %.3f, \"single_p50_ms\": %.3f,"
      " \"single_p99_ms\": %.3f, \"floor_ratio\": %.2f, \"batch\": %d,"
      " \"batch_ms\": %.1f, \"batch_qps\": %.0f, \"gemm_ms\": %.1f,"
      " \"gemm_fraction\": %.2f, \"recall_single\": %.3f, \"recall_batch\": "
      "%.3f,"
      " \"cpu_flat_ms\": %.1f, \"upload_ms\": %.0f, \"append_device_ms\": "
      "%.1f}\n",
      (unsigned long long)f.rows, f.dim, f.l2 ? "l2" : "ip", k, bw / 1e9,
      floor_ms, p50, p99, p50 / floor_ms, f.batch, batch_ms,
      f.batch / (batch_ms * 1e-3), gemm_ms, gemm_ms / batch_ms,
      single.recall / c, batch.recall / c, cpu_ms, upload_ms, append_dev_ms);
  cudaFree(scores);
  cudaFree(qdev);
  cudaFree(gen);
  cublasDestroy(blas);
  return 0;
}
