#!/usr/bin/env bash
# Every GPU of a host (issue 19) on the GPU machine, in one device call (< 300 s
# on an H200). Here:
#   tools/bundle.sh --cuda --out dist/zv-multigpu //tools:zerovec \
#       //bench/gpu:gpu_serve_bench //index:gpu_split_test \
#       //tests/gpu:gpu_serve_test //embed:cuda_encoder_test
#   mkdir -p .device-multigpu && cp dist/zv-multigpu.tar.xz .device-multigpu/
# There (carry .device-multigpu):
#   ZV_BUNDLE=.device-multigpu/zv-multigpu.tar.xz bash bench/gpu/multigpu_device.sh
# Steps, each one capped:
#   tests   gpu_split_test (a mirror split over cuda:0,cuda:0 answers as the
#           unsplit one), cuda_encoder_test (the encoder, incl. a segment
#           registered by two encoders), gpu_serve_test (the N = 1 server path)
#   build   `zerovec build` of DOCS texts, one process each, side by side:
#           --device cuda:0 (the single-GPU code), --devices cuda:0 (N = 1: must
#           cost nothing), --devices all, and --devices cuda:0,cuda:0 (two
#           encoders on one GPU: the several-encoder path); docs/s of each and
#           whether their answers agree
#   search  gpu_serve_bench over 1M x 384 rows: `serve --gpu-memory auto` with
#           no --devices (single-GPU code), --devices cuda:0, all, and
#           cuda:0,cuda:0 (mirror split in two parts on one GPU): QPS / p50 /
#           p99 at 1, 16, 64 clients
# $OUT: summary.txt, tests.log, build.log, search.log.
set -uo pipefail
T0=$(date +%s)
DEADLINE=${DEADLINE:-285}
DOCS=${DOCS:-1000000}
ROWS=${ROWS:-1000000}
SECS=${SECS:-3}
OUT=${OUT:-/tmp/multigpu_out}
BUNDLE_TAR=${ZV_BUNDLE:-.device-multigpu/zv-multigpu.tar.xz}
W=/tmp/zvmultigpu
B=$W/bundle
Z=$B/bin/zerovec
rm -rf "$W"
mkdir -p "$OUT" "$B"
tar -xJf "$BUNDLE_TAR" -C "$B" --strip-components=1 || {
  echo "cannot unpack $BUNDLE_TAR" | tee "$OUT/summary.txt"
  exit 1
}
SUM=$OUT/summary.txt
STEP_GREP="PASSED|FAILED|SKIPPED|Failure|RESULT|split over|GPU search on|rows/s|build: device|build: embedder|answers|error|DIFFER"
STEP_LINES=40
source "$(dirname "$0")/device_lib.sh"
# The split path on one GPU needs a device listed twice.
export ZEROVEC_TESTING_REPEAT_DEVICES=1
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "gpus $(nvidia-smi -L | wc -l); cpus $(nproc); bundle $(du -sh "$B" | cut -f1)"
} | tee "$SUM"

tests() {
  "$B/bin/run-test" gpu_split_test --gtest_brief=1
  "$B/bin/run-test" cuda_encoder_test --gtest_brief=1
  "$B/bin/run-test" gpu_serve_test --gtest_brief=1
}
# step runs its command under timeout: the shell functions go as `bash -c`.
export B Z W
export -f tests
step tests 100 bash -c tests

# DOCS texts: pairs of WordNet glosses from the demo corpus (~40 tokens; 1M:
# several seconds a build at the ~300k docs/s one H200 builds, bench/RESULTS.md).
python3 - "$W/corpus.jsonl" "$DOCS" <<'PY'
import json, sys
glosses = [json.loads(l)["text"] for l in open("data/demo/corpus.jsonl") if l.strip()]
n = len(glosses)
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        text = glosses[i % n] + " " + glosses[(i * 7919 + 13) % n]
        f.write(json.dumps({"id": "d%d" % i, "text": text}) + "\n")
PY

builds() {
  local name flags
  for run in "single|--device cuda:0" "n1|--devices cuda:0" "all|--devices all" \
    "split2|--devices cuda:0,cuda:0"; do
    name=${run%%|*}
    flags=${run#*|}
    echo "== build $name ($flags)"
    # shellcheck disable=SC2086
    "$Z" build --data "$W/b_$name" --collection p --input "$W/corpus.jsonl" $flags 2>&1 |
      grep -E "^build: (stored|device|embedder)|error" | sed "s/^/$name: /"
  done
  # The same answers from every build: the top 10 of a few queries, as (id,
  # score) per build. The corpus repeats each text (DOCS > its G glosses,
  # the text of id dI is the text of dJ when I = J mod G), so equal scores
  # may come back under other ids of the same text: a build agrees when its
  # ids are the reference's, or when they name the same texts with scores
  # within 2e-3.
  local glosses
  glosses=$(grep -c . data/demo/corpus.jsonl)
  for q in "a vehicle that can fly" "the operator of a motor vehicle" "bake bread"; do
    for name in single n1 all split2; do
      echo -n "$name "
      "$Z" attach --data "$W/b_$name" --collection p --text "$q" -k 10 --json \
        --device cuda:0 --quiet 2>/dev/null | python3 -c \
        'import json,sys; print(json.dumps([[h["id"],h["score"]] for h in json.load(sys.stdin)["hits"]]))'
    done | python3 -c '
import json, sys
q, glosses = sys.argv[1], int(sys.argv[2])
runs = [(l.split(" ", 1)[0], json.loads(l.split(" ", 1)[1] or "[]")) for l in sys.stdin if " " in l]
ref_name, ref = runs[0]
for name, hits in runs[1:]:
    ids = [h[0] for h in hits]
    if ids == [h[0] for h in ref]:
        print(f"answers agree for \"{q}\": {name} = {ref_name} (same ids)")
        continue
    texts = lambda hs: [int(h[0][1:]) % glosses for h in hs]
    close = len(hits) == len(ref) and all(abs(a[1] - b[1]) <= 2e-3 for a, b in zip(hits, ref))
    same = close and sorted(texts(hits)) == sorted(texts(ref))
    verdict = "agree up to ties" if same else "DIFFER"
    print(f"answers {verdict} for \"{q}\": {name} {ids} vs {ref_name} {[h[0] for h in ref]}")
' "$q" "$glosses"
  done
}
export -f builds
step build 95 bash -c builds

step search 90 "$B/bin/gpu_serve_bench" --zerovec "$Z" --rows "$ROWS" \
  --clients 1,16,64 --seconds "$SECS" --window-us 500 \
  --devices "-;cuda:0;all;cuda:0,cuda:0" --dir "$W/serve"
echo "total $(el)s" | tee -a "$SUM"
