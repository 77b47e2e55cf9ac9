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
import lzma
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
import packed_bert  # noqa: E402

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

def open_text(path):
    """path, or its .xz twin when only that exists (pack_l6.py's slimmer copies)."""
    if not os.path.exists(path) and path.endswith(".gz") and os.path.exists(path[:-3] + ".xz"):
        path = path[:-3] + ".xz"
    if path.endswith(".xz"):
        return lzma.open(path, "rt", encoding="utf-8")
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "r", encoding="utf-8")


def load_pairs(path):
    kinds, groups, a, b = [], [], [], []
    with open_text(path) as fh:
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


# make_pairs.py's kinds: the "wordnet" source of --source-weights.
WORDNET_KINDS = {"names-gloss", "lemma-gloss", "gloss-example", "names-example", "hyponym-hypernym", "synonym"}


def parse_weights(spec):
    """"wordnet=3,package-summary=2" -> {"wordnet": 3.0, "package-summary": 2.0}."""
    out = {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        name, eq, w = item.partition("=")
        if not eq or float(w) < 0:
            raise SystemExit("--source-weights: expected NAME=WEIGHT >= 0, got %r" % item)
        out[name.strip()] = float(w)
    return out


def kind_weight(kind, weights):
    """A pair kind's sampling weight: its own, else its source's ("wordnet"), else 1."""
    if kind in weights:
        return weights[kind]
    return weights.get("wordnet" if kind in WORDNET_KINDS else kind, 1.0)


def weighted_order(w, gen):
    """One epoch: pair i repeated floor(w[i]) times, plus once more with probability
    frac(w[i]), shuffled (CPU)."""
    reps = w.floor() + (torch.rand(w.numel(), generator=gen) < (w - w.floor())).float()
    order = torch.repeat_interleave(torch.arange(w.numel()), reps.long())
    return order[torch.randperm(order.numel(), generator=gen)]


def weighted_sample(w, n, gen):
    """min(n, len(w)) distinct indices drawn with probability proportional to w
    (Efraimidis-Spirakis: the largest u ** (1 / w), compared as log(u) / w)."""
    keys = torch.rand(w.numel(), generator=gen).clamp_min(1e-12).log() / w.clamp_min(1e-12)
    return keys.topk(min(n, w.numel())).indices


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
                     hidden_act="gelu", max_position_embeddings=args.max_positions or args.max_len,
                     type_vocab_size=2,
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


def embed_bucketed(model, ids, lens, buckets):
    """embed() of a training batch in `buckets` length-sorted slices, each padded only to
    its own longest text: most pairs are short, and one long passage would otherwise pad
    the whole batch to --max-len."""
    if buckets <= 1:
        return embed(model, ids, lens)
    order = torch.argsort(lens)
    parts = [embed(model, ids[p], lens[p]) for p in order.chunk(buckets)]
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)
    return torch.cat(parts)[inverse]


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



# ----------------------------------------------------------------------------- training steps

def apply_step(opt, module, loss):
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
    opt.step()


def track(step, loss, losses, curve, t_train, label, **extra):
    """Every 50 steps keeps the loss; every 500 logs the mean of the last ten."""
    if step % 50 == 0:
        losses.append(float(loss.detach()))
    if step % 500 == 0:
        l = sum(losses[-10:]) / max(1, len(losses[-10:]))
        curve.append(dict({"step": step, "seconds": round(time.time() - t_train, 1), "loss": round(l, 4)}, **extra))
        log("%s step %d loss %.4f %s %.0fs" % (label, step, l, extra, time.time() - t_train))


# ----------------------------------------------------------------------------- the larger model (issue 20)

def mlm_stream(tok, texts, cls_id, sep_id):
    """All texts' token ids, each followed by [SEP], as one int32 array."""
    parts = []
    for s in range(0, len(texts), 200000):
        for e in tok.encode_batch(texts[s:s + 200000], add_special_tokens=False):
            parts.append(np.asarray(e.ids + [sep_id], dtype=np.int32))
    return np.concatenate(parts)


