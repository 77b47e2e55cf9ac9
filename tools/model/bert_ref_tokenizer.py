"""Stand-alone re-statement of the BERT BasicTokenizer + WordPiece algorithm.

Written for cross-checking the tokenizer test table (and as a fallback where the
installed transformers has no slow Python BertTokenizer). Behaviour follows the
reference (transformers' slow BertTokenizer): clean text, space out CJK ideographs,
optional NFC, whitespace split, lower-case + strip accents, split punctuation,
greedy longest-match-first WordPiece with "##" continuation and a 100-character
per-word limit.
"""

import unicodedata


def load_vocab(path):
    """One token per line; the line number is the id (a later duplicate wins)."""
    vocab = {}
    with open(path, "r", encoding="utf-8") as fh:
        for i, line in enumerate(fh.readlines()):
            vocab[line.rstrip("\n")] = i
    return vocab


def is_whitespace(ch):
    if ch in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def strip_accents(text):
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def split_punct(word):
    out = []
    start = True
    for ch in word:
        if is_punctuation(ch):
            out.append(ch)
            start = True
        else:
            if start:
                out.append("")
            start = False
            out[-1] += ch
    return out


def basic_tokenize(text, lower=True, nfc=True):
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or is_control(ch):
            continue
        cleaned.append(" " if is_whitespace(ch) else ch)
    text = "".join(cleaned)
    spaced = []
    for ch in text:
        if is_cjk(ord(ch)):
            spaced.append(" " + ch + " ")
        else:
            spaced.append(ch)
    text = "".join(spaced)
    if nfc:
        text = unicodedata.normalize("NFC", text)
    out = []
    for tok in text.split():
        if lower:
            tok = strip_accents(tok.lower())
        out.extend(split_punct(tok))
    return " ".join(out).split()


def wordpiece(word, vocab, unk="[UNK]", max_chars=100):
    if len(word) > max_chars:
        return [unk]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        cur = None
        while start < end:
            sub = word[start:end]
            if start > 0:
                sub = "##" + sub
            if sub in vocab:
                cur = sub
                break
            end -= 1
        if cur is None:
            return [unk]
        pieces.append(cur)
        start = end
    return pieces


class RefTokenizer(object):
    def __init__(self, vocab_path, lower=True, nfc=True):
        self.vocab = load_vocab(vocab_path)
        self.lower = lower
        self.nfc = nfc
        self.special = ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"]

    def tokenize(self, text):
        # Special-token literals in the input are kept whole (as the reference's
        # added-token splitting does), the rest is basic-tokenized.
        toks = []
        for seg_is_special, seg in self._split_special(text):
            if seg_is_special:
                toks.append(seg)
            else:
                for w in basic_tokenize(seg, self.lower, self.nfc):
                    toks.extend(wordpiece(w, self.vocab))
        return toks

    def _split_special(self, text):
        out = [(False, text)]
        for sp in self.special:
            nxt = []
            for is_sp, seg in out:
                if is_sp or sp not in seg:
                    nxt.append((is_sp, seg))
                    continue
                parts = seg.split(sp)
                for i, p in enumerate(parts):
                    if i:
                        nxt.append((True, sp))
                    nxt.append((False, p))
            out = nxt
        return out

    def encode(self, text, max_length):
        ids = [self.vocab.get(t, self.vocab["[UNK]"]) for t in self.tokenize(text)]
        ids = ids[: max(0, max_length - 2)]
        return [self.vocab["[CLS]"]] + ids + [self.vocab["[SEP]"]]
