#!/usr/bin/env python3
"""Trains ZeroVec's bundled default sentence-embedding model, zerovec-mini, and evaluates it.

Runs on the GPU machine (torch, transformers, tokenizers, safetensors). Input is what
make_pairs.py writes (tools/model/work/). Steps:
  1. WordPiece vocabulary (lower-cased, accents stripped) trained on the WordNet corpus.
  2. A small BERT (transformers BertModel) trained from scratch with a symmetric InfoNCE
     loss over in-batch negatives (mean pooling, L2-normalised, temperature 0.05),
     bf16 autocast, for a fixed wall-clock budget.
  3. Evaluation on the held-out synsets: recall@k of gloss -> lemma retrieval over all
     held-out synsets, for the model and for BM25 baselines on the same data; nearest
     neighbours of everyday queries over data/demo/corpus.jsonl.
  4. Export in the sentence-transformers layout (fp16 model.safetensors).

  python3 tools/model/train.py --work tools/model/work --out models/zerovec-mini \
      --results tools/model/results --minutes 4
"""

import argparse
import collections
import copy
import gzip
import heapq
import json
import math
import os
import random
import re
import sys
import time
import unicodedata

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

EVERYDAY_QUERIES = [
    "a pet that barks",
    "something hot to drink in the morning",
    "feeling very happy",
    "a vehicle with two wheels that you pedal",
    "a tool for cutting wood",
    "where you go to buy bread",
    "frozen water falling from the sky",
    "a doctor who treats children",
    "to run away quickly",
    "money you pay to live in a house",
    "a musical instrument with black and white keys",
    "the meal eaten in the evening",
]


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


# ----------------------------------------------------------------------------- data

def load_pairs(path):
    kinds, groups, a, b = [], [], [], []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            k, g, x, y = line.rstrip("\n").split("\t")
            kinds.append(k)
            groups.append(int(g))
            a.append(x)
            b.append(y)
    return kinds, groups, a, b


def load_jsonl(path):
    with open(path, "r", encoding="utf-8") as fh:
        return [json.loads(l) for l in fh if l.strip()]


def make_tokenizer(vocab_path, max_len):
    from tokenizers import BertWordPieceTokenizer
    tok = BertWordPieceTokenizer.from_file(vocab_path, lowercase=True, strip_accents=None,
                                           clean_text=True, handle_chinese_chars=True)
    tok.enable_truncation(max_length=max_len)
    tok.no_padding()
    return tok


def tokenize_all(tok, texts, max_len):
    encs = tok.encode_batch(texts)
    lens = np.array([len(e.ids) for e in encs], dtype=np.int64)
    arr = np.zeros((len(texts), max_len), dtype=np.int32)
    for i, e in enumerate(encs):
        arr[i, : len(e.ids)] = e.ids
    return torch.from_numpy(arr), torch.from_numpy(lens)


# ----------------------------------------------------------------------------- model

def build_model(vocab_size, args):
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=vocab_size, hidden_size=args.hidden, num_hidden_layers=args.layers,
                     num_attention_heads=args.heads, intermediate_size=args.intermediate,
                     hidden_act="gelu", max_position_embeddings=args.max_len, type_vocab_size=2,
                     pad_token_id=0, layer_norm_eps=1e-12, hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.1, initializer_range=0.02)
    cfg.architectures = ["BertModel"]
    return BertModel(cfg)


def embed(model, ids, lens):
    L = int(lens.max())
    ids = ids[:, :L].long()
    mask = torch.arange(L, device=ids.device)[None, :] < lens[:, None]
    out = model(input_ids=ids, attention_mask=mask.long()).last_hidden_state
    m = mask.unsqueeze(-1).to(out.dtype)
    e = (out * m).sum(1) / m.sum(1)
    return F.normalize(e.float(), dim=-1)


