#!/usr/bin/env python3
"""Markdown tables from the JSON files bench/gpu/run_device.sh leaves in one folder.

  python3 bench/gpu/summarize.py DIR      (standard library only; missing files are skipped)
"""
import json
import os
import sys

D = sys.argv[1]


def load(name):
    p = os.path.join(D, name)
    try:
        return json.load(open(p))
    except Exception:
        return None


def k(x):
    return "%.0f" % x if x >= 100 else "%.1f" % x if x >= 10 else "%.2f" % x


out = []
p = out.append
for label in ("minilm", "bge-base"):
    ours, torch_ = load("ours_%s.json" % label), load("torch_%s.json" % label)
    if not ours:
        p("\n(no results for %s)\n" % label)
        continue
    cfg = ours["config"]
    p("\n### %s shape (%d layers, hidden %d, %d heads, FFN %d)\n" % (
        label, cfg["layers"], cfg["hidden"], cfg["heads"], cfg["ffn"]))
    p("Our device: %s; sink %s. GEMM ceiling (cublasGemmEx 8192³, random data): fp16 %.0f, bf16 %.0f TFLOP/s%s." % (
        ours["device"], ours["sink"], ours["gemm_ceiling_tflops"]["fp16"], ours["gemm_ceiling_tflops"]["bf16"],
        "; PyTorch matmul: fp16 %.0f, bf16 %.0f" % (torch_["gemm_tflops_fp16"], torch_["gemm_tflops_bf16"])
        if torch_ and "gemm_tflops_fp16" in torch_ else ""))
    if torch_ and "vector_check" in torch_:
        vc = torch_["vector_check"]
        p("\nSame vectors (first %d texts a bucket): min cosine ours vs PyTorch fp16 %s; ours vs PyTorch fp32 %s; "
          "PyTorch fp16 vs fp32 %s → %s. Encoder vs its old path (unfused, no graphs): max |diff| %.2g, min cosine %.6f. Tokenizer vs reference ids: %d of %d differ%s.\n" % (
              max(c["n"] for c in vc.values()),
              " / ".join("%s %.5f" % (b, c["min_cos_ours_vs_torch_fp16"]) for b, c in vc.items()),
              " / ".join("%s %.5f" % (b, c["min_cos_ours_vs_torch_fp32"]) for b, c in vc.items()),
              " / ".join("%s %.5f" % (b, c["min_cos_torch_fp16_vs_fp32"]) for b, c in vc.items()),
              "PASS (≥ 0.999)" if torch_.get("vector_check_pass") else "FAIL",
              ours.get("baseline_vs_encoder_max_abs_diff", float("nan")),
              ours.get("baseline_vs_encoder_min_cosine", float("nan")),
              ours["tokenizer_check"]["mismatched"], ours["tokenizer_check"]["texts"],
              "; HF fast tokenizer: %d differ" % torch_["hf_tokenizer_mismatched"]
              if "hf_tokenizer_mismatched" in torch_ else ""))
    enc = {(r["bucket"], r["batch"]): r for r in ours["runs"] if r["impl"] == "zerovec-cuda"}
    e2e = {(r["bucket"], r["batch"]): r for r in ours["runs"]
           if r["impl"] == "zerovec-e2e" and r["max_batch_tokens"] == 16384}
    e2e_big = {(r["bucket"], r["batch"]): r for r in ours["runs"]
               if r["impl"] == "zerovec-e2e" and r["max_batch_tokens"] != 16384}
    tr = {(r["bucket"], r["batch"]): r for r in (torch_ or {}).get("runs", []) if r["impl"] == "torch-fp16-sdpa"}
    p("| texts | batch | ours GPU (events) sent/s | ours Encode() wall sent/s | PyTorch fp16 SDPA sent/s "
      "| **ratio GPU / PyTorch** | ratio Encode / PyTorch | ours tokens/s (Encode) | PyTorch tokens/s "
      "| ours e2e sent/s | PyTorch e2e sent/s | **ratio e2e** |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key, r in enc.items():
        t = tr.get(key)
        e = e2e.get(key)
        cells = [key[0], str(key[1]), k(r["sentences_per_s_gpu"]), k(r["sentences_per_s_wall"]),
                 k(t["sentences_per_s"]) if t else "–",
                 "**%.2f×**" % (r["sentences_per_s_gpu"] / t["sentences_per_s"]) if t else "–",
                 "%.2f×" % (r["sentences_per_s_wall"] / t["sentences_per_s"]) if t else "–",
                 "%.3g" % r["tokens_per_s_wall"], "%.3g" % t["tokens_per_s"] if t else "–",
                 k(e["sentences_per_s"]) if e else "–",
                 k(t["e2e_sentences_per_s"]) if t and "e2e_sentences_per_s" in t else "–",
                 "**%.2f×**" % (e["sentences_per_s"] / t["e2e_sentences_per_s"]) if e and t and "e2e_sentences_per_s" in t else "–"]
        p("| " + " | ".join(cells) + " |")
    if e2e_big:
        p("\nEnd to end with max_batch_tokens raised to hold the whole batch (default 16384): " + "; ".join(
            "%s×%d %s sent/s (default %s)" % (b, n, k(r["sentences_per_s"]), k(e2e[(b, n)]["sentences_per_s"]) if (b, n) in e2e else "–")
            for (b, n), r in e2e_big.items()) + ".")
    if "tokenize" in ours:
        p("\nTokenization alone (our C++ tokenizer, batch %d): " % next(iter(ours["tokenize"].values()))["batch"] + "; ".join(
            "%s %.1f ms on 1 thread, %.1f ms on %d" % (b, t["one_thread_ms"], t["parallel_ms"], t["threads"])
            for b, t in ours["tokenize"].items()) + ".")
    # Fraction of the ceiling at the largest batch.
    ceil = max(ours["gemm_ceiling_tflops"]["fp16"], ours["gemm_ceiling_tflops"]["bf16"])
    big = max(b for _, b in enc)
    p("\nBatch %d, useful (unpadded) model FLOPs over time, against the %.0f TFLOP/s GEMM ceiling:\n" % (big, ceil))
    p("| texts | model TFLOP | ours GPU ms | ours TFLOP/s | ours fraction | ours Encode() fraction | PyTorch ms | PyTorch TFLOP/s | PyTorch fraction |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (b, n), r in enc.items():
        if n != big:
            continue
        t = tr.get((b, n))
        tf = r["model_gflop"] / 1e3
        p("| %s | %.2f | %.1f | %.0f | %.1f%% | %.1f%% | %s | %s | %s |" % (
            b, tf, r["gpu_ms"], r["tflops_gpu"], 100 * r["fraction_of_gemm_ceiling_gpu"],
            100 * r["fraction_of_gemm_ceiling_wall"],
            "%.1f" % t["ms"] if t else "–", "%.0f" % (tf / (t["ms"] / 1e3)) if t else "–",
            "%.1f%%" % (100 * tf / (t["ms"] / 1e3) / ceil) if t else "–"))
    # Phases.
    ph_rows = [(b, n, r["phases_ms"]) for (b, n), r in enc.items() if "phases_ms" in r]
    if ph_rows:
        names = ["embeddings", "qkv", "attention", "out_proj_ln", "ffn_up_gelu", "ffn_down_ln", "pool"]
        p("\nWhere our GPU time goes (the encoder's phase timer: CUDA events after each phase of its non-graph "
          "pass, summed over layers; ms, share of the sum; GPU ms above is the graph replay for small batches):\n")
        p("| texts | batch | " + " | ".join(names) + " | sum ms | attention share |")
        p("|---|---:|" + "---:|" * (len(names) + 2))
        for b, n, ph in ph_rows:
            tot = sum(ph.values()) or 1e-30
            p("| %s | %d | " % (b, n) + " | ".join("%.3g (%.0f%%)" % (ph.get(x, 0), 100 * ph.get(x, 0) / tot) for x in names)
              + " | %.3g | %.0f%% |" % (tot, 100 * ph.get("attention", 0) / tot))
    if "gemm_shapes_tflops" in ours:
        p("\ncuBLAS alone on the encoder's GEMM shapes at batch %d (TFLOP/s): " % big + "; ".join(
            "%s: " % b + ", ".join("%s %.0f" % (x, v) for x, v in s.items()) for b, s in ours["gemm_shapes_tflops"].items()) + ".")
    comp = load("compile_%s.json" % label)
    if comp:
        rs = comp.get("runs", [])
        if rs:
            p("\ntorch.compile (default mode, dynamic=False): " + "; ".join(
                "%s×%d %s sent/s (eager in the same process %s; compile %.0f s; ours GPU %s → ratio %.2f×)" % (
                    r["bucket"], r["batch"], k(r["sentences_per_s"]), k(r["batch"] / (r["eager_ms_same_process"] / 1e3)),
                    r["compile_s"], k(enc[(r["bucket"], r["batch"])]["sentences_per_s_gpu"]),
                    enc[(r["bucket"], r["batch"])]["sentences_per_s_gpu"] / r["sentences_per_s"])
                for r in rs) + ".")
        if comp.get("compile_error"):
            p("\ntorch.compile error: `%s`" % comp["compile_error"])
    else:
        p("\ntorch.compile: not measured (time bound reached or not run; see logs).")

ing = [(lbl, load("ingest_%s.json" % lbl)) for lbl in ("minilm", "bge-base")]
if any(x for _, x in ing):
    p("\n### Ingest: text → vectors a reader can search\n")
    p("| model | texts | rows | chunk | zero-copy rows/s | conventional (protobuf + loopback gRPC + faiss add) rows/s | **ratio** | zero-copy: embed / reserve / commit ms | conventional: embed / build request / RPC (server handler) ms | request MB |")
    p("|---|---|---:|---:|---:|---:|---:|---|---|---:|")
    for lbl, x in ing:
        if not x:
            continue
        for c, ratio in x["ratio_zero_copy_over_conventional"].items():
            zc = [r for r in x["runs"] if r["path"] == "zero-copy" and str(r["chunk"]) == c]
            cv = [r for r in x["runs"] if r["path"] == "conventional-grpc" and str(r["chunk"]) == c]
            med = lambda rs, f: sorted(r[f] for r in rs)[len(rs) // 2]
            p("| %s | %s | %d | %s | %s | %s | **%.2f×** | %.0f / %.1f / %.1f | %.0f / %.0f / %.0f (%.0f) | %.1f |" % (
                lbl, x["bucket"], x["rows"], c, k(x["median_rows_per_s"]["zero-copy/" + c]),
                k(x["median_rows_per_s"]["conventional-grpc/" + c]), ratio,
                med(zc, "embed_ms"), med(zc, "reserve_ms"), med(zc, "setid_commit_ms"),
                med(cv, "embed_ms"), med(cv, "build_request_ms"), med(cv, "rpc_ms"), med(cv, "server_handler_ms"),
                med(cv, "request_bytes") / 1e6))
        p("\n%s: sink `%s`; gRPC %s, protobuf %s; writer-commit→reader-seen %s µs (median)." % (
            lbl, x["runs"][0].get("sink", "?"), x.get("grpc_version"), x.get("protobuf_version"),
            "%.0f" % sorted(r["writer_done_to_reader_seen_us"] for r in x["runs"] if r["path"] == "zero-copy")[
                len([r for r in x["runs"] if r["path"] == "zero-copy"]) // 2]))
print("\n".join(out))
