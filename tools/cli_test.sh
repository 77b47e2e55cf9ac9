#!/bin/bash
# The zerovec CLI end to end: build -> query -> attach on a small corpus with the
# bundled model, resumable rebuild, output formats, compact (online, offline,
# automatic), --help, and exit codes (0 ok, 2 usage, 1 other).
set -uo pipefail

ZEROVEC="$PWD/tools/zerovec"
MODEL="$PWD/models/zerovec-mini"  # the bundled default model
CHECKS="$PWD/tests/shell/checks.sh"
PROTO="$PWD/proto/zerovec/v1/zerovec.proto"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/cli_test.XXXXXX")"
cd "$WORK"
source "$CHECKS"

[[ -f "$MODEL/model.safetensors" ]] || { echo "FAIL: bundled model missing"; exit 1; }
ln -s "$MODEL" model
cat > corpus.jsonl <<'JSONL'
{"id": "cat", "text": "the cat and the dog", "namespace": "animals", "metadata": {"legs": 4}}
{"id": "river", "text": "the river in the city", "namespace": "places"}

{"id": "fire", "text": "red fire and blue water", "namespace": "elements"}
{"id": "train", "text": "fast train music", "namespace": "things", "timestamp_ms": 1700000000000}
JSONL
printf 'the sun and the moon\nbig green tree\n' > plain.txt
printf '{"id": "ok", "text": "fine"}\n{"id": "bad", "text": \n' > bad.jsonl

# build: new collection, then a resumed run that skips every stored id.
"$ZEROVEC" build --data data --collection docs --input corpus.jsonl --model model >out 2>err
check "build" 0 $?
contains "build reports stored rows" out "stored 4 rows"
contains "build progress line" err "4 rows (100%)"
"$ZEROVEC" build --data data --collection docs --input corpus.jsonl --model model >out 2>err
check "rebuild" 0 $?
contains "rebuild skips stored ids" out "stored 0 rows in collection docs (skipped 4"
"$ZEROVEC" build --data data --collection docs --input plain.txt --model model --batch 1 >out 2>err
check "build plain text" 0 $?
contains "plain text stored" out "stored 2 rows"

# Texts over the model's window (128 tokens): build says how many it
# truncated; --chunk-long-texts stores them as overlapping window-sized rows
# ID#n with source_id and chunk in the metadata.
/usr/bin/python3 - <<'PY'
import json
words = "the river in city of water and fire dog cat".split() * 30  # 300 tokens
with open("long.jsonl", "w") as f:
    f.write(json.dumps({"id": "short", "text": "the cat and the dog"}) + "\n")
    f.write(json.dumps({"id": "long", "text": " ".join(words), "namespace": "docs",
                        "metadata": {"lang": "en"}}) + "\n")
    f.write(json.dumps({"id": "fire", "text": "red fire and blue water"}) + "\n")
PY
"$ZEROVEC" build --data ldata --collection cut --input long.jsonl --model model >out 2>err
check "build long texts" 0 $?
contains "build reports truncation and the window" out "build: truncated 1 of 3 texts to the model's window (128 tokens); --chunk-long-texts"
"$ZEROVEC" build --data ldata --collection chunked --input long.jsonl --model model --chunk-long-texts >out 2>err
check "build --chunk-long-texts" 0 $?
contains "chunks stored as rows" out "stored 5 rows in collection chunked"
contains "chunks fit the window" out "build: truncated 0 of 5 texts to the model's window (128 tokens)"
contains "build reports the split" out "split 1 long text(s) into 3 rows"
"$ZEROVEC" attach --data ldata --collection chunked --text "the river in city" -k 10 --json --model model --quiet >out 2>err
check "attach chunked collection" 0 $?
/usr/bin/python3 - out long.jsonl <<'PY'
import json, sys
hits = json.load(open(sys.argv[1]))["hits"]
text = [json.loads(l) for l in open(sys.argv[2])][1]["text"]
assert sorted(h["id"] for h in hits) == ["fire", "long#0", "long#1", "long#2", "short"], hits
chunks = sorted((h for h in hits if h["id"].startswith("long#")), key=lambda h: h["id"])
for n, h in enumerate(chunks):
    assert h["metadata"] == {"chunk": str(n), "lang": "en", "source_id": "long"}, h
    assert h["namespace"] == "docs", h
    assert h["text"] in text and len(h["text"].split()) <= 126, h
