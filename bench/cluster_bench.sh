#!/usr/bin/env bash
# Cluster mode as a functional scaling check (issue 18): the same data (ROWS
# vectors of DIM, Flat) served by one plain `zerovec serve`, then by clusters of
# 1, 2 and 4 nodes (one shard a node, replication 1) under a one-member etcd, all
# on this machine; vector Search QPS and p50/p99 at CLIENTS clients.
#   bench/cluster_bench.sh            (ROWS=100000 DIM=128 CLIENTS=1,8 SECONDS=10)
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-100000} DIM=${DIM:-128} CLIENTS=${CLIENTS:-1,8} SECONDS_EACH=${SECONDS:-10}
bazel build //tools:zerovec //bench:cluster_search_bench >/dev/null 2>&1
Z=bazel-bin/tools/zerovec B=bazel-bin/bench/cluster_search_bench
W=$(mktemp -d) PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
serve() {  # serve NAME [flags...] -> prints the address once it listens
  local name=$1; shift
  $Z serve --data "$W/$name" --model none --listen 127.0.0.1:0 --port-file "$W/$name.port" \
    "$@" >"$W/$name.log" 2>&1 & PIDS+=($!)
  while [[ ! -s $W/$name.port ]]; do sleep 0.1; done
  echo "127.0.0.1:$(cat "$W/$name.port")"
}
echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(etcd --version | head -1), rows $ROWS dim $DIM Flat"
echo "## one plain server"
$B --servers "$(serve single)" --collection c --rows "$ROWS" --dim "$DIM" --clients "$CLIENTS" --seconds "$SECONDS_EACH"
for n in 1 2 4; do
  CP=$(free_port) PP=$(free_port)
  etcd --name e$n --data-dir "$W/etcd$n" --listen-client-urls http://127.0.0.1:$CP \
    --advertise-client-urls http://127.0.0.1:$CP --listen-peer-urls http://127.0.0.1:$PP \
    --initial-advertise-peer-urls http://127.0.0.1:$PP --initial-cluster e$n=http://127.0.0.1:$PP \
    --log-level error >"$W/etcd$n.log" 2>&1 & PIDS+=($!)
  sleep 1
  addrs=()
  for i in $(seq 1 $n); do addrs+=("$(serve "n$n-$i" --cluster etcd://127.0.0.1:$CP --node-id "$i")"); done
  echo "## cluster of $n node(s), $n shard(s), replication 1 (clients spread over the nodes)"
  $B --servers "$(IFS=,; echo "${addrs[*]}")" --collection c --shards "$n" --rows "$ROWS" --dim "$DIM" \
    --clients "$CLIENTS" --seconds "$SECONDS_EACH"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
