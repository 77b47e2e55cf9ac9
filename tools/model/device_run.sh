#!/usr/bin/env bash
# Everything the GPU machine does for the bundled model and the reference test data,
# in one go (device time is scarce). Run from the repository root, after
# `python3 tools/model/make_pairs.py` (its output tools/model/work/ must be present):
#   bash tools/model/device_run.sh [TRAIN_MINUTES]
# Results land in the working tree (models/zerovec-mini/, tests/data/,
# tools/model/results/) and, when $OUT is set, in $OUT/results.tar.gz.
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
MIN=${1:-4}
R=tools/model/results
mkdir -p "$R"
T0=$(date +%s)
step() { echo "== $1 ($(( $(date +%s) - T0 ))s)"; }
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import sys,torch,transformers,tokenizers,safetensors,sentence_transformers,numpy as np;print(sys.version.split()[0],"torch",torch.__version__,"transformers",transformers.__version__,"tokenizers",tokenizers.__version__,"safetensors",safetensors.__version__,"sentence-transformers",sentence_transformers.__version__,"numpy",np.__version__)'
} > "$R/device.txt" 2>&1
cat "$R/device.txt"

step "minilm_random vocab"
python3 tools/model/vocab.py --corpus tools/model/work/vocab_corpus.txt.gz --size 30522 \
  --layout bert-base --out tests/data/minilm_random/vocab.txt > "$R/minilm_vocab.log" 2>&1 || echo "FAILED vocab"
tail -2 "$R/minilm_vocab.log"
step "minilm_random checkpoint"
python3 tools/model/random_checkpoint.py --out /tmp/minilm_random --vocab tests/data/minilm_random/vocab.txt \
  > "$R/random_checkpoint.log" 2>&1 || echo "FAILED random_checkpoint"
tail -2 "$R/random_checkpoint.log"

step "train zerovec-mini"
python3 tools/model/train.py --work tools/model/work --out models/zerovec-mini --results "$R" \
  --minutes "$MIN" > "$R/train.log" 2>&1 || echo "FAILED train"
tail -25 "$R/train.log"

step "tokenizer cases"
python3 tools/model/make_tokenizer_cases.py > "$R/tokenizer_cases.log" 2>&1 || echo "FAILED tokenizer cases"
tail -8 "$R/tokenizer_cases.log"

step "reference vectors"
python3 tools/model/make_reference.py --minilm /tmp/minilm_random > "$R/reference.log" 2>&1 || echo "FAILED reference"
tail -c 3000 "$R/reference.log"

step "pack"
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/results.tar.gz" models/zerovec-mini tests/data "$R"
  ls -la "$OUT"
fi
step "done"