assert text.startswith(chunks[0]["text"]) and text.endswith(chunks[-1]["text"])
# Consecutive chunks share 128 / 8 = 16 one-token words.
for a, b in zip(chunks, chunks[1:]):
    assert a["text"].split()[-16:] == b["text"].split()[:16], (a, b)
PY
check "chunk rows: ids, metadata, overlapping spans of the text" 0 $?
"$ZEROVEC" build --data ldata --collection chunked --input long.jsonl --model model --chunk-long-texts >out 2>err
contains "rebuild skips stored chunks" out "stored 0 rows in collection chunked (skipped 5"
"$ZEROVEC" build --data ldata --collection nochunk --input long.jsonl --model none --chunk-long-texts 2>err
check "--chunk-long-texts without a model" 2 $?

# Precomputed vectors: --model none stores them as given (no embedding); they
# must all have one size, and every line needs one without a model.
cat > vectors.jsonl <<'JSONL'
{"id": "v1", "vector": [1, 0, 0, 0]}
{"id": "v2", "text": "second", "vector": [0, 1, 0, 0], "namespace": "n"}
{"id": "v3", "vector": [0, 0, 0.6, 0.8]}
JSONL
"$ZEROVEC" build --data vdata --collection vecs --input vectors.jsonl --model none >out 2>err
check "build precomputed vectors" 0 $?
contains "vectors stored" out "stored 3 rows"
echo "0 0 0.8 0.6" >q4.vec
"$ZEROVEC" attach --data vdata --collection vecs --vector-file q4.vec -k 1 --json >out 2>err
check "attach precomputed vectors" 0 $?
contains "nearest precomputed vector" out '"id":"v3"'
# Binary vectors: .npy written by numpy (ids from --ids, else row numbers) and .fvecs.
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  /usr/bin/python3 -c '
import numpy as np, struct
v = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0.6, 0.8]], dtype=np.float32)
np.save("vecs.npy", v)
np.save("vecs_f8.npy", v.astype(np.float64))
with open("vecs.fvecs", "wb") as f:
    for row in v: f.write(struct.pack("<i", 4) + row.tobytes())
'
  printf 'n1\nn2\nn3\n' >ids.txt
  "$ZEROVEC" build --data vdata --collection npy --input vecs.npy --ids ids.txt >out 2>err
  check "build from .npy with --ids" 0 $?
  contains "npy rows stored" out "stored 3 rows"
  "$ZEROVEC" attach --data vdata --collection npy --vector-file q4.vec -k 1 --json >out 2>err
  contains "npy id from --ids" out '"id":"n3"'
  "$ZEROVEC" build --data vdata --collection fv --input vecs.fvecs >out 2>err
  check "build from .fvecs" 0 $?
  "$ZEROVEC" attach --data vdata --collection fv --vector-file q4.vec -k 1 --json >out 2>err
  contains "fvecs id is the row number" out '"id":"2"'
  "$ZEROVEC" build --data vdata --collection f8 --input vecs_f8.npy >out 2>err
  check "float64 .npy refused" 1 $?
  contains "dtype named" err "vecs_f8.npy"
  "$ZEROVEC" build --data vdata --collection x --input corpus.jsonl --ids ids.txt 2>err
  check "--ids with JSONL" 2 $?
else
  echo "ok: (numpy missing: .npy cases not run)"
fi
printf '{"id": "a", "vector": [1, 0]}\n{"id": "b", "vector": [1, 0, 0]}\n' >mixdim.jsonl
"$ZEROVEC" build --data vdata --collection vecs2 --input mixdim.jsonl --model none >out 2>err
check "vectors of two sizes" 1 $?
contains "size error names the line" err "mixdim.jsonl:2:"
"$ZEROVEC" build --data vdata --collection vecs2 --input corpus.jsonl --model none >out 2>err
check "--model none without vectors" 1 $?
contains "missing vector named" err 'corpus.jsonl:1: no "vector"'
"$ZEROVEC" build --data vdata --collection vecs --input corpus.jsonl --model model >out 2>err
check "model dim differs from collection" 1 $?

