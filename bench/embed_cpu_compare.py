#!/usr/bin/env python3
"""CPU encoder (embed::Embedder, device cpu) vs PyTorch on the CPU, same weights.

  /usr/bin/python3 bench/embed_cpu_compare.py [--threads 1,2] [--reps 7] [--texts 32]
      [--precisions fp32,bf16]

Runs from the repository root after `bazel build --jobs=2 //bench:cpu_embed_bench`.
Needs Debian's python3-torch and python3-numpy (no transformers, no safetensors
package: the checkpoint is parsed with numpy and the model is a minimal BertModel
forward in torch.nn.functional, eager, as transformers' BertModel computes it).

The model is tools/model/random_checkpoint.py's deterministic all-MiniLM-L6-v2-shaped
checkpoint (6 layers, hidden 384, 12 heads, FFN 1536, vocab 30522). The texts are
"medium": 44-83 common words, about 64 tokens on average. Both sides embed the same
texts; torch gets token ids from tools/model/bert_ref_tokenizer.py (the reference the
C++ tokenizer is tested against), padded per batch to the batch's longest text, mean
pooled over the mask and L2-normalised. Before timing, every C++ vector must have
cosine >= 0.999 with torch's.

One rep embeds all texts once in consecutive batches of the batch size (so batch 1
and batch 32 do the same work); the figure is the median of --reps reps after two
warm-up reps. The C++ time includes its tokenizer, the torch time does not (ids are
prepared outside the timed region). Threads: cpu_embed_bench --threads for C++ (its
pool; OpenBLAS single-threaded inside it), torch.set_num_threads for torch.

Precisions: each of --precisions is one cpu_embed_bench run (--precision fp32 | bf16 |
auto; bf16 = bf16 GEMM inputs, fp32 accumulation, refused on CPUs without AVX512-BF16/AMX
and then left out of the table). Torch is timed twice: float32 eager (the reference every
C++ vector is checked against, whatever its precision) and eager under
torch.autocast("cpu", dtype=torch.bfloat16) (linear layers and matmuls in bf16, as the C++
bf16 path), so a bf16 C++ figure can be read against both.

Prints a markdown table (and writes it to --out).
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tools", "model"))
from bert_ref_tokenizer import RefTokenizer  # noqa: E402

WORDS = ("the of and to in is was for on with as by at from his an were are which "
         "this be has had it one their first after new who they two her she been "
         "other when time during year city school team world film music river house "
         "system water history series season league album war state people family "
         "church game group road station").split()


def medium_text(i):
    n = 44 + (i * 37) % 40
    return " ".join(WORDS[(i * 131 + j * 17) % 64] for j in range(n)) + "."


def load_safetensors(path):
    with open(path, "rb") as fh:
        (hlen,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(hlen))
        blob = fh.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        assert meta["dtype"] == "F32", (name, meta["dtype"])
        a, b = meta["data_offsets"]
        arr = np.frombuffer(blob, dtype="<f4", count=(b - a) // 4, offset=a)
        out[name] = torch.from_numpy(arr.reshape(meta["shape"]).copy())
    return out


class Bert:
    """BertModel (absolute positions, token type 0, GELU erf) + mean pooling + L2."""

    def __init__(self, w, cfg):
        self.w, self.h, self.heads = w, cfg["hidden_size"], cfg["num_attention_heads"]
        self.layers, self.eps = cfg["num_hidden_layers"], cfg["layer_norm_eps"]

    def __call__(self, ids, mask):
        w, h, nh = self.w, self.h, self.heads
        b, L = ids.shape
        d = h // nh
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:L]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = F.layer_norm(x, (h,), w["embeddings.LayerNorm.weight"],
                         w["embeddings.LayerNorm.bias"], self.eps)
        bias = (1.0 - mask)[:, None, None, :] * torch.finfo(torch.float32).min
        for l in range(self.layers):
            p = "encoder.layer.%d." % l

            def lin(t, name):
                return F.linear(t, w[p + name + ".weight"], w[p + name + ".bias"])

            def heads(t):
                return t.view(b, L, nh, d).transpose(1, 2)

            q = heads(lin(x, "attention.self.query"))
            k = heads(lin(x, "attention.self.key"))
            v = heads(lin(x, "attention.self.value"))
            s = torch.matmul(q, k.transpose(-1, -2)) / (d ** 0.5) + bias
            c = torch.matmul(s.softmax(-1), v).transpose(1, 2).reshape(b, L, h)
            x = F.layer_norm(lin(c, "attention.output.dense") + x, (h,),
                             w[p + "attention.output.LayerNorm.weight"],
                             w[p + "attention.output.LayerNorm.bias"], self.eps)
            f = lin(F.gelu(lin(x, "intermediate.dense")), "output.dense")
            x = F.layer_norm(f + x, (h,), w[p + "output.LayerNorm.weight"],
                             w[p + "output.LayerNorm.bias"], self.eps)
        m = mask.unsqueeze(-1)
        pooled = (x * m).sum(1) / m.sum(1)
        return F.normalize(pooled, dim=-1)


def pad(seqs):
    L = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), L, dtype=torch.long)
    mask = torch.zeros(len(seqs), L, dtype=torch.float32)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return ids, mask


def cpu_model():
    """The CPU's model name and its bf16/AMX flags, from /proc/cpuinfo."""
    name, flags = "unknown", []
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name == "unknown":
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = [f for f in value.split() if f.startswith(("avx512_bf16", "amx"))]
    return name + (" [%s]" % " ".join(flags) if flags else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--texts", type=int, default=32)
    ap.add_argument("--work", default="/tmp/zv_embed_cpu_bench")
    ap.add_argument("--bin", default=os.path.join(REPO, os.environ.get("BIN", "bazel-out/k8-fastbuild/bin"), "bench/cpu_embed_bench"))
    ap.add_argument("--out", default="/tmp/zv_embed_cpu_bench/table.md")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--no-torch-bf16", action="store_true")
    args = ap.parse_args()

    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "minilm_random")
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        subprocess.check_call([sys.executable, os.path.join(REPO, "tools/model/random_checkpoint.py"),
                               "--out", model])
    cfg = json.load(open(os.path.join(model, "config.json")))
    texts = [medium_text(i) for i in range(args.texts)]
    texts_path = os.path.join(args.work, "texts.txt")
    with open(texts_path, "w") as fh:
        fh.write("\n".join(texts) + "\n")
    tok = RefTokenizer(os.path.join(model, "vocab.txt"))
    seqs = [tok.encode(t, 256) for t in texts]
    ntok = sum(len(s) for s in seqs)
    bert = Bert(load_safetensors(os.path.join(model, "model.safetensors")), cfg)
    batches = [int(x) for x in args.batches.split(",")]
    padded = {b: [pad(seqs[i:i + b]) for i in range(0, len(seqs), b)] for b in batches}

    def time_torch(b, autocast):
        def one_pass():
            for ids, mask in padded[b]:
                bert(ids, mask)
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            for _ in range(2):
                one_pass()
            ts = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                one_pass()
                ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    ref_batches = padded[32 if 32 in padded else batches[-1]]
    with torch.inference_mode():
        ref = torch.cat([bert(ids, mask) for ids, mask in ref_batches])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            ref16 = torch.cat([bert(ids, mask).float() for ids, mask in ref_batches])
    torch_bf16_cos = float(F.cosine_similarity(ref, ref16, dim=-1).min())

    rows, failed = [], []
    for threads in [int(x) for x in args.threads.split(",")]:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
        torch.set_num_threads(threads)
        torch_s = {b: time_torch(b, False) for b in batches}
        torch16_s = {} if args.no_torch_bf16 else {b: time_torch(b, True) for b in batches}
        for prec in args.precisions.split(","):
            cpp_json = os.path.join(args.work, "cpp_t%d_%s.json" % (threads, prec))
            vec_path = os.path.join(args.work, "cpp_t%d_%s.f32" % (threads, prec))
            load = os.getloadavg()
            rc = subprocess.call([args.bin, "--model", model, "--texts", texts_path, "--out", cpp_json,
                                  "--vectors-out", vec_path, "--batches", args.batches,
                                  "--reps", str(args.reps), "--threads", str(threads),
                                  "--precision", prec], env=env)
            if rc != 0:
                print("C++ --precision %s: exit %d (left out)" % (prec, rc), file=sys.stderr)
                continue
            cpp = json.load(open(cpp_json))
            got = torch.from_numpy(np.fromfile(vec_path, dtype=np.float32).reshape(len(texts), -1))
            min_cos = float(F.cosine_similarity(ref, got, dim=-1).min())
            if min_cos < 0.999:  # reported in the table, and the exit status
                print("vectors differ (%s): min cosine %.6f < 0.999" % (prec, min_cos),
                      file=sys.stderr)
                failed.append(prec)
            for r in cpp["results"]:
                b = r["batch"]
                c, t = r["median_pass_s"], torch_s[b]
                t16 = torch16_s.get(b)
                rows.append((threads, b, cpp["device"], len(texts) / c, ntok / c, len(texts) / t,
                             len(texts) / t16 if t16 else float("nan"), t / c,
                             t16 / c if t16 else float("nan"), min_cos, load[0]))
                print("threads %d batch %d %s: C++ %.1f sent/s, torch fp32 %.1f, C++/torch %.2fx, "
                      "min cos %.6f" % (threads, b, prec, len(texts) / c, len(texts) / t, t / c, min_cos),
                      file=sys.stderr)

    lines = ["| threads | batch | ZeroVec C++ (device string) | C++ sent/s | C++ tokens/s "
             "| torch fp32 sent/s | torch bf16-autocast sent/s | C++ / torch fp32 "
             "| C++ / torch bf16 | min cosine C++ vs torch fp32 | load avg (1 min) |",
             "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for th, b, dev, cs, ct, ts, ts16, ratio, ratio16, mc, ld in rows:
        lines.append("| %d | %d | %s | %.1f | %.0f | %.1f | %.1f | %.2fx | %.2fx | %.6f | %.2f |"
                     % (th, b, dev, cs, ct, ts, ts16, ratio, ratio16, mc, ld))
    lines.append("")
    lines.append("%d texts, %d tokens (%.1f a text incl. [CLS]/[SEP]); torch %s eager, float32 and "
                 "bf16 autocast (min cosine torch bf16 vs torch fp32 %.6f); numpy %s; %d reps, "
                 "median; CPU: %s." % (
                     len(texts), ntok, ntok / len(texts), torch.__version__, torch_bf16_cos,
                     np.__version__, args.reps, cpu_model()))
    table = "\n".join(lines)
    print(table)
    with open(args.out, "w") as fh:
        fh.write(table + "\n")
    if failed:
        sys.exit("min cosine < 0.999 for: %s" % ", ".join(sorted(set(failed))))


if __name__ == "__main__":
    main()
