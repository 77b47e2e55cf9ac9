#!/usr/bin/env bash
# One device call: tests, then MiniLM/bge-base throughput mma vs simt, all from a bundle:
#   Here:   tools/bundle.sh --cuda //embed:cuda_encoder_test //embed:reference_test \
#             //embed:segment_sink_test //bench/gpu:gpu_embed_bench
#   There:  bash bench/gpu/run_attention_device.sh   (carry dist/zerovec-cuda.tar.xz;
#           ZV_BUNDLE names another bundle, see bench/gpu/bundle.sh)
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
source bench/gpu/bundle.sh
R=$BUNDLE/bin
T=$BUNDLE/bin/run-test  # a test from its runfiles root, as under bazel test
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > /tmp/env.txt 2>&1; cat /tmp/env.txt
python3 bench/gpu/make_checkpoint.py --shape minilm --out /tmp/minilm > /tmp/ck1.log 2>&1 &
P1=$!
python3 bench/gpu/make_checkpoint.py --shape bge-base --out /tmp/bge > /tmp/ck2.log 2>&1 &
P2=$!
{
  cat /tmp/env.txt
  echo "== cuda_encoder_test"; timeout 100 $T cuda_encoder_test; rc=$?; echo "rc=$rc t=$(el)"
  if (( rc != 0 )); then
    echo "== cuda_encoder_test with ZV_CUDA_ATTENTION=simt (diagnostic)"
    ZV_CUDA_ATTENTION=simt timeout 60 $T cuda_encoder_test --gtest_filter=-*MmaAttention*; echo "rc=$? t=$(el)"
  fi
  echo "== reference_test"; timeout 60 $T reference_test; echo "rc=$? t=$(el)"
  echo "== segment_sink_test"; timeout 30 $T segment_sink_test; echo "rc=$? t=$(el)"
} > $OUT/tests.log 2>&1
grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED) |^rc=|min cosine|device:|ingest of|Failure|Expected|Which is" $OUT/tests.log | cut -c1-220
wait $P1; echo "ckpt minilm t=$(el)"; tail -1 /tmp/ck1.log
for impl in mma simt; do
  ZV_CUDA_ATTENTION=$impl timeout 70 $R/gpu_embed_bench --model /tmp/minilm --label minilm-$impl \
    --texts bench/gpu/texts.jsonl --out $OUT/ours_minilm_$impl.json --batches 256,4096 > $OUT/bench_minilm_$impl.log 2>&1
  echo "bench minilm $impl rc=$? t=$(el)"
done
kill -0 $P2 2>/dev/null && echo "bge checkpoint not ready at t=$(el): skipped" || { wait $P2; tail -1 /tmp/ck2.log; }
if ! kill -0 $P2 2>/dev/null && (( $(el) < 120 )); then
  ZV_CUDA_ATTENTION=mma timeout $(( 175 - $(el) )) $R/gpu_embed_bench --model /tmp/bge --label bge-mma \
    --texts bench/gpu/texts.jsonl --out $OUT/ours_bge_mma.json --batches 4096 > $OUT/bench_bge_mma.log 2>&1
  echo "bench bge mma rc=$? t=$(el)"
fi
python3 bench/gpu/summarize_attention.py $OUT | tee $OUT/summary.txt
echo "done t=$(el)"
