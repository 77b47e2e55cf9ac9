#!/usr/bin/env python3
"""Builds the GPU benchmark's input texts from the demo corpus (real WordNet glosses).

  python3 bench/gpu/make_texts.py [--per-bucket 1024] [--out bench/gpu/texts.jsonl]

Three buckets, token counts incl. [CLS]/[SEP] by the reference BERT tokenizer
(tools/model/bert_ref_tokenizer.py, bert-base-uncased vocabulary):
  short   one gloss of 8-16 tokens
  medium  consecutive glosses joined by a space, 56-72 tokens
  long    consecutive glosses joined, 232-256 tokens (the model's max_seq_length is 256)
One JSON a line: {"bucket", "text", "ids"}. Both the CUDA encoder and PyTorch read the
same ids; the C++ bench re-tokenizes the text to check its tokenizer agrees.
Needs only the Python standard library.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools", "model"))
from bert_ref_tokenizer import RefTokenizer  # noqa: E402

RANGES = {"short": (8, 16), "medium": (56, 72), "long": (232, 256)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(REPO, "data", "demo", "corpus.jsonl"))
    ap.add_argument("--vocab", default=os.path.join(REPO, "tests", "data", "minilm_random", "vocab.txt"))
    ap.add_argument("--per-bucket", type=int, default=1024)
    ap.add_argument("--out", default=os.path.join(HERE, "texts.jsonl"))
    args = ap.parse_args()
    tok = RefTokenizer(args.vocab)
    glosses = [json.loads(l)["text"] for l in open(args.corpus, encoding="utf-8")]
    pieces = [len(tok.tokenize(g)) for g in glosses]  # wordpieces, no specials
    out = []
    for bucket, (lo, hi) in RANGES.items():
        made, start = 0, 0
        while made < args.per_bucket:
            if bucket == "short":
                i = start % len(glosses)
                start += 1
                if lo <= pieces[i] + 2 <= hi:
                    text = glosses[i]
                else:
                    continue
            else:
                # Greedy run of consecutive glosses until the count lands in [lo, hi].
                parts, n, i = [], 2, start % len(glosses)
                start += 7  # next text starts elsewhere, so texts differ
                while n < lo:
                    if n + pieces[i] + (0 if not parts else 0) > hi:
                        i = (i + 1) % len(glosses)
                        if len(parts) > 200:
                            break
                        continue
                    parts.append(glosses[i])
                    n += pieces[i]
                    i = (i + 1) % len(glosses)
                text = " ".join(parts)
            ids = tok.encode(text, 256)
            if not lo <= len(ids) <= hi:
                continue
            out.append({"bucket": bucket, "text": text, "ids": ids})
            made += 1
    with open(args.out, "w", encoding="utf-8") as fh:
        for r in out:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    for b in RANGES:
        lens = [len(r["ids"]) for r in out if r["bucket"] == b]
        print(b, len(lens), "texts, tokens min/mean/max", min(lens), sum(lens) / len(lens), max(lens))


if __name__ == "__main__":
    main()
