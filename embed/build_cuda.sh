#!/usr/bin/env bash
# Builds embed/ (with the CUDA encoder), base/ and shm/ plus their tests and the
# benchmark without Bazel: for the GPU machine, which has CUDA, g++, OpenBLAS,
# GoogleTest, Boost and nlohmann-json but no Bazel.
#   embed/build_cuda.sh [BUILD_DIR]     (run from the repository root)
# Then run the tests from the repository root, e.g. BUILD_DIR/cuda_encoder_test.
set -euo pipefail
B=${1:-build-cuda}
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
CXX=${CXX:-g++}
ARCH=${CUDA_ARCH:--gencode=arch=compute_90a,code=sm_90a}
mkdir -p "$B/obj"
CXXFLAGS=(-std=c++20 -O2 -g -Wall -I. -DZEROVEC_WITH_CUDA -I/usr/local/cuda/include)
# OpenBLAS's cblas.h lives in different places across distributions.
for d in /usr/include/x86_64-linux-gnu /usr/include/openblas /usr/include/x86_64-linux-gnu/openblas-pthread; do
  [[ -f $d/cblas.h ]] && CXXFLAGS+=(-I"$d") && break
done
LIBS=(-L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcublas -lcudart
      -lopenblas -lrt -pthread)

LIB_SRCS=(base/status.cc shm/segment.cc embed/unicode_tables.cc embed/unicode.cc
          embed/tokenizer.cc embed/safetensors.cc embed/checkpoint.cc
          embed/cpu_encoder.cc embed/embedder.cc embed/segment_sink.cc
          embed/testing/test_checkpoint.cc)
MAINS=(tokenizer_test checkpoint_test cpu_encoder_test segment_sink_test
       reference_test cuda_encoder_test embed_bench)

obj() { echo "$B/obj/$(echo "${1%.*}" | tr / _).o"; }
compile() {
  local src=$1 o
  o=$(obj "$src")
  echo "c++ $src"
  "$CXX" "${CXXFLAGS[@]}" -c "$src" -o "$o"
}

pids=()
for s in "${LIB_SRCS[@]}" "${MAINS[@]/#/embed/}"; do
  src=$s; [[ $src == *.cc ]] || src=$src.cc
  compile "$src" & pids+=($!)
done
echo "nvcc embed/cuda_encoder.cu"
"$NVCC" -std=c++20 -O3 $ARCH -Xcompiler -fPIC -diag-suppress 2810 -I. \
  -c embed/cuda_encoder.cu -o "$B/obj/embed_cuda_encoder.o" & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done

LIB_OBJS=()
for s in "${LIB_SRCS[@]}"; do LIB_OBJS+=("$(obj "$s")"); done
LIB_OBJS+=("$B/obj/embed_cuda_encoder.o")
for m in "${MAINS[@]}"; do
  extra=(-lgtest_main -lgtest)
  [[ $m == embed_bench ]] && extra=()
  echo "link $B/$m"
  "$CXX" -o "$B/$m" "$(obj embed/$m.cc)" "${LIB_OBJS[@]}" "${extra[@]}" "${LIBS[@]}"
done
echo "built into $B: ${MAINS[*]}"
