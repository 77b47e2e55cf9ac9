// The vectorised element-wise kernels on every instruction set this CPU has,
// against double-precision formulas (std::erf, std::exp), on widths with and
// without a vector tail.
#include "embed/cpu_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace zv::embed::cpu {
namespace {

constexpr Isa kIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512};
constexpr size_t kWidths[] = {1, 7, 16, 37, 384};

std::vector<float> Random(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(CpuKernelsTest, BiasGeluMatchesErfForm) {
  for (Isa isa : kIsas) {
    if (!IsaSupported(isa)) continue;
    for (size_t n : kWidths) {
      const size_t rows = 3;
      std::vector<float> y = Random(rows * n, 3.0f, 1), bias = Random(n, 1, 2);
      // Far tails too: erf saturates there.
      y[0] = -9.0f;
      if (n > 1) y[1] = 7.5f;
      std::vector<float> got = y;
      BiasGeluIsa(isa, got.data(), bias.data(), rows, n);
      for (size_t i = 0; i < rows * n; ++i) {
        const double x = double{y[i]} + bias[i % n];
        const double want = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
        ASSERT_NEAR(got[i], want, 2e-6 * std::max(1.0, std::abs(x)))
            << "isa " << int(isa) << " n " << n << " x " << x;
      }
    }
  }
}

TEST(CpuKernelsTest, AddLayerNormMatchesDoubleFormula) {
  for (Isa isa : kIsas) {
    if (!IsaSupported(isa)) continue;
    for (size_t h : kWidths) {
      if (h == 1) continue;
      const size_t rows = 4;
      std::vector<float> x = Random(rows * h, 2.0f, 3);
      for (float& v : x) v += 5.0f;  // an offset the mean must remove exactly
      const std::vector<float> add = Random(rows * h, 1.0f, 4),
                               bias = Random(h, 0.5f, 5),
                               g = Random(h, 1.0f, 6), b = Random(h, 1.0f, 7);
      for (bool with_add : {false, true}) {
        std::vector<float> got = x;
        AddLayerNormIsa(isa, got.data(), with_add ? add.data() : nullptr,
                        bias.data(), rows, h, g.data(), b.data(), 1e-12f);
        for (size_t r = 0; r < rows; ++r) {
          std::vector<double> v(h);
          double mean = 0, var = 0;
          for (size_t i = 0; i < h; ++i) {
            v[i] = double{x[r * h + i]} + (with_add ? add[r * h + i] : 0.0) +
                   bias[i];
            mean += v[i] / h;
          }
          for (size_t i = 0; i < h; ++i)
            var += (v[i] - mean) * (v[i] - mean) / h;
          for (size_t i = 0; i < h; ++i) {
            const double want =
                (v[i] - mean) / std::sqrt(var + 1e-12) * g[i] + b[i];
            ASSERT_NEAR(got[r * h + i], want, 2e-5 * (1 + std::abs(want)))
                << "isa " << int(isa) << " h " << h;
          }
        }
      }
    }
  }
}

TEST(CpuKernelsTest, SoftmaxMatchesExp) {
  for (Isa isa : kIsas) {
    if (!IsaSupported(isa)) continue;
    for (size_t n : kWidths) {
      const size_t rows = 3;
      std::vector<float> s = Random(rows * n, 4.0f, 8);
      s[0] = -200.0f;  // underflows to 0 in the reference too
      std::vector<float> got = s;
      SoftmaxIsa(isa, got.data(), rows, n);
      for (size_t r = 0; r < rows; ++r) {
        double mx = -1e300, sum = 0;
        for (size_t i = 0; i < n; ++i) mx = std::max(mx, double{s[r * n + i]});
        for (size_t i = 0; i < n; ++i) sum += std::exp(s[r * n + i] - mx);
        for (size_t i = 0; i < n; ++i) {
          const double want = std::exp(s[r * n + i] - mx) / sum;
          ASSERT_NEAR(got[r * n + i], want, 1e-6 + 2e-6 * want)
              << "isa " << int(isa) << " n " << n;
        }
      }
    }
  }
}

TEST(CpuKernelsTest, NamesThePathInUse) {
  const std::string isa = KernelIsa();
  EXPECT_TRUE(isa == "avx512" || isa == "avx2" || isa == "scalar") << isa;
}

}  // namespace
}  // namespace zv::embed::cpu
