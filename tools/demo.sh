#!/usr/bin/env bash
# The embedded default: installs what is missing, builds, embeds the bundled demo
# corpus with the bundled model, serves it on 127.0.0.1 and prints the answers to a
# few example queries.
set -euo pipefail
cd "$(dirname "$0")/.."

DATA="${ZEROVEC_DATA:-./zerovec-data}"
MODEL="${ZEROVEC_MODEL:-models/zerovec-mini}"
CORPUS="data/demo/corpus.jsonl"

tools/setup.sh
bazel build //tools:zerovec
ZEROVEC="bazel-bin/tools/zerovec"

# Resumable: a second run skips the ids already stored.
"$ZEROVEC" build --data "$DATA" --collection demo --input "$CORPUS" --model "$MODEL"

PORT_FILE="$(mktemp -u)"
"$ZEROVEC" serve --data "$DATA" --model "$MODEL" --listen 127.0.0.1:0 \
  --port-file "$PORT_FILE" &
SERVER_PID=$!
trap 'kill -TERM "$SERVER_PID" 2>/dev/null || true; rm -f "$PORT_FILE"' EXIT
for _ in $(seq 300); do
  [[ -s "$PORT_FILE" ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "demo: zerovec serve exited" >&2; exit 1; }
  sleep 0.1
done
[[ -s "$PORT_FILE" ]] || { echo "demo: zerovec serve did not start" >&2; exit 1; }
ADDR="127.0.0.1:$(cat "$PORT_FILE")"

for query in "a large natural stream of water" \
             "feeling great happiness" \
             "a machine that flies through the air" \
             "to move very fast on foot"; do
  echo
  echo "== $query"
  "$ZEROVEC" query --server "$ADDR" --collection demo --text "$query" -k 3
done

kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
trap - EXIT
rm -f "$PORT_FILE"
