#!/usr/bin/env bash
# The next device call for issue 14 (written 2026-12-07 23:50 UTC, after the
# session's device time ran out):
#   1. cuda_encoder_test (the description-parsing fix of
#      PipelinedAttentionMatchesPlainKernel has not run on a GPU);
#   2. ZV_CUDA_ATTENTION_ROWS=16 against the default (32 rows) on the short
#      texts: ~13 tokens a text, so a 32-row block keeps one of its two warps
#      idle and at 119 registers a thread only 8 blocks fit an SM; attention is
#      0.54 of MiniLM short x4096's 2.94 ms with FP8 + fast accumulation (the
#      bucket at 51.4 %, bar 55 %). fp16 and fp8+fast, MiniLM and bge-base;
#   3. batch 1 of MiniLM short under ncu, one metric (gpu__time_duration) for
#      every kernel: the kernels of the 0.14 ms pass (the host has no nsys);
#   4. the attention kernel at MiniLM long x4096 under ncu (speed of light,
#      occupancy, warp stalls): what bounds 33 % of the FP8 pass;
#   5. the torch.compile table (reduce-overhead; the default mode lost at all 12
#      points on 2026-12-04) with the current encoder.
#   Here:   tools/bundle.sh --cuda --no-python --out dist/zv-ab //embed:cuda_encoder_test \
#             //bench/gpu:gpu_embed_bench //tools:zerovec //tests/gpu:e2e_test
#           mkdir -p .device-ab && cp dist/zv-ab.tar.xz .device-ab/
#           (.device-ab/texts_{short,long}.jsonl: those buckets of bench/gpu/texts.jsonl)
#   There:  ZV_BUNDLE=.device-ab/zv-ab.tar.xz bash bench/gpu/attn_b1_compile_device.sh   (carry .device-ab)
# DL: seconds the stages may take in all (default 560); each stage's files are
# tarred into $OUT as it ends (s1.tgz .. s3.tgz).
set -uo pipefail
export OUT=${OUT:-/tmp/out}
source bench/gpu/device_lib.sh
stage_begin
wait $CKPT_PIDS
S=.device-ab/texts_short.jsonl
echo "== 16-row attention blocks, short texts t=$(el)"
for round in 1 2; do
  enc minilm-rows0-$round minilm $S
  enc minilm-rows16-$round minilm $S ZV_CUDA_ATTENTION_ROWS=16
done
enc minilm-fp8f-rows0 minilm $S ZV_CUDA_PRECISION=fp8 ZV_CUDA_FP8_FAST_ACCUM=1
enc minilm-fp8f-rows16 minilm $S ZV_CUDA_PRECISION=fp8 ZV_CUDA_FP8_FAST_ACCUM=1 ZV_CUDA_ATTENTION_ROWS=16
enc bge-rows0 bge $S
enc bge-rows16 bge $S ZV_CUDA_ATTENTION_ROWS=16
pack s1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "== batch 1 under ncu t=$(el) (ncu: ${NCU:-none})"
if [[ -n "$NCU" ]] && need 120; then
  timeout 100 $NCU --csv --metrics gpu__time_duration.sum \
    $B/bin/gpu_embed_bench --model /tmp/minilm --label b1 --texts $S \
    --batches 1 --skip-e2e 1 --out /tmp/b1.json > /tmp/b1_ncu.csv 2> $OUT/r/b1_ncu.err
  echo "ncu b1 rc=$?"; wc -l /tmp/b1_ncu.csv; gzip -c /tmp/b1_ncu.csv > $OUT/r/b1_ncu.csv.gz
  tail -3 $OUT/r/b1_ncu.err
fi
echo "== attention at long x4096 under ncu t=$(el)"
need 120 && ncu_attention $OUT/r/ncu_attention.txt SpeedOfLight Occupancy LaunchStats \
  WarpStateStats SchedulerStats MemoryWorkloadAnalysis ComputeWorkloadAnalysis SourceCounters
pack s2
echo "== torch.compile table t=$(el)"
compile_table
pack s3
echo "done t=$(el)"
