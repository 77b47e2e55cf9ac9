#!/usr/bin/env bash
# Packs the 1M real-embedding run (issue 21) into .device-real/ (git-ignored;
# carry it): a CUDA bundle of embed_corpus_bench, hnsw_search_bench and
# index_bench without the model (the checkout has it), and only the passages
# make_realembed.sh will pick for ROWS base rows and QUERIES queries, each cut
# to 160 characters as bench/gpu/pack_for_device.sh cuts them, in corpus order
# (it compresses better). make_realembed.sh re-splits them on the device into
# the same base and queries. The working tree (~21.5 MB) plus both files must
# stay under the device's 64 MiB.
#   bench/realembed/pack_real_for_device.sh [ROWS=1000000] [QUERIES=500]
# Needs .corpus/passages.jsonl (bench/corpus/make_passages.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROWS=${1:-1000000}
QUERIES=${2:-500}
mkdir -p .device-real
tools/bundle.sh --cuda --no-python --out dist/zv-real //bench:embed_corpus_bench \
  //bench:hnsw_search_bench //bench:index_bench
tar -cJf .device-real/zv-real.tar.xz --exclude=share/zerovec/models \
  -C dist zv-real
/usr/bin/python3 - "$ROWS" "$QUERIES" <<'PY'
import hashlib, json, lzma, sys
rows, queries = int(sys.argv[1]), int(sys.argv[2])
items = []
for i, line in enumerate(open(".corpus/passages.jsonl", encoding="utf-8")):
    text = json.loads(line)["text"]
    if len(text) > 160:
        cut = text[:160]
        space = cut.rfind(" ")
        text = cut[:space] if space > 80 else cut
    text = " ".join(text.split())
    if text:
        h = int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "big")
        items.append((h, i, text))
# make_realembed.sh's split: by hash; 0 mod 200 are queries.
ordered = sorted(items)
picked = [x for x in ordered if x[0] % 200 == 0][:queries]
picked += [x for x in ordered if x[0] % 200 != 0][:rows]
with lzma.open(".device-real/passages.txt.xz", "wt", encoding="utf-8",
               preset=9) as f:
    for _, _, text in sorted(picked, key=lambda x: x[1]):
        f.write(text + "\n")
print(f"{len(picked)} passages of {len(items)}", file=sys.stderr)
PY
du -h .device-real/*
