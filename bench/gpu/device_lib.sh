# Sourced by the GPU device scripts: el (seconds since T0) and step, which runs
# one capped command of a device call. Set before sourcing: T0 (start, epoch
# s), DEADLINE (s), OUT (log folder), SUM (summary file); optionally
# STEP_GREP, the lines of each step's log copied to the summary.
el() { echo $(($(date +%s) - T0)); }
step() { # step NAME MAX_SECONDS CMD...: log in $OUT/NAME.log
  local name=$1 max=$2
  shift 2
  local left=$((DEADLINE - $(el)))
  ((left < max)) && max=$left
  if ((max < 10)); then
    echo "== $name SKIPPED (deadline, t=$(el)s)" | tee -a "$SUM"
    return 1
  fi
  timeout "$max" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc t=$(el)s" | tee -a "$SUM"
  grep -E "${STEP_GREP:-PASSED|FAILED|SKIPPED|Failure|RESULT|error}" \
    "$OUT/$name.log" | cut -c1-300 | tail -n "${STEP_LINES:-24}" | tee -a "$SUM"
  return $rc
}

# Staged calls (scripts that tar each stage's files into $OUT as it ends, so a
# call cut short still returns the stages it finished): left, need, pack, and
# stage_begin, which unpacks the bundle ($ZV_BUNDLE) into $B, starts the MiniLM
# and bge-base checkpoints in the background (wait on $CKPT_PIDS) and runs
# cuda_encoder_test into $OUT/r/tests.log; it sets T0 and DEADLINE ($DL, default
# 560 s). enc runs one gpu_embed_bench at x4096.
left() { echo $((DEADLINE - $(el))); }
need() { # need SECONDS: false, saying so, when fewer are left
  (($(left) > $1)) || { echo "(skipped at t=$(el): under $1 s left)"; return 1; }
}
pack() { (cd "$OUT" && tar czf "$1.tgz" r && rm -rf r && mkdir r); }
stage_begin() {
  T0=$(date +%s)
  DEADLINE=${DL:-560}
  mkdir -p "$OUT/r"
  export ZV_BUNDLE=${ZV_BUNDLE:-.device-ab/zv-ab.tar.xz}
  source bench/gpu/bundle.sh
  B=$BUNDLE
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/r/env.txt"
  CKPT_PIDS=
  for shape in minilm bge-base; do
    python3 bench/gpu/make_checkpoint.py --shape $shape --out /tmp/${shape%-base} \
      >/tmp/ck_$shape.log 2>&1 &
    CKPT_PIDS="$CKPT_PIDS $!"
  done
  echo "== tests t=$(el)"
  timeout 120 "$B/bin/run-test" cuda_encoder_test >"$OUT/r/tests.log" 2>&1
  echo "tests rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|min cosine fixed|Failure|Expected|Which is" \
    "$OUT/r/tests.log" | cut -c1-160 | head -20
}
enc() { # enc LABEL MODEL TEXTS [VAR=VALUE...]: one x4096 run, vectors to /tmp/vec_LABEL.json
  local label=$1 model=$2 texts=$3
  shift 3
  need 25 || return 0
  env "$@" timeout 60 "$B/bin/gpu_embed_bench" --model /tmp/$model --label "$label" \
    --texts "$texts" --batches 4096 --skip-e2e 1 --out "$OUT/r/$label.json" \
    --vectors-out /tmp/vec_$label.json >"$OUT/r/$label.log" 2>&1
  echo "$label rc=$? t=$(el)"
  grep -E "B= 4096|phases" "$OUT/r/$label.log" | cut -c1-150
}
# The torch.compile table (issue 14): our encoder on MiniLM at short/medium/long
# x 1, 32, 256, 4096, then torch.compile in reduce-overhead mode (the default
# mode lost at all 12 points on 2026-12-04) until the deadline, summarised.
compile_table() {
  need 150 || return 0
  timeout 60 "$B/bin/gpu_embed_bench" --model /tmp/minilm --label minilm \
    --texts bench/gpu/texts.jsonl --batches 1,32,256,4096 --skip-e2e 1 \
    --out "$OUT/r/ours_minilm.json" >"$OUT/r/ours_minilm.log" 2>&1
  echo "ours rc=$? t=$(el)"
  timeout $(($(left) - 8)) python3 bench/gpu/torch_gpu_bench.py --model /tmp/minilm \
    --label minilm --texts bench/gpu/texts.jsonl --compile-only --points all \
    --modes reduce-overhead --out "$OUT/r/compile_minilm.json" >"$OUT/r/compile.log" 2>&1
  echo "compile rc=$? t=$(el)"
  python3 bench/gpu/summarize_compile.py "$OUT/r/ours_minilm.json" \
    "$OUT/r/compile_minilm.json" 2>&1 | tail -16
}
# ncu_attention OUTFILE SECTION...: the attention kernel (one launch past the
# warm-up) of MiniLM long x4096 under ncu with those --section names, its key
# lines printed; says so where the host has no ncu.
ncu_attention() {
  local out=$1 ncu sections=()
  shift
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [[ -z "$ncu" ]]; then echo "ncu: none"; return 1; fi
  for s in "$@"; do sections+=(--section "$s"); done
  timeout 100 "$ncu" -k regex:MmaAttention --launch-skip 30 --launch-count 1 "${sections[@]}" \
    "$B/bin/gpu_embed_bench" --model /tmp/minilm --label ncu --texts .device-ab/texts_long.jsonl \
    --batches 4096 --skip-e2e 1 --out /tmp/ncu.json >"$out" 2>&1
  echo "ncu rc=$?"
  grep -E "Duration|Throughput|Achieved Occupancy|Registers|Stall|Issued Ipc|ERR" "$out" | head -30
}
