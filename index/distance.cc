#include "index/distance.h"

#include <cstring>

namespace zv::index {
namespace {

typedef float V8 __attribute__((vector_size(32)));

inline V8 Load(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline float Sum(V8 v) {
  float s = 0;
  for (int i = 0; i < 8; ++i) s += v[i];
  return s;
}

}  // namespace

__attribute__((target_clones("arch=haswell", "default"))) float InnerProduct16(
    const float* a, const float* b, size_t d) {
  V8 s0 = {}, s1 = {};
  for (size_t i = 0; i < d; i += 16) {
    s0 += Load(a + i) * Load(b + i);
    s1 += Load(a + i + 8) * Load(b + i + 8);
  }
  return Sum(s0 + s1);
}

__attribute__((target_clones("arch=haswell", "default"))) float L2Sqr16(
    const float* a, const float* b, size_t d) {
  V8 s0 = {}, s1 = {};
  for (size_t i = 0; i < d; i += 16) {
    const V8 x = Load(a + i) - Load(b + i),
             y = Load(a + i + 8) - Load(b + i + 8);
    s0 += x * x;
    s1 += y * y;
  }
  return Sum(s0 + s1);
}

}  // namespace zv::index
