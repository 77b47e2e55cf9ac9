#!/usr/bin/env bash
# One device call for issue 14's batch-1 lever: the skinny kernels (output
# projection and FFN-down each fused with residual + LayerNorm for passes of
# <= 32 tokens; opt-in: ZV_CUDA_SKINNY=32) beside the cuBLAS path, each in its
# own gpu_embed_bench process, MiniLM and bge-base shapes at batches 1 and 32,
# plus the encoder tests that cover the kernel (~2 min).
#   Here:   tools/bundle.sh --cuda --no-python --out dist/zv-skinny \
#             //embed:cuda_encoder_test //bench/gpu:gpu_embed_bench
#           mkdir -p .device-skinny && cp dist/zv-skinny.tar.xz .device-skinny/
#   There:  ZV_BUNDLE=.device-skinny/zv-skinny.tar.xz bash bench/gpu/skinny_device.sh
#           (carry .device-skinny)
# Writes $OUT/tests.log, $OUT/enc_*.json / .log, $OUT/summary.md.
set -uo pipefail
OUT=${OUT:-/tmp/skinny_out}
source bench/gpu/encoder_lib.sh
checkpoint minilm /tmp/minilm; P1=$CK_PID
checkpoint bge-base /tmp/bge; P2=$CK_PID
encoder_tests 120 '*Skinny*:*GraphReplay*:*FusedPath*:*MiniLmRandom*:*ZerovecMini*'
# bench SHAPE SKINNY: gpu_embed_bench on /tmp/SHAPE with ZV_CUDA_SKINNY=SKINNY.
bench() {
  ZV_CUDA_SKINNY=$2 timeout 120 $R/gpu_embed_bench --model /tmp/$1 --label $1-skinny$2 \
    --texts bench/gpu/texts.jsonl --batches 1,32 --skip-e2e 1 \
    --out $OUT/enc_$1_skinny$2.json > $OUT/enc_$1_skinny$2.log 2>&1
  echo "bench $1 skinny=$2 rc=$? t=$(el)"
  grep -E "B=    1|B=   32" $OUT/enc_$1_skinny$2.log | grep -v phases | cut -c1-160
}
wait $P1
bench minilm 32
bench minilm 0
wait $P2
bench bge 32
bench bge 0
python3 bench/gpu/summarize_encoder.py $OUT | tee $OUT/summary.md
