#!/usr/bin/env bash
# One device call for issue 14's attention lever: the tensor-core attention
# with fp16 exp2 and cp.async double buffering (ZV_CUDA_ATTENTION=mma2, the
# default since 2026-12-07) beside the plain one (mma), each in its own
# gpu_embed_bench process
# (each measures its own GEMM ceiling), MiniLM and bge-base shapes, plus the
# encoder tests and mma2's vectors against PyTorch fp32.
#   Here:   tools/bundle.sh --cuda --no-python --out dist/zv-attn \
#             //embed:cuda_encoder_test //bench/gpu:gpu_embed_bench
#           mkdir -p .device-attn && cp dist/zv-attn.tar.xz .device-attn/
#           (the model stays in: cuda_encoder_test checks zerovec-mini)
#   There:  ZV_BUNDLE=.device-attn/zv-attn.tar.xz bash bench/gpu/attention_v2_device.sh
#           (carry .device-attn)
#           QUICK=1: the attention tests and MiniLM x4096 on each kernel (~90 s).
# Writes $OUT/tests.log, $OUT/enc_*.json / .log, $OUT/summary.md (~6 min).
set -uo pipefail
OUT=${OUT:-/tmp/attn_out}
source bench/gpu/encoder_lib.sh
checkpoint minilm /tmp/minilm; P1=$CK_PID
if [[ -z ${QUICK:-} ]]; then
  checkpoint bge-base /tmp/bge; P2=$CK_PID
  FILTER='*'
else
  FILTER='*Pipelined*:*MmaAttention*:*TileShapes*'
fi
encoder_tests 170 "$FILTER"
# bench SHAPE KERNEL BATCHES [vectors]: gpu_embed_bench on /tmp/SHAPE with
# ZV_CUDA_ATTENTION=KERNEL; "vectors" also writes the vectors for torch.
bench() {
  local shape=$1 k=$2 batches=$3
  ZV_CUDA_ATTENTION=$k timeout 150 $R/gpu_embed_bench --model /tmp/$shape --label $shape-$k \
    --texts bench/gpu/texts.jsonl --batches $batches --skip-e2e 1 --out $OUT/enc_${shape}_$k.json \
    ${4:+--vectors-out $OUT/vec_$shape.json} > $OUT/enc_${shape}_$k.log 2>&1
  echo "bench $shape $k rc=$? t=$(el)"
}
# mma2's vectors against PyTorch fp32 (>= 0.999 required).
torch_vectors() {
  timeout 90 python3 bench/gpu/torch_gpu_bench.py --model /tmp/$1 --label $1 \
    --texts bench/gpu/texts.jsonl --vectors-only --ours-vectors $OUT/vec_$1.json \
    --out $OUT/torch_vec_$1.json > $OUT/torch_vec_$1.log 2>&1
  echo "torch vectors $1 rc=$? t=$(el)"; grep -E "min_cos" $OUT/torch_vec_$1.log | cut -c1-240
}
wait $P1
if [[ -n ${QUICK:-} ]]; then
  bench minilm mma2 4096
  bench minilm mma 4096
else
  bench minilm mma2 1,32,256,4096 vectors
  bench minilm mma 1,32,256,4096
  torch_vectors minilm
  wait $P2
  bench bge mma2 1,32,4096 vectors
  (( $(el) < 420 )) && bench bge mma 1,32,4096
  torch_vectors bge
fi
python3 bench/gpu/summarize_encoder.py $OUT | tee $OUT/summary.md
for f in $OUT/enc_*.log; do echo "--- $f"; grep -E "WARNING|FATAL|encoder vs|attention=" $f | head -3; done
