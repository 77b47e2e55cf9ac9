#!/usr/bin/env bash
# Installs every Debian package ZeroVec's build, tests and demo need. Idempotent:
# packages already present are skipped, so a second run costs a dpkg query.
# `tools/setup.sh --bench` also installs what optional benchmarks need (npm for
# bench/lancedb, whose own packages then come from `npm install` there).
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-rules-java
  g++ clang libclang-rt-14-dev clang-format
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libgrpc-dev
  libfaiss-dev librocksdb-dev libxapian-dev libboost-dev libgtest-dev libgmock-dev libopenblas-dev liblapack-dev libdnnl-dev
  nlohmann-json3-dev libsimdjson-dev libhnswlib-dev patchelf xz-utils
  python3 python3-grpcio python3-grpc-tools python3-numpy
  python3-dev pybind11-dev python3-pip python3-setuptools python3-venv
  wordnet-base
  etcd-server etcd-client golang-etcd-server-dev
)
[[ ${1:-} == --bench ]] && PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all packages present"
fi
