#!/usr/bin/env bash
# Packs what bench/gpu/product_device.sh needs into .device/ (git-ignored; carry
# it): the CUDA bundle without the model (the checkout that travels has it)
# and the passage corpus as plain text, each passage cut to 160 characters at a
# word boundary (short passages, and it keeps the compressed file under ~25 MB:
# the working tree plus what is carried must stay under 64 MiB).
#   bench/gpu/pack_for_device.sh [PASSAGES_JSONL]   (default .corpus/passages.jsonl)
set -euo pipefail
cd "$(dirname "$0")/../.."
PASSAGES=${1:-.corpus/passages.jsonl}
mkdir -p .device
tools/bundle.sh --cuda --out dist/zerovec-cuda //tools:zerovec \
  //bench:embed_corpus_bench //bench:cpu_embed_bench //bench:search_load //embed:cuda_encoder_test \
  //embed:segment_sink_test //tests/gpu:e2e_test
tar -cJf .device/zerovec-cuda.tar.xz --exclude='share/zerovec/models' \
  -C dist zerovec-cuda
if [[ ! -f .device/passages.txt.xz || $PASSAGES -nt .device/passages.txt.xz ]]; then
  /usr/bin/python3 - "$PASSAGES" <<'PY' | xz -9 -T2 >.device/passages.txt.xz
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    text = json.loads(line)["text"]
    if len(text) > 160:
        cut = text[:160]
        space = cut.rfind(" ")
        text = cut[:space] if space > 80 else cut
    print(text)
PY
fi
du -h .device/*
