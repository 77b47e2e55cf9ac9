#!/bin/bash
# Bulk build: `zerovec build` throughput and peak memory, one run, two tables.
#  1. the bundled corpus (data/demo/corpus.jsonl, 5000 docs) with the bundled model
#     (models/zerovec-mini) on the CPU: REPS fresh builds, median docs/s;
#  2. scaling 10k..1M rows (dim 384, flat) from precomputed vectors (JSONL "vector"
#     field, --model none), so the series measures the build, not CPU embedding.
# Peak memory is the max RSS from /usr/bin/time -v (file-backed segment pages that
# the build touched count in it).
#
#   bazel build --jobs=2 //tools:zerovec //bench:make_vector_corpus && bench/build_scaling.sh [DIR]
# Env: SIZES ("10000 100000 300000 1000000"), REPS (3), BATCH (1024, scaling only).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
DIR="${1:-/tmp/zv_build_scaling}"
SIZES="${SIZES:-10000 100000 300000 1000000}"
REPS="${REPS:-3}"
BATCH="${BATCH:-1024}"
BIN="$ROOT/${BIN:-bazel-out/k8-fastbuild/bin}"  # the default (CPU, .bazelrc) build, whatever bazel-bin points at
ZEROVEC="$BIN/tools/zerovec"
rm -rf "$DIR" && mkdir -p "$DIR"

# run_build LOG ARGS...: prints "<wall s> <max RSS KiB> <user s> <sys s>"
run_build() {
  local log="$1"; shift
  /usr/bin/time -v "$ZEROVEC" build "$@" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  awk -F': ' '
    /Elapsed \(wall clock\)/ { n = split($2, t, ":"); w = (n == 3) ? t[1]*3600 + t[2]*60 + t[3] : t[1]*60 + t[2] }
    /Maximum resident/ { r = $2 } /User time/ { u = $2 } /System time/ { s = $2 }
    END { print w, r, u, s }' "$log"
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2 }'; }

echo "### Bundled corpus, bundled model (CPU)"
echo
DOCS=$(grep -c . data/demo/corpus.jsonl)
: >"$DIR/demo.txt"
for rep in $(seq "$REPS"); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  rm -rf "$DIR/demo-data"
  read -r wall rss user sys < <(run_build "$DIR/demo.log" --data "$DIR/demo-data" \
    --collection demo --input data/demo/corpus.jsonl --model models/zerovec-mini)
  grep -q "stored $DOCS rows" "$DIR/demo.log" || { cat "$DIR/demo.log" >&2; exit 1; }
  echo "$wall $rss $user $sys $load" >>"$DIR/demo.txt"
done
w=$(cut -d' ' -f1 "$DIR/demo.txt" | median)
r=$(cut -d' ' -f2 "$DIR/demo.txt" | median)
echo "| docs | reps | median wall s | docs/s | median peak RSS MiB | user+sys s (each rep) | load avg 1 min (each rep) |"
echo "| ---: | ---: | ---: | ---: | ---: | --- | --- |"
printf "| %d | %d | %.2f | %.0f | %.1f | %s | %s |\n" "$DOCS" "$REPS" "$w" "$(echo "$DOCS / $w" | bc -l)" \
  "$(echo "$r / 1024" | bc -l)" "$(awk '{ printf "%s%.1f", (NR>1?", ":""), $3+$4 }' "$DIR/demo.txt")" \
  "$(awk '{ printf "%s%s", (NR>1?", ":""), $5 }' "$DIR/demo.txt")"
echo

echo "### Scaling, precomputed vectors (dim 384, flat, --model none, --batch $BATCH)"
echo
echo "| rows | corpus file MiB | vectors MiB (rows x 1536 B) | wall s | rows/s | peak RSS MiB | RSS - vectors MiB | RocksDB MiB | load avg 1 min |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for n in $SIZES; do
  corpus="$DIR/corpus-$n.jsonl"
  "$BIN"/bench/make_vector_corpus "$n" 384 "$corpus"
  rm -rf "$DIR/data-$n"
  sync
  load=$(cut -d' ' -f1 /proc/loadavg)
  read -r wall rss user sys < <(run_build "$DIR/build-$n.log" --data "$DIR/data-$n" \
    --collection scale --input "$corpus" --model none --batch "$BATCH")
  grep -q "stored $n rows" "$DIR/build-$n.log" || { cat "$DIR/build-$n.log" >&2; exit 1; }
  cmib=$(echo "$(stat -c %s "$corpus") / 1048576" | bc -l)
  vmib=$(echo "$n * 1536 / 1048576" | bc -l)
  rmib=$(echo "$rss / 1024" | bc -l)
  dbmib=$(du -sm "$DIR/data-$n/meta" | cut -f1)
  printf "| %d | %.0f | %.0f | %.1f | %.0f | %.0f | %.0f | %s | %s |\n" "$n" "$cmib" "$vmib" "$wall" \
    "$(echo "$n / $wall" | bc -l)" "$rmib" "$(echo "$rmib - $vmib" | bc -l)" "$dbmib" "$load"
  rm -rf "$corpus" "$DIR/data-$n"
done