# Errors: bad line (1, names file and line), usage errors (2), missing model (1).
"$ZEROVEC" build --data data --collection docs --input bad.jsonl --model model >out 2>err
check "bad jsonl line" 1 $?
contains "bad line named" err "bad.jsonl:2: not valid JSON"
# One error line (beside the line saying which model and device build uses).
[[ $(grep -vc '^build: model ' err) == 1 ]] && echo "ok: one error line" || { echo "FAIL: stderr lines"; cat err; failures=$((failures + 1)); }
contains "build names model and device" err "build: model model, device cpu"
# Single pass: the line before the bad one is stored, nothing from it on.
"$ZEROVEC" attach --data data --collection docs --text fine -k 10 --json --model model >out 2>err
contains "rows before a bad line are kept" out '"id":"ok"'
"$ZEROVEC" build --data data --collection docs --input corpus.jsonl --model nowhere >out 2>err
check "missing model" 1 $?
"$ZEROVEC" build --collection docs --input corpus.jsonl --bogus 2>err
check "unknown flag" 2 $?
contains "unknown flag named" err 'unknown flag "--bogus"'
"$ZEROVEC" build --data data --input corpus.jsonl 2>err
check "missing --collection" 2 $?
"$ZEROVEC" build --data data --collection docs --input corpus.jsonl --batch zero 2>err
check "bad --batch" 2 $?
"$ZEROVEC" build --data data --collection ../up --input corpus.jsonl 2>err
check "traversal collection name" 2 $?
"$ZEROVEC" build --data data --collection h1 --input corpus.jsonl --model model --index hnsw --hnsw-seal many 2>err
check "bad --hnsw-seal" 2 $?
contains "bad --hnsw-seal named" err "expected one-graph or pieces"
# An HNSW build ends sealed into one graph, or keeps its pieces if asked.
"$ZEROVEC" build --data data --collection h1 --input corpus.jsonl --model model --index hnsw >out 2>err
check "hnsw build" 0 $?
contains "hnsw build sealed into one graph" err "build: HNSW sealed into one graph in"
"$ZEROVEC" build --data data --collection h2 --input corpus.jsonl --model model --index hnsw --hnsw-seal pieces >out 2>err
check "hnsw build, pieces kept" 0 $?
contains "hnsw build keeps pieces" err "build: HNSW pieces built in"
"$ZEROVEC" attach --data data --collection h1 --text "a river in a city" -k 1 --json --model model >out 2>err
contains "sealed hnsw collection answers" out '"id":"river"'
"$ZEROVEC" frobnicate 2>err
check "unknown command" 2 $?
"$ZEROVEC" 2>err
check "no command" 2 $?
"$ZEROVEC" query --collection docs 2>err
check "query without --text/--vector-file" 2 $?
"$ZEROVEC" attach --data data --collection docs --text cat -k 0 2>err
check "attach -k 0" 2 $?
"$ZEROVEC" attach --data data --collection nope --text cat --model model 2>err
check "attach unknown collection" 1 $?
# Every command's --help / -h prints its usage on stdout and exits 0.
for cmd in build serve query attach compact; do
  "$ZEROVEC" "$cmd" --help >out 2>err
  check "$cmd --help" 0 $?
  contains "$cmd usage" out "usage: zerovec $cmd"
  "$ZEROVEC" "$cmd" --data data -h >out 2>err
  check "$cmd -h" 0 $?
done
"$ZEROVEC" build --help >out
contains "build help documents chunking" out "--chunk-long-texts (off by default)"
"$ZEROVEC" --help >out
contains "help lists compact" out "compact --data DIR --collection NAME"
contains "help lists the serve flag" out "--compact-tombstones F"
"$ZEROVEC" compact --server 127.0.0.1:1 --data data --collection docs 2>err
check "compact with --server and --data" 2 $?
"$ZEROVEC" compact --data data 2>err
check "compact without --collection" 2 $?
"$ZEROVEC" compact --data nowhere --collection docs 2>err
check "compact offline, no data dir" 1 $?
contains "compact names the data dir" err "nowhere: not a data directory"
"$ZEROVEC" serve --data data --compact-tombstones 1.5 2>err
check "serve --compact-tombstones out of range" 2 $?