def mlm_pretrain(model, tok, texts, vocab_tokens, args, device, minutes):
    """Masked-language-model pre-training of `model` (a BertModel) on packed
    sequences of 126 or 510 tokens (every 4th step long, so all 512 positions learn)."""
    from transformers import BertForMaskedLM
    ids_of = {t: i for i, t in enumerate(vocab_tokens)}
    cls_id, sep_id, mask_id, pad_id = ids_of["[CLS]"], ids_of["[SEP]"], ids_of["[MASK]"], ids_of["[PAD]"]
    first_word = max(ids_of[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")) + 1
    t0 = time.time()
    stream = torch.from_numpy(mlm_stream(tok, texts, cls_id, sep_id))
    log("mlm stream", {"tokens": int(stream.numel()), "seconds": round(time.time() - t0, 1)})
    mlm = BertForMaskedLM(model.config).to(device)
    mlm.bert.load_state_dict(model.state_dict(), strict=False)
    opt = torch.optim.AdamW(mlm.parameters(), lr=args.mlm_lr, betas=(0.9, 0.98), eps=1e-6,
                            weight_decay=0.01, **({"fused": True} if device == "cuda" else {}))
    stream = stream.to(device)
    n_tok = stream.numel()
    budget = minutes * 60.0
    gen = torch.Generator(device=device).manual_seed(args.seed)
    step, losses, curve = 0, [], []
    t_train = time.time()
    mlm.train()
    packed, check = None, {}
    if args.packed:
        packed = eager = packed_bert.PackedBert(mlm.bert)
    while time.time() - t_train < budget:
        L = 510 if step % 4 == 3 else 126
        B = args.mlm_tokens // (L + 2)
        starts = torch.randint(0, n_tok - L, (B,), device=device, generator=gen)
        body = stream[starts[:, None] + torch.arange(L, device=device)[None, :]].long()
        inp = torch.cat([torch.full((B, 1), cls_id, device=device), body,
                         torch.full((B, 1), sep_id, device=device)], dim=1)
        labels = inp.clone()
        r = torch.rand(inp.shape, device=device, generator=gen)
        special = inp < first_word
        chosen = (r < 0.15) & ~special
        labels[~chosen] = -100
        r2 = torch.rand(inp.shape, device=device, generator=gen)
        inp = torch.where(chosen & (r2 < 0.8), torch.full_like(inp, mask_id), inp)
        rand_tok = torch.randint(first_word, len(vocab_tokens), inp.shape, device=device, generator=gen)
        inp = torch.where(chosen & (r2 >= 0.8) & (r2 < 0.9), rand_tok, inp)
        frac = (time.time() - t_train) / budget
        lr = args.mlm_lr * min(1.0, (step + 1) / args.warmup) * max(0.05, 1.0 - frac)
        for g in opt.param_groups:
            g["lr"] = lr
        if packed is not None and step == 0:
            packed, check = mlm_check_packed(mlm, packed, inp, labels, args, device)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=(device == "cuda")):
            if packed is not None:  # (compiled for the short rows only: one compilation)
                loss = packed_bert.mlm_loss(packed if L == 126 else eager, mlm.cls, inp, labels)
            else:
                loss = mlm(input_ids=inp, attention_mask=torch.ones_like(inp), labels=labels).loss
        apply_step(opt, mlm, loss)
        step += 1
        track(step, loss, losses, curve, t_train, "mlm", lr=lr)
    model.load_state_dict(mlm.bert.state_dict(), strict=False)
    return {"steps": step, "seconds": round(time.time() - t_train, 1), "tokens_per_step": args.mlm_tokens,
            "packed": packed is not None, **check,
            "stream_tokens": int(n_tok), "final_loss": round(sum(losses[-10:]) / max(1, len(losses[-10:])), 4),
            "curve": curve}


def mlm_check_packed(mlm, packed, inp, labels, args, device):
    """Before the packed MLM step is used: its loss on the first batch against
    BertForMaskedLM's own (eval mode, fp32), then the compiled pass (CUDA, --compile).
    Returns (the pass to use, or None for BertForMaskedLM's; what was found)."""
    mlm.eval()
    try:
        with torch.no_grad():
            ref = float(mlm(input_ids=inp, attention_mask=torch.ones_like(inp), labels=labels).loss)
            got = float(packed_bert.mlm_loss(packed, mlm.cls, inp, labels))
    except Exception as e:  # noqa: BLE001 (e.g. another transformers layout): the old pass
        mlm.train()
        log("packed MLM failed (%s: %s); BertForMaskedLM's pass is used" % (type(e).__name__, str(e)[:300]))
        return None, {"packed_error": str(e)[:1000]}
    mlm.train()
    check = {"packed_check_loss": [round(ref, 6), round(got, 6)]}
    log("packed MLM vs BertForMaskedLM: loss %.6f vs %.6f" % (got, ref))
    if not abs(got - ref) <= 1e-3 * max(1.0, abs(ref)):
        log("packed MLM differs; BertForMaskedLM's pass is used")
        return None, check
    if args.compile and device == "cuda":
        compiled = torch.compile(packed, dynamic=False)
        try:
            t_c = time.time()
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                packed_bert.mlm_loss(compiled, mlm.cls, inp, labels).backward()
            mlm.zero_grad(set_to_none=True)
            check["compile_seconds"] = round(time.time() - t_c, 1)
            log("compiled the packed MLM pass in %.1f s" % check["compile_seconds"])
            return compiled, check
        except Exception as e:  # noqa: BLE001
            log("torch.compile failed for MLM (%s: %s); eager packed pass" % (type(e).__name__, str(e)[:300]))
            check["compile_error"] = str(e)[:1000]
    return packed, check


@torch.no_grad()
def mine_hard_negatives(model, ids, lens, pa, pb, pg, sample, device, both=False):
    """For `sample` pair indices: (hb, ha). hb: the b-text of another group that the model
    now ranks highest for each pair's a-text (a mined hard negative), or -1. ha (with
    `both`, else None): the same the other way, the a-text of another group ranked highest
    for the pair's b-text; for WordNet that is a wrong lemma list for a gloss, the direction
    of the held-out gloss -> lemma evaluation."""
    model.eval()

    def enc(idx):
        out = []
        for s in range(0, len(idx), 2048):
            j = idx[s:s + 2048]
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=(device == "cuda")):
                out.append(embed(model, ids[j], lens[j]).to(torch.bfloat16))
        return torch.cat(out)

    ta, tb, g = pa[sample], pb[sample], pg[sample]
    A, Bv = enc(ta), enc(tb)

    def pick(Q, D, d_text):
        hn = torch.full((len(sample),), -1, dtype=torch.long, device=device)
        for s in range(0, len(sample), 4096):
            top = (Q[s:s + 4096] @ D.T).float().topk(8, dim=1).indices
            # another group, and not the pair's own positive text seen under another group
            ok = (g[top] != g[s:s + 4096, None]) & (d_text[top] != d_text[s:s + 4096, None])
            first = torch.where(ok.any(1), ok.float().argmax(1), torch.full_like(ok[:, 0], -1, dtype=torch.long))
            pick_ = torch.where(first >= 0, top.gather(1, first.clamp(min=0)[:, None])[:, 0], first)
            hn[s:s + 4096] = torch.where(pick_ >= 0, d_text[pick_.clamp(min=0)], pick_)
        return hn

    hb = pick(A, Bv, tb)
    ha = pick(Bv, A, ta) if both else None
    model.train()
    return hb, ha


