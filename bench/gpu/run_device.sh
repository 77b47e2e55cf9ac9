#!/usr/bin/env bash
# The packed GPU benchmark: one command on the GPU machine (H200), from the repo root.
#   Here (Debian 12):  python3 bench/gpu/make_texts.py &&
#                      tools/bundle.sh --cuda //bench/gpu:gpu_embed_bench //bench/gpu:ingest_bench
#   There:             bash bench/gpu/run_device.sh [DEADLINE_S]    (carry dist/zerovec-cuda.tar.xz)
# The programs run from that bundle (bench/gpu/bundle.sh finds or unpacks it; ZV_BUNDLE
# names another bundle folder or tarball); its lib/ has every library they need
# beyond glibc, libstdc++ and CUDA, found through RUNPATH.
# Writes $OUT/summary.md, $OUT/run.log and $OUT/gpubench.tar.gz (every JSON and log);
# re-written after each step, so a run stopped at its limit still returns what it did.
# Steps past DEADLINE_S seconds (default 450) are skipped or cut short.
set -uo pipefail
T0=$(date +%s)
DEADLINE=${1:-450}
OUT=${OUT:-/tmp/gpubench_out}
W=/tmp/gpubench
mkdir -p "$W" "$OUT"
export PYTHONUNBUFFERED=1
el() { echo $(( $(date +%s) - T0 )); }
TEXTS=bench/gpu/texts.jsonl

publish() {
  python3 bench/gpu/summarize.py "$W" > "$OUT/summary.md" 2> "$W/summarize.err"
  (cd "$W" && tar czf "$OUT/gpubench.tar.gz" --exclude='vec_*' --exclude='minilm' --exclude='bge-base' \
     --exclude=lib --exclude=bin --exclude='build*' .)
}
step() {  # step NAME MAX_SECONDS CMD...
  local name=$1 max=$2; shift 2
  local left=$(( DEADLINE - $(el) ))
  (( left < max )) && max=$left
  if (( max < 15 )); then echo "== $name SKIPPED (deadline; t=$(el)s)"; echo skipped > "$W/$name.log"; return 1; fi
  echo "== $name (t=$(el)s, limit ${max}s)"
  timeout "$max" "$@" > "$W/$name.log" 2>&1
  local rc=$?
  echo "   rc=$rc t=$(el)s"; tail -n 4 "$W/$name.log" | cut -c1-300
  publish
  return $rc
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit,persistence_mode --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -1
  python3 -c "import torch,transformers,numpy;print('torch',torch.__version__,'cuda',torch.version.cuda,'transformers',transformers.__version__,'numpy',numpy.__version__)"
  echo "cpus $(nproc); kernel $(uname -r)"; grep "model name" /proc/cpuinfo | head -1
  df -h /tmp | tail -1; mount | grep -E ' /tmp | / ' | head -2
} > "$W/env.txt" 2>&1
cat "$W/env.txt"

# Random checkpoints (numpy), in the background while libraries are checked.
python3 bench/gpu/make_checkpoint.py --shape minilm --out "$W/minilm" > "$W/ckpt_minilm.log" 2>&1 &
P1=$!
python3 bench/gpu/make_checkpoint.py --shape bge-base --out "$W/bge-base" > "$W/ckpt_bge.log" 2>&1 &
P2=$!

source bench/gpu/bundle.sh
EMB=$BUNDLE/bin/gpu_embed_bench
ING=$BUNDLE/bin/ingest_bench
{ echo "bundle: $BUNDLE"; cat "$BUNDLE/README.txt"; echo "--- ldd gpu_embed_bench"; ldd $EMB
  echo "--- ldd ingest_bench"; ldd $ING; } > "$W/libs.txt" 2>&1
ldd $EMB | grep "not found" && echo "gpu_embed_bench: libraries missing (see libs.txt)"
ldd $ING | grep "not found" && echo "ingest_bench: libraries missing (see libs.txt)"
wait $P1 $P2
tail -n1 "$W/ckpt_minilm.log" "$W/ckpt_bge.log"

for m in minilm bge-base; do
  lim=$([[ $m == minilm ]] && echo 100 || echo 200)
  step "ours_$m" $lim $EMB --model "$W/$m" --label $m --texts $TEXTS --out "$W/ours_$m.json" --vectors-out "$W/vec_$m.json"
  step "torch_$m" 150 python3 bench/gpu/torch_gpu_bench.py --model "$W/$m" --label $m --texts $TEXTS \
    --ours-vectors "$W/vec_$m.json" --out "$W/torch_$m.json"
done
step ingest_minilm 90 $ING --model "$W/minilm" --texts $TEXTS --bucket medium --rows 65536 \
  --chunks 1024,4096 --reps 3 --dir /tmp/zv_ingest --out "$W/ingest_minilm.json"
step ingest_bge-base 60 $ING --model "$W/bge-base" --texts $TEXTS --bucket medium --rows 32768 \
  --chunks 1024 --reps 2 --dir /tmp/zv_ingest --out "$W/ingest_bge-base.json"
for m in minilm bge-base; do
  step "compile_$m" 110 python3 bench/gpu/torch_gpu_bench.py --model "$W/$m" --label $m --texts $TEXTS \
    --out "$W/compile_$m.json" --compile-only --points medium:256,long:4096
done
publish
cp "$W/env.txt" "$OUT/env.txt"
echo "== done t=$(el)s"
cat "$OUT/summary.md"
