#!/usr/bin/env bash
# ZeroVec (and faiss / hnswlib, through bench/index_bench) and LanceDB on the
# same vectors in one run (issue 21): index_bench writes the vectors it uses
# as .npy (or reads REAL's), then lancedb_bench.js ingests and indexes the
# same rows and sweeps efSearch. Markdown tables on stdout.
#
#   bench/lancedb/side_by_side.sh ROWS QUERIES [index_bench flags...]
# Environment: INDEX_BENCH (default bazel-bin/bench/index_bench), REAL=DIR
# with base.npy + queries.npy (bench/realembed; default: the synthetic set),
# WORK (default /tmp/zv-side-by-side), LANCEDB_FLAGS (e.g. "--efs 16,32,64
# --refine 0,4"; give index_bench the same --efs=). LanceDB scores against
# index_bench's exact truth (WORK/truth.npy).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROWS=${1:?usage: side_by_side.sh ROWS QUERIES [index_bench flags]}
QUERIES=${2:?}
shift 2
IB=${INDEX_BENCH:-$ROOT/bazel-bin/bench/index_bench}
WORK=${WORK:-/tmp/zv-side-by-side}
mkdir -p "$WORK"
echo "# $(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -n ${REAL:-} ]]; then
  "$IB" --rows="$ROWS" --queries="$QUERIES" --base="$REAL/base.npy" \
    --query_file="$REAL/queries.npy" --dump_npy="$WORK" "$@"
else
  "$IB" --rows="$ROWS" --queries="$QUERIES" --dump_npy="$WORK" "$@"
fi
echo "# LanceDB on the same rows, load $(cut -d' ' -f1-3 /proc/loadavg)"
node "$ROOT/bench/lancedb/lancedb_bench.js" --base "$WORK/base.npy" \
  --queries "$WORK/queries.npy" --truth "$WORK/truth.npy" \
  --dir "$WORK/lancedb" ${LANCEDB_FLAGS:-} 2>&1 | grep -v WARN
echo "# done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
