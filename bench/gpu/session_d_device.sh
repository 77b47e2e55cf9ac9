#!/usr/bin/env bash
# The last device call of 2026-12-04: gpu_serve_test again (text-query
# policy), GPU exact search beside CPU HNSW on clustered rows (issue 13), then
# the CPU encoder on the device's cores (issue 14, bench/gpu/cpu_encoder_device.sh).
#   Here:  tools/bundle.sh --cuda --out dist/zerovec-d //tools:zerovec \
#            //tests/gpu:gpu_serve_test //bench/gpu:gpu_search_bench \
#            //bench/gpu:gpu_serve_bench //bench:cpu_embed_bench //bench:embed_corpus_bench
#   There: bash bench/gpu/session_d_device.sh   (carry dist/zerovec-d.tar.xz)
set -uo pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/session_d_out}
mkdir -p "$OUT" .device
ln -sf ../dist/zerovec-d.tar.xz .device/zerovec-cuda.tar.xz
export ZV_BUNDLE=dist/zerovec-d.tar.xz
source bench/gpu/bundle.sh
B=$BUNDLE
el() { echo $(($(date +%s) - T0)); }
timeout 90 "$B/bin/run-test" gpu_serve_test --gtest_brief=1 >"$OUT/gpu_serve_test.log" 2>&1
echo "gpu_serve_test rc=$? t=$(el)s"
grep -E "PASSED|FAILED|Failure" "$OUT/gpu_serve_test.log" | head
timeout 230 "$B/bin/gpu_search_bench" --rows 1000000 --metric ip --clusters 1000 \
  --hnsw-m 16 --hnsw-efc 64 >"$OUT/bench_1m_clustered_hnsw.log" 2>&1
echo "bench clustered rc=$? t=$(el)s"
cat "$OUT/bench_1m_clustered_hnsw.log" | cut -c1-400
OUT=$OUT/cpu bash bench/gpu/cpu_encoder_device.sh 240
echo "total $(el)s"
