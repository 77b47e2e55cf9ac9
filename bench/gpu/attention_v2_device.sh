#!/usr/bin/env bash
# One device call for issue 14's attention lever: the tensor-core attention
# with fp16 exp2 and cp.async double buffering (opt-in: ZV_CUDA_ATTENTION=mma2)
# beside the default kernel, each in its own gpu_embed_bench process
# (each measures its own GEMM ceiling), MiniLM and bge-base shapes, plus the
# encoder tests and mma2's vectors against PyTorch fp32.
#   Here:   tools/bundle.sh --cuda --no-python --out dist/zv-attn \
#             //embed:cuda_encoder_test //bench/gpu:gpu_embed_bench
#           mkdir -p .device-attn && tar -cJf .device-attn/zv-attn.tar.xz \
#             --exclude=share/zerovec/models -C dist zv-attn
#   There:  ZV_BUNDLE=.device-attn/zv-attn.tar.xz bash bench/gpu/attention_v2_device.sh
#           (carry .device-attn)
#           QUICK=1: the attention tests and MiniLM x4096 on each kernel (~90 s).
# Writes $OUT/tests.log, $OUT/enc_*.json / .log, $OUT/summary.md (~6 min).
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
OUT=${OUT:-/tmp/attn_out}; mkdir -p "$OUT"
source bench/gpu/bundle.sh
R=$BUNDLE/bin
T=$BUNDLE/bin/run-test
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $OUT/env.txt 2>&1
cat $OUT/env.txt
python3 bench/gpu/make_checkpoint.py --shape minilm --out /tmp/minilm > /tmp/ck1.log 2>&1 &
P1=$!
if [[ -z ${QUICK:-} ]]; then
  python3 bench/gpu/make_checkpoint.py --shape bge-base --out /tmp/bge > /tmp/ck2.log 2>&1 &
  P2=$!
fi
if [[ -n ${QUICK:-} ]]; then
  # QUICK=1 (~90 s): the attention tests, then MiniLM x4096 on each kernel.
  { echo "== cuda_encoder_test (attention)"
    timeout 60 $T cuda_encoder_test --gtest_filter='*Pipelined*:*MmaAttention*:*TileShapes*'
    echo "rc=$? t=$(el)"; } > $OUT/tests.log 2>&1
  grep -E "^\[  (PASSED|FAILED|  OK) |^rc=|min cosine|Failure" $OUT/tests.log | cut -c1-200
  wait $P1
  for k in mma2 mma; do
    ZV_CUDA_ATTENTION=$k timeout 45 $R/gpu_embed_bench --model /tmp/minilm --label minilm-$k \
      --texts bench/gpu/texts.jsonl --batches 4096 --skip-e2e 1 \
      --out $OUT/enc_minilm_$k.json > $OUT/enc_minilm_$k.log 2>&1
    echo "bench minilm $k rc=$? t=$(el)"
  done
  python3 bench/gpu/summarize_encoder.py $OUT | tee $OUT/summary.md
  exit 0
fi
{ echo "== cuda_encoder_test"; timeout 170 $T cuda_encoder_test; echo "rc=$? t=$(el)"; } > $OUT/tests.log 2>&1
grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED) |^rc=|^==|min cosine|Failure|Expected|Which is|Value of" \
  $OUT/tests.log | cut -c1-200
wait $P1; echo "ckpt minilm t=$(el)"
B=(--texts bench/gpu/texts.jsonl --batches 1,32,256,4096 --skip-e2e 1)
ZV_CUDA_ATTENTION=mma2 timeout 120 $R/gpu_embed_bench --model /tmp/minilm --label minilm-pipelined "${B[@]}" \
  --out $OUT/enc_minilm_pipelined.json --vectors-out $OUT/vec_minilm.json > $OUT/enc_minilm_pipelined.log 2>&1
echo "bench minilm pipelined rc=$? t=$(el)"
timeout 120 $R/gpu_embed_bench --model /tmp/minilm --label minilm-v1 "${B[@]}" \
  --out $OUT/enc_minilm_v1.json > $OUT/enc_minilm_v1.log 2>&1
echo "bench minilm v1 rc=$? t=$(el)"
TV=(--texts bench/gpu/texts.jsonl --vectors-only)
timeout 90 python3 bench/gpu/torch_gpu_bench.py --model /tmp/minilm --label minilm "${TV[@]}" \
  --ours-vectors $OUT/vec_minilm.json --out $OUT/torch_vec_minilm.json > $OUT/torch_vec_minilm.log 2>&1
echo "torch vectors minilm rc=$? t=$(el)"; grep -E "min_cos" $OUT/torch_vec_minilm.log | cut -c1-240
wait $P2
BB=(--texts bench/gpu/texts.jsonl --batches 1,32,4096 --skip-e2e 1)
ZV_CUDA_ATTENTION=mma2 timeout 150 $R/gpu_embed_bench --model /tmp/bge --label bge-pipelined "${BB[@]}" \
  --out $OUT/enc_bge_pipelined.json --vectors-out $OUT/vec_bge.json > $OUT/enc_bge_pipelined.log 2>&1
echo "bench bge pipelined rc=$? t=$(el)"
if (( $(el) < 420 )); then
  timeout 120 $R/gpu_embed_bench --model /tmp/bge --label bge-v1 "${BB[@]}" \
    --out $OUT/enc_bge_v1.json > $OUT/enc_bge_v1.log 2>&1
  echo "bench bge v1 rc=$? t=$(el)"
fi
timeout 90 python3 bench/gpu/torch_gpu_bench.py --model /tmp/bge --label bge "${TV[@]}" \
  --ours-vectors $OUT/vec_bge.json --out $OUT/torch_vec_bge.json > $OUT/torch_vec_bge.log 2>&1
echo "torch vectors bge rc=$? t=$(el)"; grep -E "min_cos" $OUT/torch_vec_bge.log | cut -c1-240
python3 bench/gpu/summarize_encoder.py $OUT | tee $OUT/summary.md
for f in $OUT/enc_*.log; do echo "--- $f"; grep -E "WARNING|FATAL|encoder vs|attention=" $f | head -3; done
