#!/usr/bin/env python3
"""Build a benchmark corpus of short English passages from text shipped in
Debian 12 packages (dictionaries, WordNet, package descriptions, documentation).

Output: JSONL, one passage a line:
    {"id": "<source>-<n>", "text": "...", "namespace": "<source>"}

Man pages and licence texts are deliberately NOT used: they are held out for
retrieval evaluation.  Standard library only.  Deterministic: the same
installed packages and apt lists give a byte-identical file.

Install the sources first:  bench/corpus/install_sources.sh
Then:                       python3 bench/corpus/make_passages.py \
                                --provenance .corpus/provenance.tsv
"""

import argparse
import glob
import gzip
import hashlib
import html
import html.parser
import json
import os
import re
import statistics
import subprocess
import sys
import time
import unicodedata

MAX_WORDS = 80  # a passage longer than this is split on sentence boundaries
MIN_WORDS = 3   # shorter texts are dropped (a headword alone is no passage)
MIN_CHARS = 12

DICTD = "/usr/share/dictd"
WORDNET = "/usr/share/wordnet"
APT_LISTS = "/var/lib/apt/lists"

# --------------------------------------------------------------------------
# Text helpers

_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")
_ZERO_WIDTH = re.compile(r"[\u200b\u200e\u200f\ufeff\u00ad]")
_WS = re.compile(r"\s+")


def clean(s):
    """NFC, no control characters, collapsed whitespace, valid UTF-8."""
    s = unicodedata.normalize("NFC", s)
    s = s.replace("\ufffd", "")
    s = _CTRL.sub(" ", s)
    s = _ZERO_WIDTH.sub("", s)
    s = _WS.sub(" ", s).strip()
    # Drop lone surrogates or anything else that cannot be encoded.
    return s.encode("utf-8", "ignore").decode("utf-8")


# A sentence ends at . ! ? (optionally followed by a closing quote/bracket)
# and the next one starts with an upper-case letter, digit, quote or bracket.
_SENT_END = re.compile(r"(?<=[.!?])([\"'\u201d\u2019)\]]*)\s+(?=[\"'\u201c\u2018(\[{A-Z0-9])")
_ABBREV = re.compile(
    r"(?:\b(?:e\.g|i\.e|etc|cf|vs|viz|Mr|Mrs|Ms|Dr|St|Prof|Jr|Sr|No|Vol|vol|pp|p|ch|Fig|fig|"
    r"Inc|Ltd|Co|Corp|approx|esp|Gr|L|F|OE|AS|Lat|Obs|Bot|Zool|Chem|Med|Math|Naut|Mil|"
    r"Eng|Amer|Scot|Prov|Colloq|Arch|Anat|Law|Mus|Geol|Astron|Her|Eccl|R|Shak|Jer|Bp|"
    r"[A-Z])\.)$")


