#!/usr/bin/env python3
"""Summary of bench/gpu/fp8_device.sh: per model, bucket and batch, the CUDA
encoder's GPU time and share of the GEMM ceiling with fp16 and with fp8 GEMMs
side by side, the phases at the largest batch, and each precision's min cosine
against PyTorch fp32 (torch_vec_*.json) and against its in-process old path.
% ceiling: useful TFLOP/s over the larger of the cuBLAS fp16/bf16 GEMM
ceilings of the same process (the issue's yardstick, also for fp8).
  python3 bench/gpu/summarize_fp8.py OUT_DIR"""
import glob
import json
import os
import sys

out = sys.argv[1]
runs = {}  # (model, precision) -> enc json
for path in sorted(glob.glob(os.path.join(out, "enc_*_*.json"))):
    model, prec = os.path.basename(path)[4:-5].rsplit("_", 1)
    runs[(model, prec)] = json.load(open(path))


def phases(x):
    ph = x.get("phases_ms", {})
    tot = sum(ph.values()) or 1e-30
    return ", ".join("%s %.0f%%" % (k, 100 * v / tot) for k, v in ph.items())


for model in sorted({m for m, _ in runs}):
    precs = [p for p in ("fp16", "fp8", "fp8fast") if (model, p) in runs]
    print("\n## %s" % model)
    for p in precs:
        r = runs[(model, p)]
        c = r["gemm_ceiling_tflops"]
        tv = os.path.join(out, "torch_vec_%s_%s.json" % (model, p))
        cos = "not measured"
        if os.path.exists(tv):
            vc = json.load(open(tv)).get("vector_check", {})
            cos = ", ".join("%s %.7f" % (b, v["min_cos_ours_vs_torch_fp32"])
                            for b, v in vc.items())
        print("- %s: %s; ceiling fp16 %.0f / bf16 %.0f TFLOP/s; vs old fp16 path "
              "min cosine %.7f; vs PyTorch fp32 min cosine: %s" % (
                  p, r.get("device"), c["fp16"], c["bf16"],
                  r.get("baseline_vs_encoder_min_cosine", float("nan")), cos))
    print("\n| bucket | batch | " + " | ".join(
        "%s GPU ms | %s %% ceiling" % (p, p) for p in precs) +
        " | fp16/fp8 | fp16 phases | fp8 phases |")
    print("|---|---:|" + "---:|---:|" * len(precs) + "---:|---|---|")
    keyed = {p: {(x["bucket"], x["batch"]): x for x in runs[(model, p)]["runs"]
                 if x["impl"] == "zerovec-cuda"} for p in precs}
    for key in keyed[precs[0]]:
        cells, ms = [], {}
        for p in precs:
            x = keyed[p].get(key)
            if x is None:
                cells += ["-", "-"]
                continue
            ms[p] = x["gpu_ms"]
            cells += ["%.4f%s" % (x["gpu_ms"], " (graph)" if x.get("graph") else ""),
                      "%.1f %%" % (100 * x["fraction_of_gemm_ceiling_gpu"])]
        ratio = "%.2fx" % (ms["fp16"] / ms["fp8"]) if "fp16" in ms and "fp8" in ms else "-"
        x16 = keyed.get("fp16", {}).get(key, {})
        x8 = keyed.get("fp8", {}).get(key, {})
        print("| %s | %d | %s | %s | %s | %s |" % (
            key[0], key[1], " | ".join(cells), ratio, phases(x16), phases(x8)))