def manpage_eval(model, tok, path, args, device):
    items = load_jsonl(path)
    passages = [i for i in items if i["kind"] == "passage"]
    queries = [i for i in items if i["kind"] == "query"]
    res = {"queries": len(queries), "passages": len(passages)}
    P = encode_texts(model, tok, [p["text"] for p in passages], args.max_positions or args.max_len, device).to(device)
    Q = encode_texts(model, tok, [q["text"] for q in queries], args.max_len, device).to(device)
    top = (Q @ P.T).topk(10, dim=1).indices.cpu().tolist()
    top_w = bm25_topk([words(q["text"]) for q in queries], [words(p["text"]) for p in passages])

    def hits(tops, k):
        return sum(1 for q, t in zip(queries, tops) if any(passages[j]["page"] == q["page"] for j in t[:k]))

    for name, tops in (("dense", top), ("bm25", top_w)):
        res[name] = {"hit@1": hits(tops, 1), "hit@10": hits(tops, 10)}
    return res

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
    window = args.max_positions or args.max_len
    dump(os.path.join(out, "tokenizer_config.json"), tokenizer_config(window))
    dump(os.path.join(out, "special_tokens_map.json"), SPECIAL_TOKENS_MAP)
    dump(os.path.join(out, "modules.json"), MODULES)
    dump(os.path.join(out, "sentence_bert_config.json"), {"max_seq_length": window, "do_lower_case": False})
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


