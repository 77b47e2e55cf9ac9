#!/usr/bin/env bash
# Issue 21 in one device call on the host's CPUs (16 cores; the GPU is not
# used): HNSW at 1M x 384 rows, ZeroVec in place vs faiss IndexHNSWFlat vs
# hnswlib (M 32, same efConstruction, every core for every build), efSearch
# sweeps, matched recall 0.90 / 0.95 / 0.99 (latency and QPS ratios), build
# times, index-owned memory, and namespace-filtered search keeping 1 / 10 /
# 50 % of the rows against the exact filtered scan. Then, time permitting,
# the graph-quality bisect at 1M (one faiss add vs the in-place storage).
#
# Here (a CPU bundle of three programs, ~15 MiB; the model left out):
#   tools/bundle.sh --no-python --out dist/zerovec-hnsw //bench:index_bench \
#     //bench:hnsw_bisect //bench:hnsw_search_bench
#   mkdir -p .device-hnsw && tar -cJf .device-hnsw/zerovec-hnsw.tar.xz \
#     --exclude=share/zerovec/models -C dist zerovec-hnsw
# There (carry .device-hnsw; one step or two a call, each call <= 580 s):
#   STEPS=one bash bench/gpu/hnsw_1m_device.sh 560
# The real-embedding set needs the CUDA bundle and the passages in one carry
# (BUNDLE=.device-real/zv-real.tar.xz, PASSAGES_XZ=.device-real/passages.txt.xz;
# bench/realembed/pack_real_for_device.sh makes both):
#   BUNDLE=.device-real/zv-real.tar.xz STEPS="one realmake real" bash ...
#   STEPS=synth bash bench/gpu/hnsw_1m_device.sh 560
#   STEPS="graph efc" bash bench/gpu/hnsw_1m_device.sh 560
# Steps (STEPS, default "one"):
#   one    bench/hnsw_search_bench --bulk: ZeroVec as `zerovec build` makes
#          it (indexing deferred during the load, one graph built at the seal)
#          vs faiss IndexHNSWFlat vs hnswlib at matched recall 0.90/0.95/0.99:
#          latency, QPS, build, memory (~200 s)
#   live   the same with the live path: pieces built during the load, swept,
#          then sealed into one graph (the 2026-12-06 run; ~260 s)
#   synth  bench/index_bench with --filter: the collection path, namespace
#          filters keeping 1/10/50 % (~500 s; MERGE=1: `zerovec build`'s
#          path, deferred load sealed into one graph)
#   graph  bench/hnsw_bisect: graph quality at 1M (alias: bisect)
#   efc    the piece build at EFCS ("64 200")
#   pfsweep   ZeroVec's seal alone at PF_ROWS (500000) rows for each build
#          prefetch depth in PFS ("1 8"; "8:bf16" with the bf16 beam); HSB
#          names another build of hnsw_search_bench (a variant to compare)
#   ordersweep  the same for each level-0 insertion order in ORDERS
#          ("0 16:0.3": BITS[:RANDOM_FRACTION[:SWEEPS]], 0 = random)
#   seals  the same for each flag set in SEALS (';' between sets)
#   realmake  makes REAL (default /tmp/zvreal) from PASSAGES_XZ on the GPU
#          (needs a --cuda bundle with //bench:embed_corpus_bench)
#   real   bench/hnsw_search_bench on REAL=DIR (base.npy + queries.npy from
#          bench/realembed), --bulk as in "one"
# Environment: ROWS (1000000), QUERIES (500), EFC (100), INTERVAL (20000),
# BATCH (10000), ONE_EFS / REAL_EFS (the sweeps of one / real), BUILD_BEAM
# (float | bf16: the rows ZeroVec's build beam reads), BUILD_PF (rows the
# build prefetches ahead; the default is PieceOptions'), BUILD_ORDER (the
# level-0 insertion order, BITS[:RANDOM_FRACTION[:SWEEPS]]), BUILD_FLAGS (more
# hnsw_search_bench flags for one and real). Logs and summary.txt in $OUT.
set -uo pipefail
T0=$(date +%s)
DEADLINE=${1:-530}
OUT=${OUT:-/tmp/hnsw_out}
SUM=$OUT/summary.txt
W=/tmp/zvhnsw
B=$W/bundle
mkdir -p "$W" "$OUT" "$B"
tar -xJf "${BUNDLE:-.device-hnsw/zerovec-hnsw.tar.xz}" -C "$B" --strip-components=1
PASSAGES_XZ=${PASSAGES_XZ:-.device-hnsw/passages.txt.xz}
REAL=${REAL:-/tmp/zvreal}
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
STEP_GREP='^\||pieces|vectors from|generating|HNSW M|progress:| vs |rows x'
STEP_LINES=130
INTERVAL=${INTERVAL:-20000}
BATCH=${BATCH:-10000}
# ZeroVec's seal alone at PF_ROWS synthetic rows (HSB: another build of the
# bench to compare): seal_alone NAME FLAGS...
seal_alone() {
  local name=$1
  shift
  step "$name" 120 "${HSB:-$B/bin/hnsw_search_bench}" \
    --rows="${PF_ROWS:-500000}" --queries=200 --efc="$EFC" --threads="$T" \
    --bulk --skip_faiss --skip_hnswlib --efs=16,32,64 "$@"
}
for s in ${STEPS:-one}; do
  case $s in
    one)
      # The matched-recall comparison, ZeroVec built as `zerovec build`
      # builds it (deferred load, one graph), against both peers.
      step one_1m 540 "$B/bin/hnsw_search_bench" --rows="$ROWS" \
        --queries="$QUERIES" --efc="$EFC" --threads="$T" \
        --interval="$INTERVAL" --batch="$BATCH" --bulk \
        ${ONE_EFS:+--efs=$ONE_EFS} ${BUILD_BEAM:+--build_beam=$BUILD_BEAM} \
        ${BUILD_PF:+--build_prefetch=$BUILD_PF} \
        ${BUILD_ORDER:+--build_order=$BUILD_ORDER} ${BUILD_FLAGS:-} ;;
    seals)
      # ZeroVec's seal alone at PF_ROWS synthetic rows for each flag set of
      # SEALS (sets separated by ';', e.g. "--build_order=0;--new_links0=32").
      IFS=';' read -ra sets <<<"${SEALS:---build_order=0}"
      for i in "${!sets[@]}"; do
        # shellcheck disable=SC2086 # a set is several flags
        seal_alone "seal$i" ${sets[$i]}
      done ;;
    ordersweep)
      # ZeroVec's seal alone at PF_ROWS synthetic rows for each level-0
      # insertion order of ORDERS (BITS[:RANDOM_FRACTION]; 0 = random).
      for o in ${ORDERS:-0 16:0.3}; do
        seal_alone "order${o/:/_}" --build_order="$o"
      done ;;
    pfsweep)
      # The same for each prefetch depth of PFS (rows requested ahead of the
      # distance being scored); an entry DEPTH:bf16 builds with the bf16 beam.
      for spec in ${PFS:-1 8}; do
        pf=${spec%%:*} beam=float
        [[ $spec == *:* ]] && beam=${spec#*:}
        seal_alone "pf${pf}_$beam" --build_prefetch="$pf" --build_beam="$beam"
      done ;;
    realmake)
      # The real-embedding set made in this call (needs a --cuda bundle
      # holding //bench:embed_corpus_bench and .device-hnsw/passages.txt.xz,
      # bench/gpu/pack_for_device.sh's passage file): bench/corpus passages
      # embedded on the GPU by the checkout's zerovec-mini (256 wide).
      [[ -f $PASSAGES_XZ && -x $B/bin/embed_corpus_bench ]] || continue
      step realmake "${REALMAKE_S:-150}" env \
        PASSAGES="$PASSAGES_XZ" EMBED="$B/bin/embed_corpus_bench" \
        MODEL=models/zerovec-mini DEVICE="${REAL_DEVICE:-cuda}" \
        bash bench/realembed/make_realembed.sh "$REAL" "$ROWS" "$QUERIES" ;;
    real)
      [[ -f $REAL/base.npy ]] || continue
      step real "${REAL_S:-400}" "$B/bin/hnsw_search_bench" --base="$REAL/base.npy" \
        --query_file="$REAL/queries.npy" --rows="$ROWS" --queries="$QUERIES" \
        --efc="$EFC" --threads="$T" --interval="$INTERVAL" --batch="$BATCH" \
        --bulk --efs="${REAL_EFS:-10,16,24,32,48,64,96,128,192,256,384,512,640,768,896,1024}" \
        ${BUILD_BEAM:+--build_beam=$BUILD_BEAM} \
        ${BUILD_PF:+--build_prefetch=$BUILD_PF} \
        ${BUILD_ORDER:+--build_order=$BUILD_ORDER} ${BUILD_FLAGS:-} ;;
    graph | bisect)
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
