#!/usr/bin/env bash
# One device call for issue 14's torch.compile comparison (and the GPU tests of
# the code in the bundle): the GPU tests; our CUDA encoder on the MiniLM shape at
# short/medium/long x 1, 32, 256, 4096 (its own phase timer at each batch); then
# torch.compile (default and reduce-overhead, dynamic=False) at the same points
# in the same call; bench/gpu/summarize_compile.py makes the table.
#   Here:   tools/bundle.sh --cuda --out dist/zv-enc //embed:cuda_encoder_test \
#             //gpusearch:gpu_search_test //tests/gpu:gpu_serve_test //bench/gpu:gpu_embed_bench
#   There:  ZV_BUNDLE=dist/zv-enc.tar.xz bash bench/gpu/enc_compile_device.sh
# Writes $OUT/summary.md, the JSON and the logs (~8 min).
set -uo pipefail
T0=$(date +%s)
DEADLINE=${DEADLINE:-540}
OUT=${OUT:-/tmp/enc_compile_out}
SUM=$OUT/summary.md
mkdir -p "$OUT"
source bench/gpu/device_lib.sh
source bench/gpu/bundle.sh
R=$BUNDLE/bin
T=$BUNDLE/bin/run-test
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$SUM"
python3 bench/gpu/make_checkpoint.py --shape minilm --out /tmp/minilm >/tmp/ck.log 2>&1 &
CK=$!
STEP_GREP='PASSED|FAILED|SKIPPED|Failure|Expected|Which is|min cosine'
step gpu_search_test 90 "$T" gpu_search_test
step gpu_serve_test 120 "$T" gpu_serve_test
step cuda_encoder_test 120 "$T" cuda_encoder_test
wait $CK || { echo "checkpoint failed"; tail -5 /tmp/ck.log; }
STEP_GREP='B=|ceiling|WARNING'
step ours 120 "$R/gpu_embed_bench" --model /tmp/minilm --label minilm-fast \
  --texts bench/gpu/texts.jsonl --batches 1,32,256,4096 --skip-e2e 1 --out "$OUT/ours_minilm.json"
STEP_GREP='compile error|"mode"'
STEP_LINES=30 step compile $((DEADLINE - $(el) - 15)) python3 bench/gpu/torch_gpu_bench.py \
  --model /tmp/minilm --label minilm --texts bench/gpu/texts.jsonl --compile-only --points all \
  --modes reduce-overhead,default --out "$OUT/compile_minilm.json"
python3 bench/gpu/summarize_compile.py "$OUT/ours_minilm.json" "$OUT/compile_minilm.json" | tee -a "$SUM"
echo "done t=$(el)s"
