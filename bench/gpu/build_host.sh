#!/usr/bin/env bash
# Builds the two GPU benchmark programs on the Debian 12 development machine
# (nvcc 13.0 at /usr/local/cuda, g++ 12, Debian's gRPC/Protobuf/FAISS), for the
# GPU machine, which has CUDA but no gRPC or FAISS:
#   .gpubench/bin/gpu_embed_bench   embedding throughput (embed/ + bench/gpu/mirror.cu)
#   .gpubench/bin/ingest_bench      zero-copy vs protobuf-over-gRPC ingest
#   .gpubench/lib/                  the shared libraries they need that are not
#                                   glibc, libstdc++, CUDA or OpenBLAS (bench/gpu/run_device.sh
#                                   drops those the GPU machine already has)
# Plain g++/nvcc rather than Bazel: gpu_embed_bench needs embed/'s internal headers
# (private to //embed in Bazel), and one script builds both the same way.
#   bench/gpu/build_host.sh            (from the repository root; .gpubench/ is git-excluded)
set -euo pipefail
O=.gpubench
B=$O/obj
mkdir -p "$B" "$O/bin" "$O/lib" "$O/gen"
NVCC=/usr/local/cuda/bin/nvcc
ARCH="-gencode=arch=compute_90a,code=sm_90a"
CXXFLAGS=(-std=c++20 -O2 -g -Wall -I. -I"$O/gen" -DZEROVEC_WITH_CUDA -I/usr/local/cuda/include)
for d in /usr/include/x86_64-linux-gnu /usr/include/openblas /usr/include/x86_64-linux-gnu/openblas-pthread; do
  [[ -f $d/cblas.h ]] && CXXFLAGS+=(-I"$d") && break
done

[[ -f $O/gen/zerovec/v1/zerovec.pb.cc && $O/gen/zerovec/v1/zerovec.pb.cc -nt proto/zerovec/v1/zerovec.proto ]] || protoc --proto_path=proto --cpp_out="$O/gen" --grpc_out="$O/gen" \
  --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin proto/zerovec/v1/zerovec.proto

SRCS=(base/status.cc shm/segment.cc embed/unicode_tables.cc embed/unicode.cc
      embed/tokenizer.cc embed/safetensors.cc embed/checkpoint.cc embed/cpu_encoder.cc
      embed/embedder.cc embed/segment_sink.cc bench/gpu/gpu_embed_bench.cc
      bench/gpu/ingest_bench.cc "$O/gen/zerovec/v1/zerovec.pb.cc" "$O/gen/zerovec/v1/zerovec.grpc.pb.cc")
obj() { echo "$B/$(echo "${1%.*}" | tr / _).o"; }
# Incremental: an object is rebuilt when its source or any header it may include is newer.
HDR=$(ls -t $(find base shm embed bench/gpu "$O/gen" -name '*.h' -o -name '*.cuh') | head -1)
jobs=()
for s in "${SRCS[@]}"; do
  o=$(obj "$s")
  if [[ ! -f $o || $s -nt $o || $HDR -nt $o ]]; then
    echo "c++ $s"; g++ "${CXXFLAGS[@]}" -c "$s" -o "$o" & jobs+=($!)
  fi
done
for s in embed/cuda_encoder.cu bench/gpu/mirror.cu; do
  o=$(obj "$s")
  if [[ ! -f $o || $s -nt $o || $HDR -nt $o ]]; then
    echo "nvcc $s"
    "$NVCC" -std=c++20 -O3 $ARCH -Xcompiler -fPIC -diag-suppress 2810 -I. -c "$s" -o "$o" & jobs+=($!)
  fi
done
for j in "${jobs[@]}"; do wait "$j"; done

LIB=($(for s in base/status.cc shm/segment.cc embed/unicode_tables.cc embed/unicode.cc \
        embed/tokenizer.cc embed/safetensors.cc embed/checkpoint.cc embed/cpu_encoder.cc \
        embed/embedder.cc embed/segment_sink.cc embed/cuda_encoder.cu; do obj "$s"; done))
CUDA_LIBS=(-L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcublas -lcudart)
echo "link gpu_embed_bench"
g++ -o "$O/bin/gpu_embed_bench" "$(obj bench/gpu/gpu_embed_bench.cc)" "$(obj bench/gpu/mirror.cu)" \
  "${LIB[@]}" "${CUDA_LIBS[@]}" -lopenblas -lrt -pthread
echo "link ingest_bench"
g++ -o "$O/bin/ingest_bench" "$(obj bench/gpu/ingest_bench.cc)" \
  "$(obj "$O/gen/zerovec/v1/zerovec.pb.cc")" "$(obj "$O/gen/zerovec/v1/zerovec.grpc.pb.cc")" \
  "${LIB[@]}" -Wl,--as-needed -lgrpc++ -lgrpc -lgpr -labsl_synchronization -lprotobuf \
  -lfaiss -llapack -lopenblas -fopenmp "${CUDA_LIBS[@]}" -lrt -pthread

# Shared libraries to carry: everything ldd resolves except glibc, the C++
# runtime, CUDA and OpenBLAS/gfortran (the GPU machine has its own, newer ones).
rm -f "$O"/lib/*
for b in "$O"/bin/*; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u | while read -r so; do
  case $(basename "$so") in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
    libcuda*|libcublas*|libcudart*|libopenblas*|libgfortran*|libquadmath*|libgomp*) ;;
    *) cp -L "$so" "$O/lib/" ;;
  esac
done
strip --strip-debug "$O"/bin/*
du -sh "$O/bin" "$O/lib"
ls "$O/lib"
