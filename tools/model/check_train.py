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

# packed_bert: one packed pass equals each text alone in its own padded row
import packed_bert as PB  # noqa: E402
def bert_like(vocab=60, H=32, heads=4, layers=2, ffn=64, positions=128):
    """Random tensors in BertModel's state-dict names, built by packed_bert.bert_from_tensors."""
    t = {"embeddings.word_embeddings.weight": torch.randn(vocab, H),
         "embeddings.position_embeddings.weight": torch.randn(positions, H),
         "embeddings.token_type_embeddings.weight": torch.randn(2, H)}

    def ln(n):
        t[n + ".weight"] = 1 + 0.1 * torch.randn(H); t[n + ".bias"] = 0.1 * torch.randn(H)

    def lin(n, i, o):
        t[n + ".weight"] = torch.randn(o, i) / i ** 0.5; t[n + ".bias"] = 0.1 * torch.randn(o)

    ln("embeddings.LayerNorm")
    for l in range(layers):
        p = "encoder.layer.%d." % l
        for n in ("query", "key", "value"):
            lin(p + "attention.self." + n, H, H)
        lin(p + "attention.output.dense", H, H); ln(p + "attention.output.LayerNorm")
        lin(p + "intermediate.dense", H, ffn); lin(p + "output.dense", ffn, H); ln(p + "output.LayerNorm")
    cfg = {"hidden_size": H, "num_attention_heads": heads, "num_hidden_layers": layers, "layer_norm_eps": 1e-12}
    return PB.bert_from_tensors(t, cfg)


row_of, off_of, rows = PB.pack([128, 1, 127, 64, 64, 3, 60, 5])
print("pack", row_of.tolist(), off_of.tolist(), rows)
assert rows == 4 and row_of[0] != row_of[2] and row_of[1] == row_of[2]  # 452 tokens: 4 rows
ln_chk = torch.randint(1, 129, (5000,))
r, o, nrows = PB.pack(ln_chk.numpy())
end = torch.from_numpy(o) + ln_chk
assert int(end.max()) <= 128
occ = torch.zeros(nrows * 128, dtype=torch.int32)
for i in range(5000):
    occ[r[i] * 128 + o[i]: r[i] * 128 + o[i] + int(ln_chk[i])] += 1
assert int(occ.max()) == 1, "texts overlap"
print("pack 5000 texts: rows", nrows, "fill %.3f" % (float(ln_chk.sum()) / (nrows * 128)))
t = time.time(); PB.pack(torch.randint(3, 40, (16384,)).numpy()); print("pack 16384: %.1f ms" % (1e3 * (time.time() - t)))

bert = bert_like()
pbm = PB.PackedBert(bert, use_sdpa=False).eval()
N2 = 300
lens2 = torch.randint(1, 129, (N2,)); lens2[:200] = torch.randint(1, 20, (200,))
ids2 = torch.randint(5, 60, (N2, 128))
idx = torch.randperm(N2)[:257]


def alone(b, ids_, lens_):  # each text alone in its own row
    out = []
    for i in range(len(lens_)):
        L_ = int(lens_[i])
        h = pbm(ids_[i:i + 1, :L_].long(), torch.arange(L_)[None, :], torch.zeros(1, L_, dtype=torch.long))
        out.append(torch.nn.functional.normalize(h[0].mean(0), dim=-1))
    return torch.stack(out)


diff = PB.check_against_bert(pbm, alone, ids2, lens2, idx, tol=1e-4)
print("packed vs alone max diff %.2g" % diff)
try:  # the check does fail on a wrong reference
    PB.check_against_bert(pbm, lambda b, i_, l_: alone(b, i_, l_).roll(1, 0), ids2, lens2, idx)
    raise AssertionError("check_against_bert passed a wrong reference")
except RuntimeError as e:
    print("wrong reference ->", str(e)[:60])
# gradients flow through the packed pass (training mode, dropout on)
pbm.train()
e = PB.embed_packed(pbm, ids2, lens2, idx)
e.sum().backward()
assert bert.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0
print("packed OK")

# packed MLM loss: the head on the masked tokens only equals the head on every token
pbm.eval()
head = torch.nn.Linear(32, 60)
inp = torch.randint(5, 60, (6, 40))
lab = torch.full((6, 40), -100); pick = torch.rand(6, 40) < 0.15; lab[pick] = inp[pick]
got = PB.mlm_loss(pbm, head, inp, lab)
full = head(pbm(inp, torch.arange(40)[None, :], None))
ref = torch.nn.functional.cross_entropy(full.reshape(-1, 60), lab.reshape(-1), ignore_index=-100)
print("mlm loss packed %.6f full %.6f" % (float(got), float(ref))); assert abs(float(got) - float(ref)) < 1e-5
print("packed MLM OK")
