#!/usr/bin/env python3
"""CPU emulation of the CUDA encoder's FP8 (e4m3) GEMMs, to choose which GEMMs and
layers may run in e4m3 before spending GPU time (issue 14).

A random BERT of the bge-base or MiniLM shape (weights drawn as
tools/model/random_checkpoint.py draws them: uniform, std 0.02; LayerNorm gamma 1 +- 0.1;
biases +- 0.02; but from torch's generator, so not the same values as
bench/gpu/make_checkpoint.py) runs in float64 on the ids of bench/gpu/texts.jsonl, once
exactly and once per setting with the selected GEMMs' inputs and weights rounded to e4m3
with the encoder's scales (weights: per-tensor amax; activations: the static bounds of
embed/cuda_fp8.cuh with its 1.1 margins). Prints the min cosine of the mean-pooled,
normalised vectors per bucket and setting. Checked against the GPU once: all three GEMMs
in every layer, bge-base shape, 64 short texts: 0.99803-0.99871 here over three random
draws, 0.99868 measured on an H100 (2026-12-05, make_checkpoint.py's values).

  python3 bench/gpu/fp8_emulate.py --shape bge --texts 64 --buckets short \
      --settings all qkv,up,down:6-11 up,down:3-11
A setting is GEMMS[:LAYERS] (GEMMS: all or a comma list of qkv, up, down; LAYERS as
ZV_CUDA_FP8_LAYERS: 6-11 or 0,2,4-5; default every layer). Needs torch (Debian's will
do, see tools/model/README.md), no GPU.
"""
import argparse
import json
import math
import os

import torch

SHAPES = {"bge": (768, 12, 12, 3072), "minilm": (384, 6, 12, 1536)}
E4M3_MAX = 448.0
W_SCALE = 0.0346410161513775  # uniform [-1, 1) times this: std 0.02


def e4m3(v):
    """Round to the nearest e4m3 value (ties to even), saturating at 448."""
    a = v.abs().clamp(max=E4M3_MAX)
    e = torch.floor(torch.log2(a.clamp(min=1e-30))).clamp(min=-6)  # subnormals
    step = torch.pow(2.0, e - 3)
    return (torch.sign(v) * torch.round(a / step) * step).clamp(-E4M3_MAX, E4M3_MAX)


def parse_setting(text, layers):
    gemms, _, lay = text.partition(":")
    g = {"qkv", "up", "down"} if gemms == "all" else set(gemms.split(","))
    if not g <= {"qkv", "up", "down"}:
        raise SystemExit("unknown GEMM in " + text)
    sel = set()
    for item in (lay.split(",") if lay else ["0-%d" % (layers - 1)]):
        lo, _, hi = item.partition("-")
        sel.update(range(int(lo), int(hi or lo) + 1))
    return g, sel


