#!/usr/bin/env bash
# zerovec-l6 (issue 20) on the GPU machine, in bounded calls with a checkpoint between
# them. Here first (tools/model/README.md, "zerovec-l6"):
#   python3 tools/model/make_pairs.py && python3 tools/model/make_pairs.py --xz --out tools/model/work/l6
#   python3 tools/model/make_corpus_pairs.py --out tools/model/work/l6 --mlm-out tools/model/work/l6-mlm
#   mv tools/model/work/l6/vocab_corpus.txt.xz tools/model/work/l6-mlm/
#   rm tools/model/work/l6/heldout.jsonl tools/model/work/l6/stats.json
# Then, on the GPU machine:
#   smoke                  a tiny fresh run and a tiny resumed run (about 90 s)
#   full MLM_MIN CON_MIN   call 1, carry tools/model/work/l6 and tools/model/work/l6-mlm:
#                          smoke, vocabulary, MLM, contrastive; exports models/zerovec-l6
#   resume CON_MIN         call 2, carry tools/model/work/l6 and models/zerovec-l6 (call 1's,
#                          unpacked): smoke, contrastive from that checkpoint, reference vectors
#   pair MLM_MIN CON_MIN   two fresh runs at once on the one GPU, for an A/B comparison under
#                          the same conditions (one call, one start and smoke for both):
#                          A_ARGS and B_ARGS are extra train.py flags for each (the last of a
#                          repeated flag wins), e.g. A_ARGS="--vocab-size 16384"
#                          B_ARGS="--vocab-size 32768"; brings back the results only
#                          (tools/model/results/pair-a and pair-b): two models can exceed what
#                          a call returns (~64 MB; 16k + 32k vocabularies are 82 MB). Each side
#                          trains at about half the rate of a lone run, so give contrastive
#                          training its share: MLM_SHARE=0.7 with WALL=500 left ~80 s after the
#                          MLM, most of it torch.compile, and 2 / 48 steps (2026-12-07)
# VOCAB (default 8192): the word-piece vocabulary a fresh run trains.
# Each call ends by WALL seconds (default 560) after it starts: contrastive training stops
# early enough for export, evaluation and packing (train.py --stop-at). The model and the
# results are packed into $OUT as l6.tar.part-* (15 MiB each); unpack here with
#   cat FILES_AT/l6.tar.part-* | tar xf -      (in the repository root)
set -u
T0=$(date +%s)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true PYTHONUNBUFFERED=1
MODE=${1:-smoke}
WALL=${WALL:-560}
W=tools/model/work/l6      # WordNet pairs and the corpus texts that make pairs: every call
M=tools/model/work/l6-mlm  # WordNet text and the texts in no pair (vocabulary, MLM): call 1
CKPT=models/zerovec-l6
R=tools/model/results
TRAIN=(python3 tools/model/train.py --work "$W" --texts "$W/texts.tsv.xz" --name zerovec-l6
       --max-len 128 --lr "${LR:-4e-4}" --warmup 200 --batch "${BATCH:-4096}" --length-buckets 4
       --packed "${PACKED:-1}" --source-weights "${WEIGHTS:-wordnet=3,package-summary=3,dict-definition=2}"
       --hard-negatives-both 1)
FRESH=(--layers 6 --hidden 384 --heads 12 --intermediate 1536 --max-positions 512 --vocab-size "${VOCAB:-8192}"
       --mlm-texts "$M/mlm_texts.tsv.xz" --vocab-corpus "$M/vocab_corpus.txt.xz")
mkdir -p "$R"