# ----------------------------------------------------------------------------- main steps

def build_vocab(args, corpus_texts, vocab_path):
    """WordPiece vocabulary on the WordNet corpus plus (with --texts) the corpus texts."""
    import vocab as vocab_mod
    import tempfile
    vocab_corpus = args.vocab_corpus
    if corpus_texts or not os.path.exists(vocab_corpus):
        vocab_corpus = os.path.join(tempfile.mkdtemp(), "vocab_corpus.txt.gz")
        with gzip.open(vocab_corpus, "wt", encoding="utf-8") as out, open_text(args.vocab_corpus) as wn:
            for line in wn:
                out.write(line)
            for _, t in corpus_texts:
                out.write(t + "\n")
    tokens, n_learned = vocab_mod.train(vocab_corpus, args.vocab_size, "compact")
    with open(vocab_path, "w", encoding="utf-8") as fh:
        fh.write("".join(t + "\n" for t in tokens))
    return tokens, n_learned


def load_training_data(args, tok, corpus_texts, device):
    """Pairs (WordNet, plus the corpus pairs with --texts), tokenized; each pair's
    sampling weight (--source-weights) and kind number."""
    t0 = time.time()
    kinds, groups, ta, tb = load_pairs(os.path.join(args.work, "pairs.tsv.gz"))
    if args.smoke:
        kinds, groups, ta, tb = kinds[: args.smoke], groups[: args.smoke], ta[: args.smoke], tb[: args.smoke]
    if corpus_texts:
        import make_corpus_pairs
        base = max(groups) + 1
        for k, g, a, b in make_corpus_pairs.corpus_pairs(corpus_texts, base):
            kinds.append(k)
            groups.append(g)
            ta.append(a)
            tb.append(b)
    uniq = {}
    for t in ta + tb:
        if t not in uniq:
            uniq[t] = len(uniq)
    texts = list(uniq)
    ids, lens = tokenize_all(tok, texts, args.max_len)
    weights = parse_weights(args.source_weights)
    kind_names = sorted(set(kinds))
    kind_no = {k: i for i, k in enumerate(kind_names)}
    d = {"pa": torch.tensor([uniq[t] for t in ta]), "pb": torch.tensor([uniq[t] for t in tb]),
         "pg": torch.tensor(groups), "kind": torch.tensor([kind_no[k] for k in kinds]),
         "weight": torch.tensor([kind_weight(k, weights) for k in kinds], dtype=torch.float32),
         "kind_names": kind_names, "ids": ids, "lens": lens}
    by_type = collections.Counter(kinds)
    info = {"pairs": len(ta), "unique_texts": len(texts), "mean_tokens": float(lens.float().mean()),
            "max_tokens": int(lens.max()), "truncated_texts": int((lens >= args.max_len).sum()),
            "pairs_by_type": dict(by_type),
            "weights": {k: kind_weight(k, weights) for k in kind_names},
            "weighted_pairs_an_epoch": round(float(d["weight"].sum()), 1),
            "seconds": round(time.time() - t0, 1)}
    for k in ("pa", "pb", "pg", "kind", "ids", "lens"):
        d[k] = d[k].to(device)
    return d, info


