#!/usr/bin/env bash
# Issue 21 in one device call on the host's CPUs (16 cores; the GPU is not
# used): HNSW at 1M x 384 rows, ZeroVec in place vs faiss IndexHNSWFlat vs
# hnswlib (M 32, same efConstruction, every core for every build), efSearch
# sweeps, matched recall 0.90 / 0.95 / 0.99 (latency and QPS ratios), build
# times, index-owned memory, and namespace-filtered search keeping 1 / 10 /
# 50 % of the rows against the exact filtered scan. Then, time permitting,
# the graph-quality bisect at 1M (one faiss add vs the in-place storage).
#
# Here (a CPU bundle of two programs, ~15 MiB; the model left out):
#   tools/bundle.sh --no-python --out dist/zerovec-hnsw //bench:index_bench //bench:hnsw_bisect
#   mkdir -p .device-hnsw && tar -cJf .device-hnsw/zerovec-hnsw.tar.xz \
#     --exclude=share/zerovec/models -C dist zerovec-hnsw
# There (carry .device-hnsw):
#   bash bench/gpu/hnsw_1m_device.sh [DEADLINE_S=530]
# Environment: ROWS (1000000), QUERIES (500), EFC (100), STEPS (default
# "synth bisect"; also "efc" (EFCS="64 200"), "realmake" (makes REAL from
# .device-hnsw/passages.txt.xz on the GPU) and "real" with REAL=DIR holding
# base.npy + queries.npy from bench/realembed). Logs and summary.txt in $OUT.
set -uo pipefail
T0=$(date +%s)
DEADLINE=${1:-530}
OUT=${OUT:-/tmp/hnsw_out}
SUM=$OUT/summary.txt
W=/tmp/zvhnsw
B=$W/bundle
mkdir -p "$W" "$OUT" "$B"
tar -xJf .device-hnsw/zerovec-hnsw.tar.xz -C "$B" --strip-components=1
. bench/gpu/device_lib.sh
ROWS=${ROWS:-1000000}
QUERIES=${QUERIES:-500}
EFC=${EFC:-100}
T=$(nproc)
{
  echo "host: $T CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  echo "start: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "rows $ROWS x 384, queries $QUERIES, M 32, efConstruction $EFC, $T threads"
} | tee "$SUM"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=$T
# The summary: every markdown table row and the lines naming pieces/files.
STEP_GREP='^\||pieces|vectors from|generating|HNSW M|progress:'
STEP_LINES=130
for s in ${STEPS:-synth bisect}; do
  case $s in
    synth)
      step synth_1m 500 "$B/bin/index_bench" --rows="$ROWS" \
        --queries="$QUERIES" --flat_queries=50 --filter --efc="$EFC" \
        --threads="$T" ;;
    realmake)
      # The real-embedding set made in this call (needs a --cuda bundle
      # holding //bench:embed_corpus_bench and .device-hnsw/passages.txt.xz,
      # bench/gpu/pack_for_device.sh's passage file): bench/corpus passages
      # embedded on the GPU by the checkout's zerovec-mini (256 wide).
      [[ -f .device-hnsw/passages.txt.xz && -x $B/bin/embed_corpus_bench ]] ||
        continue
      REAL=${REAL:-/tmp/zvreal}
      step realmake "${REALMAKE_S:-150}" env \
        PASSAGES=.device-hnsw/passages.txt.xz EMBED="$B/bin/embed_corpus_bench" \
        MODEL=models/zerovec-mini DEVICE="${REAL_DEVICE:-cuda}" \
        bash bench/realembed/make_realembed.sh "$REAL" "$ROWS" "$QUERIES" ;;
    real)
      [[ -n ${REAL:-} ]] || continue
      step real 300 "$B/bin/index_bench" --base="$REAL/base.npy" \
        --query_file="$REAL/queries.npy" --rows="$ROWS" --queries="$QUERIES" \
        --flat_queries=50 --filter --efc="$EFC" --threads="$T" ;;
    bisect)
      # The same 1M rows as one faiss add, as InsertLevelsFirst over the
      # rows in place (what pieces are built by now) and as faiss adds of
      # 10,000 rows (the 2026-12-02 path): the graph-quality gap at 1M.
      step bisect_1m 240 "$B/bin/hnsw_bisect" --rows="$ROWS" --dim=384 \
        --efc="$EFC" --queries=200 --variants=range-lf,faiss-one,faiss-b10000 ;;
    efc)
      # efConstruction for large collections: the piece build at 64 and 200
      # (100 is the synth step's), build time and recall over ef.
      for e in ${EFCS:-64 200}; do
        step "efc${e}_1m" 200 "$B/bin/hnsw_bisect" --rows="$ROWS" --dim=384 \
          --efc="$e" --queries=200 --variants=range-lf
      done ;;
  esac
done
echo "total $(el) s, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$SUM"