# Deletes ids through a server with a Python gRPC client (the CLI has no
# delete); 0 when it deleted them all. Without python3-grpcio: 77.
grpc_delete() {  # grpc_delete ADDR COLLECTION ID...
  /usr/bin/python3 - "$PROTO" "$@" <<'PY'
import os, subprocess, sys, tempfile
proto, addr, coll, ids = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
try:
    import grpc, grpc_tools  # noqa: F401
except ImportError:
    sys.exit(77)
out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
root = os.path.dirname(os.path.dirname(os.path.dirname(proto)))
subprocess.check_call([sys.executable, "-m", "grpc_tools.protoc", "-I" + root,
                       "--python_out=" + out, "--grpc_python_out=" + out, proto])
sys.path.insert(0, out)
from zerovec.v1 import zerovec_pb2 as pb, zerovec_pb2_grpc as pb_grpc
stub = pb_grpc.ZeroVecStub(grpc.insecure_channel(addr))
sys.exit(0 if stub.Delete(pb.DeleteRequest(collection=coll, ids=ids)).deleted == len(ids) else 1)
PY
}

# Hybrid search: a collection built with --lexical, searched in each mode.
"$ZEROVEC" build --data hdata --collection lex --input corpus.jsonl --model model --lexical >out 2>err
check "build --lexical" 0 $?
"$ZEROVEC" attach --data hdata --collection lex --text "dogs" --mode lexical --json --model none >out 2>err
check "attach --mode lexical (no model)" 0 $?
contains "lexical finds the stemmed word" out '"id":"cat","lexical_rank":1'
"$ZEROVEC" attach --data hdata --collection lex --text "blue water" --mode hybrid -k 2 --model model --quiet >out 2>err
check "attach --mode hybrid" 0 $?
contains "hybrid table shows both ranks" out "dense lex"
head -2 out | tail -1 >first
contains "hybrid top hit" first "fire"
"$ZEROVEC" attach --data data --collection docs --text "dogs" --mode lexical 2>err
check "lexical search of a collection built without --lexical" 1 $?
contains "names the missing index" err "no lexical index"
"$ZEROVEC" attach --data hdata --collection lex --vector-file short.vec --mode hybrid 2>err
check "hybrid with a vector query" 2 $?
"$ZEROVEC" query --server 127.0.0.1:1 --collection lex --text x --mode fuzzy 2>err
check "query --mode unknown" 2 $?

# serve + query (table and JSON) + attach with the same answers.
"$ZEROVEC" serve --data data --model model --listen 127.0.0.1:0 --port-file port 2>serve.log &
SERVER_PID=$!
for _ in $(seq 100); do [[ -s port ]] && break; sleep 0.1; done
ADDR="127.0.0.1:$(cat port)"
"$ZEROVEC" query --server "$ADDR" --collection docs --text "the river in the city" -k 3 >out 2>err
check "query" 0 $?
contains "table header" out "rank"
head -2 out | tail -1 >first
contains "exact text is the top hit" first "river"
contains "table shows namespace" first "places"
"$ZEROVEC" query --server "$ADDR" --collection docs --text "the river in the city" -k 3 --json >q.json
check "query --json" 0 $?
"$ZEROVEC" attach --data data --collection docs --text "the river in the city" -k 3 --model model --json >a.json
check "attach --json" 0 $?
/usr/bin/python3 - q.json a.json <<'PY'
import json, sys
q, a = (json.load(open(f))["hits"] for f in sys.argv[1:3])
assert [h["id"] for h in q] == [h["id"] for h in a], (q, a)
assert all(abs(x["score"] - y["score"]) < 1e-5 for x, y in zip(q, a)), (q, a)
assert q[0]["id"] == "river" and q[0]["namespace"] == "places" and q[0]["text"] == "the river in the city"
PY
check "query and attach agree" 0 $?
"$ZEROVEC" attach --data data --collection docs --text "the river in the city" -k 3 --model model >out
contains "attach table" out "river"
"$ZEROVEC" query --server "$ADDR" --collection docs --text "cat" --namespace animals --json >out
contains "namespace filter" out '"id":"cat"'
"$ZEROVEC" query --server "$ADDR" --collection missing --text "cat" 2>err
check "query unknown collection" 1 $?
contains "server error on one line" err "NOT_FOUND"
echo "1 2 3" >short.vec
"$ZEROVEC" query --server "$ADDR" --collection docs --vector-file short.vec 2>err
check "query wrong dim" 1 $?
contains "dim error names field" err "query.vector: expected 256 values, got 3"
# Time-aware ranking through the server and in process: same answers.
"$ZEROVEC" query --server "$ADDR" --collection docs --text "the river in the city" -k 3 \
  --recency-half-life-ms 86400000 --json >qr.json
