#!/usr/bin/env bash
# One device call comparing CUDA encoder settings side by side: the encoder
# tests, then gpu_embed_bench once per value of one environment variable (each
# in its own process, each measuring its own GEMM ceiling), MiniLM and
# bge-base shapes, and the first value's MiniLM vectors against PyTorch fp32.
#   Here:   tools/bundle.sh --cuda --no-python --out dist/zv-ab \
#             //embed:cuda_encoder_test //bench/gpu:gpu_embed_bench
#           mkdir -p .device-ab && cp dist/zv-ab.tar.xz .device-ab/
#   There:  ZV_BUNDLE=.device-ab/zv-ab.tar.xz AB_VAR=ZV_CUDA_PDL AB_VALUES="1 0" \
#             bash bench/gpu/encoder_ab_device.sh          (carry .device-ab)
#   AB_TESTS: cuda_encoder_test's filter (default all); BGE_BATCHES (default
#   1,32,4096); the MiniLM shape runs batches 1,32,256,4096.
# Writes $OUT/tests.log, $OUT/enc_{minilm,bge}_VALUE.json / .log, summary.md.
set -uo pipefail
OUT=${OUT:-/tmp/ab_out}
: "${AB_VAR:?set AB_VAR to the environment variable to compare}"
: "${AB_VALUES:?set AB_VALUES to its values, the first one also checked against PyTorch}"
source bench/gpu/encoder_lib.sh
checkpoint minilm /tmp/minilm; P1=$CK_PID
checkpoint bge-base /tmp/bge; P2=$CK_PID
encoder_tests 170 "${AB_TESTS:-*}"
# bench SHAPE VALUE BATCHES [vectors]
bench() {
  local shape=$1 value=$2 batches=$3
  env "$AB_VAR=$value" timeout 170 "$R/gpu_embed_bench" --model /tmp/$shape \
    --label "$shape-$AB_VAR=$value" --texts bench/gpu/texts.jsonl --batches "$batches" \
    --skip-e2e 1 --out "$OUT/enc_${shape}_$value.json" \
    ${4:+--vectors-out $OUT/vec_$shape.json} > "$OUT/enc_${shape}_$value.log" 2>&1
  echo "bench $shape $AB_VAR=$value rc=$? t=$(el)"
}
read -r -a VALUES <<< "$AB_VALUES"
wait $P1
first=1
for v in "${VALUES[@]}"; do
  bench minilm "$v" 1,32,256,4096 ${first:+vectors}
  first=
done
timeout 90 python3 bench/gpu/torch_gpu_bench.py --model /tmp/minilm --label minilm \
  --texts bench/gpu/texts.jsonl --vectors-only --ours-vectors "$OUT/vec_minilm.json" \
  --out "$OUT/torch_vec_minilm.json" > "$OUT/torch_vec_minilm.log" 2>&1
echo "torch vectors minilm rc=$? t=$(el)"; grep -E "min_cos" "$OUT/torch_vec_minilm.log" | cut -c1-240
wait $P2
for v in "${VALUES[@]}"; do bench bge "$v" "${BGE_BATCHES:-1,32,4096}"; done
python3 bench/gpu/summarize_encoder.py "$OUT" > "$OUT/summary.md"
grep -E "^## |^\| (short|medium|long)" "$OUT/summary.md" | cut -c1-110
for f in "$OUT"/enc_*.log; do echo "--- $f"; grep -E "WARNING|FATAL|after the runs" "$f" | cut -c1-300 | head -3; done