elapsed() { echo $(( $(date +%s) - T0 )); }
need() {
  for f in "$@"; do
    [ -e "$f" ] || { echo "ERROR: $f is missing (carry it; see the top of $0)"; exit 2; }
  done
}
pack() {
  [ -n "${OUT:-}" ] || return 0
  tar cf - "$@" | split -b 15M - "$OUT/l6.tar.part-"
  ls -la "$OUT"
}
fail() {
  echo "ERROR: $1 failed ($(elapsed)s); the end of its log:"
  tail -40 "$2"
  pack "$R"/*l6*.log
  exit 1
}
smoke_fresh() {
  "${TRAIN[@]}" "${FRESH[@]}" --out /tmp/l6s --results /tmp/l6s-r --smoke 5000 --mlm-minutes 0.05 \
    --compile 0 --minutes 0.15 --hard-negatives-at 0.3 --hard-negative-sample 4000 > "$R/smoke-l6-fresh.log" 2>&1 &&
    grep -q SUMMARY "$R/smoke-l6-fresh.log"
}
# full and pair: a fresh run's inputs, then the fresh smoke (stops the call if it fails).
fresh_start() {
  need "$W/pairs.tsv.xz" "$W/texts.tsv.xz" "$M/mlm_texts.tsv.xz" "$M/vocab_corpus.txt.xz"
  smoke_fresh || fail "smoke (fresh)" "$R/smoke-l6-fresh.log"
  echo "smoke passed ($(elapsed)s)"
}
smoke_resume() {
  "${TRAIN[@]}" --resume-from "$1" --out /tmp/l6r --results /tmp/l6r-r --smoke 5000 --compile 0 --minutes 0.1 \
    --hard-negatives-at 0,0.5 --hard-negative-sample 4000 > "$R/smoke-l6-resume.log" 2>&1 &&
    grep -q SUMMARY "$R/smoke-l6-resume.log"
}

python3 -c 'import sys,torch,transformers,tokenizers;print(sys.version.split()[0],"torch",torch.__version__,"transformers",transformers.__version__,"tokenizers",tokenizers.__version__)' | tee "$R/device-l6.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$R/device-l6.txt"

case "$MODE" in
smoke)
  need "$W/pairs.tsv.xz" "$W/texts.tsv.xz" "$M/mlm_texts.tsv.xz" "$M/vocab_corpus.txt.xz"
  smoke_fresh || fail "smoke (fresh)" "$R/smoke-l6-fresh.log"
  grep SUMMARY "$R/smoke-l6-fresh.log"
  smoke_resume /tmp/l6s || fail "smoke (resume)" "$R/smoke-l6-resume.log"
  grep SUMMARY "$R/smoke-l6-resume.log"
  echo "smoke passed ($(elapsed)s)"
  ;;
full)
  MLM=${2:-1.5}
  CON=${3:-99}
  fresh_start
  # Call 2's path, checked now so that a fix can land before call 2; it runs beside the
  # training's CPU-bound start (vocabulary, tokenization), and call 1 goes on regardless.
  smoke_resume /tmp/l6s &
  RESUME_SMOKE=$!
  # 45 s are left for export, evaluation and packing
  "${TRAIN[@]}" "${FRESH[@]}" --out "$CKPT" --results "$R" --mlm-minutes "$MLM" --minutes "$CON" \
    --mlm-share "${MLM_SHARE:-0.5}" \
    --stop-at $((T0 + WALL - 45)) --hard-negatives-at 0.5 --lr-range 1,0.5 \
    --eval-file zerovec-l6-eval-call1.json > "$R/train-l6-call1.log" 2>&1 || echo "FAILED train ($(elapsed)s)"
  if wait "$RESUME_SMOKE"; then
    echo "resume smoke passed"
  else
    echo "WARNING: resume smoke failed, fix before call 2:"
    tail -25 "$R/smoke-l6-resume.log"
  fi
  grep -E "vocab|data|mlm \{|hard negatives|trained|SUMMARY" "$R/train-l6-call1.log" | cut -c1-600
  tail -3 "$R/train-l6-call1.log" | cut -c1-300
  pack "$CKPT" "$R"/*l6*
  ;;
resume)
  CON=${2:-99}
  need "$W/pairs.tsv.xz" "$W/texts.tsv.xz" "$CKPT/model.safetensors" "$CKPT/vocab.txt"
  smoke_resume "$CKPT" || fail "smoke (resume)" "$R/smoke-l6-resume.log"
  echo "smoke passed ($(elapsed)s)"
  # 110 s are left for export, evaluation, the reference vectors and packing
  "${TRAIN[@]}" --resume-from "$CKPT" --out "$CKPT" --results "$R" --minutes "$CON" \
    --stop-at $((T0 + WALL - 110)) --hard-negatives-at 0,0.5 --lr-range "${LR_RANGE:-0.5,0}" --warmup 100 \
    --eval-file zerovec-l6-eval.json > "$R/train-l6-call2.log" 2>&1 || echo "FAILED train ($(elapsed)s)"
  grep -E "vocab|data|hard negatives|trained|SUMMARY" "$R/train-l6-call2.log" | cut -c1-600
  tail -3 "$R/train-l6-call2.log" | cut -c1-300
  LEFT=$((T0 + WALL - 15 - $(date +%s)))
  if [ "$LEFT" -gt 20 ]; then
    timeout "$LEFT" python3 tools/model/make_reference.py --only zerovec-l6 > "$R/reference-l6.log" 2>&1 ||
      echo "FAILED or timed out: reference vectors ($(elapsed)s)"
    tail -c 1200 "$R/reference-l6.log"
  else
    echo "no time left for the reference vectors"
  fi
  REF=()
  [ -f tests/data/reference/zerovec-l6.jsonl ] && REF=(tests/data/reference/zerovec-l6.jsonl)
  pack "$CKPT" "${REF[@]}" "$R"/*l6*
  ;;
pair)
  MLM=${2:-1.5}
  CON=${3:-99}
  fresh_start
  PIDS=()
  for SIDE in a b; do
    ARGS_VAR=${SIDE^^}_ARGS
    read -r -a EXTRA <<< "${!ARGS_VAR:-}"
    mkdir -p "$R/pair-$SIDE"
    echo "$SIDE: ${EXTRA[*]:-(no extra flags)}" | tee "$R/pair-$SIDE/args.txt"
    # 50 s are left for export, evaluation (both at once) and packing
    "${TRAIN[@]}" "${FRESH[@]}" --out "$CKPT-$SIDE" --results "$R/pair-$SIDE" \
      --mlm-minutes "$MLM" --minutes "$CON" --mlm-share "${MLM_SHARE:-0.5}" \
      --stop-at $((T0 + WALL - 50)) --hard-negatives-at 0.5 --lr-range 1,0.5 \
      --eval-file zerovec-l6-eval-pair-$SIDE.json "${EXTRA[@]}" \
      > "$R/pair-$SIDE/train-l6-pair.log" 2>&1 &
    PIDS+=($!)
  done
  for i in 0 1; do wait "${PIDS[$i]}" || echo "FAILED train side $i ($(elapsed)s)"; done
  for SIDE in a b; do
    echo "== $SIDE: $(cat "$R/pair-$SIDE/args.txt")"
    grep -E "vocab|mlm \{|trained|SUMMARY" "$R/pair-$SIDE/train-l6-pair.log" | cut -c1-400
    tail -2 "$R/pair-$SIDE/train-l6-pair.log" | cut -c1-300
  done
  pack "$R/pair-a" "$R/pair-b" "$R"/smoke-l6-fresh.log "$R"/device-l6.txt
  ;;
*)
  echo "usage: $0 smoke | full [MLM_MIN] [CON_MIN] | resume [CON_MIN] | pair [MLM_MIN] [CON_MIN]"
  exit 2
  ;;
esac
echo "done ($(elapsed)s)"
