#!/usr/bin/env bash
# Issue 13's remaining measurements and the device tests of this session's GPU
# code, in one device call (~7 min on an H200). Here:
#   tools/bundle.sh --cuda --out dist/zerovec-b //tools:zerovec \
#     //tests/gpu:gpu_serve_test //gpusearch:gpu_search_test \
#     //bench/gpu:gpu_search_bench //bench/gpu:gpu_serve_bench \
#     //embed:cuda_encoder_test ...
# There (carry dist/zerovec-b.tar.xz):
#   ZV_BUNDLE=dist/zerovec-b.tar.xz bash bench/gpu/gpusearch_final_device.sh [DEADLINE_S]
# Steps (each capped, the deadline cuts the last): gpu_search_test,
# gpu_serve_test, cuda_encoder_test; text queries through the server at 1M
# (device path vs host path); the restart at 10M rows; gpu_search_bench at 1M
# with CPU HNSW (hnswlib M16 efC64) to recall 0.95 beside it.
set -uo pipefail
T0=$(date +%s)
DEADLINE=${1:-560}
OUT=${OUT:-/tmp/gpusearch_final_out}
mkdir -p "$OUT"
source bench/gpu/bundle.sh
B=$BUNDLE
SUM=$OUT/summary.txt
el() { echo $(($(date +%s) - T0)); }
step() { # step NAME MAX_SECONDS CMD...: log in $OUT/NAME.log
  local name=$1 max=$2
  shift 2
  local left=$((DEADLINE - $(el)))
  ((left < max)) && max=$left
  if ((max < 10)); then
    echo "== $name SKIPPED (deadline, t=$(el)s)" | tee -a "$SUM"
    return 1
  fi
  timeout "$max" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc t=$(el)s" | tee -a "$SUM"
  grep -E "PASSED|FAILED|SKIPPED|Failure|RESULT|floor|query|batch|CPU|HNSW|mirrored|error|graph|cosine" \
    "$OUT/$name.log" | cut -c1-300 | tail -n 30 | tee -a "$SUM"
  return $rc
}
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "cpus $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
} | tee "$SUM"
MINI=$B/share/zerovec/models/zerovec-mini
step gpu_search_test 60 "$B/bin/run-test" gpu_search_test --gtest_brief=1
step gpu_serve_test 120 "$B/bin/run-test" gpu_serve_test --gtest_brief=1
step cuda_encoder_test 120 "$B/bin/run-test" cuda_encoder_test --gtest_brief=1
step serve_text_1m 90 "$B/bin/gpu_serve_bench" --zerovec "$B/bin/zerovec" \
  --rows 1000000 --dim 256 --model "$MINI" --text --clients 1,16,64 \
  --seconds 2 --window-us 500
step restart_10m 170 "$B/bin/gpu_serve_bench" --zerovec "$B/bin/zerovec" \
  --rows 10000000 --restart-only --window-us 500
step bench_1m_ip_hnsw 200 "$B/bin/gpu_search_bench" --rows 1000000 \
  --metric ip --hnsw-m 16 --hnsw-efc 64
echo "total $(el)s" | tee -a "$SUM"
