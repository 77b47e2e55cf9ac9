# Sourced by the encoder device scripts (cudaenc_device.sh,
# attention_v2_device.sh) with OUT set: T0 and el (seconds
# since T0), the bundle (bench/gpu/bundle.sh), R (its bin/), T (a test run
# from its runfiles root, as under bazel test), the GPU's name and clocks in
# $OUT/env.txt; checkpoint and encoder_tests below.
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
