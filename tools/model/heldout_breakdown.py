#!/usr/bin/env python3
"""WordNet held-out gloss -> lemma recall@10 of an exported model, per query, split by
whether a lemma of the query's synset is the headword of a dictionary training pair
(make_corpus_pairs.py's dict-definition kind). Runs on the CPU with torch alone (no
transformers, tokenizers or safetensors: packed_bert's reader and forward pass, the
stdlib reference tokenizer), e.g. with Debian's python3-torch unpacked as check_train.py
describes:
  python3 tools/model/heldout_breakdown.py --model models/zerovec-l6 \
      --texts tools/model/work/l6/texts.tsv.xz
With --manpages tests/data/manpages/eval.jsonl instead of --texts: which man-page questions
dense and BM25 each find (train.py's scoring), and the ones only BM25 finds.
With --coverage FILE... (the training text: texts.tsv.xz, mlm_texts.tsv.xz, vocab_corpus.txt.xz,
pairs.tsv.xz) also: recall split by how often the query's lemma occurs in that text (for a
synset, its best-covered lemma; for a lemma of several words, its rarest word).
"""
import argparse
import collections
import json
import lzma
import os
import re
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bert_ref_tokenizer  # noqa: E402
import make_corpus_pairs  # noqa: E402
import packed_bert  # noqa: E402