check "query --recency-half-life-ms" 0 $?
"$ZEROVEC" attach --data data --collection docs --text "the river in the city" -k 3 \
  --model model --recency-half-life-ms 86400000 --recency-weight 0.5 --json >ar.json
check "attach --recency-weight" 0 $?
contains "recency keeps the best match" qr.json '"id":"river"'
"$ZEROVEC" query --server "$ADDR" --collection docs --text "cat" --recency-weight 1 2>err
check "--recency-weight without a half-life" 2 $?
contains "recency usage error" err "--recency-weight needs --recency-half-life-ms"

# compact through the server: the deleted rows go, the rest still answer, and
# an attached reader follows the new generation.
grpc_delete "$ADDR" docs fire train
rc=$?
if [[ $rc == 77 ]]; then
  echo "ok: (python3-grpcio missing: compacting without tombstones)"; removed=0
else
  check "delete through the server" 0 $rc; removed=2
fi
"$ZEROVEC" compact --server "$ADDR" --collection docs >out 2>err
check "compact --server" 0 $?
contains "compact reports what it removed" out "($removed tombstones removed), generation 2"
contains "compaction logged by the server" serve.log "compacted collection docs (requested)"
"$ZEROVEC" query --server "$ADDR" --collection docs --text "red fire and blue water" -k 10 --json >out
check "query after compact" 0 $?
if [[ $removed == 2 ]] && grep -qF '"id":"fire"' out; then
  echo "FAIL: deleted id still found after compact"; failures=$((failures + 1))
fi
contains "live rows still found" out '"id":"river"'
"$ZEROVEC" attach --data data --collection docs --text "the river in the city" -k 1 --model model --json >out 2>err
check "attach after compact" 0 $?
contains "attach reads the new generation" out '"id":"river"'
"$ZEROVEC" compact --server "$ADDR" --collection missing 2>err
check "compact unknown collection" 1 $?
contains "compact NOT_FOUND" err "NOT_FOUND"
"$ZEROVEC" compact --data data --collection docs >out 2>err
check "compact offline while a server holds the data" 1 $?
contains "offline compact names the holder" err "held by process $SERVER_PID (zerovec serve)"
contains "offline compact says what to do" err "compact through it with --server ADDR"
# build into a data dir the server holds: who holds it and what to do instead,
# not RocksDB's "While lock file ... Resource temporarily unavailable".
"$ZEROVEC" build --data data --collection docs --input corpus.jsonl --model model >out 2>err
check "build into a served data dir" 1 $?
contains "build names the serving pid" err "data data is held by process $SERVER_PID (zerovec serve)"
contains "build says what to do instead" err "add to it through that server (the Upsert RPC), stop it first"
if grep -qF "Resource temporarily unavailable" err; then
  echo "FAIL: raw RocksDB lock error shown"; failures=$((failures + 1))
fi
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
check "serve exits 0 on SIGTERM" 0 $?
SERVER_PID=""

# Held by something that is not a server (here a stand-in whose argv[1] is
# "build", locking meta/LOCK as RocksDB does): wait for it, not "upsert".
cat > build <<'PY'
import fcntl, sys, time
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(30)
PY
/usr/bin/python3 build data/meta/LOCK locked &
HOLDER=$!
for _ in $(seq 100); do [[ -e locked ]] && break; sleep 0.1; done
"$ZEROVEC" compact --data data --collection docs >out 2>err
check "compact while a build holds the data" 1 $?
contains "names the build holder" err "held by process $HOLDER (python3 build), which has it open; wait for it to finish, or stop it first"
kill "$HOLDER"; wait "$HOLDER" 2>/dev/null

