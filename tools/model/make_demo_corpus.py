#!/usr/bin/env python3
"""Writes data/demo/corpus.jsonl: ~5000 English documents from WordNet 3.0, one per synset.

Stdlib only, deterministic. The synsets chosen are everyday senses: per part of
speech (quotas 3500 nouns, 800 verbs, 550 adjectives, 150 adverbs) the synsets with the
highest score = 5 * WordNet tag count (cntlist.rev) + min(200, how often one of its
one-word lemmas occurs in all WordNet glosses and examples) / 4, ties broken by key. Each line:
  {"id": "wn-n-02084071", "text": "dog, domestic dog, Canis familiaris: a member of ...; \"the dog barked all night\"",
   "namespace": "noun", "metadata": {"pos": "n", "lexfile": "noun.animal"}}

  python3 tools/model/make_demo_corpus.py [--wordnet /usr/share/wordnet]
"""

import argparse
import collections
import json
import re
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import wordnet  # noqa: E402

NAMESPACE = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
QUOTA = {"n": 3500, "v": 800, "a": 550, "r": 150}


def choose(syn, counts):
    freq = collections.Counter()
    for s in syn.values():
        freq.update(re.findall(r"[a-z]+", (s.definition + " " + " ".join(s.examples)).lower()))

    def score(s):
        best = max([freq[l] for l in s.lemmas if " " not in l and l.islower()] or [0])
        return 5 * wordnet.synset_count(s, counts) + min(best, 200) / 4.0

    chosen = []
    for pos, quota in QUOTA.items():
        cand = sorted((s for s in syn.values() if s.pos == pos), key=lambda s: (-score(s), s.key))
        chosen += cand[:quota]
    return sorted(chosen, key=lambda s: s.key)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wordnet", default=wordnet.DEFAULT_DIR)
    ap.add_argument("--out", default=os.path.join(REPO, "data", "demo", "corpus.jsonl"))
    args = ap.parse_args()
    syn = wordnet.load(args.wordnet)
    counts = wordnet.load_counts(args.wordnet)
    chosen = choose(syn, counts)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        for s in chosen:
            text = ", ".join(s.lemmas) + ": " + s.definition
            if s.examples:
                text += "; " + "; ".join('"%s"' % e for e in s.examples[:2])
            doc = {"id": s.id, "text": " ".join(text.split()), "namespace": NAMESPACE[s.pos],
                   "metadata": {"pos": s.ss_type, "lexfile": s.lexfile}}
            fh.write(json.dumps(doc, ensure_ascii=False, sort_keys=False) + "\n")
    print("wrote", len(chosen), "documents to", args.out)


if __name__ == "__main__":
    main()
