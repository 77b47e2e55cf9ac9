#!/usr/bin/env python3
"""Issue 14's torch.compile table: our CUDA encoder (gpu_embed_bench JSON) against
torch.compile in default and reduce-overhead modes (torch_gpu_bench --compile-only JSON),
per bucket x batch, with the ratio to the better mode and, where the ratio is under the
bar, the encoder phase that takes the largest share (its own phase timer).

  python3 bench/gpu/summarize_compile.py OURS.json COMPILE.json [--bar 1.5]
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("compiled")
    ap.add_argument("--bar", type=float, default=1.5)
    a = ap.parse_args()
    ours = {(r["bucket"], r["batch"]): r for r in json.load(open(a.ours))["runs"]}
    comp = json.load(open(a.compiled))
    by = {}
    for r in comp.get("runs", []):
        by.setdefault((r["bucket"], r["batch"]), {})[r.get("mode", "default")] = r
    print("| texts | batch | ours GPU ms | eager ms | compile default ms | compile reduce-overhead ms "
          "| ours / best compiled | bounding phase (ours) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    missed = 0
    for key in sorted(ours, key=lambda k: (["short", "medium", "long"].index(k[0]), k[1])):
        o = ours[key]
        modes = by.get(key, {})
        ms = {m: r["ms"] for m, r in modes.items()}
        eager = min((r["eager_ms_same_process"] for r in modes.values()), default=None)
        best = min(ms.values()) if ms else None
        ratio = best / o["gpu_ms"] if best else None
        phase = ""
        if ratio is not None and ratio < a.bar:
            missed += 1
            ph = o.get("phases_ms") or {}
            tot = sum(ph.values())
            if tot:
                top = sorted(ph.items(), key=lambda kv: -kv[1])[:2]
                phase = ", ".join("%s %.0f%%" % (k, 100 * v / tot) for k, v in top)
            else:
                phase = "(no phase timing at this batch)"
        f = lambda v: "%.4g" % v if v is not None else "n/m"
        print("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
            key[0], key[1], f(o["gpu_ms"]), f(eager), f(ms.get("default")), f(ms.get("reduce-overhead")),
            ("**%.2f×**" % ratio) if ratio is not None else "n/m", phase))
    for m, e in comp.get("compile_errors", {}).items():
        print("\ncompile error (%s): `%s`" % (m, e))
    print("\npoints under %.1f×: %d" % (a.bar, missed))


if __name__ == "__main__":
    main()
