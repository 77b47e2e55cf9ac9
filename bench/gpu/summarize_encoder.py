#!/usr/bin/env python3
"""Summary of bench/gpu/cudaenc_device.sh: per model and encoder path, GPU time
per bucket x batch (the encoder's own events), share of the GEMM ceiling,
graph replay or not, and the phase split.
  python3 bench/gpu/summarize_encoder.py OUT_DIR"""
import glob
import json
import os
import sys

out = sys.argv[1]
for path in sorted(glob.glob(os.path.join(out, "enc_*.json"))):
    r = json.load(open(path))
    ceil = max(r["gemm_ceiling_tflops"]["fp16"], r["gemm_ceiling_tflops"]["bf16"])
    print("\n## %s — %s" % (os.path.basename(path), r.get("encoder_options", "?")))
    print("device: %s" % r.get("device"))
    print("vs old path in-process: max |diff| %.3g, min cosine %.7f; GEMM ceiling %.0f TFLOP/s" % (
        r.get("baseline_vs_encoder_max_abs_diff", float("nan")),
        r.get("baseline_vs_encoder_min_cosine", float("nan")), ceil))
    print("| bucket | batch | GPU ms | Encode wall ms | TFLOP/s | % ceiling | graph | phases (ms, non-graph pass) |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for x in r["runs"]:
        if x["impl"] != "zerovec-cuda":
            continue
        ph = x.get("phases_ms", {})
        tot = sum(ph.values()) or 1e-30
        phs = ", ".join("%s %.3g (%.0f%%)" % (k, v, 100 * v / tot) for k, v in ph.items())
        print("| %s | %d | %.4f | %.4f | %.1f | %.1f%% | %s | %s |" % (
            x["bucket"], x["batch"], x["gpu_ms"], x["encode_wall_ms"], x["tflops_gpu"],
            100 * x["fraction_of_gemm_ceiling_gpu"], "yes" if x.get("graph") else "no", phs))
