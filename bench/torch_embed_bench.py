#!/usr/bin/env python3
"""PyTorch baseline for the embedding benchmark (runs on the GPU machine).

transformers' BertModel in fp16 with SDPA attention, padded per batch (to the longest
sequence of the batch), under torch.inference_mode, timed with CUDA events; every
figure is the median of repeated runs after warm-up. Also measures the GPU's dense
fp16/bf16 GEMM ceiling in the same process, and optionally torch.compile.

  python3 bench/torch_embed_bench.py --model DIR --texts FILE --out results.json
The texts file holds one JSON object per line: {"bucket": "short", "ids": [...]},
token ids already made by the reference tokenizer, so both sides embed the same ids.
"""
import argparse
import json
import statistics
import time

import torch
from transformers import BertModel


def cuda_time_ms(fn, reps, warmup=2):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def gemm_ceiling(dtype, n=8192, reps=10):
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    ms = cuda_time_ms(lambda: a @ b, reps, warmup=3)
    return 2 * n**3 / (ms / 1e3) / 1e12


def make_batch(seqs, device):
    longest = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), longest, dtype=torch.long)
    mask = torch.zeros(len(seqs), longest, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return ids.to(device), mask.to(device)


def embed(model, ids, mask):
    out = model(input_ids=ids, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).to(out.dtype)
    pooled = (out * m).sum(1) / m.sum(1)
    return torch.nn.functional.normalize(pooled.float(), dim=-1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--texts", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="1,32,256,4096")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--vectors-out", help="write fp32 vectors of the first 64 texts a bucket")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = True
    model = BertModel.from_pretrained(args.model, attn_implementation="sdpa", add_pooling_layer=False)
    model = model.half().cuda().eval()
    buckets = {}
    for line in open(args.texts):
        rec = json.loads(line)
        buckets.setdefault(rec["bucket"], []).append(rec["ids"])

    results = {"model": args.model, "torch": torch.__version__,
               "gpu": torch.cuda.get_device_name(), "runs": []}
    results["gemm_tflops_fp16"] = gemm_ceiling(torch.float16)
    results["gemm_tflops_bf16"] = gemm_ceiling(torch.bfloat16)

    vectors = {}
    with torch.inference_mode():
        for bucket, seqs in buckets.items():
            ids, mask = make_batch(seqs[:64], "cuda")
            vectors[bucket] = embed(model, ids, mask).cpu().tolist()
            for bs in [int(b) for b in args.batches.split(",")]:
                batch = [seqs[i % len(seqs)] for i in range(bs)]
                ids, mask = make_batch(batch, "cuda")
                tokens = sum(len(s) for s in batch)
                ms = cuda_time_ms(lambda: embed(model, ids, mask), args.reps)
                results["runs"].append({"impl": "torch-fp16-sdpa", "bucket": bucket, "batch": bs,
                                        "ms": ms, "sentences_per_s": bs / (ms / 1e3),
                                        "tokens_per_s": tokens / (ms / 1e3)})
                print(json.dumps(results["runs"][-1]), flush=True)
        if args.compile:
            try:
                t0 = time.time()
                compiled = torch.compile(model)
                for bucket in ("medium",):
                    seqs = buckets[bucket]
                    bs = 256
                    batch = [seqs[i % len(seqs)] for i in range(bs)]
                    ids, mask = make_batch(batch, "cuda")
                    tokens = sum(len(s) for s in batch)
                    ms = cuda_time_ms(lambda: embed(compiled, ids, mask), args.reps, warmup=3)
                    results["runs"].append({"impl": "torch-compile-fp16", "bucket": bucket,
                                            "batch": bs, "ms": ms, "sentences_per_s": bs / (ms / 1e3),
                                            "tokens_per_s": tokens / (ms / 1e3),
                                            "compile_s": time.time() - t0})
                    print(json.dumps(results["runs"][-1]), flush=True)
            except Exception as e:  # record, don't hide: the table says it did not work
                results["compile_error"] = repr(e)[:500]
    json.dump(results, open(args.out, "w"), indent=1)
    if args.vectors_out:
        json.dump(vectors, open(args.vectors_out, "w"))


if __name__ == "__main__":
    main()