# compact offline, the server gone.
"$ZEROVEC" compact --data data --collection docs >out 2>err
check "compact --data" 0 $?
contains "offline compact advances the generation" out "(0 tombstones removed), generation 3"
"$ZEROVEC" compact --data data --collection nope 2>err
check "compact offline, unknown collection" 1 $?
"$ZEROVEC" attach --data data --collection docs --text "the river in the city" -k 1 --model model --json >out 2>err
contains "attach after offline compact" out '"id":"river"'

# serve --compact-tombstones: deleting past the fraction compacts on its own.
rm -f port
"$ZEROVEC" serve --data vdata --model none --listen 127.0.0.1:0 --port-file port \
  --compact-tombstones 0.3 --compact-min-rows 1 2>serve.log &
SERVER_PID=$!
for _ in $(seq 100); do [[ -s port ]] && break; sleep 0.1; done
ADDR="127.0.0.1:$(cat port)"
contains "serve says it compacts" serve.log "compacting collections of at least 1 rows once 0.3"
grpc_delete "$ADDR" vecs v1
if [[ $? == 0 ]]; then
  for _ in $(seq 100); do grep -qF "compacted collection vecs (automatic" serve.log && break; sleep 0.1; done
  contains "automatic compaction logged" serve.log "compacted collection vecs (automatic, 1 of 3 rows tombstoned, threshold 0.30): 3 -> 2 rows"
fi
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
SERVER_PID=""

# serve --gpu-memory: a byte budget needs CUDA and a GPU (else refuses to
# start, saying why); auto serves either way and says where it searches.
"$ZEROVEC" serve --data vdata --model none --listen 127.0.0.1:0 --gpu-memory 1Q 2>err
check "serve --gpu-memory 1Q" 2 $?
contains "names the bad budget" err "--gpu-memory: '1Q' is not a byte count"
"$ZEROVEC" serve --data vdata --model none --listen 127.0.0.1:0 --gpu-text-queries gpu 2>err
check "serve --gpu-text-queries gpu" 2 $?
contains "names the bad text-query way" err '--gpu-text-queries: auto, device or host, not "gpu"'
timeout 10 "$ZEROVEC" serve --data vdata --model none --listen 127.0.0.1:0 \
  --gpu-memory 1G 2>err
rc=$?
if [[ $rc == 124 ]]; then
  contains "serve --gpu-memory 1G on a GPU host" err "GPU search on cuda:0"
else
  check "serve --gpu-memory 1G without a GPU" 1 $rc
  if grep -qE "GPU search: (this binary was built without CUDA|no CUDA device)" err; then
    echo "ok: says why there is no GPU search"
  else
    echo "FAIL: serve --gpu-memory 1G: $(cat err)"; failures=$((failures + 1))
  fi
fi
rm -f port
"$ZEROVEC" serve --data vdata --model none --listen 127.0.0.1:0 --port-file port \
  --gpu-memory auto 2>serve.log &
SERVER_PID=$!
for _ in $(seq 100); do [[ -s port ]] && break; sleep 0.1; done
if grep -qE "GPU search off \(--gpu-memory auto\)|GPU search on cuda:" serve.log; then
  echo "ok: serve --gpu-memory auto says where it searches"
else
  echo "FAIL: serve --gpu-memory auto: $(cat serve.log)"; failures=$((failures + 1))
fi
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
SERVER_PID=""

# --devices (issue 19): two CPU encoders (a device may repeat only under
# ZEROVEC_TESTING_REPEAT_DEVICES=1) build what one does: same answers. 700
# texts, so a chunk is split over both encoders.
/usr/bin/python3 - <<'PY'
import json
words = "cat dog river city fire water train music sun moon tree green red blue fast".split()
with open("many.jsonl", "w") as f:
    for i in range(700):
        text = " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(3 + i % 9))
        f.write(json.dumps({"id": "m%d" % i, "text": text}) + "\n")
PY
"$ZEROVEC" build --data d1 --collection many --input many.jsonl --model model --device cpu >out 2>err
check "build --device cpu" 0 $?
ZEROVEC_TESTING_REPEAT_DEVICES=1 "$ZEROVEC" build --data d2 --collection many --input many.jsonl \
  --model model --devices cpu,cpu >out 2>err
