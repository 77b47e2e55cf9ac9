#!/usr/bin/env bash
# One device call for issue 14 after the fixed LayerNorm became the default:
#   1. cuda_encoder_test (all cases);
#   2. the default (fixed LayerNorm) against ZV_CUDA_LAYERNORM=generic,
#      interleaved, MiniLM twice and bge-base once, x4096, one process each;
#   3. FP8 with and without fast accumulation on MiniLM (all GEMMs) and on
#      bge-base (layers 6-11), each setting's vectors against PyTorch fp32;
#   4. batch 1 of MiniLM short under nsys (kernel trace, graph nodes traced)
#      where nsys is installed: which kernels bound the 0.14 ms pass; then
#      ZV_CUDA_ATTENTION_BLOCKS=3 against 1 (MiniLM x4096, twice each) and the
#      attention kernel at long x4096 under ncu where it is installed;
#   5. e2e_test (the zerovec binary on CUDA);
#   6. the torch.compile table (MiniLM, short/medium/long x 1, 32, 256, 4096)
#      with reduce-overhead only: the default mode lost at all 12 points on
#      2026-12-04 (bench/RESULTS.md), so the time goes to the mode that wins.
#   Here:   tools/bundle.sh --cuda --no-python --out dist/zv-ab //embed:cuda_encoder_test \
#             //bench/gpu:gpu_embed_bench //tools:zerovec //tests/gpu:e2e_test
#           mkdir -p .device-ab && cp dist/zv-ab.tar.xz .device-ab/
#           (texts_short.jsonl in .device-ab: the short bucket of bench/gpu/texts.jsonl)
#   There:  ZV_BUNDLE=.device-ab/zv-ab.tar.xz bash bench/gpu/ln_default_b1_device.sh   (carry .device-ab)
# DL: seconds the stages may take in all (default 560). Each stage's files are
# tarred into $OUT as it ends (s1.tgz .. s4.tgz).
set -uo pipefail
export OUT=${OUT:-/tmp/out}
source bench/gpu/device_lib.sh
stage_begin
wait $CKPT_PIDS
T=bench/gpu/texts.jsonl
echo "== layernorm t=$(el)"
for round in ${LN_ROUNDS:-1 2}; do
  enc minilm-fixed-$round minilm $T
  enc minilm-generic-$round minilm $T ZV_CUDA_LAYERNORM=generic
done
enc bge-fixed bge $T
enc bge-generic bge $T ZV_CUDA_LAYERNORM=generic
pack s1
echo "== batch 1 under nsys t=$(el)"
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys \
  /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"
if [[ -n "$NSYS" ]] && need 60; then
  timeout 90 $NSYS profile -t cuda --cuda-graph-trace=node --force-overwrite true -o /tmp/b1 \
    $B/bin/gpu_embed_bench --model /tmp/minilm --label b1 --texts .device-ab/texts_short.jsonl \
    --batches 1 --skip-e2e 1 --out $OUT/r/b1.json > $OUT/r/b1.log 2>&1
  echo "nsys rc=$?"; grep -E "B=     1" $OUT/r/b1.log | cut -c1-150
  timeout 60 $NSYS stats --report cuda_gpu_trace --format csv --output /tmp/b1 /tmp/b1.nsys-rep > /dev/null 2>&1
  ls /tmp/b1*; gzip -c /tmp/b1_cuda_gpu_trace.csv > $OUT/r/b1_trace.csv.gz 2>/dev/null
fi
echo "== fp8 t=$(el)"
enc minilm-fp8 minilm $T ZV_CUDA_PRECISION=fp8
enc minilm-fp8-fast minilm $T ZV_CUDA_PRECISION=fp8 ZV_CUDA_FP8_FAST_ACCUM=1
enc bge-fp8-6-11 bge $T ZV_CUDA_PRECISION=fp8 ZV_CUDA_FP8_LAYERS=6-11
enc bge-fp8-6-11-fast bge $T ZV_CUDA_PRECISION=fp8 ZV_CUDA_FP8_LAYERS=6-11 ZV_CUDA_FP8_FAST_ACCUM=1
for m in minilm bge; do
  need 40 || break
  V=$(ls /tmp/vec_$m-fixed*.json /tmp/vec_$m-fp8*.json 2>/dev/null | tr '\n' , | sed 's/,$//')
  timeout 90 python3 bench/gpu/torch_gpu_bench.py --model /tmp/$m --label $m --texts bench/gpu/texts.jsonl \
    --vectors-only --ours-vectors "$V" --out $OUT/r/torch_vec_$m.json > $OUT/r/torch_vec_$m.log 2>&1
  echo "torch $m rc=$? t=$(el)"
  grep -E "^vec_" $OUT/r/torch_vec_$m.log | sed 's/"n": [0-9]*, //; s/min_cos_//g; s/"ours_vs_torch_fp16": [0-9.]*, //' | cut -c1-130
done
pack s2
echo "== attention: 3 blocks an SM (opt-in) against the default, MiniLM long x4096 t=$(el)"
for round in ${BLOCK_ROUNDS:-1 2}; do
  enc minilm-long-blocks1-$round minilm $T ZV_CUDA_ATTENTION_BLOCKS=1
  enc minilm-long-blocks3-$round minilm $T ZV_CUDA_ATTENTION_BLOCKS=3
done
if (($(left) > 240)); then
  ncu_attention $OUT/r/ncu_attention.txt SpeedOfLight Occupancy LaunchStats WarpStateStats \
    SchedulerStats MemoryWorkloadAnalysis ComputeWorkloadAnalysis
fi
pack s3
echo "== e2e t=$(el)"
need 40 && timeout 60 $B/bin/run-test e2e_test > $OUT/r/e2e.log 2>&1; echo "e2e rc=$?"; tail -3 $OUT/r/e2e.log
echo "== torch.compile table t=$(el)"
compile_table
pack s4
echo "done t=$(el)"
