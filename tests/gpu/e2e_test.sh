#!/bin/bash
# GPU end to end through the zerovec binary a user runs: build on CUDA, the same
# corpus built on the CPU beside it, serve on CUDA, query over gRPC, attach in
# process on CUDA and on the CPU; the answers must agree. Skips (exit 0, says
# why) where the binary has no CUDA or the host no GPU, as in CI.
#   Bazel:   bazel test --config=cuda //tests/gpu:e2e_test
#   Bundle:  BUNDLE/bin/run-test e2e_test     (see tools/bundle.sh)
# ZEROVEC / ZV_MODEL / ZV_CORPUS override where the binary, model and corpus are.
set -uo pipefail

ZEROVEC="${ZEROVEC:-$PWD/tools/zerovec}"
MODEL="${ZV_MODEL:-$PWD/models/zerovec-mini}"
CORPUS="${ZV_CORPUS:-$PWD/data/demo/corpus.jsonl}"
CHECKS="$PWD/tests/shell/checks.sh"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/gpu_e2e.XXXXXX")"
cd "$WORK" || exit 1
source "$CHECKS"
top_ids() {  # top_ids JSON_FILE: the hit ids, one a line
  python3 -c 'import json,sys; print("\n".join(h["id"] for h in json.load(open(sys.argv[1]))["hits"]))' "$1"
}

for f in "$ZEROVEC" "$MODEL/config.json" "$CORPUS"; do
  [[ -e "$f" ]] || { echo "FAIL: missing $f"; exit 1; }
done
head -n 2000 "$CORPUS" > corpus.jsonl

# 1. Build on CUDA; skip cleanly where there is none.
"$ZEROVEC" build --data data --collection gpu --input corpus.jsonl --model "$MODEL" \
  --device cuda >out 2>err
rc=$?
if [[ $rc != 0 ]] && grep -qE "without CUDA|no such CUDA device" err; then
  echo "SKIPPED: $(tail -1 err)"
  # Under Bazel, say so in the test's XML, so the run counts it as skipped.
  if [[ -n ${XML_OUTPUT_FILE:-} ]]; then
    printf '%s\n' '<?xml version="1.0" encoding="UTF-8"?>' \
      '<testsuites><testsuite name="gpu_e2e" tests="1" skipped="1">' \
      '<testcase name="GpuEndToEnd" result="skipped"><skipped message="no CUDA"/></testcase>' \
      '</testsuite></testsuites>' >"$XML_OUTPUT_FILE"
  fi
  exit 0
fi
check "build --device cuda" 0 $rc
contains "build names its CUDA device" err "device cuda:0"
contains "build stored the corpus" out "stored 2000 rows"
# A CUDA request on a device that is not there is an error, not a CPU run.
"$ZEROVEC" build --data data --collection nope --input corpus.jsonl --model "$MODEL" \
  --device cuda:99 >out 2>err
check "build --device cuda:99" 1 $?
contains "missing device named" err "cuda:99"

# 2. The same corpus on the CPU, into a second collection.
"$ZEROVEC" build --data data --collection cpu --input corpus.jsonl --model "$MODEL" \
  --device cpu >out 2>err
check "build --device cpu" 0 $?
contains "cpu build names its device" err "device cpu"

# 3. Attach in process: CUDA and CPU query embeddings over both collections agree.
queries=("a large natural stream of water" "a machine that flies through the air"
         "feeling great happiness" "to move very fast on foot")
for q in "${queries[@]}"; do
  for dev in cuda cpu; do
    for coll in gpu cpu; do
      "$ZEROVEC" attach --data data --collection $coll --text "$q" -k 10 --json \
        --model "$MODEL" --device $dev >"att_${dev}_${coll}.json" 2>err ||
        { echo "FAIL: attach $dev $coll: $(cat err)"; failures=$((failures + 1)); }
    done
  done
  top_ids att_cpu_cpu.json >ref.ids
  for f in att_cuda_gpu.json att_cuda_cpu.json att_cpu_gpu.json; do
    top_ids "$f" >got.ids
    same_top=$([[ $(head -1 ref.ids) == $(head -1 got.ids) ]] && echo 1 || echo 0)
    overlap=$(sort ref.ids got.ids | uniq -d | wc -l)
    if [[ $same_top == 1 && $overlap -ge 8 ]]; then
      echo "ok: \"$q\" $f top-1 equal, $overlap/10 shared with the CPU answer"
    else
      echo "FAIL: \"$q\" $f: top-1 $(head -1 got.ids) vs $(head -1 ref.ids), $overlap/10 shared"
      failures=$((failures + 1))
    fi
  done
done

# 4. Serve on CUDA; gRPC text queries answer as attach does.
"$ZEROVEC" serve --data data --model "$MODEL" --device cuda --listen 127.0.0.1:0 \
  --port-file port 2>serve.log &
SERVER_PID=$!
for _ in $(seq 300); do [[ -s port ]] && break; sleep 0.1; done
if [[ ! -s port ]]; then
  echo "FAIL: serve did not start"; cat serve.log; exit 1
fi
contains "serve names its CUDA device" serve.log "device cuda:0"
for q in "${queries[@]}"; do
  "$ZEROVEC" query --server "127.0.0.1:$(cat port)" --collection gpu --text "$q" \
    -k 10 --json >q.json 2>err
  check "query \"$q\"" 0 $?
  "$ZEROVEC" attach --data data --collection gpu --text "$q" -k 10 --json \
    --model "$MODEL" --device cuda >a.json 2>err
  if [[ "$(top_ids q.json)" == "$(top_ids a.json)" ]]; then
    echo "ok: served and attached answers equal for \"$q\""
  else
    echo "FAIL: served vs attached differ for \"$q\""; failures=$((failures + 1))
  fi
done
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
check "serve stops on SIGTERM" 0 $?
SERVER_PID=""

echo "gpu e2e: $failures failure(s)"
[[ $failures == 0 ]]
