import json, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ours_*.json"))):
    d = json.load(open(f))
    print("==", d["label"], "|", d.get("device"), "| mirror==encoder:", d.get("mirror_matches_encoder"))
    for r in d["runs"]:
        if r["impl"] == "zerovec-cuda":
            ph = r.get("phases_ms", {})
            tot = sum(ph.values()) or 1
            att = ph.get("attention", 0)
            gem = sum(v for k, v in ph.items() if k.startswith("gemm"))
            L = r["tokens"] / r["batch"]
            fl = 4.0 * d["config"]["hidden"] * d["config"]["layers"]
            print(f'{r["bucket"]:6s} B={r["batch"]:5d} gpu {r["gpu_ms"]:8.2f} ms {r["sentences_per_s_gpu"]:9.0f} sent/s  wall {r["sentences_per_s_wall"]:9.0f} sent/s | phases {tot:7.2f} ms: attention {att:7.2f} ms ({100*att/tot:4.1f}%)  gemms {gem:6.2f} ms')
        elif r["impl"] == "zerovec-e2e":
            print(f'  e2e mbt={r["max_batch_tokens"]} {r["bucket"]:6s} B={r["batch"]} {r["sentences_per_s"]:9.0f} sent/s')