@torch.no_grad()
def encode_texts(model, tok, texts, max_len, device, bs=512):
    ids, lens = tokenize_all(tok, texts, max_len)
    order = torch.argsort(lens, descending=True)
    out = torch.empty(len(texts), model.config.hidden_size)
    model.eval()
    for s in range(0, len(texts), bs):
        idx = order[s:s + bs]
        e = embed(model, ids[idx].to(device), lens[idx].to(device))
        out[idx] = e.cpu()
    return out


# ----------------------------------------------------------------------------- eval

_WORD = re.compile(r"[a-z0-9]+")


def words(text):
    t = unicodedata.normalize("NFD", text.lower())
    t = "".join(c for c in t if unicodedata.category(c) != "Mn")
    return _WORD.findall(t)


def bm25_topk(queries, docs, k=10, k1=1.2, b=0.75):
    """queries, docs: lists of token lists. Returns top-k doc indices per query."""
    N = len(docs)
    df = collections.Counter()
    post = collections.defaultdict(list)
    dl = [len(d) for d in docs]
    avgdl = sum(dl) / max(1, N)
    for j, d in enumerate(docs):
        for t, tf in collections.Counter(d).items():
            df[t] += 1
            post[t].append((j, tf))
    idf = {t: math.log(1.0 + (N - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    res = []
    for q in queries:
        sc = collections.defaultdict(float)
        for t, qtf in collections.Counter(q).items():
            if t not in post:
                continue
            w = idf[t]
            for j, tf in post[t]:
                sc[j] += qtf * w * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl[j] / avgdl))
        res.append([j for j, _ in heapq.nlargest(k, sc.items(), key=lambda kv: (kv[1], -kv[0]))])
    return res


def recall_from_topk(topk, targets, ks=(1, 5, 10)):
    out = {}
    for k in ks:
        out["recall@%d" % k] = sum(1 for t, r in zip(targets, topk) if t in r[:k]) / len(targets)
    mrr = 0.0
    for t, r in zip(targets, topk):
        if t in r:
            mrr += 1.0 / (r.index(t) + 1)
    out["mrr@10"] = mrr / len(targets)
    return out


def heldout_eval(model, tok, held, args, device):
    doc_texts = []
    doc_index = {}
    targets = []
    for h in held:
        if h["doc"] not in doc_index:
            doc_index[h["doc"]] = len(doc_texts)
            doc_texts.append(h["doc"])
        targets.append(doc_index[h["doc"]])
    queries = [h["query"] for h in held]
    res = {"queries": len(queries), "docs": len(doc_texts)}
    t0 = time.time()
    Q = encode_texts(model, tok, queries, args.max_len, device).to(device)
    D = encode_texts(model, tok, doc_texts, args.max_len, device).to(device)
    top = (Q @ D.T).topk(10, dim=1).indices.cpu().tolist()
    res["model"] = recall_from_topk(top, targets)
    res["model_seconds"] = round(time.time() - t0, 2)
    t0 = time.time()
    top_w = bm25_topk([words(q) for q in queries], [words(d) for d in doc_texts])
    res["bm25_words"] = recall_from_topk(top_w, targets)

    def pieces(texts):
        return [[t for t in e.tokens if t not in ("[CLS]", "[SEP]")] for e in tok.encode_batch(texts)]

    top_p = bm25_topk(pieces(queries), pieces(doc_texts))
    res["bm25_wordpieces"] = recall_from_topk(top_p, targets)
    res["bm25_seconds"] = round(time.time() - t0, 2)
    # a few examples
    ex = []
    for i in range(0, len(queries), max(1, len(queries) // 8))[:8]:
        ex.append({"query": queries[i], "target": doc_texts[targets[i]],
                   "model_top3": [doc_texts[j] for j in top[i][:3]],
                   "bm25_top3": [doc_texts[j] for j in top_w[i][:3]]})
    res["examples"] = ex
    return res


def neighbours(model, tok, corpus, args, device, k=5):
    texts = [d["text"] for d in corpus]
    D = encode_texts(model, tok, texts, args.max_len, device).to(device)
    Q = encode_texts(model, tok, EVERYDAY_QUERIES, args.max_len, device).to(device)
    sims = Q @ D.T
    v, ix = sims.topk(k, dim=1)
    out = []
    for qi, q in enumerate(EVERYDAY_QUERIES):
        out.append({"query": q, "neighbours": [
            {"id": corpus[j]["id"], "score": round(float(s), 4), "text": texts[j][:110]}
            for s, j in zip(v[qi].tolist(), ix[qi].tolist())]})
    return out


# ----------------------------------------------------------------------------- export

def dump(path, obj):
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True)
        fh.write("\n")


def export(model, vocab_path, out, args):
    import shutil
    from random_checkpoint import MODULES, SPECIAL_TOKENS_MAP, pooling_config, tokenizer_config
    os.makedirs(out, exist_ok=True)
    m16 = copy.deepcopy(model).cpu().half().eval()
    m16.save_pretrained(out)
    shutil.copyfile(vocab_path, os.path.join(out, "vocab.txt"))
    dump(os.path.join(out, "tokenizer_config.json"), tokenizer_config(args.max_len))
    dump(os.path.join(out, "special_tokens_map.json"), SPECIAL_TOKENS_MAP)
    dump(os.path.join(out, "modules.json"), MODULES)
    dump(os.path.join(out, "sentence_bert_config.json"), {"max_seq_length": args.max_len, "do_lower_case": False})
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    os.makedirs(os.path.join(out, "2_Normalize"), exist_ok=True)
    dump(os.path.join(out, "1_Pooling", "config.json"), pooling_config(args.hidden))
    try:
        from safetensors import safe_open
        with safe_open(os.path.join(out, "model.safetensors"), "pt") as f:
            names = sorted(f.keys())
            dtypes = sorted({str(f.get_tensor(n).dtype) for n in names})
        return {"tensors": len(names), "dtypes": dtypes, "first_names": names[:6],
                "bytes": os.path.getsize(os.path.join(out, "model.safetensors"))}
    except Exception as e:  # pragma: no cover
        return {"error": repr(e)}


# ----------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--out", default=os.path.join(REPO, "models", "zerovec-mini"))
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--corpus", default=os.path.join(REPO, "data", "demo", "corpus.jsonl"))
    ap.add_argument("--minutes", type=float, default=4.0)
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=7e-4)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--temperature", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=0, help="0: bounded by --minutes only")
    args = ap.parse_args()

    t_start = time.time()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    os.makedirs(args.results, exist_ok=True)
    results = {"args": vars(args), "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
               "torch": torch.__version__}
    try:
        import transformers, tokenizers
        results["transformers"] = transformers.__version__
        results["tokenizers"] = tokenizers.__version__
    except Exception:
        pass

    # 1. vocabulary
    import vocab as vocab_mod
    import tempfile
    vocab_path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    t0 = time.time()
    tokens, n_learned = vocab_mod.train(os.path.join(args.work, "vocab_corpus.txt.gz"), args.vocab_size, "compact")
    with open(vocab_path, "w", encoding="utf-8") as fh:
        fh.write("".join(t + "\n" for t in tokens))
    results["vocab"] = {"size": len(tokens), "learned": n_learned, "seconds": round(time.time() - t0, 1)}
    log("vocab", results["vocab"])
    tok = make_tokenizer(vocab_path, args.max_len)

    # 2. data
    t0 = time.time()
    kinds, groups, ta, tb = load_pairs(os.path.join(args.work, "pairs.tsv.gz"))
    uniq = {}
    for t in ta + tb:
        if t not in uniq:
            uniq[t] = len(uniq)
    texts = list(uniq)
    ids, lens = tokenize_all(tok, texts, args.max_len)
    pa = torch.tensor([uniq[t] for t in ta])
    pb = torch.tensor([uniq[t] for t in tb])
    pg = torch.tensor(groups)
    results["data"] = {"pairs": len(ta), "unique_texts": len(texts), "mean_tokens": float(lens.float().mean()),
                       "max_tokens": int(lens.max()), "truncated_texts": int((lens >= args.max_len).sum()),
                       "pairs_by_type": dict(collections.Counter(kinds)), "seconds": round(time.time() - t0, 1)}
    log("data", results["data"])
    ids, lens, pa, pb, pg = ids.to(device), lens.to(device), pa.to(device), pb.to(device), pg.to(device)

    # 3. train
    model = build_model(len(tokens), args).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt_kw = {"fused": True} if device == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-6, **opt_kw)
    budget = args.minutes * 60.0
    P = len(ta)
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    perm = torch.randperm(P, generator=gen).to(device)
    pos = 0
    epoch = 0
    step = 0
    labels = torch.arange(args.batch, device=device)
    eye = torch.eye(args.batch, dtype=torch.bool, device=device)
    t_train = time.time()
    losses = []
    curve = []
    model.train()
    while True:
        elapsed = time.time() - t_train
        if elapsed >= budget or (args.max_steps and step >= args.max_steps):
            break
        if pos + args.batch > P:
            perm = torch.randperm(P, generator=gen).to(device)
            pos = 0
            epoch += 1
        bi = perm[pos:pos + args.batch]
        pos += args.batch
        frac = elapsed / budget if not args.max_steps else step / args.max_steps
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * max(0.02, 1.0 - frac)
        for g in opt.param_groups:
            g["lr"] = lr
        a_i, b_i, grp = pa[bi], pb[bi], pg[bi]
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=(device == "cuda")):
            ea = embed(model, ids[a_i], lens[a_i])
            eb = embed(model, ids[b_i], lens[b_i])
        logits = (ea @ eb.T) / args.temperature
        same = (grp[:, None] == grp[None, :]) & ~eye[: len(bi), : len(bi)]
        logits = logits.masked_fill(same, float("-inf"))
        lab = labels[: len(bi)]
        loss = 0.5 * (F.cross_entropy(logits, lab) + F.cross_entropy(logits.T, lab))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 50 == 0:
            losses.append(float(loss.detach()))
        if step % 500 == 0:
            l = sum(losses[-10:]) / max(1, len(losses[-10:]))
            curve.append({"step": step, "seconds": round(time.time() - t_train, 1), "loss": round(l, 4), "lr": lr})
            log("step %d epoch %d loss %.4f lr %.2e %.0fs" % (step, epoch, l, lr, time.time() - t_train))
    train_seconds = time.time() - t_train
    results["training"] = {"steps": step, "epochs": round(step * args.batch / P, 2), "seconds": round(train_seconds, 1),
                           "params": n_params, "final_loss": round(sum(losses[-10:]) / max(1, len(losses[-10:])), 4),
                           "curve": curve}
    log("trained", {k: v for k, v in results["training"].items() if k != "curve"})

    # 4. export (fp16), then evaluate the exported weights (fp16 -> fp32)
    results["export"] = export(model, vocab_path, args.out, args)
    log("export", results["export"])
    from transformers import BertModel
    model = BertModel.from_pretrained(args.out).float().to(device).eval()
    held = load_jsonl(os.path.join(args.work, "heldout.jsonl"))
    results["heldout"] = heldout_eval(model, tok, held, args, device)
    log("heldout", json.dumps({k: v for k, v in results["heldout"].items() if k != "examples"}))
    if os.path.exists(args.corpus):
        corpus = load_jsonl(args.corpus)
        results["neighbours_corpus"] = os.path.relpath(args.corpus, REPO)
        results["neighbours"] = neighbours(model, tok, corpus, args, device)
        for n in results["neighbours"]:
            log(n["query"], "->", [x["text"][:40] for x in n["neighbours"]])
    results["total_seconds"] = round(time.time() - t_start, 1)
    dump(os.path.join(args.results, "zerovec-mini-eval.json"), results)
    log("done", results["total_seconds"])


if __name__ == "__main__":
    main()
