# Sourced by the encoder device scripts (cudaenc_device.sh,
# encoder_ab_device.sh and its wrapper attention_v2_device.sh) with OUT set:
# T0 and el (seconds since T0), the bundle (bench/gpu/bundle.sh), R (its
# bin/), T (a test run from its runfiles root, as under bazel test), the GPU's
# name and clocks in $OUT/env.txt; checkpoint, encoder_tests, bench_setting
# and torch_vectors below.
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
mkdir -p "$OUT"
source bench/gpu/bundle.sh
R=$BUNDLE/bin
T=$BUNDLE/bin/run-test
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit \
  --format=csv > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
# checkpoint SHAPE DIR: make_checkpoint.py in the background, its pid in CK_PID.
checkpoint() {
  python3 bench/gpu/make_checkpoint.py --shape "$1" --out "$2" > "/tmp/ck_$1.log" 2>&1 &
  CK_PID=$!
}
# encoder_tests SECONDS FILTER: cuda_encoder_test's FILTER cases into
# $OUT/tests.log, their verdicts and cosines on stdout.
encoder_tests() {
  { echo "== cuda_encoder_test ($2)"
    timeout "$1" "$T" cuda_encoder_test --gtest_filter="$2"; echo "rc=$? t=$(el)"; } \
    > "$OUT/tests.log" 2>&1
  grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED) |^rc=|^==|min cosine|Failure|Expected|Which is|Value of" \
    "$OUT/tests.log" | cut -c1-200
}
# bench_setting SHAPE VAR VALUE BATCHES [vectors]: gpu_embed_bench on
# /tmp/SHAPE with VAR=VALUE in its environment, into $OUT/enc_SHAPE_VALUE.*;
# "vectors" also writes $OUT/vec_SHAPE.json for torch_vectors.
bench_setting() {
  local shape=$1 var=$2 value=$3 batches=$4
  env "$var=$value" timeout 170 "$R/gpu_embed_bench" --model "/tmp/$shape" \
    --label "$shape-$var=$value" --texts bench/gpu/texts.jsonl --batches "$batches" \
    --skip-e2e 1 --out "$OUT/enc_${shape}_$value.json" \
    ${5:+--vectors-out "$OUT/vec_$shape.json"} > "$OUT/enc_${shape}_$value.log" 2>&1
  echo "bench $shape $var=$value rc=$? t=$(el)"
}
# torch_vectors SHAPE: $OUT/vec_SHAPE.json against PyTorch fp32 and fp16
# (>= 0.999 required).
torch_vectors() {
  timeout 90 python3 bench/gpu/torch_gpu_bench.py --model "/tmp/$1" --label "$1" \
    --texts bench/gpu/texts.jsonl --vectors-only --ours-vectors "$OUT/vec_$1.json" \
    --out "$OUT/torch_vec_$1.json" > "$OUT/torch_vec_$1.log" 2>&1
  echo "torch vectors $1 rc=$? t=$(el)"; grep -E "min_cos" "$OUT/torch_vec_$1.log" | cut -c1-240
}