class Model:
    def __init__(self, shape, vocab, seed):
        self.h, self.layers, self.heads, self.f = SHAPES[shape]
        h, f = self.h, self.f
        gen = torch.Generator().manual_seed(seed)

        def u(*shape, s):
            return (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1) * s

        self.emb = dict(word=u(vocab, h, s=W_SCALE), pos=u(512, h, s=W_SCALE),
                        typ=u(h, s=W_SCALE), g=1 + u(h, s=0.1), b=u(h, s=0.02))
        self.ly = [dict(qkv_w=u(3 * h, h, s=W_SCALE), qkv_b=u(3 * h, s=0.02),
                        o_w=u(h, h, s=W_SCALE), o_b=u(h, s=0.02), g1=1 + u(h, s=0.1),
                        b1=u(h, s=0.02), i_w=u(f, h, s=W_SCALE), i_b=u(f, s=0.02),
                        d_w=u(h, f, s=W_SCALE), d_b=u(h, s=0.02), g2=1 + u(h, s=0.1),
                        b2=u(h, s=0.02)) for _ in range(self.layers)]

        def qw(w):
            q = E4M3_MAX / w.abs().max()
            return e4m3(w * q) / q

        self.w8 = [dict(qkv=qw(l["qkv_w"]), i=qw(l["i_w"]), d=qw(l["d_w"])) for l in self.ly]

    def ln_elem_bound(self, g, b):
        return (g.abs() * math.sqrt(self.h) + b.abs()).max().item()

    def ln_norm_bound(self, g, b):
        return g.abs().max().item() * math.sqrt(self.h) + b.norm().item()

    @staticmethod
    def ln(x, g, b):
        m = x.mean(-1, keepdim=True)
        v = ((x - m) ** 2).mean(-1, keepdim=True)
        return (x - m) / torch.sqrt(v + 1e-12) * g + b

    def forward(self, ids, gemms=frozenset(), layers=frozenset()):
        h, t = self.h, len(ids)
        gelu = lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
        x = self.ln(self.emb["word"][ids] + self.emb["pos"][:t] + self.emb["typ"],
                    self.emb["g"], self.emb["b"])
        in_bound = 1.1 * self.ln_elem_bound(self.emb["g"], self.emb["b"])
        for i, l in enumerate(self.ly):
            on = gemms if i in layers else set()
            if "qkv" in on:
                q = E4M3_MAX / in_bound
                qkv = (e4m3(x * q) / q) @ self.w8[i]["qkv"].T + l["qkv_b"]
            else:
                qkv = x @ l["qkv_w"].T + l["qkv_b"]
            dh = h // self.heads
            qh, kh, vh = (m.view(t, self.heads, dh).transpose(0, 1) for m in qkv.split(h, -1))
            att = torch.softmax(qh @ kh.transpose(1, 2) / math.sqrt(dh), -1) @ vh
            x = self.ln(x + att.transpose(0, 1).reshape(t, h) @ l["o_w"].T + l["o_b"],
                        l["g1"], l["b1"])
            if "up" in on:
                q1 = E4M3_MAX / (1.1 * self.ln_elem_bound(l["g1"], l["b1"]))
                mid = gelu((e4m3(x * q1) / q1) @ self.w8[i]["i"].T + l["i_b"])
            else:
                mid = gelu(x @ l["i_w"].T + l["i_b"])
            if "down" in on:
                xn = 1.1 * self.ln_norm_bound(l["g1"], l["b1"])
                bound = 1.1 * max(0.17, (l["i_w"].norm(dim=1) * xn + l["i_b"].abs()).max().item())
                qd = E4M3_MAX / bound
                y = (e4m3(mid * qd) / qd) @ self.w8[i]["d"].T + l["d_b"]
            else:
                y = mid @ l["d_w"].T + l["d_b"]
            x = self.ln(x + y, l["g2"], l["b2"])
            in_bound = 1.1 * self.ln_elem_bound(l["g2"], l["b2"])
        v = x.mean(0)
        return v / v.norm()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="bge")
    ap.add_argument("--texts", type=int, default=64, help="texts a bucket")
    ap.add_argument("--buckets", default="short,medium,long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--settings", nargs="+", default=["all"])
    ap.add_argument("--out", help="JSON file for the results")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    rows = [json.loads(l) for l in open(os.path.join(here, "texts.jsonl"))]
    model = Model(args.shape, max(max(r["ids"]) for r in rows) + 1, args.seed)
    res = {}
    for bucket in args.buckets.split(","):
        seqs = [r["ids"] for r in rows if r["bucket"] == bucket][:args.texts]
        ref = [model.forward(s) for s in seqs]
        for setting in args.settings:
            g, lay = parse_setting(setting, model.layers)
            c = min(float(r @ model.forward(s, g, lay)) for r, s in zip(ref, seqs))
            res.setdefault(setting, {})[bucket] = c
            print("%-7s %-24s min cosine vs exact %.6f" % (bucket, setting, c), flush=True)
    if args.out:
        json.dump(dict(vars(args), results=res), open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
