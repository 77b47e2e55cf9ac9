#!/usr/bin/env bash
# One device call for issue 14's GEMM lever: every fp16 GEMM on cuBLASLt with
# its algorithm timed per size class (ZV_CUDA_GEMM_TUNE=1) beside the default
# (cuBLAS's own pick), each in its own gpu_embed_bench process (each measures
# its own GEMM ceiling), MiniLM and bge-base shapes, plus the encoder tests and
# the tuned path's vectors against PyTorch fp32.
#   Here:   tools/bundle.sh --cuda --no-python --out dist/zv-tune \
#             //embed:cuda_encoder_test //bench/gpu:gpu_embed_bench
#           mkdir -p .device-tune && cp dist/zv-tune.tar.xz .device-tune/
#   There:  ZV_BUNDLE=.device-tune/zv-tune.tar.xz bash bench/gpu/gemm_tune_device.sh
#           (carry .device-tune)
# Writes $OUT/tests.log, $OUT/enc_*.json / .log, $OUT/summary.md.
set -uo pipefail
OUT=${OUT:-/tmp/tune_out}
source bench/gpu/encoder_lib.sh
checkpoint minilm /tmp/minilm; P1=$CK_PID
checkpoint bge-base /tmp/bge; P2=$CK_PID
encoder_tests 170 '*'
# bench SHAPE TUNE BATCHES [vectors]: gpu_embed_bench on /tmp/SHAPE with
# ZV_CUDA_GEMM_TUNE=TUNE; "vectors" also writes the vectors for torch.
bench() {
  local shape=$1 tune=$2 batches=$3
  ZV_CUDA_GEMM_TUNE=$tune timeout 170 $R/gpu_embed_bench --model /tmp/$shape \
    --label $shape-tune$tune --texts bench/gpu/texts.jsonl --batches $batches --skip-e2e 1 \
    --out $OUT/enc_${shape}_tune$tune.json \
    ${4:+--vectors-out $OUT/vec_$shape.json} > $OUT/enc_${shape}_tune$tune.log 2>&1
  echo "bench $shape tune=$tune rc=$? t=$(el)"
}
torch_vectors() {
  timeout 90 python3 bench/gpu/torch_gpu_bench.py --model /tmp/$1 --label $1 \
    --texts bench/gpu/texts.jsonl --vectors-only --ours-vectors $OUT/vec_$1.json \
    --out $OUT/torch_vec_$1.json > $OUT/torch_vec_$1.log 2>&1
  echo "torch vectors $1 rc=$? t=$(el)"; grep -E "min_cos" $OUT/torch_vec_$1.log | cut -c1-240
}
wait $P1
bench minilm 1 1,32,256,4096 vectors
bench minilm 0 1,32,256,4096
torch_vectors minilm
wait $P2
bench bge 1 1,4096
bench bge 0 1,4096

python3 bench/gpu/summarize_encoder.py $OUT | tee $OUT/summary.md
for f in $OUT/enc_*.log; do echo "--- $f"; grep -E "WARNING|FATAL|encoder vs|tuned" $f | cut -c1-400 | head -4; done
