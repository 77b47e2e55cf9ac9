#!/usr/bin/env python3
"""PyTorch side of the GPU embedding benchmark (bench/RESULTS.md, "GPU (H200)").

Uses bench/torch_embed_bench.py's pieces unchanged (BertModel fp16 + SDPA, padded per
batch, mean pooling + normalise, CUDA-event timing, GEMM ceiling) on the ids of
bench/gpu/texts.jsonl, with the same batch sizes and repetition counts as
bench/gpu/gpu_embed_bench.cc, and adds:
  * the vector check: cosine of our CUDA encoder's vectors (--ours-vectors, written by
    gpu_embed_bench) against PyTorch fp16 and against PyTorch fp32, per text;
  * end to end: BertTokenizerFast on the texts + forward + copy to the host (wall);
  * --compile-only: torch.compile (dynamic=False) in each of --modes ("default",
    "reduce-overhead") at a few points (--points all: short/medium/long x 1, 32, 256, 4096),
    each recorded as soon as it is measured (the caller bounds the time with `timeout`).

  python3 bench/gpu/torch_gpu_bench.py --model DIR --label NAME --texts FILE \
      --ours-vectors FILE --out FILE.json [--compile-only --points medium:256,long:4096]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoTokenizer, BertModel, BertTokenizerFast

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_embed_bench import cuda_time_ms, embed, gemm_ceiling, make_batch  # noqa: E402


def reps_for(bs):
    return 5 if bs >= 4096 else 10 if bs >= 256 else 20


def load(model_dir, dtype):
    m = BertModel.from_pretrained(model_dir, attn_implementation="sdpa", add_pooling_layer=False)
    return (m.half() if dtype == torch.float16 else m.float()).cuda().eval()


def make_tokenizer(model_dir):
    """The fast (Rust) tokenizer a transformers user gets for this folder."""
    errors = []
    try:
        t = AutoTokenizer.from_pretrained(model_dir)
        return t, "AutoTokenizer -> %s (is_fast=%s)" % (type(t).__name__, getattr(t, "is_fast", None))
    except Exception as e:
        errors.append("AutoTokenizer: %r" % (e,))
    try:
        t = BertTokenizerFast(vocab_file=os.path.join(model_dir, "vocab.txt"), do_lower_case=True)
        return t, "BertTokenizerFast(vocab_file)"
    except Exception as e:
        errors.append("BertTokenizerFast: %r" % (e,))
    return None, "; ".join(errors)[:600]


def measure_ceiling_and_tokenizer(args, res, buckets, texts):
    res["gemm_tflops_fp16"] = gemm_ceiling(torch.float16)
    res["gemm_tflops_bf16"] = gemm_ceiling(torch.bfloat16)
    print("torch GEMM 8192^3: fp16 %.0f, bf16 %.0f TFLOP/s" % (res["gemm_tflops_fp16"], res["gemm_tflops_bf16"]),
          flush=True)
    tok, res["hf_tokenizer"] = make_tokenizer(args.model)
    print("tokenizer:", res["hf_tokenizer"], flush=True)
    if tok is not None:
        mism = 0
        for b in buckets:
            enc = tok(texts[b], truncation=True, max_length=256)["input_ids"]
            mism += sum(1 for x, y in zip(enc, buckets[b]) if list(x) != list(y))
        res["hf_tokenizer_mismatched"] = mism
        print("HF tokenizer: %d texts differ from the reference ids" % mism, flush=True)


def compile_points(args, model, buckets, res, save):
    """torch.compile per mode and point; a failure is recorded per mode, not hidden."""
    import torch._dynamo as dynamo
    # One graph per static shape: 12 points would pass dynamo's default recompile limit (8)
    # and silently fall back to eager.
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(dynamo.config, name):
            setattr(dynamo.config, name, 256)
    points = args.points
    if points == "all":
        points = ",".join("%s:%d" % (b, n) for b in ("short", "medium", "long") for n in (1, 32, 256, 4096))
    t0 = time.time()
    for mode in args.modes.split(","):
        dynamo.reset()
        try:
            # The whole embedding (model + pooling + normalise), as a user would compile it.
            compiled = torch.compile(lambda i, m: embed(model, i, m), mode=mode, dynamic=False)
            with torch.inference_mode():
                for point in points.split(","):
                    bucket, bs = point.split(":")
                    bs = int(bs)
                    seqs = buckets[bucket]
                    batch = [seqs[i % len(seqs)] for i in range(bs)]
                    ids, mask = make_batch(batch, "cuda")
                    tokens = sum(len(s) for s in batch)
                    tc = time.time()
                    for _ in range(3):  # compiles this shape (reduce-overhead records its graph on a later call)
                        compiled(ids, mask)
                    torch.cuda.synchronize()
                    compile_s = time.time() - tc
                    ms = cuda_time_ms(lambda: compiled(ids, mask), reps_for(bs), warmup=2)
                    eager = cuda_time_ms(lambda: embed(model, ids, mask), reps_for(bs))
                    res["runs"].append({"impl": "torch-compile-fp16", "mode": mode, "bucket": bucket, "batch": bs,
                                        "ms": ms, "eager_ms_same_process": eager,
                                        "sentences_per_s": bs / (ms / 1e3),
                                        "tokens_per_s": tokens / (ms / 1e3), "compile_s": compile_s})
                    print(json.dumps(res["runs"][-1]), flush=True)
                    save()
        except Exception as e:  # recorded, not hidden
            res.setdefault("compile_errors", {})[mode] = repr(e)[:800]
            print("compile error (%s):" % mode, repr(e)[:800], flush=True)
        res["compile_total_s"] = time.time() - t0
        save()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--texts", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ours-vectors")
    ap.add_argument("--batches", default="1,32,256,4096")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--points", default="medium:256,long:4096",
                    help="bucket:batch list, or 'all' (short/medium/long x 1,32,256,4096)")
    ap.add_argument("--modes", default="default",
                    help="torch.compile modes, comma-separated (default, reduce-overhead)")
    ap.add_argument("--vectors-only", action="store_true",
                    help="only the --ours-vectors check (no GEMM ceiling, tokenizer or timings)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True

    buckets, texts = {}, {}
    for line in open(args.texts, encoding="utf-8"):
        r = json.loads(line)
        buckets.setdefault(r["bucket"], []).append(r["ids"])
        texts.setdefault(r["bucket"], []).append(r["text"])
    res = {"label": args.label, "torch": torch.__version__, "transformers": transformers.__version__,
           "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(), "runs": []}

    def save():
        json.dump(res, open(args.out, "w"), indent=1)

    model = load(args.model, torch.float16)
    batches = [int(b) for b in args.batches.split(",")]

    if args.compile_only:
        compile_points(args, model, buckets, res, save)
        save()
        return

    if not args.vectors_only:
        measure_ceiling_and_tokenizer(args, res, buckets, texts)

    with torch.inference_mode():
        # Same vectors?
        if args.ours_vectors:
            # Several files (comma-separated): each checked, under its name in
            # "vector_checks"; the first is also "vector_check".
            ref32 = load(args.model, torch.float32)
            res["vector_checks"] = {}
            for path in args.ours_vectors.split(","):
                ours = json.load(open(path))
                check = {}
                for b, seqs in buckets.items():
                    n = len(ours[b])
                    ids, mask = make_batch(seqs[:n], "cuda")
                    v16 = embed(model, ids, mask)
                    v32 = embed(ref32, ids, mask)
                    o = torch.nn.functional.normalize(torch.tensor(ours[b], device="cuda"), dim=-1)
                    check[b] = {"n": n,
                                "min_cos_ours_vs_torch_fp16": (o * v16).sum(-1).min().item(),
                                "min_cos_ours_vs_torch_fp32": (o * v32).sum(-1).min().item(),
                                "min_cos_torch_fp16_vs_fp32": (v16 * v32).sum(-1).min().item()}
                    print(os.path.basename(path), b, json.dumps(check[b]), flush=True)
                res["vector_checks"][os.path.basename(path)] = check
                if "vector_check" not in res:
                    res["vector_check"] = check
                    res["vector_check_pass"] = all(
                        c["min_cos_ours_vs_torch_fp16"] >= 0.999 for c in check.values())
            del ref32
            torch.cuda.empty_cache()
        save()
        if args.vectors_only:
            return

        for bucket, seqs in buckets.items():
            for bs in batches:
                batch = [seqs[i % len(seqs)] for i in range(bs)]
                ids, mask = make_batch(batch, "cuda")
                tokens = sum(len(s) for s in batch)
                ms = cuda_time_ms(lambda: embed(model, ids, mask), reps_for(bs))
                rec = {"impl": "torch-fp16-sdpa", "bucket": bucket, "batch": bs, "ms": ms,
                       "padded_tokens": int(ids.numel()), "tokens": tokens,
                       "sentences_per_s": bs / (ms / 1e3), "tokens_per_s": tokens / (ms / 1e3)}
                # End to end: fast tokenizer + H2D + forward + pooled rows to the host.
                tb = [texts[bucket][i % len(seqs)] for i in range(bs)]

                def e2e():
                    enc = tok(tb, padding=True, truncation=True, max_length=256, return_tensors="pt")
                    return embed(model, enc["input_ids"].cuda(), enc["attention_mask"].cuda()).cpu()

                try:
                    if tok is None:
                        raise RuntimeError("no tokenizer")
                    for _ in range(2):
                        e2e()
                    wall = []
                    for _ in range(reps_for(bs)):
                        t0 = time.perf_counter()
                        e2e()
                        wall.append((time.perf_counter() - t0) * 1e3)
                    rec["e2e_ms"] = statistics.median(wall)
                    rec["e2e_sentences_per_s"] = bs / (rec["e2e_ms"] / 1e3)
                except Exception as e:
                    rec["e2e_error"] = repr(e)[:300]
                res["runs"].append(rec)
                print(json.dumps(rec), flush=True)
                del ids, mask
        save()


if __name__ == "__main__":
    main()
