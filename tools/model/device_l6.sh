#!/usr/bin/env bash
# The default model zerovec-l6 (issue 20) on the GPU machine, one call. Here first:
#   python3 tools/model/make_pairs.py && python3 tools/model/make_corpus_pairs.py
#   python3 tools/model/make_manpage_eval.py
# then with tools/model/work carried:
#   bash tools/model/device_l6.sh smoke|full [MLM_MINUTES] [CONTRASTIVE_MINUTES]
# full: trains, evaluates and exports models/zerovec-l6, writes its reference vectors
# (tests/data/reference/zerovec-l6.jsonl) and packs everything into $OUT as
# l6.tar.part-* (the model is larger than one returned file may be).
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
MODE=${1:-smoke}
MLM=${2:-2.3}
CON=${3:-2.7}
W=tools/model/work
SHAPE=(--layers 6 --hidden 384 --heads 12 --intermediate 1536 --max-len 128 --max-positions 512
       --vocab-size 8192 --lr 3e-4 --warmup 200 --name zerovec-l6 --texts $W/texts.tsv.xz)
R=tools/model/results
mkdir -p "$R"
python3 -c 'import sys,torch,transformers,tokenizers;print(sys.version.split()[0],"torch",torch.__version__,"transformers",transformers.__version__,"tokenizers",tokenizers.__version__)' | tee "$R/device-l6.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$R/device-l6.txt"
if [ "$MODE" = smoke ]; then
  python3 tools/model/train.py --work $W --out /tmp/l6 --results /tmp/l6r "${SHAPE[@]}" \
    --smoke 20000 --mlm-minutes 0.15 --minutes 0.2 --hard-negative-sample 5000 2>&1 | tail -30
  exit
fi
python3 tools/model/train.py --work $W --out models/zerovec-l6 --results "$R" "${SHAPE[@]}" \
  --mlm-minutes "$MLM" --minutes "$CON" > "$R/train-l6.log" 2>&1 || echo "FAILED train"
tail -20 "$R/train-l6.log"
python3 tools/model/make_reference.py --only zerovec-l6 > "$R/reference-l6.log" 2>&1 || echo "FAILED reference"
tail -c 1500 "$R/reference-l6.log"
if [ -n "${OUT:-}" ]; then
  tar cf - models/zerovec-l6 tests/data/reference/zerovec-l6.jsonl "$R"/*l6* | split -b 15M - "$OUT/l6.tar.part-"
  ls -la "$OUT"
fi