check "build --devices cpu,cpu" 0 $?
contains "build --devices stored every row" out "stored 700 rows"
contains "build names both encoders" err "device 2 encoders: [cpu"
for q in "the cat and the dog" "fast train music" "blue water fire"; do
  "$ZEROVEC" attach --data d1 --collection many --text "$q" -k 10 --json --model model --quiet >a1 2>/dev/null
  "$ZEROVEC" attach --data d2 --collection many --text "$q" -k 10 --json --model model --quiet >a2 2>/dev/null
  if /usr/bin/python3 - a1 a2 <<'PY'
import json, sys
def hits(path):
    doc = json.load(open(path))
    return [(h["id"], h["score"]) for h in (doc["hits"] if isinstance(doc, dict) else doc)]
a, b = hits(sys.argv[1]), hits(sys.argv[2])
ok = len(a) == 10 and len(a) == len(b) and all(
    abs(x[1] - y[1]) < 1e-4 and (x[0] == y[0] or abs(x[1] - y[1]) < 1e-6) for x, y in zip(a, b))
sys.exit(0 if ok else 1)
PY
  then echo "ok: --devices cpu,cpu answers \"$q\" as --device cpu"
  else echo "FAIL: --devices cpu,cpu vs --device cpu for \"$q\":"; cat a1 a2; failures=$((failures + 1)); fi
done
# serve --devices cpu,cpu: text queries embedded by either encoder answer as
# the single-encoder attach does.
rm -f port
ZEROVEC_TESTING_REPEAT_DEVICES=1 "$ZEROVEC" serve --data d2 --model model --listen 127.0.0.1:0 \
  --port-file port --devices cpu,cpu 2>serve.log &
SERVER_PID=$!
for _ in $(seq 100); do [[ -s port ]] && break; sleep 0.1; done
contains "serve names both encoders" serve.log "device 2 encoders: [cpu"
for i in 1 2 3 4; do  # several requests: both encoders take some
  "$ZEROVEC" query --server "127.0.0.1:$(cat port)" --collection many --text "fast train music" \
    -k 5 --json >sq$i.json 2>err
  check "query through serve --devices cpu,cpu ($i)" 0 $?
done
"$ZEROVEC" attach --data d1 --collection many --text "fast train music" -k 5 --json --model model \
  --device cpu --quiet >a1 2>/dev/null
if /usr/bin/python3 - a1 sq1.json sq4.json <<'PY'
import json, sys
ids = [[h["id"] for h in json.load(open(p))["hits"]] for p in sys.argv[1:]]
sys.exit(0 if len(ids[0]) == 5 and all(i == ids[0] for i in ids) else 1)
PY
then echo "ok: serve --devices cpu,cpu answers as --device cpu"
else echo "FAIL: serve --devices cpu,cpu answers:"; cat a1 sq1.json sq4.json; failures=$((failures + 1)); fi
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
SERVER_PID=""

# Bad --devices values: usage errors (2) that say what is wrong.
env -u ZEROVEC_TESTING_REPEAT_DEVICES "$ZEROVEC" build --data d3 --collection many --input many.jsonl \
  --model model --devices cpu,cpu 2>err
check "build --devices cpu,cpu without the testing switch" 2 $?
contains "repeat named" err "--devices: cpu is listed twice in \"cpu,cpu\""
"$ZEROVEC" build --data d3 --collection many --input many.jsonl --model model --devices gpu0 2>err
check "build --devices gpu0" 2 $?
contains "bad device named" err "--devices: \"gpu0\" is not cpu or cuda:N (in \"gpu0\")"
"$ZEROVEC" build --data d3 --collection many --input many.jsonl --model model --devices "cuda:0," 2>err
check "build --devices with an empty entry" 2 $?
contains "empty entry refused" err "--devices: expected \"all\" or a comma-separated list"
"$ZEROVEC" build --data d3 --collection many --input many.jsonl --model model \
  --device cpu --devices cuda:0,cuda:1 2>err