def embed_texts(model, tok, texts, row):
    """Unit vectors of texts (cut at row tokens) through the packed pass, in chunks."""
    enc = [tok.encode(t, row) for t in texts]
    lens = torch.tensor([len(e) for e in enc])
    ids = torch.zeros(len(enc), row, dtype=torch.long)
    for i, e in enumerate(enc):
        ids[i, : len(e)] = torch.tensor(e)
    step = max(1, 2048 * packed_bert.ROW // row)
    with torch.no_grad():
        return torch.cat([packed_bert.embed_packed(model, ids, lens, torch.arange(s, min(s + step, len(enc))), row=row)
                          for s in range(0, len(enc), step)])


def manpage_breakdown(embed, path, passage_row):
    """The man-page set as train.py scores it (passages up to the model's window, questions up
    to 128 tokens),
    per question: found in the top 10 by dense, by BM25 (words), both or neither, and the
    questions only BM25 finds with dense's top pages beside them."""
    import train  # noqa: E402 (its BM25 and word split, so the counts match its SUMMARY)
    with open(path) as fh:
        items = [json.loads(l) for l in fh]
    passages = [i for i in items if i["kind"] == "passage"]
    queries = [i for i in items if i["kind"] == "query"]
    top = (embed([q["text"] for q in queries]) @ embed([p["text"] for p in passages], passage_row).T).topk(10, dim=1)
    top_w = train.bm25_topk([train.words(q["text"]) for q in queries], [train.words(p["text"]) for p in passages])
    counts = {"both": 0, "dense_only": 0, "bm25_only": 0, "neither": 0}
    bm25_only = []
    for q, d, w in zip(queries, top.indices.tolist(), top_w):
        dense_pages = [passages[j]["page"] for j in d]
        dense, bm25 = q["page"] in dense_pages, any(passages[j]["page"] == q["page"] for j in w)
        counts["both" if dense and bm25 else "dense_only" if dense else "bm25_only" if bm25 else "neither"] += 1
        if bm25 and not dense:
            bm25_only.append({"page": q["page"], "question": q["text"], "dense_top3": dense_pages[:3]})
    return {"questions": len(queries), "passages": len(passages),
            "dense_hit@10": counts["both"] + counts["dense_only"],
            "bm25_hit@10": counts["both"] + counts["bm25_only"], **counts, "bm25_only_questions": bm25_only}


WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")


def word_counts(paths, wanted):
    """Occurrences of the words in `wanted` in the files (xz or plain text, lower-cased)."""
    counts = collections.Counter()
    for path in paths:
        opener = lzma.open if path.endswith(".xz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                counts.update(w for w in WORD.findall(line.lower()) if w in wanted)
    return counts


def coverage_split(held, hit, paths):
    """Recall@10 by how often the query's lemma occurs in the training text."""
    lemmas = [[WORD.findall(x.lower()) for x in h["doc"].split(",")] for h in held]
    wanted = {w for ls in lemmas for l in ls for w in l}
    counts = word_counts(paths, wanted)
    # per query: its best-covered lemma's count (a lemma's count: its rarest word's)
    cover = [max((min(counts[w] for w in l) for l in ls if l), default=0) for ls in lemmas]
    buckets = [(0, 0), (1, 9), (10, 99), (100, 999), (1000, None)]
    out = {}
    for lo, hi in buckets:
        sel = [ok for c, ok in zip(cover, hit) if c >= lo and (hi is None or c <= hi)]
        name = "occurs_%d%s" % (lo, "+" if hi is None else "" if hi == lo else "-%d" % hi)
        out[name] = {"queries": len(sel), "recall@10": round(sum(sel) / max(1, len(sel)), 4)}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="exported folder (config.json, model.safetensors, vocab.txt)")
    ap.add_argument("--texts", help="make_corpus_pairs.py's texts.tsv.xz (the dictionary pairs)")
    ap.add_argument("--manpages", help="instead: the man-page set (tests/data/manpages/eval.jsonl), dense against BM25")
    ap.add_argument("--heldout", default=os.path.join(REPO, "tests", "data", "heldout_gloss_lemma.jsonl"))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--coverage", nargs="+", help="training text files: recall by lemma frequency in them")
    args = ap.parse_args()
    if not args.texts and not args.manpages:
        ap.error("--texts (held-out breakdown) or --manpages is needed")
    if args.threads:
        torch.set_num_threads(args.threads)
    with open(os.path.join(args.model, "config.json")) as fh:
        config = json.load(fh)
    bert = packed_bert.bert_from_tensors(
        packed_bert.read_safetensors(os.path.join(args.model, "model.safetensors")), config)
    model = packed_bert.PackedBert(bert, use_sdpa=False).eval()
    tok = bert_ref_tokenizer.RefTokenizer(os.path.join(args.model, "vocab.txt"))

    def embed(texts, row=packed_bert.ROW):
        return embed_texts(model, tok, texts, row)

    if args.manpages:
        print(json.dumps(manpage_breakdown(embed, args.manpages, config["max_position_embeddings"]), indent=1))
        return
    with open(args.heldout) as fh:
        held = [json.loads(l) for l in fh]
    docs = sorted({h["doc"] for h in held})
    doc_no = {d: i for i, d in enumerate(docs)}
    t0 = time.time()
    top = (embed([h["query"] for h in held]) @ embed(docs).T).topk(10, dim=1).indices.tolist()
    seconds = time.time() - t0
    hit = [doc_no[h["doc"]] in top[i] for i, h in enumerate(held)]
    heads = {a.strip().lower() for k, _, a, _ in
             make_corpus_pairs.corpus_pairs(list(make_corpus_pairs.read_texts(args.texts)), 0)
             if k == "dict-definition"}
    covered = [any(x.strip().lower() in heads for x in h["doc"].split(",")) for h in held]
    out = {"model": args.model, "queries": len(held), "docs": len(docs), "embed_seconds": round(seconds, 1),
           "recall@10": round(sum(hit) / len(hit), 4)}
    for name, want in (("lemma_is_dictionary_headword", True), ("lemma_not_dictionary_headword", False)):
        sel = [h for h, c in zip(hit, covered) if c == want]
        out[name] = {"queries": len(sel), "recall@10": round(sum(sel) / max(1, len(sel)), 4)}
    if args.coverage:
        out["by_lemma_frequency_in_training_text"] = coverage_split(held, hit, args.coverage)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
