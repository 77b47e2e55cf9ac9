#!/usr/bin/env python3
"""PyTorch baseline for embed_bench: BertModel fp16 with SDPA attention on the GPU.

Usage: python3 embed/tools/torch_bench.py MODEL_DIR
MODEL_DIR needs config.json and vocab.txt; weights are randomly initialised (speed
does not depend on them).
Same texts as embed/embed_bench.cc; batches are padded (as transformers does), mean
pooled over the attention mask and L2-normalised. Times with CUDA events: the model
forward alone, and end to end including the fast tokenizer and the copy to the host.
"""
import sys
import time

import torch
from transformers import BertConfig, BertModel, BertTokenizerFast

WORDS = ("the of and to in is was for on with as by at from his an were are which "
         "this be has had it one their first after new who they two her she been "
         "other when time during year city school team world film music river house "
         "system water history series season league album war state people family "
         "church game group road station").split()
assert len(WORDS) == 64


def medium_text(i):
    n = 20 + (i * 37) % 30
    return " ".join(WORDS[(i * 131 + j * 17) % 64] for j in range(n)) + "."


def main():
    model_dir = sys.argv[1]
    tok = BertTokenizerFast(vocab_file=f"{model_dir}/vocab.txt", do_lower_case=True)
    config = BertConfig.from_json_file(f"{model_dir}/config.json")
    config._attn_implementation = "sdpa"
    model = BertModel(config, add_pooling_layer=False).half().cuda().eval()

    def embed(texts):
        enc = tok(texts, padding=True, truncation=True, max_length=256,
                  return_tensors="pt").to("cuda")
        out = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).to(out.dtype)
        pooled = (out * mask).sum(1) / mask.sum(1)
        return torch.nn.functional.normalize(pooled.float(), dim=-1)

    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}, fp16, "
          f"attention {model.config._attn_implementation}")
    with torch.inference_mode():
        for batch in (1, 32, 4096):
            texts = [medium_text(i) for i in range(batch)]
            enc = tok(texts, padding=True, return_tensors="pt").to("cuda")
            for _ in range(3):
                model(**enc)
            torch.cuda.synchronize()
            iters = max(3, min(200, 20000 // batch))
            start, stop = torch.cuda.Event(True), torch.cuda.Event(True)
            start.record()
            for _ in range(iters):
                model(**enc)
            stop.record()
            torch.cuda.synchronize()
            fwd_ms = start.elapsed_time(stop) / iters
            t0 = time.perf_counter()
            for _ in range(iters):
                embed(texts).cpu()
            e2e_ms = (time.perf_counter() - t0) * 1e3 / iters
            print(f"batch {batch:5d}: forward {batch / fwd_ms * 1e3:10.0f} sentences/s "
                  f"({fwd_ms:.3f} ms); end to end {batch / e2e_ms * 1e3:10.0f} "
                  f"sentences/s ({e2e_ms:.3f} ms)")


if __name__ == "__main__":
    main()
