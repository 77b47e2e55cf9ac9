#!/usr/bin/env bash
# GPU exact search (gpusearch/) on the GPU machine, in one device call. Here:
#   tools/bundle.sh --cuda --out dist/zerovec-gpusearch \
#       //gpusearch:gpu_search_test //bench/gpu:gpu_search_bench
#   mkdir -p .device-gpusearch && tar -cJf .device-gpusearch/bundle.tar.xz \
#       --exclude=share/zerovec/models -C dist zerovec-gpusearch
# There (carry .device-gpusearch; the device gets the session's checkout, so a
# helper's worktree copies this script into that folder as well):
#   bash bench/gpu/gpu_search_device.sh [DEADLINE_S]
# Runs the test, then the bench at 1M and 10M rows x 384 (IP; L2 at 1M);
# ~35 s in all on an H200 (bench/gpu/results/h200-2026-12-03-gpusearch/).
# logs and a summary go to $OUT.
set -uo pipefail
T0=$(date +%s)
DEADLINE=${1:-200}
OUT=${OUT:-/tmp/gpusearch_out}
B=/tmp/zvgpusearch
mkdir -p "$OUT" "$B"
tar -xJf .device-gpusearch/bundle.tar.xz -C "$B" --strip-components=1
SUM=$OUT/summary.txt
STEP_GREP="PASSED|FAILED|SKIPPED|Failure|RESULT|floor|query|batch|CPU|rebuild"
STEP_LINES=12
source "$(dirname "$0")/device_lib.sh"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "cpus $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
} | tee "$SUM"
step gpu_search_test 40 "$B/bin/run-test" gpu_search_test --gtest_brief=1
step bench_1m_ip 30 "$B/bin/gpu_search_bench" --rows 1000000 --metric ip
step bench_10m_ip 90 "$B/bin/gpu_search_bench" --rows 10000000 --metric ip
step bench_1m_l2 30 "$B/bin/gpu_search_bench" --rows 1000000 --metric l2
echo "total $(el)s" | tee -a "$SUM"
