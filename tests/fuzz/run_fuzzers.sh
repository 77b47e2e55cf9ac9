#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/BUILD with Bazel (clang,
# --config=fuzz: -fsanitize=fuzzer,address,undefined) and runs each for a bounded
# time over its seed corpus in tests/fuzz/corpus/<target>/. Seeds (including kept
# crash reproducers) are replayed first, so a regression fails at once. Prints one
# "FUZZ <target> PASS|FAIL" line per target; exit 1 on any FAIL.
#   FUZZ_SECONDS=60 tests/fuzz/run_fuzzers.sh [target...]
# Bazel configures its C++ toolchain from CC once per output base, so the clang
# build lives in its own output base (ZV_FUZZ_OUTPUT_BASE) and never invalidates
# the main gcc one; --symlink_prefix=/ leaves the workspace's bazel-* links alone.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
SECONDS_EACH=${FUZZ_SECONDS:-45}
OUT=${FUZZ_OUT:-/tmp/zerovec-fuzz}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# The fuzz server idles out after 10 minutes instead of Bazel's 3 hours.
BAZEL=(bazel "--output_base=${ZV_FUZZ_OUTPUT_BASE:-$HOME/.cache/zerovec-fuzz-bazel}"
  --max_idle_secs=600)
FLAGS=(--config=fuzz --repo_env=CC=clang --symlink_prefix=/)

targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <("${BAZEL[@]}" query 'attr(tags, "\bfuzz\b", //tests/fuzz:all)' 2>"$OUT/query.log" |
    sed 's/.*://' | sort)
  if ((${#targets[@]} == 0)); then
    echo "FUZZ all FAIL (bazel query; see $OUT/query.log)"
    tail -20 "$OUT/query.log"
    exit 1
  fi
fi

# All targets in one build first (parallel actions across targets); the
# per-target builds below are then no-ops that report each target's status.
"${BAZEL[@]}" build "${FLAGS[@]}" --keep_going "${targets[@]/#///tests/fuzz:}" >"$OUT/build.log" 2>&1
BIN=$("${BAZEL[@]}" info "${FLAGS[@]}" bazel-bin 2>/dev/null)/tests/fuzz
failed=0
for t in "${targets[@]}"; do
  # One build per target: its exit status says whether THIS binary is current.
  if ! "${BAZEL[@]}" build "${FLAGS[@]}" "//tests/fuzz:$t" >"$OUT/$t.build.log" 2>&1; then
    echo "FUZZ $t FAIL (build; see $OUT/$t.build.log)"
    grep -A12 "^ERROR:" "$OUT/$t.build.log" | head -30
    failed=1
    continue
  fi
  bin=$BIN/$t
  work="$OUT/$t.corpus"
  mkdir -p "$work"
  seeds=()
  [[ -d tests/fuzz/corpus/$t ]] && seeds=("$ROOT/tests/fuzz/corpus/$t")
  # New findings go to $work (scratch), reproducers to $OUT; the committed seeds
  # stay as they are. The working directory is the target's runfiles root, as
  # under `bazel run` (the tokenizer reads models/zerovec-mini/vocab.txt there).
  if (cd "$bin.runfiles/zerovec" && "$bin" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=0 -artifact_prefix="$OUT/$t-" "$work" "${seeds[@]}" \
    >"$OUT/$t.log" 2>&1); then
    echo "FUZZ $t PASS ($(grep -o 'Done [0-9]* runs' "$OUT/$t.log" | head -1))"
  else
    echo "FUZZ $t FAIL (reproducer saved under $OUT; log $OUT/$t.log)"
    tail -30 "$OUT/$t.log"
    failed=1
  fi
done
exit $failed
