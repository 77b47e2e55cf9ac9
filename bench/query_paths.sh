#!/bin/bash
# Query paths, one run: p50/p99 latency and QPS of one k=10 search over 100k rows
# (dim 384, clustered, flat) through (a) gRPC on loopback, (b) AttachedCollection
# in-process, (c) python3-faiss IndexFlatIP over a numpy copy; the same queries.
#
#   bazel build --jobs=2 //bench:query_path_bench && bench/query_paths.sh [DIR]
# Env: ROWS (100000) QUERIES (1000) RUNS (5) WARMUP (200). Needs Debian's
# python3-faiss and python3-numpy. Prints a markdown table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-/tmp/zv_query_paths}"
ROWS="${ROWS:-100000}" QUERIES="${QUERIES:-1000}" RUNS="${RUNS:-5}" WARMUP="${WARMUP:-200}"
LOAD="$(cut -d' ' -f1 /proc/loadavg)"
"${BIN:-bazel-out/k8-fastbuild/bin}"/bench/query_path_bench --dir "$DIR" --rows "$ROWS" --queries "$QUERIES" \
  --runs "$RUNS" --warmup "$WARMUP"
/usr/bin/python3 bench/query_path_faiss.py --dir "$DIR" --runs "$RUNS" --warmup "$WARMUP" \
  --load "$LOAD"
