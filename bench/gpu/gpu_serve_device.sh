#!/usr/bin/env bash
# GPU search in the server (issue 13) on the GPU machine, in one device call.
# Here:
#   tools/bundle.sh --cuda --out dist/zerovec-gpuserve //tools:zerovec \
#       //tests/gpu:gpu_serve_test //bench/gpu:gpu_serve_bench
#   mkdir -p .device-gpuserve && tar -cJf .device-gpuserve/bundle.tar.xz \
#       -C dist zerovec-gpuserve
# There (carry .device-gpuserve; the device gets the session's checkout, so a
# helper's worktree copies this script into that folder as well):
#   bash bench/gpu/gpu_serve_device.sh [DEADLINE_S] [TENM=1]
# Runs gpu_serve_test, then through `zerovec serve --gpu-memory auto`: 1M x 384
# restart time and QPS / p50 / p99 at 1, 16, 64, 256 single-query clients,
# coalescing on (500 us) and off; then (TENM=1) the restart time at 10M rows.
# Logs and a summary go to $OUT.
set -uo pipefail
T0=$(date +%s)
DEADLINE=${1:-280}
TENM=${2:-1}
SECS=${SECS:-3}  # seconds per client count
OUT=${OUT:-/tmp/gpuserve_out}
HERE=$(cd "$(dirname "$0")" && pwd)
BUNDLE_TAR=${BUNDLE_TAR:-.device-gpuserve/bundle.tar.xz}
B=/tmp/zvgpuserve
mkdir -p "$OUT" "$B"
tar -xJf "$BUNDLE_TAR" -C "$B" --strip-components=1
SUM=$OUT/summary.txt
STEP_GREP="PASSED|FAILED|SKIPPED|Failure|RESULT|mirrored|CPU|error"
STEP_LINES=24
source "$(dirname "$0")/device_lib.sh"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "cpus $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
} | tee "$SUM"
step gpu_serve_test 50 "$B/bin/run-test" gpu_serve_test --gtest_brief=1
step serve_1m 80 "$B/bin/gpu_serve_bench" --zerovec "$B/bin/zerovec" \
  --rows 1000000 --clients 1,16,64,256 --seconds "$SECS" --window-us 500
if [[ $TENM == 1 ]]; then
  step restart_10m 150 "$B/bin/gpu_serve_bench" --zerovec "$B/bin/zerovec" \
    --rows 10000000 --restart-only --window-us 500
fi
echo "total $(el)s" | tee -a "$SUM"