check "build --device and --devices disagree" 2 $?
contains "disagreement named" err "--device cpu and --devices cuda:0,cuda:1 disagree"
"$ZEROVEC" serve --data d3 --model model --listen 127.0.0.1:0 --devices cuda:0,,cuda:1 2>err
check "serve --devices with an empty entry" 2 $?
"$ZEROVEC" serve --data d3 --model model --listen 127.0.0.1:0 --devices cuda:0,cuda:1 \
  --gpu-device 3 --gpu-memory 1G 2>err
check "serve --gpu-device outside --devices" 2 $?
contains "gpu-device outside named" err "--gpu-device 3 is not one of --devices cuda:0,cuda:1"
# --devices all: every GPU, or the CPU where there is none.
"$ZEROVEC" build --data d4 --collection many --input corpus.jsonl --model model --devices all >out 2>err
check "build --devices all" 0 $?

# --version / version.
for v in --version version; do
  "$ZEROVEC" $v >out 2>err
  check "zerovec $v" 0 $?
  if grep -qE '^zerovec [0-9]+\.[0-9]+\.[0-9]+' out; then echo "ok: $v prints it"; else
    echo "FAIL: $v printed:"; cat out; failures=$((failures + 1)); fi
done

# The default model is found from anywhere, never silently dropped: from a
# directory with no models/ the Bazel binary finds it in its runfiles; a copy
# of the binary laid out as a bundle finds <bundle>/share/zerovec/models; a
# lone copy fails naming where it looked, unless ZEROVEC_MODEL names one.
mkdir -p elsewhere bundle/bin bundle/share/zerovec/models lone
ln -s "$MODEL" bundle/share/zerovec/models/zerovec-mini
cp "$ZEROVEC" bundle/bin/zerovec
cp "$ZEROVEC" lone/zerovec
(cd elsewhere && "$ZEROVEC" attach --data ../data --collection docs --text "the river in the city" -k 1 --json >out 2>err)
check "attach from another dir, default model" 0 $?
contains "runfiles model found" elsewhere/out '"id":"river"'
(cd elsewhere && env -u RUNFILES_DIR -u TEST_SRCDIR ../bundle/bin/zerovec attach --data ../data \
  --collection docs --text "the river in the city" -k 1 --json >out 2>err)
check "bundle attach, default model" 0 $?
contains "bundle model found" elsewhere/out '"id":"river"'
contains "bundle says which model" elsewhere/err "share/zerovec/models/zerovec-mini"
(cd elsewhere && env -u RUNFILES_DIR -u TEST_SRCDIR -u ZEROVEC_MODEL ../lone/zerovec serve \
  --data ../sdata --listen 127.0.0.1:0 >out 2>err)
check "serve with no model to be found fails" 1 $?
contains "serve names where it looked" elsewhere/err "no model found (looked in ZEROVEC_MODEL (unset), $WORK/share/zerovec/models/zerovec-mini, $WORK/lone/zerovec.runfiles/zerovec/models/zerovec-mini, $WORK/elsewhere/models/zerovec-mini)"
contains "serve offers --model none" elsewhere/err "or --model none for vectors only"
(cd elsewhere && env -u RUNFILES_DIR -u TEST_SRCDIR -u ZEROVEC_MODEL ../lone/zerovec attach --data ../data \
  --collection docs --text "river" >out 2>err)
check "attach with no model to be found fails" 1 $?
contains "attach names where it looked" elsewhere/err "no model found"
(cd elsewhere && env -u RUNFILES_DIR -u TEST_SRCDIR ZEROVEC_MODEL="$MODEL" ../lone/zerovec attach \
  --data ../data --collection docs --text "the river in the city" -k 1 --json >out 2>err)
check "ZEROVEC_MODEL names the model" 0 $?
contains "ZEROVEC_MODEL model used" elsewhere/out '"id":"river"'
(cd elsewhere && ZEROVEC_MODEL=/nonexistent "$ZEROVEC" attach --data ../data --collection docs --text "x" 2>err)
check "ZEROVEC_MODEL pointing nowhere fails" 1 $?
contains "ZEROVEC_MODEL error names it" elsewhere/err "ZEROVEC_MODEL=/nonexistent: no model there"

echo "cli_test: $failures failure(s)"
exit $((failures > 0))
