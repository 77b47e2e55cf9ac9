#!/usr/bin/env bash
# Fallback for bench/gpu/run_device.sh: builds gpu_embed_bench ON the GPU machine
# (CUDA 13, g++ 13, OpenBLAS, nlohmann-json there) when the binary carried from
# the development machine does not load. ingest_bench needs gRPC and FAISS, which
# the GPU machine lacks, so it is only ever built by bench/gpu/build_host.sh.
#   bench/gpu/build_device.sh OUT_DIR
set -euo pipefail
B=${1:-build-gpubench}
mkdir -p "$B/obj"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
CXXFLAGS=(-std=c++20 -O2 -Wall -I. -DZEROVEC_WITH_CUDA -I/usr/local/cuda/include)
for d in /usr/include/x86_64-linux-gnu /usr/include/openblas /usr/include/x86_64-linux-gnu/openblas-pthread; do
  [[ -f $d/cblas.h ]] && CXXFLAGS+=(-I"$d") && break
done
SRCS=(base/status.cc shm/segment.cc embed/unicode_tables.cc embed/unicode.cc embed/tokenizer.cc
      embed/safetensors.cc embed/checkpoint.cc embed/cpu_encoder.cc embed/embedder.cc
      bench/gpu/gpu_embed_bench.cc)
objs=(); pids=()
for s in "${SRCS[@]}"; do
  o=$B/obj/$(echo "${s%.*}" | tr / _).o; objs+=("$o")
  g++ "${CXXFLAGS[@]}" -c "$s" -o "$o" & pids+=($!)
done
for s in embed/cuda_encoder.cu bench/gpu/mirror.cu; do
  o=$B/obj/$(echo "${s%.*}" | tr / _).o; objs+=("$o")
  "$NVCC" -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC \
    -diag-suppress 2810 -I. -c "$s" -o "$o" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
g++ -o "$B/gpu_embed_bench" "${objs[@]}" -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 \
  -lcublas -lcudart -lopenblas -lrt -pthread
echo "built $B/gpu_embed_bench"
