#!/usr/bin/env python3
"""Deterministic random checkpoints for the GPU benchmark, at two shapes.

  python3 bench/gpu/make_checkpoint.py --shape minilm|bge-base --out DIR

tools/model/random_checkpoint.py writes the all-MiniLM-L6-v2 shape only (its sizes are
module constants); this wrapper sets those constants for the chosen shape and calls
its write_folder, so the value rule (FNV-1a + splitmix64, std 0.02 weights) and the
sentence-transformers layout (mean pooling, normalise, max_seq_length 256) are the same.
Needs numpy.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools", "model"))
import random_checkpoint as rc  # noqa: E402

SHAPES = {  # hidden, layers, heads, intermediate
    "minilm": (384, 6, 12, 1536),
    "bge-base": (768, 12, 12, 3072),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    h, l, heads, f = SHAPES[args.shape]
    rc.HIDDEN, rc.LAYERS, rc.HEADS, rc.INTER = h, l, heads, f
    rc.CONFIG = dict(rc.CONFIG, hidden_size=h, num_hidden_layers=l, num_attention_heads=heads,
                     intermediate_size=f, _name_or_path="zerovec/%s_random" % args.shape)
    rc.write_folder(args.out, rc.DEFAULT_VOCAB, True)
    print("wrote", args.out, "shape", args.shape, SHAPES[args.shape])


if __name__ == "__main__":
    main()
