#!/usr/bin/env bash
# One device call (<= 5 min) for the CUDA encoder's FP8 (e4m3) GEMM path
# (issue 14, precision lever): the FP8 encoder tests, then gpu_embed_bench on
# the MiniLM and bge-base shapes (random checkpoints, bench/gpu/make_checkpoint.py)
# with fp16 and fp8 GEMMs side by side (ZV_CUDA_PRECISION), batches 1/32/4096 of
# the short/medium/long texts of bench/gpu/texts.jsonl: GPU ms, % of the GEMM
# ceiling measured in the same process, phases; and each FP8 run's vectors
# against PyTorch fp32 (torch_gpu_bench.py --vectors-only); if time is left,
# MiniLM with fp8 and cuBLASLt's fast accumulation. bf16 is not a path
# of the CUDA encoder (its activations are fp16 throughout).
#   Here:   tools/bundle.sh --cuda --out dist/zv-fp8 //embed:cuda_encoder_test \
#             //bench/gpu:gpu_embed_bench
#   There:  ZV_BUNDLE=dist/zv-fp8.tar.xz bash bench/gpu/fp8_device.sh
# Leaves $OUT/summary.md, steps.md and fp8_all.tar.xz (every log and JSON: the
# device tool brings back at most 8 files). CUBLASLT_LOG_LEVEL=1 on the FP8
# steps: cuBLASLt prints why it refuses an algorithm.
set -uo pipefail
T0=$(date +%s)
DEADLINE=${DEADLINE:-290}
OUT=${OUT:-/tmp/fp8_out}
mkdir -p "$OUT"
SUM=$OUT/steps.md
: >"$SUM"
source bench/gpu/device_lib.sh
source bench/gpu/bundle.sh
R=$BUNDLE/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit \
  --format=csv >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
python3 bench/gpu/make_checkpoint.py --shape minilm --out /tmp/minilm >/tmp/ck1.log 2>&1 &
P1=$!
python3 bench/gpu/make_checkpoint.py --shape bge-base --out /tmp/bge >/tmp/ck2.log 2>&1 &
P2=$!

STEP_GREP='PASSED|FAILED|SKIPPED|Failure|Expected|Which is|min cosine|fp8:|device:|cublasLt|\[cublasLt' \
  STEP_LINES=40 step tests 90 env CUBLASLT_LOG_LEVEL=1 "$R/run-test" cuda_encoder_test \
  '--gtest_filter=*Fp8*:*Levers*:*MiniLmRandomAgrees*:*ZerovecMiniAgrees*'

export STEP_GREP='GEMM ceiling|B= *(1|32|4096) |phases|encoder vs|WARNING|FATAL|fp8 off|cublasLt'
export STEP_LINES=30
BENCH=(--texts bench/gpu/texts.jsonl --batches 1,32,4096 --skip-e2e 1)
TV=(--texts bench/gpu/texts.jsonl --vectors-only)
bench() { # bench MODEL_DIR LABEL PRECISION MAX_SECONDS (fp8fast: fp8 with
  # cuBLASLt's fast accumulation)
  local fast=0 prec=$3
  [[ $3 == fp8fast ]] && fast=1 prec=fp8
  step "enc_$2_$3" "$4" env ZV_CUDA_PRECISION="$prec" ZV_CUDA_FP8_FAST_ACCUM=$fast CUBLASLT_LOG_LEVEL=1 \
    "$R/gpu_embed_bench" --model "$1" --label "$2-$3" "${BENCH[@]}" \
    --out "$OUT/enc_$2_$3.json" --vectors-out "$OUT/vec_$2_$3.json"
}
torchvec() { # torchvec MODEL_DIR LABEL PRECISION MAX_SECONDS
  [[ -s $OUT/vec_$2_$3.json ]] || return 1
  STEP_GREP=min_cos step "torch_vec_$2_$3" "$4" python3 bench/gpu/torch_gpu_bench.py \
    --model "$1" --label "$2" "${TV[@]}" --ours-vectors "$OUT/vec_$2_$3.json" \
    --out "$OUT/torch_vec_$2_$3.json"
}

wait $P1
echo "checkpoint minilm t=$(el)s: $(tail -1 /tmp/ck1.log)" | tee -a "$SUM"
bench /tmp/minilm minilm fp16 60
bench /tmp/minilm minilm fp8 60
torchvec /tmp/minilm minilm fp8 50
wait $P2
echo "checkpoint bge t=$(el)s: $(tail -1 /tmp/ck2.log)" | tee -a "$SUM"
bench /tmp/bge bge fp16 60
bench /tmp/bge bge fp8 60
torchvec /tmp/bge bge fp8 60
bench /tmp/minilm minilm fp8fast 50
torchvec /tmp/minilm minilm fp8fast 40
torchvec /tmp/minilm minilm fp16 40
python3 bench/gpu/summarize_fp8.py "$OUT" | tee "$OUT/summary.md"
echo "done t=$(el)s" | tee -a "$SUM"
(cd "$OUT" && tar -cJf /tmp/fp8_all.tar.xz --exclude=summary.md --exclude=steps.md . &&
  find . -type f ! -name summary.md ! -name steps.md -delete && mv /tmp/fp8_all.tar.xz .)
