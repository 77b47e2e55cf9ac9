// Helpers for index/ tests: temp dirs under TEST_TMPDIR, data, brute force.
#ifndef ZEROVEC_INDEX_TEST_UTIL_H_
#define ZEROVEC_INDEX_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/test_util.h"
#include "index/collection.h"

namespace zv::index::testing {

using zv::testing::MakeTempDir;  // base/test_util.h

inline std::vector<float> RandomVectors(size_t n, uint32_t dim, uint64_t seed,
                                        bool normalise = false) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> v(n * dim);
  for (float& x : v) x = g(rng);
  if (normalise) {
    for (size_t i = 0; i < n; ++i) {
      float s = 0;
      for (uint32_t j = 0; j < dim; ++j) s += v[i * dim + j] * v[i * dim + j];
      s = 1.0f / std::sqrt(s);
      for (uint32_t j = 0; j < dim; ++j) v[i * dim + j] *= s;
    }
  }
  return v;
}

// n vectors around `clusters` random centres (normalised), like sentence
// embeddings.
inline std::vector<float> ClusteredVectors(size_t n, uint32_t dim, int clusters,
                                           uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> centres = RandomVectors(clusters, dim, seed + 1, true);
  std::vector<float> v(n * dim);
  std::uniform_int_distribution<int> pick(0, clusters - 1);
  for (size_t i = 0; i < n; ++i) {
    const int c = pick(rng);
    float s = 0;
    for (uint32_t j = 0; j < dim; ++j) {
      v[i * dim + j] =
          centres[c * dim + j] + 0.6f * g(rng) / std::sqrt(float(dim));
      s += v[i * dim + j] * v[i * dim + j];
    }
    s = 1.0f / std::sqrt(s);
    for (uint32_t j = 0; j < dim; ++j) v[i * dim + j] *= s;
  }
  return v;
}

// Embedding-like data: `clusters` random centres, each point its centre plus a
// displacement in a shared `latent`-dimensional subspace and a little isotropic
// noise, normalised. The first `n` rows are the base, the next `nq` queries.
inline std::vector<float> LatentClustered(size_t n, size_t nq, uint32_t dim,
                                          int clusters, int latent,
                                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  const std::vector<float> centres =
      RandomVectors(clusters, dim, seed + 1, true);
  const std::vector<float> basis = RandomVectors(latent, dim, seed + 2, true);
  std::uniform_int_distribution<int> pick(0, clusters - 1);
  std::vector<float> v((n + nq) * dim);
  std::vector<float> z(latent);
  for (size_t i = 0; i < n + nq; ++i) {
    float* x = &v[i * dim];
    const int c = pick(rng);
    for (float& zi : z) zi = g(rng) * 0.06f;
    float s = 0;
    for (uint32_t j = 0; j < dim; ++j) {
      float val = centres[c * dim + j] + 0.01f * g(rng);
      for (int l = 0; l < latent; ++l) val += z[l] * basis[l * dim + j];
      x[j] = val;
      s += val * val;
    }
    s = 1.0f / std::sqrt(s);
    for (uint32_t j = 0; j < dim; ++j) x[j] *= s;
  }
  return v;
}

struct Ref {
  float score;
  size_t index;
};

// Exact top-k over `base` (n x dim) restricted to `allowed` (empty: all), best
// first.
inline std::vector<Ref> BruteForce(const std::vector<float>& base, uint32_t dim,
                                   const float* q, int k, shm::Metric metric,
                                   const std::vector<bool>& allowed) {
  std::vector<Ref> all;
  const size_t n = base.size() / dim;
  for (size_t i = 0; i < n; ++i) {
    if (!allowed.empty() && !allowed[i]) continue;
    double s = 0;
    for (uint32_t j = 0; j < dim; ++j) {
      const double a = q[j], b = base[i * dim + j];
      s += metric == shm::Metric::kInnerProduct ? a * b : (a - b) * (a - b);
    }
    all.push_back({static_cast<float>(s), i});
  }
  const bool ip = metric == shm::Metric::kInnerProduct;
  std::sort(all.begin(), all.end(), [&](const Ref& a, const Ref& b) {
    return ip ? a.score > b.score : a.score < b.score;
  });
  if (all.size() > static_cast<size_t>(k)) all.resize(k);
  return all;
}

inline std::string IdOf(size_t i) { return "doc-" + std::to_string(i); }

}  // namespace zv::index::testing

#endif  // ZEROVEC_INDEX_TEST_UTIL_H_
