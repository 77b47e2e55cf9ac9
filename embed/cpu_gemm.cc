#include "embed/cpu_gemm.h"

#include <immintrin.h>

#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <unordered_map>

// From libgomp, which libdnnl runs on; declared here so that no compiler's
// own <omp.h> (GCC's or clang's libomp one) or -fopenmp is needed.
extern "C" void omp_set_num_threads(int);

namespace zv::embed::cpu {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// Weights are packed for this many rows of activations; oneDNN's brgemm picks
// the weights' blocking from N and K, so other row counts read the same
// layout (GemmContext falls back to a repacked copy where one does not).
constexpr int kPackRows = 128;

const dnnl::engine& Engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dt DataType(Precision p) { return p == Precision::kBf16 ? dt::bf16 : dt::f32; }

// oneDNN runs its own OpenMP parallel regions; the encoder's parallelism comes
// from its pool (one GEMM a thread), so each calling thread asks for one
// OpenMP thread. The setting is per thread (OpenMP's nthreads-var).
void OneOpenMpThread() {
  thread_local const bool done = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)done;
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports at every inlined use (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512bw"))) void ToBf16Avx512(const float* x,
                                                              size_t n,
                                                              uint16_t* out,
                                                              size_t* done) {
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i half = _mm512_set1_epi32(0x7fff);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i b = _mm512_castps_si512(_mm512_loadu_ps(x + i));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), one);
    const __m512i r =
        _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(lsb, half)), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtepi32_epi16(r));
  }
  *done = i;
}
#pragma GCC diagnostic pop

}  // namespace

const char* PrecisionName(Precision p) {
  return p == Precision::kBf16 ? "bf16" : "fp32";
}

std::string GemmIsa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    default:
      return "pre-avx2";
  }
}

bool Bf16Native() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 ||
         isa == dnnl::cpu_isa::avx512_core_amx;
}

Precision DefaultPrecision() {
  static const Precision p = [] {
    const char* env = std::getenv("ZEROVEC_CPU_PRECISION");
    if (env != nullptr && std::strcmp(env, "fp32") == 0)
      return Precision::kFp32;
    return Bf16Native() ? Precision::kBf16 : Precision::kFp32;
  }();
  return p;
}

void ToBf16(const float* x, size_t n, uint16_t* out) {
  static const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  size_t i = 0;
  if (avx512) ToBf16Avx512(x, n, out, &i);
  for (; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, &x[i], sizeof b);
    out[i] = static_cast<uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
  }
}

struct PackedWeight::Impl {
  dnnl::memory packed;
};

PackedWeight::PackedWeight(const std::vector<float>& w, int n, int k,
                           Precision p)
    : n_(n), k_(k), precision_(p), impl_(std::make_unique<Impl>()) {
  // An OpenMP team started here would outlive the packing (and spin).
  OneOpenMpThread();
  const dnnl::engine& eng = Engine();
  const dt wdt = DataType(p);
  // W[n, k] row-major is the k x n matrix matmul wants, column-major ("ba").
  const dnnl::memory::desc plain({k, n}, dt::f32, tag::ba);
  const dnnl::matmul::desc d(
      dnnl::memory::desc({kPackRows, k}, wdt, tag::ab),
      dnnl::memory::desc({k, n}, wdt, tag::any),
      dnnl::memory::desc({kPackRows, n}, dt::f32, tag::ab));
  const dnnl::matmul::primitive_desc pd(d, eng);
  impl_->packed = dnnl::memory(pd.weights_desc(), eng);
  dnnl::memory src(plain, eng, const_cast<float*>(w.data()));
  dnnl::stream s(eng);
  dnnl::reorder(src, impl_->packed).execute(s, src, impl_->packed);
  s.wait();
}

PackedWeight::~PackedWeight() = default;
PackedWeight::PackedWeight(PackedWeight&&) noexcept = default;
PackedWeight& PackedWeight::operator=(PackedWeight&&) noexcept = default;

struct GemmContext::Impl {
  // (m, n, k, precision, y_bf16, epilogue, bias, weights' identity)
  using Key = std::tuple<int, int, int, int, bool, int, bool, const void*>;
  struct Entry {
    dnnl::matmul prim;
    dnnl::memory::desc src, dst, bias, scratch;
    size_t scratch_bytes = 0;
    // Set when oneDNN wants another weights layout for this shape: the packed
    // weights reordered into it once.
    dnnl::memory repacked;
    std::string impl;
  };
  dnnl::stream stream{Engine()};
  std::map<Key, Entry> cache;
  std::vector<uint8_t> scratch;