def contrastive_loss(model, d, bi, hard_b, hard_a, labels, args, device, packed=None):
    """Symmetric InfoNCE over the batch bi: a -> [b's, mined hard b's], b -> [a's,
    mined hard a's]; pairs of one group are not each other's negatives, nor is a hard
    negative that is the row's own positive text. With packed (packed_bert.PackedBert
    over model, maybe compiled) all texts of the batch go through one packed pass."""
    ids, lens = d["ids"], d["lens"]
    a_i, b_i, grp = d["pa"][bi], d["pb"][bi], d["pg"][bi]
    n = len(bi)
    hb = hard_b[bi] if hard_b is not None else None
    ha = hard_a[bi] if hard_a is not None else None
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=(device == "cuda")):
        if packed is not None:  # all sides in one packed forward pass
            sides = [a_i, b_i] + [x for x in (hb, ha) if x is not None]
            e = packed_bert.embed_packed(packed, ids, lens, torch.cat(sides),
                                         row=max(packed_bert.ROW, args.max_len)).split(n)
            ea, eb = e[0], e[1]
            ehb = e[2] if hb is not None else None
            eha = e[-1] if ha is not None else None
        else:
            k = args.length_buckets
            ea = embed_bucketed(model, ids[a_i], lens[a_i], k)
            eb = embed_bucketed(model, ids[b_i], lens[b_i], k)
            ehb = embed_bucketed(model, ids[hb], lens[hb], k) if hb is not None else None
            eha = embed_bucketed(model, ids[ha], lens[ha], k) if ha is not None else None
    same = (grp[:, None] == grp[None, :]) & ~torch.eye(n, dtype=torch.bool, device=device)
    logits = ((ea @ eb.T) / args.temperature).masked_fill(same, float("-inf"))
    la, lb = logits, logits.T
    if ehb is not None:
        lh = ((ea @ ehb.T) / args.temperature).masked_fill(hb[None, :] == b_i[:, None], float("-inf"))
        la = torch.cat([la, lh], dim=1)
    if eha is not None:
        lh = ((eb @ eha.T) / args.temperature).masked_fill(ha[None, :] == a_i[:, None], float("-inf"))
        lb = torch.cat([lb, lh], dim=1)
    lab = labels[:n]
    return 0.5 * (F.cross_entropy(la, lab) + F.cross_entropy(lb, lab))


