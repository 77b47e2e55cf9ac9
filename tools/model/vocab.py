#!/usr/bin/env python3
"""Trains a lower-cased WordPiece vocabulary (tokenizers' BertWordPieceTokenizer) on the
WordNet text corpus written by make_pairs.py and writes a BERT vocab.txt.

  python3 tools/model/vocab.py --corpus tools/model/work/vocab_corpus.txt.gz \
      --size 30522 --layout bert-base --out tests/data/minilm_random/vocab.txt

Layouts:
  compact    [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, then the trained tokens.
  bert-base  the special-token ids of bert-base-uncased: [PAD]=0, [unused0..98]=1..99,
             [UNK]=100 [CLS]=101 [SEP]=102 [MASK]=103, then the trained tokens; padded
             with further [unusedN] entries up to --size if the trainer returns fewer.
"""

import argparse
import gzip
import json

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def read_lines(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                yield line


def train(corpus, size, layout):
    from tokenizers import BertWordPieceTokenizer

    reserved = 104 if layout == "bert-base" else 5
    trained_size = size - reserved + len(SPECIAL)
    tok = BertWordPieceTokenizer(clean_text=True, handle_chinese_chars=True,
                                 strip_accents=None, lowercase=True)
    tok.train_from_iterator(read_lines(corpus), vocab_size=trained_size, min_frequency=2,
                            limit_alphabet=1000, special_tokens=list(SPECIAL),
                            show_progress=False, wordpieces_prefix="##")
    learned = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
               if t not in SPECIAL]
    if layout == "bert-base":
        tokens = ["[PAD]"] + ["[unused%d]" % i for i in range(99)] + SPECIAL[1:]
        tokens += learned
        n = 99
        while len(tokens) < size:
            tokens.append("[unused%d]" % n)
            n += 1
        tokens = tokens[:size]
    else:
        tokens = SPECIAL + learned
    assert len(set(tokens)) == len(tokens), "duplicate tokens"
    for t in tokens:
        assert t and not any(c.isspace() for c in t), repr(t)
    return tokens, len(learned)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--layout", choices=["compact", "bert-base"], default="compact")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    tokens, n_learned = train(args.corpus, args.size, args.layout)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("".join(t + "\n" for t in tokens))
    ids = {t: i for i, t in enumerate(tokens)}
    print(json.dumps({"out": args.out, "size": len(tokens), "learned": n_learned,
                      "special_ids": {t: ids[t] for t in SPECIAL}}))


if __name__ == "__main__":
    main()
