"""Minimal, dependency-free reader for the WordNet 3.0 database files.

Reads data.noun / data.verb / data.adj / data.adv (Debian package
``wordnet-base`` installs them under /usr/share/wordnet) and cntlist.rev
when present. Used by make_pairs.py and make_demo_corpus.py.
"""

import os
import re
import zlib

DEFAULT_DIR = "/usr/share/wordnet"

POS_FILES = (("n", "noun"), ("v", "verb"), ("a", "adj"), ("r", "adv"))

# The 45 lexicographer files of WordNet 3.0, by lex_filenum.
LEXNAMES = [
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal",
    "noun.artifact", "noun.attribute", "noun.body", "noun.cognition",
    "noun.communication", "noun.event", "noun.feeling", "noun.food",
    "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession",
    "noun.process", "noun.quantity", "noun.relation", "noun.shape",
    "noun.state", "noun.substance", "noun.time", "verb.body", "verb.change",
    "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion",
    "verb.motion", "verb.perception", "verb.possession", "verb.social",
    "verb.stative", "verb.weather", "adj.ppl",
]

SS_TYPE_NUM = {"n": 1, "v": 2, "a": 3, "r": 4, "s": 5}

_ADJ_MARKER = re.compile(r"\((a|p|ip)\)$")
_QUOTED = re.compile(r'"([^"]*)"')


class Synset(object):
    __slots__ = ("pos", "offset", "lexfile", "ss_type", "words", "lex_ids",
                 "pointers", "definition", "examples")

    @property
    def key(self):
        return "%s%08d" % (self.pos, self.offset)

    @property
    def id(self):
        return "wn-%s-%08d" % (self.pos, self.offset)

    @property
    def lemmas(self):
        """Lemmas as text: underscores to spaces, duplicates removed."""
        out = []
        for w in self.words:
            t = w.replace("_", " ")
            if t not in out:
                out.append(t)
        return out

    def hypernyms(self):
        return [(p, o) for (sym, o, p) in self.pointers if sym in ("@", "@i")]

    def similar(self):
        return [(p, o) for (sym, o, p) in self.pointers if sym in ("&",)]


def _split_gloss(gloss):
    """Splits a WordNet gloss into (definition, [examples])."""
    examples = [e.strip() for e in _QUOTED.findall(gloss) if e.strip()]
    rest = _QUOTED.sub("", gloss)
    parts = [p.strip() for p in rest.split(";")]
    parts = [p for p in parts if p and p not in (",", ".")]
    definition = "; ".join(parts).strip(" ;,")
    return definition, examples


def parse_line(line, pos):
    if line.startswith("  "):
        return None
    head, _, gloss = line.partition("|")
    f = head.split()
    s = Synset()
    s.pos = pos
    s.offset = int(f[0])
    s.lexfile = LEXNAMES[int(f[1])]
    s.ss_type = f[2]
    w_cnt = int(f[3], 16)
    i = 4
    s.words = []
    s.lex_ids = []
    for _ in range(w_cnt):
        w = _ADJ_MARKER.sub("", f[i])
        s.words.append(w)
        s.lex_ids.append(int(f[i + 1], 16))
        i += 2
    p_cnt = int(f[i])
    i += 1
    s.pointers = []
    for _ in range(p_cnt):
        s.pointers.append((f[i], int(f[i + 1]), "a" if f[i + 2] == "s" else f[i + 2]))
        i += 4
    s.definition, s.examples = _split_gloss(gloss.strip())
    return s


def load(wn_dir=DEFAULT_DIR):
    """Returns dict key -> Synset, key = pos letter (n, v, a, r) + 8-digit offset."""
    synsets = {}
    for pos, name in POS_FILES:
        path = os.path.join(wn_dir, "data." + name)
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                s = parse_line(line, pos)
                if s is not None:
                    synsets[s.key] = s
    return synsets


def load_counts(wn_dir=DEFAULT_DIR):
    """Tag counts (SemCor etc.) per (lemma, ss_type num, lexfile num, lex_id)."""
    path = os.path.join(wn_dir, "cntlist.rev")
    counts = {}
    if not os.path.exists(path):
        return counts
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) != 3:
                continue
            key, _, cnt = parts
            lemma, _, rest = key.partition("%")
            r = rest.split(":")
            k = (lemma, int(r[0][0]), int(r[1]), int(r[2]))
            counts[k] = counts.get(k, 0) + int(cnt)
    return counts


def synset_count(s, counts):
    num = SS_TYPE_NUM[s.ss_type]
    lf = LEXNAMES.index(s.lexfile)
    return sum(counts.get((w.lower(), num, lf, lid), 0) for w, lid in zip(s.words, s.lex_ids))


def is_heldout(s, percent=5):
    """Deterministic held-out split by synset: CRC-32 of e.g. b'n02084071'."""
    return zlib.crc32(s.key.encode("ascii")) % 100 < percent
