#!/usr/bin/env bash
# One device call comparing CUDA encoder settings side by side: the encoder
# tests, then gpu_embed_bench once per value of one environment variable (each
# in its own process, each measuring its own GEMM ceiling), MiniLM and
# bge-base shapes, and the first value's vectors against PyTorch fp32.
#   Here:   tools/bundle.sh --cuda --no-python --out dist/zv-ab \
#             //embed:cuda_encoder_test //bench/gpu:gpu_embed_bench
#           mkdir -p .device-ab && cp dist/zv-ab.tar.xz .device-ab/
#   There:  ZV_BUNDLE=.device-ab/zv-ab.tar.xz AB_VAR=ZV_CUDA_ATTENTION_ROWS AB_VALUES="0 128" \
#             bash bench/gpu/encoder_ab_device.sh          (carry .device-ab)
#   AB_TESTS: cuda_encoder_test's filter (default all); MINILM_BATCHES
#   (default 1,32,256,4096); BGE_BATCHES (default 1,32,4096; "none" skips
#   bge-base).
# Writes $OUT/tests.log, $OUT/enc_{minilm,bge}_VALUE.json / .log, summary.md.
set -uo pipefail
OUT=${OUT:-/tmp/ab_out}
: "${AB_VAR:?set AB_VAR to the environment variable to compare}"
: "${AB_VALUES:?set AB_VALUES to its values, the first one also checked against PyTorch}"
BGE_BATCHES=${BGE_BATCHES:-1,32,4096}
source bench/gpu/encoder_lib.sh
checkpoint minilm /tmp/minilm; P1=$CK_PID
[[ $BGE_BATCHES == none ]] || { checkpoint bge-base /tmp/bge; P2=$CK_PID; }
encoder_tests 170 "${AB_TESTS:-*}"
read -r -a VALUES <<< "$AB_VALUES"
# each_value SHAPE BATCHES: every value, the first one with its vectors checked.
each_value() {
  local first=1 v
  for v in "${VALUES[@]}"; do
    bench_setting "$1" "$AB_VAR" "$v" "$2" ${first:+vectors}
    first=
  done
  torch_vectors "$1"
}
wait $P1
each_value minilm "${MINILM_BATCHES:-1,32,256,4096}"
if [[ $BGE_BATCHES != none ]]; then
  wait $P2
  each_value bge "$BGE_BATCHES"
fi
python3 bench/gpu/summarize_encoder.py "$OUT" > "$OUT/summary.md"
grep -E "^## |^\| (short|medium|long)" "$OUT/summary.md" | cut -c1-110
for f in "$OUT"/enc_*.log; do echo "--- $f"; grep -E "WARNING|FATAL|after the runs" "$f" | cut -c1-300 | head -3; done