  Entry& Get(int m, const PackedWeight& w, bool has_bias, Epilogue e,
             bool y_bf16);
};

GemmContext::Impl::Entry& GemmContext::Impl::Get(int m, const PackedWeight& w,
                                                 bool has_bias, Epilogue e,
                                                 bool y_bf16) {
  const dnnl::memory& packed = w.impl_->packed;
  const Key key{m,      w.n(),  w.k(),    static_cast<int>(w.precision()),
                y_bf16, int(e), has_bias, packed.get_data_handle()};
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  // Row counts vary with every batch; keep the cache bounded.
  if (cache.size() >= 256) cache.clear();
  const dnnl::engine& eng = Engine();
  Entry en;
  const dt wdt = DataType(w.precision());
  en.src = dnnl::memory::desc({m, w.k()}, wdt, tag::ab);
  en.dst = dnnl::memory::desc({m, w.n()}, y_bf16 ? dt::bf16 : dt::f32, tag::ab);
  en.bias = dnnl::memory::desc({1, w.n()}, dt::f32, tag::ab);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops po;
  if (e == Epilogue::kAccumulate) po.append_sum(1.0f);
  if (e == Epilogue::kGelu) {
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
  }
  attr.set_post_ops(po);
  auto make = [&](const dnnl::memory::desc& wmd) {
    const dnnl::matmul::desc d =
        has_bias ? dnnl::matmul::desc(en.src, wmd, en.bias, en.dst)
                 : dnnl::matmul::desc(en.src, wmd, en.dst);
    return dnnl::matmul::primitive_desc(d, attr, eng);
  };
  dnnl::matmul::primitive_desc pd =
      make(dnnl::memory::desc({w.k(), w.n()}, wdt, tag::any));
  if (pd.weights_desc() != packed.get_desc()) {
    en.repacked = dnnl::memory(pd.weights_desc(), eng);
    dnnl::memory from = packed;
    dnnl::reorder(from, en.repacked).execute(stream, from, en.repacked);
    stream.wait();
  }
  en.scratch = pd.scratchpad_desc();
  en.scratch_bytes = en.scratch.get_size();
  en.impl = pd.impl_info_str();
  en.prim = dnnl::matmul(pd);
  return cache.emplace(key, std::move(en)).first->second;
}

GemmContext::GemmContext() : impl_(std::make_unique<Impl>()) {}
GemmContext::~GemmContext() = default;
GemmContext::GemmContext(GemmContext&&) noexcept = default;
GemmContext& GemmContext::operator=(GemmContext&&) noexcept = default;

void GemmContext::Linear(const void* x, int m, const PackedWeight& w,
                         const float* bias, Epilogue epilogue, void* y,
                         bool y_bf16) {
  OneOpenMpThread();
  Impl& s = *impl_;
  Impl::Entry& en = s.Get(m, w, bias != nullptr, epilogue, y_bf16);
  // oneDNN lays its scratchpad out from a 64-byte aligned base.
  if (s.scratch.size() < en.scratch_bytes + 64) {
    s.scratch.resize(en.scratch_bytes + 64);
  }
  void* scratch = s.scratch.data();
  size_t room = s.scratch.size();
  std::align(64, en.scratch_bytes, scratch, room);
  const dnnl::engine& eng = Engine();
  dnnl::memory weights = en.repacked ? en.repacked : w.impl_->packed;
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(en.src, eng, const_cast<void*>(x))},
      {DNNL_ARG_WEIGHTS, weights},
      {DNNL_ARG_DST, dnnl::memory(en.dst, eng, y)},
      {DNNL_ARG_SCRATCHPAD, dnnl::memory(en.scratch, eng, scratch)}};
  if (bias != nullptr) {
    args.emplace(DNNL_ARG_BIAS,
                 dnnl::memory(en.bias, eng, const_cast<float*>(bias)));
  }
  en.prim.execute(s.stream, args);
  s.stream.wait();
  if (last_impl_ != en.impl) last_impl_ = en.impl;
}

}  // namespace zv::embed::cpu