def sentences(text):
    parts, start = [], 0
    for m in _SENT_END.finditer(text):
        cut = m.start() + len(m.group(1))
        piece = text[start:cut]
        if _ABBREV.search(piece):  # "e.g. Foo", "Dr. Smith", "J. Smith": no break
            continue
        parts.append(piece.strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return [p for p in parts if p]


def _split_long_sentence(words, limit):
    """A single sentence over the limit: cut after ; or , near the limit,
    else hard at the limit."""
    out = []
    while len(words) > limit:
        cut = 0
        for i in range(limit, max(limit // 2, 1), -1):
            if words[i - 1].endswith((";", ",", ":")):
                cut = i
                break
        if not cut:
            cut = limit
        out.append(" ".join(words[:cut]))
        words = words[cut:]
    if words:
        out.append(" ".join(words))
    return out


def chunk(text, limit=MAX_WORDS):
    """Split text into pieces of at most `limit` words on sentence boundaries."""
    words = text.split()
    if len(words) <= limit:
        return [text]
    pieces, cur, n = [], [], 0
    for sent in sentences(text):
        sw = sent.split()
        if len(sw) > limit:
            if cur:
                pieces.append(" ".join(cur))
                cur, n = [], 0
            pieces.extend(_split_long_sentence(sw, limit))
            continue
        if n + len(sw) > limit and cur:
            pieces.append(" ".join(cur))
            cur, n = [], 0
        cur.extend(sw)
        n += len(sw)
    if cur:
        pieces.append(" ".join(cur))
    # A short last piece is merged back when the total still fits 1.25x.
    if len(pieces) > 1:
        last = pieces[-1].split()
        prev = pieces[-2].split()
        if len(last) < 8 and len(prev) + len(last) <= limit + limit // 4:
            pieces[-2:] = [" ".join(prev + last)]
    return pieces


def with_prefix(prefix, body, limit=MAX_WORDS):
    """`prefix: body`, split so every piece carries the prefix."""
    body = clean(body)
    if not body:
        return []
    if not prefix:
        return chunk(body, limit)
    room = max(limit - len(prefix.split()), 20)
    return ["%s: %s" % (prefix, piece) for piece in chunk(body, room)]


def alpha_ratio(s):
    if not s:
        return 0.0
    return sum(c.isalpha() for c in s) / len(s)


# --------------------------------------------------------------------------
# Package metadata (provenance)


# --extracted DIR: packages unpacked with `dpkg-deb -x X.deb DIR/<pkg>` (their version in
# DIR/<pkg>.version) stand in for installed ones, for documentation packages whose
# installation would upgrade the machine's python3.11, postgresql or openjdk.
EXTRACTED = None


def extracted_root(pkg):
    if EXTRACTED and os.path.isdir(os.path.join(EXTRACTED, pkg)):
        return os.path.join(EXTRACTED, pkg)
    return None


def dpkg_version(pkg):
    root = extracted_root(pkg)
    if root:
        with open(root + ".version", encoding="utf-8") as f:
            return f.read().strip() + " (unpacked, not installed)"
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                             capture_output=True, text=True, check=False)
        return out.stdout.strip() or "not installed"
    except OSError:
        return "unknown"


# Licences of copyright files that are not machine-readable (DEP-5): the
# statement as written in /usr/share/doc/<pkg>/copyright, summarised.
_LICENCE_SUMMARY = {
    "dict-gcide": "GPL-2+ (GCIDE, based on Webster's 1913 and WordNet)",
    "dict-foldoc": "GFDL-1.1+ (no invariant sections)",
    "dict-devil": "public domain (copyright expired)",
    "fortunes": "BSD-4-clause-UC (fortune data: quotations, copyright of each with its author)",
    "fortunes-min": "BSD-4-clause-UC (fortune data: quotations, copyright of each with its author)",
    "python3.11-doc": "PSF-2.0 (Python licence; other licences listed for bundled code)",
    "debian-faq": "permissive notice (SPI 1996-2003): verbatim and modified copies allowed",
}


def copyright_licence(pkg):
    path = (extracted_root(pkg) or "") + "/usr/share/doc/%s/copyright" % pkg
    if pkg in _LICENCE_SUMMARY:
        return _LICENCE_SUMMARY[pkg]
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return "no copyright file"
    if "copyright-format" in text.splitlines()[0] if text else False:
        # DEP-5: the License of the "Files: *" stanza, then the other ones.
        stanzas = re.split(r"\n\s*\n", text)
        main, other = [], []
        for st in stanzas:
            fm = re.search(r"^Files:\s*(.*)$", st, re.M)
            lm = re.search(r"^License:\s*(\S.*)$", st, re.M)
            if not lm or not fm:
                continue
            lic = lm.group(1).strip()
            if fm.group(1).strip() == "*":
                main.append(lic)
            elif lic not in other:
                other.append(lic)
        lics = main + [l for l in other if l not in main]
        if lics:
            return "; ".join(lics[:4]) + (" …" if len(lics) > 4 else "")
    for key, name in (("public domain", "public domain"), ("GFDL", "GFDL"),
                      ("Free Documentation", "GFDL"), ("GPL", "GPL"),
                      ("BSD", "BSD")):
        if key.lower() in text.lower():
            return name + " (as stated in copyright file)"
    return "see /usr/share/doc/%s/copyright" % pkg


# --------------------------------------------------------------------------
# Output

# Licence texts are held out (reserved for evaluation): a passage with a
# phrase that only licence texts and licence notices use is dropped, whatever
# its source.
_LICENCE_TEXT = re.compile(
    r"WITHOUT ANY WARRANTY|Permission is hereby granted|Redistribution and use in "
    r"source and binary|THE SOFTWARE IS PROVIDED|MERCHANTABILITY|redistribute it "
    r"and/or modify|Permission is granted to copy|under the terms of (?:the )?"
    r"(?:version \S+ of )?the GNU|Licensed under the Apache|SPDX-License-Identifier|"
    r"You should have received a copy of the|permitted to copy and distribute "
    r"verbatim|is distributed in the hope|There is NO WARRANTY|Distributed under "
    r"the terms of|copy of the GNU (?:Lesser |Library )?General Public License|"
    r"licen[cs]es for most software are designed|common-licenses", re.I)



class Corpus:
    def __init__(self, fh):
        self.fh = fh
        self.seen = set()
        self.counts = {}
        self.words = []
        self.dupes = 0
        self.short = 0
        self.licence = 0

    def add(self, source, text):
        text = clean(text)
        if len(text) < MIN_CHARS or len(text.split()) < MIN_WORDS:
            self.short += 1
            return False
        if _LICENCE_TEXT.search(text):
            self.licence += 1
            return False
        key = hashlib.blake2b(text.encode("utf-8"), digest_size=12).digest()
        if key in self.seen:
            self.dupes += 1
            return False
        self.seen.add(key)
        n = self.counts.get(source, 0)
        self.counts[source] = n + 1
        self.words.append(len(text.split()))
        self.fh.write(json.dumps({"id": "%s-%d" % (source, n), "text": text,
                                  "namespace": source}, ensure_ascii=False))
        self.fh.write("\n")
        return True


# --------------------------------------------------------------------------
# dictd databases (GCIDE, FOLDOC, Jargon, Devil's Dictionary, V.E.R.A.)

_B64 = {c: i for i, c in enumerate(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def _b64num(s):
    n = 0
    for c in s:
        n = n * 64 + _B64[c]
    return n


def dictd_entries(name):
    """(headword, body) for each distinct article of a dictd database, in
    file order; the 00-database-* meta articles (licence blurbs) skipped."""
    with open(os.path.join(DICTD, name + ".index"), "rb") as f:
        index = f.read().decode("utf-8", "replace")
    with gzip.open(os.path.join(DICTD, name + ".dict.dz")) as f:
        data = f.read()
    arts = {}
    for line in index.splitlines():
        p = line.split("\t")
        if len(p) < 3:
            continue
        head = p[0]
        if head.startswith("00-database") or head.startswith("00database"):
            continue
        off, ln = _b64num(p[1]), _b64num(p[2])
        arts.setdefault((off, ln), head)
    for (off, ln), head in sorted(arts.items()):
        raw = data[off:off + ln]
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError:
            body = raw.decode("cp1252", "replace")
        yield head, body


def _paragraphs(lines):
    paras, cur = [], []
    for ln in lines:
        if ln.strip():
            cur.append(ln)
        elif cur:
            paras.append(cur)
            cur = []
    if cur:
        paras.append(cur)
    return paras


# ---- GCIDE

_GC_NAMED = {
    "imac": "ī", "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "eth": "ð",
    "thorn": "þ", "ng": "ŋ", "deg": "°", "root": "√", "sect": "§",
    "yogh": "ȝ", "asl": "ʼ", "pounds": "£", "add": "ạ", "udd": "ụ",
    "dsdot": "ḍ", "bprime": "″", "prime": "′", "cre": "˘", "frac12": "½",
    "frac13": "⅓", "frac14": "¼", "frac34": "¾", "frac23": "⅔",
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε",
    "zeta": "ζ", "eta": "η", "theta": "θ", "iota": "ι", "kappa": "κ",
    "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "omicron": "ο",
    "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "upsilon": "υ",
    "phi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω", "Delta": "Δ",
    "Sigma": "Σ", "Omega": "Ω", "Pi": "Π", "Theta": "Θ", "Gamma": "Γ",
    "times": "×", "divide": "÷", "middot": "·", "ldquo": "“", "rdquo": "”",
    "lsquo": "‘", "rsquo": "’", "mdash": "—", "ndash": "–", "hand": "☞",
    "dagger": "†", "ddagger": "‡", "para": "¶", "sharp": "♯", "flat": "♭",
    "natural": "♮", "?": "?", "th": "th", "oo": "oo", "uum": "ü",
    "aum": "ä", "oum": "ö", "eum": "ë", "ium": "ï", "=oo": "ōō",
    "oo^": "ŏŏ", "-oo": "oo", "ycir": "ŷ", "ocir": "ô", "acir": "â",
}
_GC_DIA = {"=": "\u0304", "'": "\u0301", "`": "\u0300", '"': "\u0308",
           "~": "\u0303", ".": "\u0307", ",": "\u0327", "*": "\u030a",
           "^": "\u0302", "-": ""}
_GC_CODE = re.compile(r"\[([^\]\s\[]{1,8})\]")
_GC_SOURCE = re.compile(
    r"^\s*\[[^\]]*(?:Webster|WordNet|PJC|Century|Chambers|RDH|RHUD|\bAS\b|"
    r"\bGG\b|\bRP\b|\bMW\b|\bDC\b|\bJS\b|Dict\b|break)[^\]]*\]\s*$")
_GC_SOURCE_INLINE = re.compile(
    r"\[[^\[\]]*(?:Webster|WordNet|PJC|Century Dict|Chambers|RDH|RHUD)[^\[\]]*\]")
_GC_HEAD = re.compile(r"^(?P<hw>[^\\\n]+?)\s*\\[^\\\n]*\\(?P<rest>.*)$")
_GC_POS = re.compile(
    r"^[\s,]*(?:\([^)]*\)[\s,]*)?(?P<pos>(?:(?:n|v|a|adv|prep|conj|interj|pron|"
    r"p|pr|t|i|pl|sing|superl|compar|imp|prop|adj|vb|obs|pref|suff|"
    r"inf|pres)\.(?:\s*&\s*|\s+|,\s*)?)+)")
_POS_NAMES = [("v. t.", "verb"), ("v. i.", "verb"), ("v.", "verb"),
              ("n. pl.", "plural noun"), ("prop. n.", "proper noun"),
              ("n.", "noun"), ("adv.", "adverb"), ("a.", "adjective"),
              ("adj.", "adjective"), ("prep.", "preposition"),
              ("conj.", "conjunction"), ("interj.", "interjection"),
              ("pron.", "pronoun"), ("p. p.", "past participle"),
              ("p. a.", "participial adjective"), ("pref.", "prefix"),
              ("suff.", "suffix")]


def _gc_code(m):
    c = m.group(1)
    if c in _GC_NAMED:
        return _GC_NAMED[c]
    if len(c) == 2 and c[0] in _GC_DIA and c[1].isalpha():
        return unicodedata.normalize("NFC", c[1] + _GC_DIA[c[0]])
    if len(c) == 2 and c[1] == "^" and c[0].isalpha():  # [a^] breve
        return unicodedata.normalize("NFC", c[0] + "\u0306")
    return m.group(0)


def gcide_text(s):
    s = _GC_CODE.sub(_gc_code, s)
    # {cross references}: keep the words, drop syllable/accent marks inside.
    s = re.sub(r"\{([^{}]*)\}", lambda m: re.sub(r"[*\"`]", "", m.group(1)), s)
    s = s.replace("<--", "").replace("-->", "")
    s = re.sub(r"<[^<>\n]{1,40}>", "", s)
    s = s.replace("[GREEK]", "").replace("\\", "")
    s = _GC_SOURCE_INLINE.sub("", s)
    s = re.sub(r"\s--\s?(?=[A-Z])", " — ", s)   # "--Shak." citation
    s = re.sub(r"\s?--\s?", " — ", s)           # dash
    return s


def _gc_pos(rest):
    m = _GC_POS.match(rest)
    if not m:
        return ""
    pos = m.group("pos").strip().rstrip(",&").strip()
    for key, name in _POS_NAMES:
        if pos.startswith(key):
            return name
    return ""


def _gc_header(lines):
    """Header = first line plus continuation lines while [ ( are open."""
    depth = 0
    n = 0
    for i, ln in enumerate(lines):
        depth += ln.count("[") - ln.count("]") + ln.count("(") - ln.count(")")
        n = i + 1
        if depth <= 0:
            break
    return " ".join(l.strip() for l in lines[:n]), lines[n:]


def gcide_passages(head, body):
    lines = body.split("\n")
    # Split into entries: an entry starts at a non-indented line.
    entries, cur = [], []
    for ln in lines:
        if ln and not ln[0].isspace() and cur:
            entries.append(cur)
            cur = []
        cur.append(ln)
    if cur:
        entries.append(cur)
    for ent in entries:
        if not ent or not ent[0].strip():
            continue
        header, rest = _gc_header(ent)
        m = _GC_HEAD.match(header)
        if m:
            hw = m.group("hw")
            pos = _gc_pos(m.group("rest"))
        else:
            hw, pos = head, ""
        hw = clean(gcide_text(re.sub(r"[*\"`]", "", hw)))
        if not hw:
            hw = head
        if hw.startswith("00-") or head.startswith("00-"):
            continue  # file markers of the GCIDE build
        label = "%s (%s)" % (hw, pos) if pos else hw
        for para in _paragraphs(rest):
            para = [l for l in para if not _GC_SOURCE.match(l)]
            if not para:
                continue
            indent = len(para[0]) - len(para[0].lstrip())
            # A paragraph may hold several numbered senses without blank lines.
            groups, g = [], []
            for l in para:
                if g and re.match(r"^\s{2,6}\d+\.\s", l):
                    groups.append(g)
                    g = []
                g.append(l)
            groups.append(g)
            for g in groups:
                text = clean(gcide_text(" ".join(l.strip() for l in g)))
                if not text:
                    continue
                if indent >= 8:  # quotation, ending "— Author."
                    yield from chunk(text.rstrip("."))
                    continue
                text = re.sub(r"^\d+\.\s*", "", text)
                if text.startswith("Syn:"):
                    yield from with_prefix("%s, synonyms" % hw, text[4:])
                elif text.startswith("Usage:"):
                    yield from with_prefix("%s, usage" % hw, text[6:])
                elif text.startswith("Note:"):
                    yield from with_prefix(hw, text[5:])
                elif text.startswith("—") or g[0].lstrip().startswith(("{", "--")):
                    # phrase or run-on entry: "{Abuse of distress} (Law), a ..."
                    yield from chunk(text.lstrip("—- "))
                else:
                    yield from with_prefix(label, text)


def source_gcide(corpus):
    for head, body in dictd_entries("gcide"):
        for p in gcide_passages(head, body):
            corpus.add("gcide", p)


# ---- FOLDOC and the Jargon File


def _foldoc_like(name, corpus, source):
    for head, body in dictd_entries(name):
        lines = body.split("\n")
        i = 0
        heads = []
        while i < len(lines) and (not lines[i].strip() or not lines[i][0].isspace()
                                  or (name == "jargon" and lines[i].startswith(" ")
                                      and not lines[i].startswith("  "))):
            if lines[i].strip() and not lines[i][0].isspace():
                heads.append(lines[i].strip())
            i += 1
            if i < len(lines) and lines[i].strip() == "" and heads:
                break
        hw = heads[0] if heads else head
        for k, para in enumerate(_paragraphs(lines[i:])):
            if k > 0 and re.search(r"(?i)licen[cs]e", hw):
                break  # entries on licences quote the licence text: definition only
            text = clean(" ".join(l.strip() for l in para))
            if re.fullmatch(r"\(\d{4}-\d\d-\d\d\)", text):
                continue  # FOLDOC date stamp
            if re.fullmatch(r"\[[^\]]*\]\.?", text):
                continue  # bibliographic reference only
            if len(para) == 1 and len(text.split()) <= 1:
                continue  # Jargon letter headings "K"
            cat = ""
            cm = re.match(r"^(\d+\.\s*)?<([^<>]{1,60})>\s*", text)
            if cm:
                cat = cm.group(2)
                text = text[cm.end():]
            text = re.sub(r"^\d+\.\s*", "", text)
            text = re.sub(r"\{\(?(?:https?|ftp|mailto|news|telnet|gopher):[^{}]*\}", "", text)
            text = re.sub(r"\(?(?:https?|ftp)://\S+", "", text)
            text = re.sub(r"<[^<>\s]+@[^<>\s]+>", "", text)  # e-mail addresses
            text = re.sub(r"\{([^{}]*)\}", r"\1", text)
            text = re.sub(r"\(\s*\)", "", text)
            if not text.strip() or alpha_ratio(text) < 0.5:
                continue
            prefix = "%s (%s)" % (hw, cat) if cat else hw
            for p in with_prefix(prefix, text):
                corpus.add(source, p)


def source_foldoc(corpus):
    _foldoc_like("foldoc", corpus, "foldoc")


def source_jargon(corpus):
    _foldoc_like("jargon", corpus, "jargon")


def source_devil(corpus):
    for head, body in dictd_entries("devil"):
        lines = body.split("\n")
        # The article starts with the headword alone on a line.
        if lines and lines[0].strip() and not lines[0].startswith(" ") \
                and "," not in lines[0] and len(lines[0].split()) <= 3:
            lines = lines[1:]
        hw = head.lower()
        for para in _paragraphs(lines):
            if para[0].startswith("    "):  # verse, author on the last line
                author = ""
                if len(para) > 1 and para[-1].startswith(" " * 12):
                    author = para[-1].strip()
                    para = para[:-1]
                text = " / ".join(l.strip() for l in para)
                if author:
                    text += " — " + author
                for p in chunk(clean(text)):
                    corpus.add("devil", p)
            else:
                text = clean(" ".join(l.strip() for l in para))
                text = text.replace("_", "")
                if text.upper().startswith(hw.upper()):
                    for p in chunk(text):
                        corpus.add("devil", p)
                else:
                    for p in with_prefix(hw, text):
                        corpus.add("devil", p)


def source_vera(corpus):
    for head, body in dictd_entries("vera"):
        lines = [l for l in body.split("\n") if l.strip()]
        if len(lines) < 2:
            continue
        abbr = lines[0].strip()
        exp = clean(" ".join(l.strip() for l in lines[1:]))
        if exp:
            corpus.add("vera", "%s: %s" % (abbr, exp))


# --------------------------------------------------------------------------
# WordNet 3.0

_WN_POS = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective",
           "r": "adverb"}


def source_wordnet(corpus):
    for fname in ("data.noun", "data.verb", "data.adj", "data.adv"):
        with open(os.path.join(WORDNET, fname), encoding="utf-8",
                  errors="replace") as f:
            for line in f:
                if line.startswith("  "):
                    continue  # licence header
                if " | " not in line:
                    continue
                fields, gloss = line.rstrip("\n").split(" | ", 1)
                p = fields.split()
                pos = _WN_POS.get(p[2], "")
                wcnt = int(p[3], 16)
                lemmas = []
                for k in range(wcnt):
                    w = p[4 + 2 * k]
                    w = re.sub(r"\((?:a|p|ip)\)$", "", w).replace("_", " ")
                    if w not in lemmas:
                        lemmas.append(w)
                gloss = gloss.strip()
                # Definition = text before the first quoted example.
                q = re.search(r'(?:^|;\s*)"', gloss)
                definition = gloss[:q.start()] if q else gloss
                definition = definition.strip().rstrip(";").strip()
                examples = re.findall(r'"([^"]+)"', gloss[q.start():]) if q else []
                if definition:
                    corpus.add("wordnet", "%s (%s): %s" % (", ".join(lemmas), pos, definition))
                for ex in examples:
                    ex = ex.strip()
                    if len(ex.split()) >= 3:
                        corpus.add("wordnet", "%s (%s), as in: %s" % (lemmas[0], pos, ex))


# --------------------------------------------------------------------------
# Debian package descriptions (apt lists, Translation-en)


def _apt_cat(path):
    if path.endswith((".lz4", ".xz", ".bz2", ".zst", ".gz")):
        helper = "/usr/lib/apt/apt-helper"
        out = subprocess.run([helper, "cat-file", path], capture_output=True,
                             check=True)
        return out.stdout.decode("utf-8", "replace")
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _apt_records(text):
    for rec in text.split("\n\n"):
        if not rec.strip():
            continue
        fields, key = {}, None
        for ln in rec.split("\n"):
            if ln.startswith((" ", "\t")) and key:
                fields[key] += "\n" + ln
            elif ":" in ln:
                key, _, val = ln.partition(":")
                fields[key] = val.strip()
        yield fields


def description_passages(pkg, desc):
    lines = desc.split("\n")
    short = clean(lines[0]).rstrip(".")
    paras, cur = [], []
    for ln in lines[1:]:
        s = ln[1:] if ln.startswith(" ") else ln
        if s.strip() == ".":
            if cur:
                paras.append(cur)
            cur = []
        else:
            cur.append(s)
    if cur:
        paras.append(cur)
    out = []
    head = "%s: %s%s" % (pkg, short, "" if short.endswith(("?", "!")) else ".")
    for i, para in enumerate(paras):
        text = clean(" ".join(l.strip() for l in para))
        text = re.sub(r"^[*o+-] ", "", text)
        if not text or alpha_ratio(text) < 0.5:
            continue
        if i == 0:
            pieces = chunk(text, MAX_WORDS - len(head.split()))
            out.append("%s %s" % (head, pieces[0]))
            out.extend("%s: %s" % (pkg, p) for p in pieces[1:])
        else:
            out.extend(chunk(text))
    if not out and short:
        out.append(head)
    return out


def apt_list_files():
    tr = sorted(glob.glob(os.path.join(APT_LISTS, "*_i18n_Translation-en*")))
    tr = [p for p in tr if not p.endswith((".diff", "Index"))]
    return tr


def source_debian_descriptions(corpus):
    files = apt_list_files()
    if not files:
        raise SystemExit(
            "no Translation-en lists under %s: run bench/corpus/install_sources.sh "
            "(apt-get update with Acquire::Languages=en)" % APT_LISTS)
    done = set()
    for path in files:
        for rec in _apt_records(_apt_cat(path)):
            pkg = rec.get("Package")
            desc = rec.get("Description-en")
            md5 = rec.get("Description-md5")
            if not pkg or not desc or (pkg, md5) in done:
                continue
            done.add((pkg, md5))
            for p in description_passages(pkg, desc):
                corpus.add("debian-descriptions", p)


# --------------------------------------------------------------------------
# fortune(6) cookies (English, non-offensive set)

FORTUNE_DIR = "/usr/share/games/fortunes"
_FORTUNE_SKIP = {"ascii-art"}


def source_fortunes(corpus):
    for path in sorted(glob.glob(os.path.join(FORTUNE_DIR, "*.u8"))):
        base = os.path.basename(path)[:-3]
        if base in _FORTUNE_SKIP:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for cookie in re.split(r"^%\s*$", text, flags=re.M):
            raw = cookie.strip("\n")
            if not raw.strip():
                continue
            lines = raw.split("\n")
            # Pictures and tables: many non-letters.
            if alpha_ratio(re.sub(r"\s", "", raw)) < 0.6:
                continue
            t = clean(" ".join(l.strip() for l in lines))
            for p in chunk(t):
                corpus.add("fortunes", p)


# --------------------------------------------------------------------------
# HTML documentation: prose paragraphs only (no code, navigation, headings)

_BLOCK = {"p", "div", "li", "ul", "ol", "dl", "dd", "table", "tr", "td",
          "tbody", "thead", "blockquote", "section", "article", "figure",
          "figcaption", "caption", "aside", "main", "body", "hr", "form",
          "center", "details", "summary"}
_SKIP_TAGS = {"head", "script", "style", "pre", "nav", "footer", "header",
              "dt", "th", "textarea", "svg", "math", "button", "select",
              "h1", "h2", "h3", "h4", "h5", "h6", "title", "noscript",
              "object", "iframe", "code-block"}
_SKIP_CLASS = re.compile(
    r"\b(?:sphinxsidebar\w*|related|footer|navheader|navfooter|toc|"
    r"wy-nav-side|rst-footer-buttons|wy-breadcrumbs\w*|highlight[-\w]*|"
    r"menu-wrapper|mobile-nav|programlisting|synopsis|screen|literallayout|"
    r"funcsynopsis|cmdsynopsis|breadcrumbs?|sidebar|navigation|toctree-wrapper|"
    r"headerlink|sig|linenodiv|doc-metadata|member-signature|type-signature|"
    r"legal-copy|sub-title|top-nav|sub-nav|flex-header|inheritance|"
    r"inherited-list|caption|table-tabs)\b")
_VOID = {"br", "img", "hr", "meta", "link", "input", "wbr", "col", "area",
         "base", "source", "track", "embed", "param"}


class _ProseParser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []   # (tag, skipping)
        self.skip = 0
        self.buf = []
        self.paras = []

    def _flush(self):
        if self.buf:
            t = "".join(self.buf)
            self.buf = []
            if t.strip():
                self.paras.append(t)

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            if tag in ("br", "hr") and not self.skip:
                self.buf.append(" " if tag == "br" else "")
                if tag == "hr":
                    self._flush()
            return
        a = dict(attrs)
        cls = a.get("class") or ""
        skipping = (tag in _SKIP_TAGS or bool(_SKIP_CLASS.search(cls))
                    or a.get("role") in ("navigation", "search", "banner"))
        if tag in _BLOCK or skipping:
            if not self.skip:
                self._flush()
        self.stack.append((tag, skipping))
        if skipping:
            self.skip += 1

    def handle_startendtag(self, tag, attrs):
        if tag in _BLOCK and not self.skip:
            self._flush()

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        if not any(t == tag for t, _ in self.stack):
            return  # stray end tag
        while self.stack:
            t, skipping = self.stack.pop()
            if skipping:
                self.skip -= 1
            if t == tag:
                break
        if tag in _BLOCK or tag in _SKIP_TAGS:
            if not self.skip:
                self._flush()

    def handle_data(self, data):
        if not self.skip:
            self.buf.append(data)

    def close(self):
        super().close()
        self._flush()


def prose_ok(text, min_words=6):
    words = text.split()
    if len(words) < min_words:
        return False
    nonspace = re.sub(r"\s", "", text)
    if alpha_ratio(nonspace) < 0.72:
        return False
    lower = sum(1 for w in words if re.fullmatch(r"[a-z][a-z'’-]+[,.;:]?", w))
    if lower < max(3, len(words) // 3):
        return False  # identifiers, tables of names, code
    if re.search(r"[{};]\s*$|^\s*[#$>]|\w\(\)\s*\{|==|!=|->|::", text) and lower < len(words) // 2:
        return False
    return True


def html_paragraphs(path):
    with open(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8", "replace")
    p = _ProseParser()
    try:
        p.feed(text)
        p.close()
    except Exception:  # malformed markup: keep what was parsed
        p._flush()
    for para in p.paras:
        para = clean(para.replace("¶", " "))
        if para:
            yield para


def package_files(pkg, pattern):
    """Files of an installed package matching a regex, sorted, symlinks
    resolved and de-duplicated."""
    root = extracted_root(pkg)
    if root:
        out = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]
    else:
        out = subprocess.run(["dpkg-query", "-L", pkg], capture_output=True,
                             text=True, check=False).stdout.split("\n")
    seen, files = set(), []
    for path in sorted(out):
        if not re.search(pattern, path) or not os.path.isfile(path):
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        files.append(path)
    return files


# Documentation packages: (namespace, package, file regex, exclude regex).
# Excluded: licence pages, and pages that are the sources of man pages
# (PostgreSQL SQL-command/application/SPI reference, django-admin).
_NOT_LICENCE = r"(?i)licen[cs]e|copying|copyright|legalnotice|gpl|gfdl"
HTML_DOCS = [
    ("python-docs", "python3.11-doc", r"\.html$",
     _NOT_LICENCE + r"|/(genindex|py-modindex|search|contents)[^/]*\.html$|/_"),
    ("postgresql-docs", "postgresql-doc-15", r"/html/.*\.html$",
     _NOT_LICENCE + r"|/(sql|app|spi|bookindex)-[^/]*\.html$"),
    ("linux-docs", "linux-doc-6.1", r"/html/.*\.html$",
     _NOT_LICENCE + r"|/(genindex|search|py-modindex)\.html$|/_"),
    ("django-docs", "python-django-doc", r"\.html$",
     _NOT_LICENCE + r"|/(genindex|py-modindex|search|contents)\.html$|/_|django-admin"),
    ("nodejs-docs", "nodejs-doc", r"/api/.*\.html$",
     _NOT_LICENCE + r"|/all\.html$|/index\.html$"),
    ("java-docs", "openjdk-17-doc", r"/api/.*\.html$",
     _NOT_LICENCE + r"|/(index-files|class-use|legal)/|/(allclasses-index|allpackages-index|"
     r"overview-tree|package-tree|deprecated-list|constant-values|serialized-form|"
     r"index-all|index|search|overview-summary|module-summary|package-summary)\.html$"),
    ("debian-docs", "debian-reference-en", r"\.en\.html$|/html/.*\.html$",
     _NOT_LICENCE),
    ("debian-docs", "developers-reference", r"\.html$", _NOT_LICENCE + r"|/_"),
    ("debian-docs", "debian-faq", r"\.html$", _NOT_LICENCE),
    ("debian-docs", "debian-policy", r"\.html$",
     _NOT_LICENCE + r"|/_|/(genindex|search)\.html$"),
    ("debian-docs", "maint-guide", r"\.en\.html$|/html/[^/]*\.html$", _NOT_LICENCE),
    # Added for the 1M real-embedding HNSW set (issue 21): more prose manuals.
    ("pandas-docs", "python-pandas-doc", r"/html/.*\.html$",
     _NOT_LICENCE + r"|/(genindex|py-modindex|search)\.html$|/_"),
    ("scipy-docs", "python-scipy-doc", r"/html/.*\.html$",
     _NOT_LICENCE + r"|/(genindex|py-modindex|search)\.html$|/_"),
    ("sqlalchemy-docs", "python-sqlalchemy-doc", r"/html/.*\.html$",
     _NOT_LICENCE + r"|/(genindex|py-modindex|search)\.html$|/_"),
    ("gimp-docs", "gimp-help-en", r"/help/en/.*\.html$", _NOT_LICENCE),
    ("rust-docs", "rust-doc", r"/html/.*\.html$",
     _NOT_LICENCE + r"|/(all|search|settings|help)\.html$|/src/|/implementors/"),
    ("bash-guide", "abs-guide", r"/html/.*\.html$", _NOT_LICENCE),
]


def html_doc_source(ns, pkg, pattern, exclude):
    def run(corpus):
        for path in package_files(pkg, pattern):
            if re.search(exclude, path):
                continue
            for para in html_paragraphs(path):
                if not prose_ok(para):
                    continue
                for p in chunk(para):
                    if prose_ok(p, 5):
                        corpus.add(ns, p)
    return run


# --------------------------------------------------------------------------
# SWORD modules (public-domain Bibles, commentaries, Strong's dictionaries)

SWORD = "/usr/share/sword/modules"
_OSIS_BOOKS = {
    "Gen": "Genesis", "Exod": "Exodus", "Lev": "Leviticus", "Num": "Numbers",
    "Deut": "Deuteronomy", "Josh": "Joshua", "Judg": "Judges", "Ruth": "Ruth",
    "1Sam": "1 Samuel", "2Sam": "2 Samuel", "1Kgs": "1 Kings", "2Kgs": "2 Kings",
    "1Chr": "1 Chronicles", "2Chr": "2 Chronicles", "Ezra": "Ezra",
    "Neh": "Nehemiah", "Esth": "Esther", "Job": "Job", "Ps": "Psalm",
    "Prov": "Proverbs", "Eccl": "Ecclesiastes", "Song": "Song of Solomon",
    "Isa": "Isaiah", "Jer": "Jeremiah", "Lam": "Lamentations",
    "Ezek": "Ezekiel", "Dan": "Daniel", "DanGr": "Daniel (Greek)",
    "Hos": "Hosea", "Joel": "Joel", "Amos": "Amos", "Obad": "Obadiah",
    "Jonah": "Jonah", "Mic": "Micah", "Nah": "Nahum", "Hab": "Habakkuk",
    "Zeph": "Zephaniah", "Hag": "Haggai", "Zech": "Zechariah", "Mal": "Malachi",
    "Tob": "Tobit", "Jdt": "Judith", "EsthGr": "Esther (Greek)",
    "Wis": "Wisdom", "Sir": "Sirach", "Bar": "Baruch", "1Macc": "1 Maccabees",
    "2Macc": "2 Maccabees", "1Esd": "1 Esdras", "PrMan": "Prayer of Manasseh",
    "AddPs": "Psalm 151", "3Macc": "3 Maccabees", "2Esd": "2 Esdras",
    "4Macc": "4 Maccabees", "Matt": "Matthew", "Mark": "Mark", "Luke": "Luke",
    "John": "John", "Acts": "Acts", "Rom": "Romans", "1Cor": "1 Corinthians",
    "2Cor": "2 Corinthians", "Gal": "Galatians", "Eph": "Ephesians",
    "Phil": "Philippians", "Col": "Colossians", "1Thess": "1 Thessalonians",
    "2Thess": "2 Thessalonians", "1Tim": "1 Timothy", "2Tim": "2 Timothy",
    "Titus": "Titus", "Phlm": "Philemon", "Heb": "Hebrews", "Jas": "James",
    "1Pet": "1 Peter", "2Pet": "2 Peter", "1John": "1 John", "2John": "2 John",
    "3John": "3 John", "Jude": "Jude", "Rev": "Revelation",
}


def sword_entries(moddir, prefix, entry_size):
    """Yield (testament, index, text) for every verse slot of a zText/zCom
    module, empty slots included (they keep the verse count right)."""
    import struct
    import zlib
    fmt = "<IIH" if entry_size == 10 else "<III"
    for test in ("ot", "nt"):
        base = os.path.join(moddir, "%s.%s" % (test, prefix))
        if not os.path.exists(base + "zs") or os.path.getsize(base + "zs") == 0:
            continue
        with open(base + "zs", "rb") as f:
            bzs = f.read()
        with open(base + "zz", "rb") as f:
            bzz = f.read()
        with open(base + "zv", "rb") as f:
            bzv = f.read()
        blocks = [struct.unpack_from("<III", bzs, i) for i in range(0, len(bzs) - 11, 12)]
        cur_b, cur = None, b""
        for i in range(0, len(bzv) - entry_size + 1, entry_size):
            b, o, s = struct.unpack_from(fmt, bzv, i)
            if s == 0 or b >= len(blocks):
                yield test, i // entry_size, ""
                continue
            if b != cur_b:
                off, sz, _ = blocks[b]
                cur = zlib.decompress(bzz[off:off + sz])
                cur_b = b
            yield test, i // entry_size, cur[o:o + s].decode("utf-8", "replace")


_OSIS_BLOCK = r"</?(?:div|lb|l|p|row|cell|item|lg|list|table|chapter|verse)\b[^>]*>"


def osis_text(s, para_breaks=True):
    """OSIS/TEI markup to text: notes and titles dropped, structural
    elements become paragraph breaks (or spaces), inline markup vanishes."""
    s = re.sub(r"(?s)<note\b.*?</note>", " ", s)
    s = re.sub(r"(?s)<title\b.*?</title>", "\n\n", s)
    s = re.sub(r"<milestone\b[^>]*>", " ", s)
    s = re.sub(_OSIS_BLOCK, "\n\n" if para_breaks else " ", s)
    s = re.sub(r"<[^>]+>", "", s)
    s = html.unescape(s).replace("{", "").replace("}", "")
    return fix_punct_space(s)


def fix_punct_space(s):
    s = re.sub(r"[ \t]+([,.;:?!\u2019\u201d)\]])", r"\1", s)
    return re.sub(r"([(\[\u201c\u2018])[ \t]+", r"\1", s)


def _sword_refs(entries):
    """Track book/chapter/verse from the OSIS chapter markers."""
    book, chap, verse = None, 0, 0
    for test, idx, text in entries:
        m = re.search(r'<chapter\b[^>]*\bosisID="([^".]+)\.(\d+)"[^>]*\bsID=', text)
        bm = re.search(r'osisID="([^".]+)"[^>]*type="book"|type="book"[^>]*osisID="([^".]+)"', text)
        if m:
            book, chap, verse = m.group(1), int(m.group(2)), 0
            yield book, chap, 0, text
            continue
        if bm:
            book, chap, verse = (bm.group(1) or bm.group(2)), 0, 0
            yield book, 0, 0, text
            continue
        verse += 1
        yield book, chap, verse, text


def sword_bible(ns, moddir, label):
    def run(corpus):
        for book, chap, verse, text in _sword_refs(sword_entries(moddir, "b", 10)):
            name = _OSIS_BOOKS.get(book or "", book or "")
            if chap and verse:
                t = clean(osis_text(text, para_breaks=False))
                if t:
                    for p in with_prefix("%s %d:%d (%s)" % (name, chap, verse, label), t):
                        corpus.add(ns, p)
            else:  # prefaces, book introductions
                for para in osis_text(text).split("\n\n"):
                    para = clean(para)
                    if prose_ok(para):
                        for p in chunk(para):
                            corpus.add(ns, p)
    return run


def sword_commentary(ns, moddir, prefix, entry_size, label):
    def run(corpus):
        for book, chap, verse, text in _sword_refs(sword_entries(moddir, prefix, entry_size)):
            name = _OSIS_BOOKS.get(book or "", book or "")
            where = "%s, %s %d" % (label, name, chap) if chap else "%s, %s" % (label, name)
            for para in osis_text(text).split("\n\n"):
                para = clean(para)
                if not prose_ok(para, 5):
                    continue
                for p in with_prefix(where, para):
                    corpus.add(ns, p)
    return run


def sword_lexicon(ns, base, label):
    import struct
    import zlib

    def run(corpus):
        with open(base + ".idx", "rb") as f:
            idx = f.read()
        with open(base + ".dat", "rb") as f:
            dat = f.read()
        with open(base + ".zdx", "rb") as f:
            zdx = f.read()
        with open(base + ".zdt", "rb") as f:
            zdt = f.read()
        cache = {}
        for i in range(0, len(idx) - 7, 8):
            o, s = struct.unpack_from("<II", idx, i)
            key, _, rest = dat[o:o + s].partition(b"\n")
            if len(rest) < 8:
                continue
            b, e = struct.unpack_from("<II", rest)
            if b not in cache:
                zo, zs = struct.unpack_from("<II", zdx, b * 8)
                cache = {b: zlib.decompress(zdt[zo:zo + zs])}
            blk = cache[b]
            eo, es = struct.unpack_from("<II", blk, 4 + e * 8)
            entry = blk[eo:eo + es].rstrip(b"\x00").decode("utf-8", "replace")
            num = key.decode("ascii", "replace").strip()
            trans = re.search(r'<orth[^>]*type="trans"[^>]*>([^<]*)</orth>', entry)
            orig = re.search(r"<orth>([^<]*)</orth>", entry)
            # The Hebrew lexicon is not TEI: fall back to the plain text.
            body = re.sub(r'(?s)<orth[^>]*type="writing"[^>]*>.*?</orth>', " ", entry)
            body = re.sub(r"(?s)<pron\b.*?</pron>", " ", body)
            body = re.sub(r'(?s)<orth[^>]*type="trans"[^>]*>.*?</orth>', " ", body)
            body = re.sub(r"(?s)<orth>.*?</orth>", " ", body)
            body = re.sub(r"<[^>]+>", " ", body)
            body = clean(fix_punct_space(html.unescape(body).replace("{", "").replace("}", "")))
            body = re.sub(r"^\d+\s+", "", body)
            if len(body.split()) < 3:
                continue
            head = "%s %s" % (label, num.lstrip("0") or num)
            if trans and trans.group(1).strip():
                head += " %s" % trans.group(1).strip()
                if orig and orig.group(1).strip():
                    head += " (%s)" % orig.group(1).strip()
            for p in with_prefix(head, body):
                corpus.add(ns, p)
    return run


# --------------------------------------------------------------------------

SOURCES = [
    # (namespace, function, packages it reads)
    ("wordnet", source_wordnet, ["wordnet-base"]),
    ("gcide", source_gcide, ["dict-gcide"]),
    ("foldoc", source_foldoc, ["dict-foldoc"]),
    ("jargon", source_jargon, ["dict-jargon"]),
    ("devil", source_devil, ["dict-devil"]),
    ("vera", source_vera, ["dict-vera"]),
    ("debian-descriptions", source_debian_descriptions, ["apt-lists"]),
    ("fortunes", source_fortunes, ["fortunes-min", "fortunes"]),
    ("bible", sword_bible("bible", SWORD + "/texts/ztext/engKJV2006eb", "KJV"),
     ["sword-text-kjv"]),
    ("bible", sword_bible("bible", SWORD + "/texts/ztext/engWEB2015eb", "WEB"),
     ["sword-text-web"]),
    ("bible-commentary", sword_commentary(
        "bible-commentary", SWORD + "/comments/zcom/mhcc", "b", 10,
        "Matthew Henry's Concise Commentary"), ["sword-comm-mhcc"]),
    ("bible-commentary", sword_commentary(
        "bible-commentary", SWORD + "/comments/zcom/scofield", "b", 10,
        "Scofield Reference Notes"), ["sword-comm-scofield"]),
    ("bible-commentary", sword_commentary(
        "bible-commentary", SWORD + "/comments/zcom/tdavid", "c", 12,
        "Spurgeon, The Treasury of David"), ["sword-comm-tdavid"]),
    ("strongs", sword_lexicon("strongs", SWORD + "/lexdict/zld/strongsgreek/dict",
                              "Strong's Greek"), ["sword-dict-strongs-greek"]),
    ("strongs", sword_lexicon("strongs", SWORD + "/lexdict/zld/strongshebrew/dict",
                              "Strong's Hebrew"), ["sword-dict-strongs-hebrew"]),
] + [(ns, html_doc_source(ns, pkg, pat, exc), [pkg]) for ns, pkg, pat, exc in HTML_DOCS]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".corpus/passages.jsonl")
    ap.add_argument("--min", type=int, default=1000000,
                    help="fail if fewer unique passages come out")
    ap.add_argument("--provenance", default=None,
                    help="write a TSV: source, package, version, licence, passages")
    ap.add_argument("--extracted", default=None,
                    help="DIR of packages unpacked with dpkg-deb -x DIR/<pkg> (see EXTRACTED)")
    ap.add_argument("--only", default=None,
                    help="comma-separated namespaces (for testing)")
    args = ap.parse_args()

    only = set(args.only.split(",")) if args.only else None
    global EXTRACTED
    EXTRACTED = args.extracted
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    t0 = time.time()
    taken = []  # passages per SOURCES entry
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        corpus = Corpus(fh)
        for ns, fn, pkgs in SOURCES:
            if only and ns not in only:
                taken.append(None)
                continue
            t1 = time.time()
            before = corpus.counts.get(ns, 0)
            fn(corpus)
            n = corpus.counts.get(ns, 0) - before
            taken.append(n)
            print("%-20s %-26s %8d passages %6.1fs" % (ns, pkgs[-1], n, time.time() - t1),
                  file=sys.stderr)
    total = sum(corpus.counts.values())
    w = sorted(corpus.words)
    print("per namespace: " + ", ".join("%s %d" % kv for kv in corpus.counts.items()),
          file=sys.stderr)
    if w:
        print("total %d passages (dropped: %d exact duplicates, %d too short, %d licence "
              "text); words/passage mean %.1f median %d p95 %d max %d; %.1fs"
              % (total, corpus.dupes, corpus.short, corpus.licence, statistics.fmean(w),
                 w[len(w) // 2], w[int(len(w) * 0.95)], w[-1], time.time() - t0),
              file=sys.stderr)
    if total < args.min:
        os.unlink(tmp)
        raise SystemExit("error: only %d unique passages, fewer than --min %d; "
                         "install more sources (bench/corpus/install_sources.sh)"
                         % (total, args.min))
    os.replace(tmp, args.out)
    print("wrote %s (%d bytes)" % (args.out, os.path.getsize(args.out)), file=sys.stderr)

    if args.provenance:
        with open(args.provenance, "w", encoding="utf-8") as f:
            f.write("namespace\tpackage\tversion\tlicence\tpassages\n")
            for (ns, _fn, pkgs), n in zip(SOURCES, taken):
                if n is None:
                    continue
                for i, pkg in enumerate(pkgs):
                    if pkg == "apt-lists":
                        ver = "; ".join(apt_release_dates())
                        lic = "each package's own (Debian package descriptions)"
                    else:
                        ver = dpkg_version(pkg)
                        lic = copyright_licence(pkg)
                    f.write("%s\t%s\t%s\t%s\t%s\n" % (ns, pkg, ver, lic,
                                                       n if i == len(pkgs) - 1 else "(with next)"))
        print("wrote %s" % args.provenance, file=sys.stderr)


def apt_release_dates():
    out = []
    for path in sorted(glob.glob(os.path.join(APT_LISTS, "*_InRelease"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4000)
        suite = re.search(r"^Suite:\s*(.*)$", head, re.M)
        date = re.search(r"^Date:\s*(.*)$", head, re.M)
        if suite and date:
            out.append("%s %s" % (suite.group(1), date.group(1)))
    return out


if __name__ == "__main__":
    main()
