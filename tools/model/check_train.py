#!/usr/bin/env python3
"""Checks train.py's pure-torch parts on the CPU with a toy model: source weights,
weighted epochs and samples, length-bucketed embedding, hard-negative mining both
ways, the contrastive loop with re-mining and --stop-at, the loss's masks. Needs torch
only (no transformers/tokenizers), so it runs here without the GPU machine, e.g. with
Debian's python3-torch unpacked (not installed) under DIR:
  apt-get install --download-only -o Dir::Cache::archives=DIR/debs python3-torch
  for d in DIR/debs/*.deb; do dpkg-deb -x $d DIR/root; done
  LD_LIBRARY_PATH=$(find DIR/root -name '*.so*' -printf '%h\n' | sort -u | tr '\n' :) \
    PYTHONPATH=DIR/root/usr/lib/python3/dist-packages /usr/bin/python3 tools/model/check_train.py
"""
import argparse
import os
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import train as T  # noqa: E402

torch.manual_seed(0)
# weights
w = T.parse_weights("wordnet=3,package-summary=2,same-document=0.5")
kinds = ["names-gloss"] * 100 + ["package-summary"] * 50 + ["same-document"] * 200 + ["dict-definition"] * 30
wt = torch.tensor([T.kind_weight(k, w) for k in kinds])
print("weights", {k: T.kind_weight(k, w) for k in set(kinds)})
g = torch.Generator().manual_seed(0)
o = T.weighted_order(wt, g)
cnt = torch.bincount(o, minlength=len(kinds))
print("order len", o.numel(), "expected", float(wt.sum()))
assert (cnt[:100] == 3).all() and (cnt[100:150] == 2).all() and (cnt[350:] == 1).all()
assert set(cnt[150:350].tolist()) <= {0, 1}
s = T.weighted_sample(wt, 100, g)
assert s.unique().numel() == 100
print("sample share wordnet", (s < 100).float().mean().item(), "package", ((s >= 100) & (s < 150)).float().mean().item())
try:
    T.parse_weights("wordnet")
    raise AssertionError
except SystemExit as e:
    print("bad spec ->", e)

# toy BERT-like model
class Cfg: hidden_size = 16
class Toy(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.config = Cfg(); s.emb = torch.nn.Embedding(50, 16); s.lin = torch.nn.Linear(16, 16)
    def forward(s, input_ids, attention_mask):
        h = s.lin(s.emb(input_ids))
        # make each position depend on the whole (masked) sequence like attention would
        m = attention_mask.unsqueeze(-1).float()
        ctx = (h * m).sum(1, keepdim=True) / m.sum(1, keepdim=True)
        return types.SimpleNamespace(last_hidden_state=h + ctx)
model = Toy()
N, L = 400, 12
lens = torch.randint(2, L + 1, (N,))
ids = torch.randint(5, 50, (N, L)); ids[torch.arange(L)[None, :] >= lens[:, None]] = 0
e1 = T.embed(model, ids[:37], lens[:37]); e2 = T.embed_bucketed(model, ids[:37], lens[:37], 4)
print("bucketed max diff", (e1 - e2).abs().max().item()); assert (e1 - e2).abs().max() < 1e-5
# pairs
P = 300
pa = torch.randint(0, N, (P,)); pb = torch.randint(0, N, (P,)); pg = torch.arange(P) // 2
kinds = ["names-gloss"] * 150 + ["package-summary"] * 50 + ["same-document"] * 100
knames = sorted(set(kinds))
d = {"pa": pa, "pb": pb, "pg": pg, "kind": torch.tensor([knames.index(k) for k in kinds]),
     "weight": torch.tensor([T.kind_weight(k, w) for k in kinds]), "kind_names": knames, "ids": ids, "lens": lens}
hb, ha = T.mine_hard_negatives(model, ids, lens, pa, pb, pg, torch.arange(P), "cpu", both=True)
print("mined b", (hb >= 0).sum().item(), "mined a", (ha >= 0).sum().item())
assert ((hb < 0) | (hb != pb)).all() and ((ha < 0) | (ha != pa)).all()
args = argparse.Namespace(minutes=0.05, stop_at=0.0, lr_range="1,0.5", hard_negatives_at="0,0.5", texts="x",
                          hard_negative_sample=200, hard_negatives_both=1, batch=32, lr=1e-3, warmup=5,
                          max_steps=0, seed=0, temperature=0.05, length_buckets=4)
res = {}
T.contrastive_train(model, d, args, "cpu", res)
print({k: v for k, v in res["training"].items() if k != "curve"})
print([ {k: v for k, v in m.items()} for m in res["hard_negatives"]])
assert len(res["hard_negatives"]) == 2
# deadline
args.stop_at = time.time() + 1.0; args.minutes = 5; args.hard_negatives_at = "0.5"
t = time.time(); T.contrastive_train(model, d, args, "cpu", res); print("stop-at run took", round(time.time() - t, 2))
assert time.time() - t < 2.5
# loss masks: hard negative equal to own positive is masked (finite loss)
bi = torch.arange(8)
hard_b = pb.clone()  # every hard negative is the pair's own positive -> masked on the diagonal
loss = T.contrastive_loss(model, d, bi, hard_b, None, torch.arange(32), args, "cpu")
print("loss with self hard negatives", loss.item()); assert torch.isfinite(loss)
print("OK")