def contrastive_train(model, d, args, device, results):
    """Contrastive training for --minutes or until --stop-at, whichever is first. Pairs
    are drawn by --source-weights; at each --hard-negatives-at fraction of the budget
    (with --texts) hard negatives are mined for a weighted sample of pairs, which is then
    the training pool (uniformly shuffled, so the sample's mix is the weighted one)."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt_kw = {"fused": True} if device == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-6, **opt_kw)
    t_train = time.time()
    budget = args.minutes * 60.0
    if args.stop_at:
        budget = max(0.0, min(budget, args.stop_at - t_train))
    lr0, lr1 = (float(x) for x in args.lr_range.split(","))
    P = d["pa"].numel()
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    mine_at = sorted(float(x) for x in args.hard_negatives_at.split(",") if x.strip()) if args.texts else []
    w = d["weight"]

    def order(pool):
        if pool is None:
            return weighted_order(w, gen).to(device)
        return pool[torch.randperm(pool.numel(), generator=gen).to(device)]

    packed, compiled = None, False
    if getattr(args, "packed", 0):
        packed = packed_bert.PackedBert(model)
        # 192 a-texts of random pairs and the 64 longest texts
        probe = torch.cat([d["pa"][torch.randperm(P, generator=gen)[:192].to(device)],
                           torch.argsort(d["lens"], descending=True)[:64]])
        diff = packed_bert.check_against_bert(packed, embed, d["ids"], d["lens"], probe)
        results["packed_check_max_abs_diff"] = diff
        log("packed forward vs BertModel: max |diff| %.2g on %d texts" % (diff, probe.numel()))
        if args.compile and device == "cuda":
            packed, compiled = torch.compile(packed, dynamic=True), True
    perm, pos, epoch, step = order(None), 0, 0, 0
    labels = torch.arange(args.batch, device=device)
    seen = torch.zeros(len(d["kind_names"]), dtype=torch.long, device=device)
    hard_b = hard_a = pool = None
    losses, curve, mined_log = [], [], []
    model.train()
    while True:
        elapsed = time.time() - t_train
        if elapsed >= budget or (args.max_steps and step >= args.max_steps):
            break
        if mine_at and elapsed >= mine_at[0] * budget:
            mine_at.pop(0)
            t_m = time.time()
            sample = weighted_sample(w, args.hard_negative_sample, gen).to(device)
            if args.batch > sample.numel() // 2:
                args.batch = max(8, sample.numel() // 2)  # smoke runs: a batch must fit the pool
            hb, ha = mine_hard_negatives(model, d["ids"], d["lens"], d["pa"], d["pb"], d["pg"], sample, device,
                                         args.hard_negatives_both)
            hard_b = torch.full((P,), -1, dtype=torch.long, device=device)
            hard_b[sample] = hb
            ok = hb >= 0
            if ha is not None:
                hard_a = torch.full((P,), -1, dtype=torch.long, device=device)
                hard_a[sample] = ha
                ok &= ha >= 0
            pool = sample[ok]
            mined_log.append({"mined": int(pool.numel()), "seconds": round(time.time() - t_m, 1), "at_step": step,
                              "by_type": {d["kind_names"][i]: int(c) for i, c in
                                          enumerate(torch.bincount(d["kind"][pool], minlength=len(seen)).tolist())}})
            log("hard negatives", mined_log[-1])
            budget += time.time() - t_m  # mining does not eat the training budget ...
            if args.stop_at:
                budget = min(budget, args.stop_at - t_train)  # ... but the deadline holds
            perm, pos = order(pool), 0
        if pos + args.batch > perm.numel():
            perm, pos, epoch = order(pool), 0, epoch + 1
        bi = perm[pos:pos + args.batch]
        pos += args.batch
        frac = elapsed / max(budget, 1e-9) if not args.max_steps else step / args.max_steps
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * max(0.02, lr0 + (lr1 - lr0) * min(1.0, frac))
        for g in opt.param_groups:
            g["lr"] = lr
        t_step = time.time()
        try:
            loss = contrastive_loss(model, d, bi, hard_b, hard_a, labels, args, device, packed)
        except Exception as e:  # noqa: BLE001
            if step or packed is None or not compiled:
                raise
            # the first call compiles; an error there falls back to the eager packed pass
            log("torch.compile failed (%s: %s); eager packed pass" % (type(e).__name__, str(e)[:300]))
            results["compile_error"] = str(e)[:1000]
            packed, compiled = packed_bert.PackedBert(model), False
            loss = contrastive_loss(model, d, bi, hard_b, hard_a, labels, args, device, packed)
        if step == 0 and compiled:
            log("compiled the packed pass in %.1f s" % (time.time() - t_step))
        apply_step(opt, model, loss)
        seen.index_add_(0, d["kind"][bi], torch.ones_like(bi))  # (bincount would sync with the host)
        step += 1
        track(step, loss, losses, curve, t_train, "contrastive", lr=lr, epoch=epoch)
    counts = torch.bincount(d["kind"], minlength=len(seen)).tolist()
    seen = seen.tolist()
    results["hard_negatives"] = mined_log
    results["training"] = {"steps": step, "batch": args.batch, "pair_samples": step * args.batch,
                           "epochs": round(step * args.batch / max(1.0, float(w.sum())), 2),
                           "epochs_by_type": {k: round(seen[i] / max(1, counts[i]), 2)
                                              for i, k in enumerate(d["kind_names"])},
                           "seconds": round(time.time() - t_train, 1), "lr_range": [lr0, lr1],
                           "pairs_per_s": round(step * args.batch / max(1e-9, time.time() - t_train), 1),
                           "packed": bool(packed is not None),
                           "final_loss": round(sum(losses[-10:]) / max(1, len(losses[-10:])), 4),
                           "curve": curve}


def evaluate(args, tok, device, results):
    """Reloads the exported fp16 weights (as fp32) and evaluates them: WordNet held-out
    gloss -> lemma, everyday-query neighbours, man pages vs BM25."""
    from transformers import BertModel
    model = BertModel.from_pretrained(args.out).float().to(device).eval()
    held = load_jsonl(args.heldout)
    results["heldout"] = heldout_eval(model, tok, held, args, device)
    log("heldout", json.dumps({k: v for k, v in results["heldout"].items() if k != "examples"}))
    if os.path.exists(args.corpus):
        corpus = load_jsonl(args.corpus)
        results["neighbours_corpus"] = os.path.relpath(args.corpus, REPO)
        results["neighbours"] = neighbours(model, tok, corpus, args, device)
        for n in results["neighbours"]:
            log(n["query"], "->", [x["text"][:40] for x in n["neighbours"]])
    summary = "SUMMARY %s wordnet_heldout recall@10 %.4f (bm25 %.4f)" % (
        args.name, results["heldout"]["model"]["recall@10"], results["heldout"]["bm25_words"]["recall@10"])
    if os.path.exists(args.manpages):
        m = results["manpages"] = manpage_eval(model, tok, args.manpages, args, device)
        log("manpages", m)
        summary += " | manpages (%d questions) dense hit@10 %d hit@1 %d, bm25 hit@10 %d hit@1 %d" % (
            m["queries"], m["dense"]["hit@10"], m["dense"]["hit@1"], m["bm25"]["hit@10"], m["bm25"]["hit@1"])
    log(summary)


# ----------------------------------------------------------------------------- main

def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--out", default=os.path.join(REPO, "models", "zerovec-mini"))
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--corpus", default=os.path.join(REPO, "data", "demo", "corpus.jsonl"))
    ap.add_argument("--minutes", type=float, default=4.0)
    ap.add_argument("--stop-at", type=float, default=0.0,
                    help="unix time by which contrastive training ends, whatever --minutes says (0: none)")
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=7e-4)
    ap.add_argument("--lr-range", default="1,0",
                    help="START,END: the contrastive learning rate goes linearly from START * --lr to "
                         "END * --lr (at least 0.02 * --lr) over this call's budget; a run split over "
                         "calls passes e.g. 1,0.5 then 0.5,0")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--temperature", type=float, default=0.05)
    ap.add_argument("--length-buckets", type=int, default=1,
                    help="embed each side of a training batch in this many length-sorted slices (speed)")
    ap.add_argument("--packed", type=int, default=0,
                    help="1: each contrastive step embeds all its texts in one packed pass, and MLM runs "
                         "its prediction head on the masked tokens only (packed_bert.py; each "
                         "checked against transformers' own pass first)")
    ap.add_argument("--compile", type=int, default=1, help="with --packed on CUDA: torch.compile the pass")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=0, help="0: bounded by --minutes only")
    ap.add_argument("--source-weights", default="package-summary=2",
                    help="NAME=W,...: sampling weight of a pair kind (names-gloss, dict-definition, "
                         "package-summary, same-document, ...) or of the source 'wordnet' (all of "
                         "make_pairs.py's kinds); others 1. Fractions are drawn at random each epoch.")
    ap.add_argument("--resume-from", default="",
                    help="an exported model folder (train.py --out): its vocabulary and weights are "
                         "the start; no vocabulary training, no MLM; the optimizer starts afresh")
    # The larger default model (issue 20): more text, MLM first, mined hard negatives.
    ap.add_argument("--texts", default="", help="work/texts.tsv.xz (make_corpus_pairs.py); enables the below")
    ap.add_argument("--mlm-texts", default="",
                    help="mlm_texts.tsv.xz (make_corpus_pairs.py): texts in no pair, for the vocabulary and MLM")
    ap.add_argument("--vocab-corpus", default="", help="WordNet text (default WORK/vocab_corpus.txt.gz or .xz)")
    ap.add_argument("--heldout", default="",
                    help="held-out set (default WORK/heldout.jsonl, else its copy tests/data/heldout_gloss_lemma.jsonl)")
    ap.add_argument("--max-positions", type=int, default=0, help="position table (0: --max-len)")
    ap.add_argument("--mlm-minutes", type=float, default=0.0)
    ap.add_argument("--mlm-lr", type=float, default=5e-4)
    ap.add_argument("--mlm-share", type=float, default=0.5,
                    help="with --stop-at: MLM takes at most this share of the time left")
    ap.add_argument("--mlm-tokens", type=int, default=65536, help="tokens a pre-training step")
    ap.add_argument("--hard-negatives-at", default="0.5",
                    help="fractions of the contrastive budget at which hard negatives are (re)mined, "
                         "comma-separated")
    ap.add_argument("--hard-negative-sample", type=int, default=400000)
    ap.add_argument("--hard-negatives-both", type=int, default=0,
                    help="1: mine a hard a-text for each b-text too (gloss -> wrong lemmas)")
    ap.add_argument("--manpages", default=os.path.join(REPO, "tests", "data", "manpages", "eval.jsonl"))
    ap.add_argument("--name", default="zerovec-mini")
    ap.add_argument("--eval-file", default="", help="results file name (default NAME-eval.json)")
    ap.add_argument("--smoke", type=int, default=0, help="N: only N texts and N pairs (a quick check)")
    args = ap.parse_args()
    args.vocab_corpus = args.vocab_corpus or os.path.join(args.work, "vocab_corpus.txt.gz")
    if not args.heldout:
        args.heldout = os.path.join(args.work, "heldout.jsonl")
        if not os.path.exists(args.heldout):
            args.heldout = os.path.join(REPO, "tests", "data", "heldout_gloss_lemma.jsonl")
    return args


def load_model(args, tokens, device):
    """A fresh BertModel of the --layers/--hidden/... shape, or the --resume-from one
    (whose shape then overrides the arguments, for export)."""
    if not args.resume_from:
        return build_model(len(tokens), args).to(device)
    from transformers import BertModel
    model = BertModel.from_pretrained(args.resume_from).float().to(device)
    c = model.config
    if c.vocab_size != len(tokens):
        raise SystemExit("--resume-from: vocab.txt has %d tokens, the model %d" % (len(tokens), c.vocab_size))
    args.layers, args.hidden, args.heads = c.num_hidden_layers, c.hidden_size, c.num_attention_heads
    args.intermediate, args.max_positions = c.intermediate_size, c.max_position_embeddings
    return model


def main():
    args = parse_args()
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

    # 1. vocabulary (or the resumed model's)
    import tempfile
    t0 = time.time()
    corpus_texts, extra_texts = [], []
    if args.texts:
        import make_corpus_pairs
        corpus_texts = list(make_corpus_pairs.read_texts(args.texts))
        if args.mlm_texts and not args.resume_from:
            extra_texts = list(make_corpus_pairs.read_texts(args.mlm_texts))
        if args.smoke:
            corpus_texts = corpus_texts[:: max(1, len(corpus_texts) // args.smoke)]
            extra_texts = extra_texts[:: max(1, len(extra_texts) // args.smoke)]
    if args.resume_from:
        vocab_path = os.path.join(args.resume_from, "vocab.txt")
        with open(vocab_path, encoding="utf-8") as fh:
            tokens = [l.rstrip("\n") for l in fh if l.strip()]
        results["vocab"] = {"size": len(tokens), "resumed_from": args.resume_from}
        # export() copies the vocabulary into --out, which may be --resume-from itself
        vocab_copy = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        with open(vocab_copy, "w", encoding="utf-8") as fh:
            fh.write("".join(t + "\n" for t in tokens))
        vocab_path = vocab_copy
    else:
        vocab_path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        tokens, n_learned = build_vocab(args, corpus_texts + extra_texts, vocab_path)
        results["vocab"] = {"size": len(tokens), "learned": n_learned, "seconds": round(time.time() - t0, 1)}
    log("vocab", results["vocab"])
    tok = make_tokenizer(vocab_path, args.max_len)

    # 2. data
    d, results["data"] = load_training_data(args, tok, corpus_texts, device)
    log("data", results["data"])

    # 3. train: MLM (fresh models only), then contrastive
    model = load_model(args, tokens, device)
    n_params = sum(p.numel() for p in model.parameters())
    if args.mlm_minutes > 0 and not args.resume_from:
        mlm_tok = make_tokenizer(vocab_path, 100000)
        with open_text(args.vocab_corpus) as fh:
            wn_lines = [l.strip() for l in fh]
        if args.smoke:
            wn_lines = wn_lines[: args.smoke]
        mlm_texts = [t for _, t in corpus_texts + extra_texts] + [l for l in wn_lines if l]
        random.Random(args.seed).shuffle(mlm_texts)
        minutes = args.mlm_minutes
        if args.stop_at:  # at most --mlm-share of what is left before the deadline
            minutes = min(minutes, max(0.0, args.mlm_share * (args.stop_at - time.time()) / 60.0))
        results["mlm"] = mlm_pretrain(model, mlm_tok, mlm_texts, tokens, args, device, minutes)
        log("mlm", {k: v for k, v in results["mlm"].items() if k != "curve"})
        del mlm_texts, wn_lines
    del corpus_texts, extra_texts
    contrastive_train(model, d, args, device, results)
    results["training"]["params"] = n_params
    log("trained", {k: v for k, v in results["training"].items() if k != "curve"})

    # 4. export (fp16), then evaluate the exported weights (fp16 -> fp32)
    results["export"] = export(model, vocab_path, args.out, args)
    log("export", results["export"])
    del model, d
    evaluate(args, tok, device, results)
    results["total_seconds"] = round(time.time() - t_start, 1)
    dump(os.path.join(args.results, args.eval_file or "%s-eval.json" % args.name), results)
    log("done", results["total_seconds"])


if __name__ == "__main__":
    main()
