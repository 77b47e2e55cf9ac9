#include "embed/embedder.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "embed/embedder_impl.h"

extern "C" char* openblas_get_corename(void);

namespace zv::embed {

using internal::EmbedderImpl;

void UseFastBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string core = openblas_get_corename();
  static const char* const kGeneric[] = {"Prescott",   "Core2",   "Penryn",
                                         "Dunnington", "Nehalem", "Atom",
                                         "Unknown",    "Katmai",  "Northwood"};
  if (std::find(std::begin(kGeneric), std::end(kGeneric), core) ==
      std::end(kGeneric)) {
    return;
  }
  const char* want = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    want = "SkylakeX";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    want = "Haswell";
  }
  if (want == nullptr) return;
  std::fprintf(stderr,
               "zerovec: OpenBLAS took this CPU for a generic %s; restarting "
               "with OPENBLAS_CORETYPE=%s\n",
               core.c_str(), want);
  setenv("OPENBLAS_CORETYPE", want, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: go on as is
}

StatusOr<EmbedderOptions> ParseDevice(const std::string& flag,
                                      EmbedderOptions options) {
  options.cuda_device = 0;
  if (flag == "auto") {
    options.device = DevicePreference::kAuto;
  } else if (flag == "cpu") {
    options.device = DevicePreference::kCpu;
  } else if (flag == "cuda") {
    options.device = DevicePreference::kCuda;
  } else if (flag.rfind("cuda:", 0) == 0 && flag.size() > 5 &&
             flag.size() <= 8 &&
             std::all_of(flag.begin() + 5, flag.end(),
                         [](char c) { return c >= '0' && c <= '9'; })) {
    options.device = DevicePreference::kCuda;
    options.cuda_device = std::stoi(flag.substr(5));
  } else {
    return InvalidArgumentError(
        "--device: expected auto, cpu, cuda or cuda:N, got \"" + flag + "\"");
  }
  return options;
}

StatusOr<std::unique_ptr<Embedder>> Embedder::Create(
    const EmbedderOptions& options) {
  ZV_ASSIGN_OR_RETURN(std::shared_ptr<const Checkpoint> ck,
                      LoadCheckpoint(options.model_dir));
  ZV_ASSIGN_OR_RETURN(Tokenizer tokenizer,
                      Tokenizer::Create(ck->vocab, ck->tokenizer_options));
  auto embedder =
      std::make_unique<EmbedderImpl>(std::move(ck), std::move(tokenizer));
  ZV_RETURN_IF_ERROR(embedder->Init(options));
  return std::unique_ptr<Embedder>(std::move(embedder));
}

}  // namespace zv::embed
