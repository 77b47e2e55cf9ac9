#!/usr/bin/env python3
"""Training text and contrastive pairs for the default model from the Debian passage
corpus (bench/corpus/make_passages.py), beside the WordNet pairs of make_pairs.py.

Stdlib only. Here (after make_pairs.py and bench/corpus/make_passages.py):
    python3 tools/model/make_corpus_pairs.py [--passages .corpus/passages.jsonl]
        [--work tools/model/work]
writes work/texts.tsv.xz: "namespace<TAB>text" a line, the passages that make pairs
(small enough to carry to the GPU machine beside a checkpoint), and mlm_texts.tsv.xz,
the other passages (vocabulary and MLM only). train.py reads it with read_texts() and
turns it into pairs with corpus_pairs() below, so the pairing rules live in one place.

What is left out, and why:
  - the "wordnet" namespace: WordNet enters through make_pairs.py, whose split holds
    out 5% of the synsets for the gloss -> lemma evaluation;
  - any passage one of whose clauses is a held-out WordNet gloss (GCIDE quotes WordNet),
    so the evaluation stays unseen;
  - man pages and licence texts were never in the passage corpus (they are the real-text
    evaluation set, make_manpage_eval.py);
  - navigation crumbs and passages under 6 words; the Bible, commentaries, Strong's and
    fortunes (--drop): far from both evaluations' text, and the data must travel;
  - from the pairs only (kept as MLM text, mlm_texts.tsv.xz): each large documentation
    source past --cap passages, so dictionary and package text are not drowned, and
    dictionary senses past --dict-senses per headword (GCIDE has up to dozens).

Pairs (kind, group, a, b); pairs of one group are never each other's negatives:
  dict-definition   headword -> its definition (gcide, foldoc, jargon, vera, devil,
                    strongs), grouped by headword
  package-summary   a package's short description -> its long description (first
                    passage of each package), grouped by package
  same-document     a passage -> the next passage of the same source (documentation,
                    Bible, commentary, fortunes), non-overlapping
"""

import argparse
import collections
import json
import lzma
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

DICT_SOURCES = {"gcide", "foldoc", "jargon", "vera", "devil", "strongs"}
PACKAGE_SOURCE = "debian-descriptions"
CAPPED_SOURCES = {"java-docs", "linux-docs", "python-docs", "postgresql-docs",
                  "django-docs", "nodejs-docs", "debian-docs", "bible",
                  "bible-commentary", "fortunes"}

_NORM = re.compile(r"[^a-z0-9]+")


def norm(s):
    return _NORM.sub(" ", s.lower()).strip()


def clauses(text):
    return [norm(c) for c in re.split(r"[;\u2014]|--", text) if len(norm(c)) >= 12]


def heldout_glosses(path):
    out = set()
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                for c in clauses(json.loads(line)["query"]):
                    out.add(c)
    return out


_HEAD = re.compile(r"^([^:]{1,60}?)(?: \(([^()]{1,40})\))?: (.+)$")


def dict_pair(text):
    """(headword, definition) of a dictionary passage "HEAD (pos): BODY", or None."""
    m = _HEAD.match(text)
    if not m:
        return None
    head, body = m.group(1).strip(), m.group(3).strip()
    if len(body.split()) < 3 or not re.search(r"[A-Za-z]", head):
        return None
    return head, body


def package_pair(text):
    """(short description, long description) of a package's first passage
    "pkg: Short description. Long description...", or None."""
    m = re.match(r"^([a-z0-9][a-z0-9+.-]*): (.+?[.?!]) (.+)$", text)
    if not m:
        return None
    pkg, short, long_ = m.group(1), m.group(2).rstrip("."), m.group(3)
    if len(long_.split()) < 5:
        return None
    return pkg, short, long_


def corpus_pairs(texts, group_base=0):
    """texts: [(namespace, text)] in corpus order. Yields (kind, group, a, b)."""
    for k, g, a, b, _ in pairs_with_sources(texts, group_base):
        yield k, g, a, b


def pairs_with_sources(texts, group_base=0):
    """corpus_pairs(), each pair with the indices of the texts it came from."""
    groups = {}

    def group(key):
        if key not in groups:
            groups[key] = group_base + len(groups)
        return groups[key]

    seen_pkg = set()
    prev = {}
    for i, (ns, text) in enumerate(texts):
        if ns in DICT_SOURCES:
            p = dict_pair(text)
            if p:
                yield "dict-definition", group((ns, p[0].lower())), p[0], p[1], (i,)
        elif ns == PACKAGE_SOURCE:
            p = package_pair(text)
            if p and p[0] not in seen_pkg:
                seen_pkg.add(p[0])
                yield "package-summary", group(("pkg", p[0])), p[1], p[2], (i,)
        else:
            if ns in prev:
                j, first = prev.pop(ns)
                yield "same-document", group(("doc", ns, len(groups))), first, text, (j, i)
            else:
                prev[ns] = (i, text)


