#!/usr/bin/env bash
# Runs every ZeroVec test and ends with one line "N passed, N failed":
#   1. installs what is missing (tools/setup.sh);
#   2. every unit and integration test under AddressSanitizer + UBSan (--config=asan),
#      except those tagged "unsanitized" (recall/quality runs over 100k rows that
#      ASan slows ~15x past Bazel's timeout), which run in the optimized build;
#   3. the tests tagged "tsan" (segment, collection, gRPC and attach concurrency)
#      under ThreadSanitizer;
#   4. each libFuzzer target (Bazel, clang, --config=fuzz) for FUZZ_SECONDS
#      (default 45) over its seed corpus.
# CUDA tests are behind --config=cuda and run on a GPU machine (README, "GPU").
# Counts are test cases from each target's JUnit XML; a target that died before
# writing its XML counts as one failure.
set -uo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

BAZEL_FLAGS=(--keep_going --jobs=2 --local_ram_resources=HOST_RAM*.5 --local_cpu_resources=2)
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS" "$RESULTS".labels "$RESULTS".err' EXIT

# run_suite CONFIG QUERY: bazel test under CONFIG, then tallies into $RESULTS.
run_suite() {
  local config=$1 query=$2 status=0
  # A failed query (a BUILD error, a stray bazel-* symlink into another output
  # base) must fail CI, not skip the suite.
  if ! bazel query "$query" 2>"$RESULTS.err" >"$RESULTS.labels"; then
    tail -5 "$RESULTS.err"
    echo "# $config: bazel query failed" >&2
    echo "0 1 0" >>"$RESULTS"
    return
  fi
  if [[ ! -s "$RESULTS.labels" ]]; then return; fi
  local flags=("${BAZEL_FLAGS[@]}")
  [[ $config == default ]] || flags+=(--config="$config")
  echo "=== bazel test, $config build ($(wc -l <"$RESULTS.labels") targets)"
  bazel test "${flags[@]}" $(cat "$RESULTS.labels") || status=$?
  local testlogs
  testlogs=$(bazel info "${flags[@]}" bazel-testlogs 2>/dev/null)
  /usr/bin/python3 - "$status" "$RESULTS.labels" "$testlogs" "$config" >>"$RESULTS" <<'PY'
import os, sys, xml.etree.ElementTree as ET
status, labels, testlogs, config = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
passed = failed = skipped = 0
for label in open(labels).read().split():
    package, name = label.lstrip("/").split(":")
    try:
        root = ET.parse(os.path.join(testlogs, package, name, "test.xml")).getroot()
    except Exception:
        failed += 1
        print(f"# {config} {label}: no result (build failure or crash)", file=sys.stderr)
        continue
    cases = list(root.iter("testcase"))
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    if not cases:  # a non-gtest test (sh_test): Bazel's XML holds its verdict
        bad = root.find(".//failure") is not None or root.find(".//error") is not None
        failed += bad
        passed += not bad
if status != 0 and failed == 0:
    failed = 1  # bazel failed although no test case said so
print(passed, failed, skipped)
PY
}

run_suite asan 'tests(//...) except attr(tags, manual, //...) except attr(tags, unsanitized, //...)'
run_suite default 'attr(tags, unsanitized, tests(//...)) except attr(tags, manual, //...)'
run_suite tsan 'attr(tags, tsan, tests(//...)) except attr(tags, manual, //...)'

# The fuzz targets build with clang in their own Bazel output base
# (tests/fuzz/run_fuzzers.sh says why); one "FUZZ <target> PASS|FAIL" line each.
echo "=== fuzzing (${FUZZ_SECONDS:-45} s a target)"
fuzz_log=$(mktemp)
fuzz_status=0
bash tests/fuzz/run_fuzzers.sh | tee "$fuzz_log" || fuzz_status=$?
fuzz_pass=$(grep -c '^FUZZ [^ ]* PASS' "$fuzz_log")
fuzz_fail=$(grep -c '^FUZZ [^ ]* FAIL' "$fuzz_log")
((fuzz_status == 0 || fuzz_fail > 0)) || fuzz_fail=1  # died without a verdict
echo "$fuzz_pass $fuzz_fail 0" >>"$RESULTS"
rm -f "$fuzz_log"

awk '{p += $1; f += $2; s += $3} END {
  printf "(%d skipped)\n%d passed, %d failed\n", s, p, f; exit (f > 0) }' "$RESULTS"
