#!/usr/bin/env bash
# Issue 12's measurements on the device host's CPUs (16 cores) in one call,
# from a CPU bundle of zerovec + live_index_bench. Here:
#   tools/bundle.sh --out dist/zerovec-live //tools:zerovec //bench:live_index_bench
#   mkdir -p .device-live && cp dist/zerovec-live.tar.xz .device-live/
# There (carry .device-live):
#   bash bench/live_index_device.sh [DEADLINE_S]
# Steps (each skipped when the deadline is near): attach at 1M rows with an
# efSearch sweep; searches with and without one writer through the server at
# 1M and 100k rows; kill -9 during upserts at 1M rows, 20 rounds. Logs in $OUT.
set -uo pipefail
T0=$(date +%s)
DEADLINE=${1:-560}
OUT=${OUT:-/tmp/live_out}
W=/tmp/zvlive
B=$W/bundle
mkdir -p "$W" "$OUT" "$B"
tar -xJf .device-live/zerovec-live.tar.xz -C "$B" --strip-components=1
Z=$B/bin/zerovec
L=$B/bin/live_index_bench
el() { echo $(($(date +%s) - T0)); }
{ nproc; uptime; } >"$OUT/machine.txt"
step() { # step NAME MAX_SECONDS ARGS...
  local name=$1 max=$2
  shift 2
  local left=$((DEADLINE - $(el)))
  ((left < max)) && max=$left
  if ((max < 20)); then
    echo "== $name SKIPPED at t=$(el)s" | tee -a "$OUT/summary.txt"
    return
  fi
  echo "== $name (t=$(el)s, load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT/summary.txt"
  timeout "$max" "$L" "$@" --zerovec "$Z" --work "$W/work" >"$OUT/$name.log" 2>&1
  echo "rc=$?" >>"$OUT/$name.log"
  grep -E '^\||x;|worst|reader RSS|prepared|pieces built' "$OUT/$name.log" | tee -a "$OUT/summary.txt"
}
# STEPS picks a subset (default all), e.g. STEPS="attach_1m writers_100k".
STEPS=${STEPS:-attach_1m writers_1m kill_1m writers_100k}
for s in $STEPS; do
  case $s in
    attach_1m) step attach_1m 260 attach --rows 1000000 --dim 384 \
      --queries "${QUERIES:-200}" --ef "${EFS:-128,256,512,1024}" ;;
    writers_1m) step writers_1m 260 writers --rows 1000000 --dim 384 \
      --clients 8 --seconds 8 --rounds 2 ;;
    kill_1m) step kill_1m 220 kill --rows 1000000 --dim 384 --rounds 20 ;;
    writers_100k) step writers_100k 100 writers --rows 100000 --dim 384 \
      --clients 8 --seconds 8 --rounds 2 ;;
  esac
done
echo "total $(el) s" | tee -a "$OUT/summary.txt"
