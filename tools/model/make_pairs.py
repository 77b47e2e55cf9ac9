#!/usr/bin/env python3
"""Builds contrastive training pairs and the held-out evaluation set from WordNet 3.0.

Stdlib only. Usage:
    python3 tools/model/make_pairs.py [--wordnet /usr/share/wordnet] [--out tools/model/work]

Writes into --out:
  pairs.tsv.gz        type <TAB> group <TAB> text_a <TAB> text_b   (group = synset number;
                      pairs of one group are never used as each other's negatives)
  heldout.jsonl       one held-out synset per line: {"id", "query" (its gloss), "doc" (its lemmas)}
  vocab_corpus.txt.gz lemmas, glosses and examples of the training synsets, one per line
                      (input of the WordPiece vocabulary trainer)
  stats.json          counts

The split is by synset: a synset is held out when CRC-32 of its key (pos letter +
8-digit offset, e.g. "n02084071") mod 100 < 5. No pair touches a held-out synset.
"""

import argparse
import gzip
import json
import lzma
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wordnet  # noqa: E402


def clean(t):
    return " ".join(t.replace("\t", " ").split())


def open_out(path, xz):
    if xz:
        return lzma.open(path + ".xz", "wt", encoding="utf-8", preset=9 | lzma.PRESET_EXTREME)
    return gzip.open(path + ".gz", "wt", encoding="utf-8", compresslevel=6)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wordnet", default=wordnet.DEFAULT_DIR)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "work"))
    ap.add_argument("--heldout-percent", type=int, default=5)
    ap.add_argument("--xz", action="store_true",
                    help="pairs.tsv.xz (in group order, which compresses 3x better than shuffled) and "
                         "vocab_corpus.txt.xz instead of .gz: the slim copy carried to the GPU machine")
    args = ap.parse_args()

    syn = wordnet.load(args.wordnet)
    keys = sorted(syn)
    number = {k: i for i, k in enumerate(keys)}
    held = {k for k in keys if wordnet.is_heldout(syn[k], args.heldout_percent)}
    rng = random.Random(20240611)
    os.makedirs(args.out, exist_ok=True)

    pairs = []

    def add(kind, group, a, b):
        a, b = clean(a), clean(b)
        if a and b and a != b:
            pairs.append((kind, group, a, b))

    for k in keys:
        if k in held:
            continue
        s = syn[k]
        g = number[k]
        lemmas = s.lemmas
        names = ", ".join(lemmas)
        d = s.definition
        if d:
            add("names-gloss", g, names, d)
            if len(lemmas) > 1:
                for lem in lemmas[:4]:
                    add("lemma-gloss", g, lem, d)
        for ex in s.examples[:3]:
            if d:
                add("gloss-example", g, d, ex)
        if s.examples:
            add("names-example", g, names, rng.choice(s.examples))
        for (p, o) in s.hypernyms()[:2]:
            hk = "%s%08d" % (p, o)
            if hk in syn and hk not in held:
                add("hyponym-hypernym", g, names, ", ".join(syn[hk].lemmas[:3]))
        if len(lemmas) > 1:
            others = lemmas[1:]
            rng.shuffle(others)
            for o in others[:2]:
                add("synonym", g, lemmas[0], o)

    rng.shuffle(pairs)
    if args.xz:
        pairs.sort(key=lambda p: p[1])  # stable: the shuffled order within a group
    with open_out(os.path.join(args.out, "pairs.tsv"), args.xz) as fh:
        for kind, g, a, b in pairs:
            fh.write("%s\t%d\t%s\t%s\n" % (kind, g, a, b))

    n_held = 0
    with open(os.path.join(args.out, "heldout.jsonl"), "w", encoding="utf-8") as fh:
        for k in keys:
            if k not in held:
                continue
            s = syn[k]
            if not s.definition:
                continue
            fh.write(json.dumps({"id": s.id, "query": clean(s.definition),
                                 "doc": clean(", ".join(s.lemmas))}, ensure_ascii=False) + "\n")
            n_held += 1

    with open_out(os.path.join(args.out, "vocab_corpus.txt"), args.xz) as fh:
        for k in keys:
            if k in held:
                continue
            s = syn[k]
            fh.write(clean(", ".join(s.lemmas)) + "\n")
            if s.definition:
                fh.write(clean(s.definition) + "\n")
            for ex in s.examples:
                fh.write(clean(ex) + "\n")

    kinds = {}
    for p in pairs:
        kinds[p[0]] = kinds.get(p[0], 0) + 1
    stats = {"synsets": len(keys), "heldout_synsets": len(held), "heldout_eval_queries": n_held,
             "pairs": len(pairs), "pairs_by_type": kinds}
    with open(os.path.join(args.out, "stats.json"), "w") as fh:
        json.dump(stats, fh, indent=1, sort_keys=True)
    print(json.dumps(stats, sort_keys=True))


if __name__ == "__main__":
    main()
