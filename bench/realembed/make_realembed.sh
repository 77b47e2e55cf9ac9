#!/usr/bin/env bash
# The real-embedding HNSW data set (issue 21): ROWS passages of real English
# text from Debian packages (WordNet, GCIDE, FOLDOC, Jargon, package
# descriptions, Debian and other HTML documentation: bench/corpus) embedded by
# ZeroVec's own encoder, plus QUERIES held-out passages of the same corpus as
# queries (never in the base), as OUT/base.npy and OUT/queries.npy (float32,
# unit rows) that `index_bench --base=OUT/base.npy --query_file=OUT/queries.npy`
# and bench/lancedb read. Nothing here is committed (OUT is outside git or in
# an ignored folder).
#
#   bench/realembed/make_realembed.sh OUT [ROWS=100000] [QUERIES=1000]
#
# Environment:
#   PASSAGES  .jsonl, .txt or .txt.xz of passages (default .corpus/passages.jsonl,
#             made by bench/corpus/make_passages.py when missing; on the device
#             the .device/passages.txt.xz that bench/gpu/pack_for_device.sh packs)
#   MODEL     model directory (default models/zerovec-l6 if present: 384 wide;
#             else models/zerovec-mini: 256 wide)
#   EMBED     embed_corpus_bench binary (default bazel-bin/bench/embed_corpus_bench)
#   DEVICE    auto | cpu | cuda (default auto: the GPU encoder where there is one)
# The split is deterministic: passages are ordered by the SHA-1 of their text
# (a uniform sample of every source); those whose hash is 0 mod 200 are the
# query pool (the first QUERIES of it), the base is the first ROWS of the rest.
set -euo pipefail
OUT=${1:?usage: make_realembed.sh OUT [ROWS] [QUERIES]}
ROWS=${2:-100000}
QUERIES=${3:-1000}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PASSAGES=${PASSAGES:-$ROOT/.corpus/passages.jsonl}
if [[ -z "${MODEL:-}" ]]; then
  MODEL=$ROOT/models/zerovec-mini
  [[ -f $ROOT/models/zerovec-l6/config.json ]] && MODEL=$ROOT/models/zerovec-l6
fi
EMBED=${EMBED:-$ROOT/bazel-bin/bench/embed_corpus_bench}
DEVICE=${DEVICE:-auto}
mkdir -p "$OUT"

if [[ ! -f $PASSAGES ]]; then
  [[ $PASSAGES == *.jsonl ]] || { echo "no $PASSAGES" >&2; exit 1; }
  echo "making $PASSAGES (bench/corpus/make_passages.py, ~3 min)" >&2
  mkdir -p "$(dirname "$PASSAGES")"
  python3 "$ROOT/bench/corpus/make_passages.py" --out "$PASSAGES" \
    --min "$((ROWS + QUERIES))"
fi

# Split into OUT/base.txt and OUT/queries.txt, one passage a line.
python3 -c '
import hashlib, json, lzma, sys
rows, queries, out, src = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
jsonl = src.endswith(".jsonl")
f = lzma.open(src, "rt", encoding="utf-8") if src.endswith(".xz") else open(src, encoding="utf-8")
items = []
with f:
    for line in f:
        text = json.loads(line)["text"] if jsonl else line.rstrip("\n")
        text = " ".join(text.split())
        if text:
            h = int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "big")
            items.append((h, text))
# Uniform samples across every source (the corpus is grouped by source).
items.sort()
qs = [t for h, t in items if h % 200 == 0][:queries]
bs = [t for h, t in items if h % 200 != 0][:rows]
nb, nq = len(bs), len(qs)
with open(out + "/base.txt", "w", encoding="utf-8") as b:
    b.writelines(t + "\n" for t in bs)
with open(out + "/queries.txt", "w", encoding="utf-8") as q:
    q.writelines(t + "\n" for t in qs)
print(f"split: {nb} base passages, {nq} held-out query passages", file=sys.stderr)
if nb < rows or nq < queries:
    sys.exit("not enough passages")
' "$ROWS" "$QUERIES" "$OUT" "$PASSAGES"

for part in base queries; do
  "$EMBED" --input "$OUT/$part.txt" --model "$MODEL" --device "$DEVICE" \
    --repeat 1 --out "$OUT/$part.npy" | grep -E "texts|run 0|wrote" >&2
done
echo "model $(basename "$MODEL"): $OUT/base.npy ($ROWS rows), $OUT/queries.npy ($QUERIES)" >&2
