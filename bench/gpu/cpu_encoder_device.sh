#!/usr/bin/env bash
# The CPU encoder on the device machine's cores, CUDA hidden (issue 14's CPU
# targets), in one device call. Here:
#   tools/bundle.sh --out dist/zerovec-cpu //tools:zerovec \
#       //bench:cpu_embed_bench //bench:embed_corpus_bench
#   mkdir -p .device && cp dist/zerovec-cpu.tar.xz .device/
#   (or bench/gpu/pack_for_device.sh: its CUDA bundle has the same programs)
# There (carry .device):
#   bash bench/gpu/cpu_encoder_device.sh [DEADLINE_S]
# Bundle: .device/zerovec-cpu.tar.xz, else .device/zerovec-cuda.tar.xz.
# Passages: .device/passages5k.txt, else the first 5000 lines of
# .device/passages.txt.xz (pack_for_device.sh), else data/demo/corpus.jsonl.
# Steps: bench/embed_cpu_compare.py (the CPU encoder at fp32 and bf16 GEMMs
# vs eager torch fp32 and torch bf16 autocast, MiniLM shape, batch 1 and 32,
# 1, 2 and all threads); the encoder alone (embed_corpus_bench) and
# `zerovec build --device cpu` on the passages at 1 and all threads (default
# precision: bf16 where the CPU has AVX512-BF16/AMX), plus the MiniLM-shape
# build at fp32 (ZEROVEC_CPU_PRECISION=fp32), with user, system and wall time.
# Logs, compare.md and summary.txt go to $OUT.
set -uo pipefail
T0=$(date +%s)
DEADLINE=${1:-420}
OUT=${OUT:-/tmp/cpu_encoder_out}
W=/tmp/zvcpuenc
B=$W/bundle
export CUDA_VISIBLE_DEVICES=
mkdir -p "$W" "$OUT" "$B"
TAR=.device/zerovec-cpu.tar.xz
[[ -f $TAR ]] || TAR=.device/zerovec-cuda.tar.xz
tar -xJf "$TAR" -C "$B" --strip-components=1
if [[ ! -d $B/share/zerovec/models/zerovec-mini ]]; then
  mkdir -p "$B/share/zerovec/models"
  cp -r models/zerovec-mini "$B/share/zerovec/models/"
fi
CORES=$(nproc)
SUM=$OUT/summary.txt
el() { echo $(($(date +%s) - T0)); }
note() { echo "$*" | tee -a "$SUM"; }

# timed NAME MAX CMD...: CMD's wall, user and system seconds (its children
# included) and context switches into summary; its output in $OUT/NAME.log.
timed() {
  local name=$1 max=$2
  shift 2
  local left=$((DEADLINE - $(el)))
  ((left < max)) && max=$left
  if ((max < 10)); then
    note "== $name SKIPPED (deadline, t=$(el)s)"
    return 1
  fi
  note "== $name (t=$(el)s, limit ${max}s, load $(cut -d' ' -f1-3 /proc/loadavg))"
  python3 - "$max" "$OUT/$name.log" "$@" <<'PY' | tee -a "$SUM"
import resource, subprocess, sys, time
limit, log, cmd = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
t0 = time.time()
with open(log, "w") as fh:
    try:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=limit).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
wall = time.time() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru.ru_utime + ru.ru_stime
print("rc=%s wall %.2f s, user %.2f s, sys %.2f s (sys %.1f%% of CPU time), "
      "CPU/wall %.2f, ctx switches vol %d invol %d" % (
          rc, wall, ru.ru_utime, ru.ru_stime, 100 * ru.ru_stime / max(cpu, 1e-9),
          cpu / max(wall, 1e-9), ru.ru_nvcsw, ru.ru_nivcsw))
PY
  grep -E "docs/s|rows/s|device|C\+\+ / torch|^\| [0-9]|encode" "$OUT/$name.log" |
    cut -c1-300 | tail -n 12 | tee -a "$SUM"
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  echo "cores $CORES; $(grep -m1 'model name' /proc/cpuinfo); cgroup cpu.max: $(cat /sys/fs/cgroup/cpu.max 2>/dev/null)"
  echo "bundle $TAR: $(du -sh "$B" | cut -f1); CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES'"
  python3 -c 'import torch; print("torch", torch.__version__, torch.__config__.show())' 2>&1 | head -n 12
  grep -o -w -E 'avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort | uniq -c
} | tee "$SUM"

P=$W/passages5k.txt
if [[ -f .device/passages5k.txt ]]; then
  cp .device/passages5k.txt "$P"
elif [[ -f .device/passages.txt.xz ]]; then
  xz -dc .device/passages.txt.xz | head -n 5000 >"$P"
else
  P=data/demo/corpus.jsonl
fi
note "passages: $P, $(wc -l <"$P") lines"
MINILM=$W/minilm_random
python3 bench/gpu/make_checkpoint.py --shape minilm --out "$MINILM" >/dev/null

# 1. Eager torch (fp32 and bf16 autocast) vs the CPU encoder (fp32 and bf16
# GEMMs), same weights, min cosine vs torch fp32 >= 0.999 checked.
timed compare 240 python3 bench/embed_cpu_compare.py --threads "1,2,$CORES" \
  --batches 1,32 --precisions fp32,bf16 --reps 5 \
  --bin "$B/bin/cpu_embed_bench" --work "$W/compare" --out "$OUT/compare.md"
cat "$OUT/compare.md" >>"$SUM" 2>/dev/null
# A batch of one sequence is split over the pool's threads by rows (and
# attention by head); the same without that split, for comparison.
for t in 2 "$CORES"; do
  timed "nosplit_bf16_t$t" 40 env ZEROVEC_CPU_SPLIT=0 "$B/bin/cpu_embed_bench" \
    --model "$W/compare/minilm_random" --texts "$W/compare/texts.txt" \
    --out "$OUT/nosplit_t$t.json" --batches 1 --reps 5 --threads "$t" \
    --precision bf16
  cat "$OUT/nosplit_t$t.json" >>"$SUM" 2>/dev/null
done

# 2. Encoder alone and the whole build, bundled model, 1 thread and all cores.
for t in 1 "$CORES"; do
  timed "encoder_mini_t$t" 60 "$B/bin/embed_corpus_bench" --input "$P" \
    --device cpu --threads "$t" --chunk 1024 --repeat 1
  rm -rf "$W/d_t$t"
  timed "build_mini_t$t" 60 "$B/bin/zerovec" build --data "$W/d_t$t" \
    --collection p --input "$P" --device cpu --threads "$t"
done
# 3. The MiniLM shape (6 layers, 384 wide): fewer passages.
head -n 1500 "$P" >"$W/passages1500"
for t in 1 "$CORES"; do
  rm -rf "$W/dl_t$t"
  timed "build_minilm_t$t" 50 "$B/bin/zerovec" build --data "$W/dl_t$t" \
    --collection p --input "$W/passages1500" --model "$MINILM" --device cpu \
    --threads "$t"
done
rm -rf "$W/dl_fp32"
timed "build_minilm_t${CORES}_fp32" 50 env ZEROVEC_CPU_PRECISION=fp32 \
  "$B/bin/zerovec" build --data "$W/dl_fp32" --collection p \
  --input "$W/passages1500" --model "$MINILM" --device cpu --threads "$CORES"
note "done t=$(el)s"
