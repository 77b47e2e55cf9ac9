#!/usr/bin/env bash
# One device call for the CUDA encoder's levers (issue 14): the encoder tests on
# the fast path (and, if they fail, again on the old path to tell the two
# apart), then gpu_embed_bench on the fast path and on the old path (unfused,
# no padding or graphs) for MiniLM, and the fast path for bge-base; the fast
# path's vectors against PyTorch fp16 and fp32 (torch_gpu_bench --vectors-only).
#   Here:   tools/bundle.sh --cuda //embed:cuda_encoder_test //embed:reference_test \
#             //embed:segment_sink_test //bench/gpu:gpu_embed_bench
#   There:  bash bench/gpu/cudaenc_device.sh   (carry dist/zerovec-cuda.tar.xz;
#           ZV_BUNDLE names another bundle, see bench/gpu/bundle.sh)
# Writes $OUT/tests.log, $OUT/enc_*.json / .log and $OUT/summary.md (~8 min).
set -uo pipefail
OUT=${OUT:-/tmp/cudaenc_out}
source bench/gpu/encoder_lib.sh
checkpoint minilm /tmp/minilm; P1=$CK_PID
checkpoint bge-base /tmp/bge; P2=$CK_PID
{
  echo "== cuda_encoder_test (fast path)"; timeout 150 $T cuda_encoder_test; rc=$?; echo "rc=$rc t=$(el)"
  if (( rc != 0 )); then
    echo "== cuda_encoder_test on the old path (ZV_CUDA_FUSED=0 ZV_CUDA_SMALL_BATCH=0; diagnostic)"
    env ZV_CUDA_FUSED=0 ZV_CUDA_SMALL_BATCH=0 timeout 100 $T cuda_encoder_test \
      --gtest_filter=-*Levers*; echo "rc=$? t=$(el)"
  fi
  echo "== reference_test"; timeout 60 $T reference_test; echo "rc=$? t=$(el)"
  echo "== segment_sink_test"; timeout 30 $T segment_sink_test; echo "rc=$? t=$(el)"
} > $OUT/tests.log 2>&1
grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED) |^rc=|^==|min cosine|graph encoder|phases|fused:|old:|device:|Failure|Expected|Which is|Value of" \
  $OUT/tests.log | cut -c1-240
wait $P1; echo "ckpt minilm t=$(el)"; tail -1 /tmp/ck_minilm.log
B=(--texts bench/gpu/texts.jsonl --batches 1,32,256,4096)
timeout 150 $R/gpu_embed_bench --model /tmp/minilm --label minilm-fast "${B[@]}" \
  --out $OUT/enc_minilm_fast.json --vectors-out $OUT/vec_minilm_fast.json > $OUT/enc_minilm_fast.log 2>&1
echo "bench minilm fast rc=$? t=$(el)"
env ZV_CUDA_FUSED=0 ZV_CUDA_SMALL_BATCH=0 timeout 120 $R/gpu_embed_bench --model /tmp/minilm \
  --label minilm-old "${B[@]}" --skip-e2e 1 --out $OUT/enc_minilm_old.json > $OUT/enc_minilm_old.log 2>&1
echo "bench minilm old rc=$? t=$(el)"
# The fast path's vectors against PyTorch fp16/fp32 (>= 0.999 required).
TV=(--texts bench/gpu/texts.jsonl --vectors-only)
timeout 90 python3 bench/gpu/torch_gpu_bench.py --model /tmp/minilm --label minilm "${TV[@]}" \
  --ours-vectors $OUT/vec_minilm_fast.json --out $OUT/torch_vec_minilm.json > $OUT/torch_vec_minilm.log 2>&1
echo "torch vectors minilm rc=$? t=$(el)"; grep -E "min_cos" $OUT/torch_vec_minilm.log | cut -c1-240
wait $P2; tail -1 /tmp/ck_bge-base.log
left=$(( 520 - $(el) ))
if (( left > 60 )); then
  timeout $left $R/gpu_embed_bench --model /tmp/bge --label bge-fast --texts bench/gpu/texts.jsonl \
    --batches 1,32,4096 --skip-e2e 1 --out $OUT/enc_bge_fast.json \
    --vectors-out $OUT/vec_bge_fast.json > $OUT/enc_bge_fast.log 2>&1
  echo "bench bge fast rc=$? t=$(el)"
else
  echo "bge-base skipped (t=$(el))"
fi
python3 bench/gpu/summarize_encoder.py $OUT | tee $OUT/summary.md
for f in $OUT/enc_*.log; do echo "--- $f"; grep -E "WARNING|FATAL|encoder vs|graphs off|cublasLt" $f; done
left=$(( 585 - $(el) ))
if [[ -s $OUT/vec_bge_fast.json ]] && (( left > 30 )); then
  timeout $left python3 bench/gpu/torch_gpu_bench.py --model /tmp/bge --label bge-base "${TV[@]}" \
    --ours-vectors $OUT/vec_bge_fast.json --out $OUT/torch_vec_bge.json > $OUT/torch_vec_bge.log 2>&1
  echo "torch vectors bge rc=$? t=$(el)"; grep -E "min_cos" $OUT/torch_vec_bge.log | cut -c1-240
fi
echo "done t=$(el)"
