#!/usr/bin/env python3
"""Generates tests/data/tokenizer_cases.jsonl with the reference BERT tokenizer.

Runs where transformers is installed (the device machine). For each vocab
(models/zerovec-mini/vocab.txt, tests/data/minilm_random/vocab.txt) and each input:
  {"vocab": ..., "do_lower_case": true, "strip_accents": null, "max_length": N,
   "text_b64": base64(raw bytes), "ids": [...]}
ids = the slow Python BertTokenizer (do_lower_case=True) on
raw.decode("utf-8", errors="replace"), truncation=True, max_length=N, no padding.
The fast tokenizer and tools/model/bert_ref_tokenizer.py are run on the same inputs;
disagreements go to tools/model/results/tokenizer_disagreements.json.
"""

import base64
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

VOCABS = [("models/zerovec-mini/vocab.txt", 128), ("tests/data/minilm_random/vocab.txt", 512)]

HANDWRITTEN = [
    # plain English, mixed case
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!",
    "Hello, World! How are you doing today?",
    "ZeroVec is a Vector Retrieval Engine written in C++.",
    "iPhone, eBay, McDonald's and O'Reilly",
    "She said: \"don't stop\" -- and then (quietly) left...",
    "Dr. Smith arrived at 10:30 a.m. on Jan. 5th, 2024.",
    "U.S.A. vs. U.K.: who wins?",
    "e-mail, co-operate, well-known, state-of-the-art",
    "snake_case and camelCase and kebab-case and PascalCase",
    "https://example.com/path?query=1&x=y#frag",
    "user@example.org wrote #hashtag @mention",
    "C++ C# F# .NET node.js",
    # numbers
    "3.14159 2.71828 1,000,000 1e-9 0x1F 007",
    "$5.99 €10 £3 ¥500 ₹20 50% 100°C -40°F",
    "Call 555-0199 or +1 (800) 555-0100 ext. 42",
    "2024-06-11T10:30:00Z",
    "1st 2nd 3rd 4th 21st 1990s",
    "½ ¼ ¾ x² H₂O ①②③ Ⅻ",
    # punctuation runs
    "!!!???...,,,;;;:::",
    "Wait... what?!?! No way!!!",
    "(((nested))) [[brackets]] {{braces}} <<angles>>",
    "“curly quotes” ‘single’ «guillemets» „low“ ‹one›",
    "em—dash en–dash hyphen-minus − minus ‐ hyphen",
    "¿Qué pasa? ¡Hola! ¿Dónde está la biblioteca?",
    "…ellipsis·middle dot•bullet†dagger‡§¶",
    "~`^|\\/*+=_",
    "#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    # accents and other scripts
    "café naïve Ångström résumé",
    "CAFÉ NAÏVE ÅNGSTRÖM RÉSUMÉ",
    "Crème Brûlée à la façade, São Paulo, Zürich, Kraków",
    "Øresund Łódź Straße İstanbul Æsir œuvre",
    "Ελληνικά: ΑΘΗΝΑ αθήνα Σίσυφος",
    "Русский текст: Москва, ПРИВЕТ мир",
    "עברית ו-العربية من اليمين إلى اليسار",
    "हिन्दी देवनागरी",
    "ไทย ภาษาไทย",
    "Tiếng Việt có dấu: Hà Nội, Việt Nam",
    "cafe\u0301 (decomposed e + combining acute)",
    "A\u030angstro\u0308m (combining ring and diaeresis)",
    "\u212bngstr\u00f6m with ANGSTROM SIGN",
    "ﬁne ﬂour (ligatures) Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    # CJK
    "中文",
    "日本語",
    "한국어",
    "中文English混合text",
    "我爱北京天安门。",
    "日本語のテキストです。カタカナとひらがな。",
    "한국어 문장입니다. 서울특별시",
    "漢字かな交じり文",
    "𠀀𠀁 CJK Extension B",
    "㐀㐁 CJK Extension A, 豈 compatibility",
    # emoji and symbols
    "😀",
    "I love pizza 🍕🍕🍕!",
    "thumbs up 👍🏽 family 👨‍👩‍👧 flag 🇺🇸 heart ❤️",
    "hello😀world",
    "★☆♥♦♣♠ ✓✗ → ← ↑ ↓ ⇒ ∞ ≠ ≤ ≥ ±",
    "© ® ™ ℃ № ℓ",
    # control, format and whitespace characters
    "tab\tseparated\tvalues",
    "line one\nline two\r\nline three\rline four",
    "  leading and trailing spaces  ",
    "\t\n\r ",
    " ",
    "",
    "null\x00byte and bell\x07 and escape\x1b[31mred\x1b[0m",
    "zero\u200bwidth\u200cnon\u200djoiner",
    "soft\u00adhyphen and BOM\ufeffinside",
    "no-break\u00a0space and ideographic\u3000space",
    "line\u2028separator and paragraph\u2029separator",
    "next\u0085line and form\x0cfeed and vertical\x0btab",
    "ogham\u1680space en\u2002space thin\u2009space",
    "mongolian\u180evowel separator",
    "private use \ue000\uf8ff and noncharacter \ufdd0",
    "variation selector \u2764\ufe0f and \u0041\u20dd",
    # long words
    "a" * 101,
    "b" * 100,
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "supercalifragilisticexpialidocious" * 4,
    "antidisestablishmentarianism and " + "z" * 150 + " end",
    "é" * 101,
    # special-token literals (the reference keeps them whole)
    "hello [SEP] world",
    "[CLS] starts here",
    "[cls] lowercase is not special",
    "[UNK][MASK]",
    # misc
    "don't won't can't I'm you're it's",
    "rock'n'roll",
    "New York-based company's CEO",
    "The year 2000 problem (Y2K) wasn't that bad.",
    "A man, a plan, a canal: Panama",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
]

