#!/usr/bin/env bash
# CPU encoder A/B on a shared, loaded machine (no torch needed): several
# cpu_embed_bench binaries/precisions run in turn, ROUNDS rounds, then per
# config the median and best pass (wall) and, at one thread, process CPU time a
# pass (/usr/bin/time of 12 reps minus 2 reps, /10: less sensitive to load).
#   bench/cpu_encoder_ab.sh MODEL_DIR TEXTS_FILE ROUNDS THREADS NAME:BIN:PRECISION...
# PRECISION goes to ZEROVEC_CPU_PRECISION (a binary from before that variable
# ignores it). MODEL_DIR: tools/model/random_checkpoint.py --out DIR; TEXTS_FILE:
# one text a line (embed_cpu_compare.py's medium_text(0..31)).
set -euo pipefail
MODEL=$1 TEXTS=$2 R=$3 T=$4
shift 4
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at start, $(date -u +%FT%TZ)"
for r in $(seq "$R"); do
  for c in "$@"; do
    IFS=: read -r name bin prec <<<"$c"
    ZEROVEC_CPU_PRECISION=$prec nice "$bin" --model "$MODEL" --texts "$TEXTS" \
      --out "$W/${name}_$r.json" --batches 1,32 --reps 5 --threads "$T" >/dev/null 2>&1
  done
done
cpu_s() {  # BIN PREC BATCH REPS -> user+sys seconds of one run
  ZEROVEC_CPU_PRECISION=$2 /usr/bin/time -f "%U %S" "$1" --model "$MODEL" \
    --texts "$TEXTS" --out "$W/cpu.json" --batches "$3" --reps "$4" --warmup 1 \
    --threads 1 2>&1 >/dev/null | tail -n 1 | awk '{print $1 + $2}'
}
if [[ $T == 1 ]]; then
  for c in "$@"; do
    IFS=: read -r name bin prec <<<"$c"
    for b in 1 32; do
      echo "cpu $name $b $(cpu_s "$bin" "$prec" $b 2) $(cpu_s "$bin" "$prec" $b 12)" >>"$W/cpu.txt"
    done
  done
fi
/usr/bin/python3 - "$W" "$R" "$T" "$@" <<'PY'
import json, os, sys
w, R, T = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for c in sys.argv[4:]:
    name = c.split(":")[0]
    res = {}
    for r in range(1, R + 1):
        for x in json.load(open(f"{w}/{name}_{r}.json"))["results"]:
            res.setdefault(x["batch"], []).extend(x["all_pass_s"])
    for b, v in sorted(res.items()):
        v.sort()
        print(f"{name} threads {T} batch {b}: median {32 / v[len(v) // 2]:.1f} rows/s, "
              f"best {32 / v[0]:.1f} rows/s ({len(v)} passes)")
if os.path.exists(f"{w}/cpu.txt"):
    for line in open(f"{w}/cpu.txt"):
        _, name, b, a, z = line.split()
        per = (float(z) - float(a)) / 10
        print(f"{name} batch {b}: CPU {per:.3f} s a pass at 1 thread, {32 / per:.1f} rows/s of CPU")
PY
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at end"
