#!/usr/bin/env bash
# Builds each libFuzzer target with clang (-fsanitize=fuzzer,address,undefined) and
# runs it for a bounded time over its seed corpus in tests/fuzz/corpus/<target>/.
# Seeds (including kept crash reproducers) are replayed first, so a regression fails
# at once. Prints one "FUZZ <target> PASS|FAIL" line per target; exit 1 on any FAIL.
#   FUZZ_SECONDS=60 tests/fuzz/run_fuzzers.sh [target...]
set -uo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${FUZZ_SECONDS:-45}
OUT=${FUZZ_OUT:-/tmp/zerovec-fuzz}
mkdir -p "$OUT"

CXX="clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I."
declare -A SOURCES LIBS
SOURCES[segment_attach]="tests/fuzz/segment_attach_fuzzer.cc shm/segment.cc base/status.cc"
LIBS[segment_attach]="-lrt -pthread"
if [[ -f tests/fuzz/targets.sh ]]; then source tests/fuzz/targets.sh; fi

targets=("$@")
if ((${#targets[@]} == 0)); then targets=("${!SOURCES[@]}"); fi

failed=0
for t in "${targets[@]}"; do
  bin="$OUT/$t"
  if ! $CXX ${SOURCES[$t]} ${LIBS[$t]} -o "$bin" >"$OUT/$t.build.log" 2>&1; then
    echo "FUZZ $t FAIL (build; see $OUT/$t.build.log)"; tail -20 "$OUT/$t.build.log"
    failed=1; continue
  fi
  work="$OUT/$t.corpus"; mkdir -p "$work"
  # New findings go to $work (scratch); the committed seeds stay as they are.
  if (cd "$OUT" && "$bin" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=0 "$work" "$OLDPWD/tests/fuzz/corpus/$t" >"$OUT/$t.log" 2>&1); then
    echo "FUZZ $t PASS ($(grep -o 'Done [0-9]* runs' "$OUT/$t.log" | head -1))"
  else
    echo "FUZZ $t FAIL (reproducer saved under $OUT; log $OUT/$t.log)"; tail -30 "$OUT/$t.log"
    failed=1
  fi
done
exit $failed