INVALID_UTF8 = [
    b"\xff\xfe invalid bytes at start",
    b"caf\xc3",
    b"caf\xc3 is truncated",
    b"\xc3\x28 bad continuation",
    b"\xe2\x82 truncated three-byte",
    b"abc\x80def",
    b"\xed\xa0\x80 encoded surrogate",
    b"\xf4\x90\x80\x80 above U+10FFFF",
    b"\xc0\xaf overlong slash",
    b"\xf0\x9f\x98 truncated emoji",
    b"mixed \xe4\xb8\xad\xe6\x96 broken CJK",
    b"\x80\x81\x82\x83",
    b"valid \xc3\xa9 then invalid \xa9 then valid \xc3\xa9",
]


def wordnet_texts(n=160):
    path = os.path.join(REPO, "data", "demo", "corpus.jsonl")
    docs = [json.loads(l) for l in open(path, encoding="utf-8")]
    step = max(1, len(docs) // n)
    out = []
    for i, d in enumerate(docs[::step][:n]):
        t = d["text"]
        if i % 7 == 3:
            t = t.upper()
        elif i % 7 == 5:
            t = t.title()
        out.append(t)
    return out


def long_text(n_docs):
    path = os.path.join(REPO, "data", "demo", "corpus.jsonl")
    docs = [json.loads(l)["text"] for l in open(path, encoding="utf-8")]
    return " ".join(docs[100:100 + n_docs])


def inputs():
    """(raw bytes, note) list; deterministic."""
    out = [(t.encode("utf-8"), "handwritten") for t in HANDWRITTEN]
    out += [(b, "invalid-utf8") for b in INVALID_UTF8]
    out += [(t.encode("utf-8"), "wordnet") for t in wordnet_texts()]
    out += [(long_text(12).encode("utf-8"), "long"), (long_text(40).encode("utf-8"), "long")]
    return out


def slow_tokenizer(vocab_path):
    """The slow Python reference. Returns (tokenizer, description) or (None, errors)."""
    errors = []
    try:
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
        return BertTokenizerLegacy(vocab_file=vocab_path, do_lower_case=True), "transformers BertTokenizerLegacy (slow, Python)"
    except Exception as e:
        errors.append("BertTokenizerLegacy: %r" % (e,))
    try:
        from transformers import BertTokenizer
        t = BertTokenizer(vocab_file=vocab_path, do_lower_case=True)
        if not getattr(t, "is_fast", False):
            return t, "transformers BertTokenizer (slow, Python)"
        errors.append("transformers.BertTokenizer is fast here")
    except Exception as e:
        errors.append("BertTokenizer: %r" % (e,))
    return None, errors


def fast_tokenizers(vocab_path):
    """Fast (Rust) tokenizers on the same vocab: transformers' AutoTokenizer and
    BertTokenizerFast loaded from the checkpoint folder (vocab.txt + tokenizer_config.json),
    and tokenizers' BertWordPieceTokenizer on vocab.txt."""
    out = []
    folder = os.path.dirname(os.path.abspath(vocab_path))
    for cls_name in ("AutoTokenizer", "BertTokenizerFast"):
        try:
            import transformers
            t = getattr(transformers, cls_name).from_pretrained(folder)
            name = "transformers %s.from_pretrained(folder) -> %s, is_fast=%s" % (
                cls_name, type(t).__name__, getattr(t, "is_fast", None))
            out.append((name, lambda s, L, t=t: t(s, truncation=True, max_length=L)["input_ids"]))
        except Exception as e:
            print("no", cls_name, repr(e))
    try:
        from tokenizers import BertWordPieceTokenizer
        t2 = BertWordPieceTokenizer.from_file(vocab_path, lowercase=True)

        def enc(s, L, t2=t2):
            t2.enable_truncation(max_length=L)
            return t2.encode(s).ids
        out.append(("tokenizers BertWordPieceTokenizer", enc))
    except Exception as e:
        print("no BertWordPieceTokenizer:", repr(e))
    return out


def reference_encoder(vocab_path):
    """Returns (encode(text, max_length) -> ids, description)."""
    import bert_ref_tokenizer
    slow, desc = slow_tokenizer(vocab_path)
    if slow is not None:
        return (lambda s, L: list(slow.encode(s, truncation=True, max_length=L, add_special_tokens=True))), desc
    port = bert_ref_tokenizer.RefTokenizer(vocab_path)
    return port.encode, "tools/model/bert_ref_tokenizer.py (no slow tokenizer in transformers: %s)" % "; ".join(desc)


def main():
    import bert_ref_tokenizer
    os.chdir(REPO)
    cases = []
    report = {"python": sys.version, "unicodedata": __import__("unicodedata").unidata_version, "vocabs": {}}
    try:
        import transformers, tokenizers
        report["transformers"] = transformers.__version__
        report["tokenizers"] = tokenizers.__version__
    except Exception:
        pass
    items = inputs()
    for vocab, default_len in VOCABS:
        ref, desc = reference_encoder(vocab)
        others = fast_tokenizers(vocab)
        others.append(("bert_ref_tokenizer.py (NFC)", bert_ref_tokenizer.RefTokenizer(vocab, nfc=True).encode))
        others.append(("bert_ref_tokenizer.py (no NFC)", bert_ref_tokenizer.RefTokenizer(vocab, nfc=False).encode))
        rep = {"reference": desc, "cases": 0, "disagreements": {name: [] for name, _ in others}}
        for k, (raw, note) in enumerate(items):
            lens = [default_len]
            if k % 9 == 0 or note == "long":
                lens.append(8)
            if k % 9 == 4 or note == "long":
                lens.append(16)
            text = raw.decode("utf-8", errors="replace")
            for L in lens:
                ids = ref(text, L)
                cases.append({"vocab": vocab, "do_lower_case": True, "strip_accents": None, "max_length": L,
                              "text_b64": base64.b64encode(raw).decode("ascii"), "ids": ids})
                rep["cases"] += 1
                for name, fn in others:
                    try:
                        o = list(fn(text, L))
                    except Exception as e:
                        o = "error: %r" % (e,)
                    if o != ids:
                        rep["disagreements"][name].append({"text": text[:200], "max_length": L, "reference": ids[:40],
                                                           "other": o[:40] if isinstance(o, list) else o})
        report["vocabs"][vocab] = rep
        print(vocab, desc, rep["cases"], {n: len(v) for n, v in rep["disagreements"].items()})
    os.makedirs("tests/data", exist_ok=True)
    with open("tests/data/tokenizer_cases.jsonl", "w", encoding="utf-8") as fh:
        for c in cases:
            fh.write(json.dumps(c, ensure_ascii=True) + "\n")
    os.makedirs("tools/model/results", exist_ok=True)
    with open("tools/model/results/tokenizer_disagreements.json", "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1, ensure_ascii=False)
    print("wrote", len(cases), "cases")


if __name__ == "__main__":
    main()
