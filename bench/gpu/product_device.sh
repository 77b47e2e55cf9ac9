#!/usr/bin/env bash
# The GPU product measured as a user runs it, in one device call, from the CUDA
# bundle (tools/bundle.sh --cuda). Here:
#   tools/bundle.sh --cuda //tools:zerovec //bench:embed_corpus_bench \
#       //bench:search_load //embed:cuda_encoder_test //embed:segment_sink_test \
#       //tests/gpu:e2e_test
#   python3 bench/corpus/make_passages.py
#   bench/gpu/pack_for_device.sh     # .device/: the bundle (model left out: the
#                                    # checkout has it) and the passages, short
# There (carry .device):
#   bash bench/gpu/product_device.sh [DEADLINE_S]
# Steps: the GPU tests from the bundle; the whole `zerovec build` of the 1M
# passages on CUDA with the bundled model and with a MiniLM-shape checkpoint,
# each beside the encoder alone on the same texts; the same build on the CPU
# (a subset); `zerovec serve` text-search QPS at 1/16/64 clients on CUDA and on
# the CPU. Logs and a summary go to $OUT.
set -uo pipefail
T0=$(date +%s)
DEADLINE=${1:-540}
OUT=${OUT:-/tmp/product_out}
W=/tmp/zvprod
B=$W/bundle
Z=$B/bin/zerovec
mkdir -p "$W" "$OUT" "$B"
tar -xJf .device/zerovec-cuda.tar.xz -C "$B" --strip-components=1
mkdir -p "$B/share/zerovec/models"
cp -r models/zerovec-mini "$B/share/zerovec/models/"
el() { echo $(($(date +%s) - T0)); }
SUM=$OUT/summary.txt
note() { echo "$*" | tee -a "$SUM"; }

step() { # step NAME MAX_SECONDS CMD...: runs CMD, log in $OUT/NAME.log
  local name=$1 max=$2
  shift 2
  local left=$((DEADLINE - $(el)))
  ((left < max)) && max=$left
  if ((max < 10)); then
    note "== $name SKIPPED (deadline, t=$(el)s)"
    return 1
  fi
  echo "== $name (t=$(el)s, limit ${max}s)"
  timeout "$max" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  note "== $name rc=$rc t=$(el)s"
  tail -n 6 "$OUT/$name.log" | cut -c1-400 | tee -a "$SUM"
  return $rc
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  echo "cpus $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
  echo "bundle: $(du -sh "$B" | cut -f1)"
} | tee "$SUM"

# ZV_BUILDS_ONLY=1: only the build measurements (steps 2-4), for a quick rerun.
ONLY_BUILDS=${ZV_BUILDS_ONLY:-0}

# 1. The GPU tests, from the bundle.
((ONLY_BUILDS)) || step cuda_encoder_test 120 "$B/bin/run-test" cuda_encoder_test
((ONLY_BUILDS)) || step segment_sink_test 60 "$B/bin/run-test" segment_sink_test
export ZEROVEC=$Z
((ONLY_BUILDS)) || step gpu_e2e_test 180 "$B/bin/run-test" e2e_test

# 2. The corpus: 1M+ passages of Debian text.
# Plain text, one passage a line (ids line-N), each cut to 160 characters.
xz -dc .device/passages.txt.xz >"$W/passages.txt"
note "passages: $(wc -l <"$W/passages.txt") lines, $(du -h "$W/passages.txt" | cut -f1)"
head -n 5000 "$W/passages.txt" >"$W/passages5k.txt"
# Queries: the first words of passages from further down the file.
sed -n '500000,501999p' "$W/passages.txt" | cut -d' ' -f1-8 >"$W/queries.txt"

# 3. Bundled model: encoder alone, then the whole build, same texts.
step encoder_mini 90 "$B/bin/embed_corpus_bench" --input "$W/passages.txt" \
  --device cuda --repeat 2
step build_mini 120 "$Z" build --data "$W/d_mini" --collection p \
  --input "$W/passages.txt" --device cuda
# The same with the data directory on tmpfs, where the GPU can store rows
# straight into the segment (sink=host-registered) if the host allows pinning.
if mkdir -p /dev/shm/zvprod 2>/dev/null; then
  step build_mini_shm 120 "$Z" build --data /dev/shm/zvprod/d_mini --collection p \
    --input "$W/passages.txt" --device cuda
  rm -rf /dev/shm/zvprod
fi

# 4. MiniLM shape (random weights; the same kernels as the real checkpoint).
python3 bench/gpu/make_checkpoint.py --shape minilm --out "$W/minilm" >"$OUT/ckpt.log" 2>&1
step encoder_minilm 120 "$B/bin/embed_corpus_bench" --input "$W/passages.txt" \
  --model "$W/minilm" --device cuda --repeat 2
step build_minilm 150 "$Z" build --data "$W/d_minilm" --collection p \
  --input "$W/passages.txt" --model "$W/minilm" --device cuda

# 5. Serve on CUDA over the 1M rows: text search at 1/16/64 clients.
serve_load() { # serve_load NAME DEVICE
  "$Z" serve --data "$W/d_mini" --device "$2" --listen 127.0.0.1:0 \
    --port-file "$W/port.$1" --max-concurrent-requests 1024 2>"$OUT/serve_$1.log" &
  local pid=$!
  for _ in $(seq 600); do [[ -s $W/port.$1 ]] && break; sleep 0.1; done
  step "search_$1" 60 "$B/bin/search_load" --server "127.0.0.1:$(cat "$W/port.$1")" \
    --collection p --queries "$W/queries.txt" --clients 1,16,64 --seconds 8
  kill -TERM $pid
  wait $pid
}
if ((!ONLY_BUILDS)); then
  serve_load cuda cuda
  serve_load cpu cpu
fi

# 6. The CPU on this host's cores, on a 5k subset (the whole 1M would take
# an hour): encoder alone and the whole build.
((ONLY_BUILDS)) || CUDA_VISIBLE_DEVICES= step encoder_cpu 90 "$B/bin/embed_corpus_bench" \
  --input "$W/passages5k.txt" --device cpu --repeat 1
((ONLY_BUILDS)) || CUDA_VISIBLE_DEVICES= step build_cpu 120 "$Z" build \
  --data "$W/d_cpu" --collection p --input "$W/passages5k.txt" --device cpu

note "total t=$(el)s"