def read_texts(path):
    with lzma.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            ns, _, text = line.rstrip("\n").partition("\t")
            if text:
                yield ns, text


def split_for_pairs(texts):
    """(texts that make the pairs, the rest), each in corpus order. corpus_pairs() of
    the first gives the very pairs of all texts (checked), so the device call that only
    continues contrastive training carries the first alone; MLM and the vocabulary read both."""
    used = set()
    for *_, src in pairs_with_sources(texts):
        used.update(src)
    paired = [t for i, t in enumerate(texts) if i in used]
    rest = [t for i, t in enumerate(texts) if i not in used]
    if list(corpus_pairs(paired)) != list(corpus_pairs(texts)):
        raise SystemExit("error: the pair texts alone do not give the same pairs")
    return paired, rest


def write_texts(path, texts):
    with lzma.open(path, "wt", encoding="utf-8", preset=9) as out:
        for ns, text in texts:
            out.write("%s\t%s\n" % (ns, text))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", default=os.path.join(REPO, ".corpus", "passages.jsonl"))
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--cap", type=int, default=15000,
                    help="passages of each large documentation source that may make pairs; the rest "
                         "are MLM text only")
    ap.add_argument("--dict-senses", type=int, default=2,
                    help="definitions of one dictionary headword that may make pairs; the rest are MLM text only")
    ap.add_argument("--drop", default="bible,bible-commentary,strongs,fortunes",
                    help="namespaces left out: far from the evaluations' text, and the data must "
                         "travel to the GPU machine beside a checkpoint (64 MiB in all)")
    ap.add_argument("--out", default="", help="folder of texts.tsv.xz (default --work)")
    ap.add_argument("--mlm-out", default="", help="folder of mlm_texts.tsv.xz (default --out)")
    args = ap.parse_args()
    held = heldout_glosses(os.path.join(args.work, "heldout.jsonl"))
    drop = set(filter(None, args.drop.split(",")))
    kept = collections.Counter()
    dropped = collections.Counter()
    texts, mlm_only = [], []
    senses = collections.Counter()
    with open(args.passages, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            ns, text = d["namespace"], " ".join(d["text"].split())
            if ns == "wordnet":
                dropped["wordnet (make_pairs.py instead)"] += 1
                continue
            if ns in drop:
                dropped["--drop " + ns] += 1
                continue
            if len(text.split()) < 6 or "previous | up | next" in text:
                dropped["short or navigation"] += 1
                continue
            if any(c in held for c in clauses(text)):
                dropped["quotes a held-out gloss"] += 1
                continue
            kept[ns] += 1
            # The texts that may make pairs travel to every training call; the others
            # (MLM and vocabulary only) to the first.
            head = dict_pair(text) if ns in DICT_SOURCES else None
            if head:
                senses[ns, head[0].lower()] += 1
            if (ns in CAPPED_SOURCES and kept[ns] > args.cap) or (head and senses[ns, head[0].lower()] > args.dict_senses):
                mlm_only.append((ns, text))
            else:
                texts.append((ns, text))
    paired, rest = split_for_pairs(texts)
    rest += mlm_only
    out_dir = args.out or args.work
    os.makedirs(out_dir, exist_ok=True)
    out_path = os.path.join(out_dir, "texts.tsv.xz")
    os.makedirs(args.mlm_out or out_dir, exist_ok=True)
    rest_path = os.path.join(args.mlm_out or out_dir, "mlm_texts.tsv.xz")
    write_texts(out_path, paired)
    write_texts(rest_path, rest)
    pairs = collections.Counter(k for k, _, _, _ in corpus_pairs(read_texts(out_path)))
    stats = {"texts": sum(kept.values()), "by_source": dict(kept.most_common()),
             "dropped": dict(dropped), "pairs": dict(pairs), "pair_texts": len(paired),
             "mlm_only_texts": len(rest), "bytes": os.path.getsize(out_path),
             "mlm_only_bytes": os.path.getsize(rest_path)}
    with open(os.path.join(out_dir, "corpus_stats.json"), "w") as fh:
        json.dump(stats, fh, indent=2)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
