#!/usr/bin/env python3
"""Reference sentence embeddings for the C++ encoder tests.

Runs where torch + transformers are installed (the device machine):
  python3 tools/model/make_reference.py --minilm /tmp/minilm_random

For each checkpoint folder, every sentence is tokenized with the reference tokenizer
(see make_tokenizer_cases.py; truncation to max_length, no padding), run through
transformers' BertModel in fp32 on the CPU (eval mode, eager attention, one unpadded
sequence at a time, token_type_ids all 0), mean-pooled over all tokens including
[CLS]/[SEP] and L2-normalised. Lines: {"text", "ids", "vector"} (8 significant digits).
Cross-checks: sentence-transformers loading the same folder, and the same BertModel
in fp16 / bf16 on the GPU; results in tools/model/results/reference_checks.json.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

SENTENCES = [
    "A dog is running across the park.",
    "The cat sleeps on the warm windowsill.",
    "How do I reset my password?",
    "Where can I buy fresh bread in the morning?",
    "The stock market fell sharply on Monday.",
    "She plays the piano beautifully.",
    "Heavy snow is expected tonight in the mountains.",
    "My bicycle has a flat tire.",
    "The doctor prescribed antibiotics for the infection.",
    "We ate dinner at a small Italian restaurant.",
    "Photosynthesis converts light energy into chemical energy.",
    "The train to Boston leaves at 6:45 p.m.",
    "He ran away as fast as he could.",
    "Water boils at 100 degrees Celsius at sea level.",
    "The children built a sandcastle on the beach.",
    "Please turn off the lights when you leave.",
    "An apple a day keeps the doctor away.",
    "Quantum computers use qubits instead of bits.",
    "The library is closed on Sundays.",
    "I need a hammer and some nails.",
    "a member of the genus Canis that has been domesticated by man since prehistoric times",
    "a beverage consisting of an infusion of ground coffee beans",
    "precipitation falling from clouds in the form of ice crystals",
    "a wheeled vehicle that has two wheels and is moved by foot pedals",
    "food made from dough of flour or meal and usually raised with yeast",
    "run away quickly",
    "a keyboard instrument that is played by depressing keys",
    "feeling happiness",
    "dog, domestic dog, Canis familiaris",
    "coffee, java",
    "vector search",
    "Hello",
    "hello",
    "HELLO WORLD!!!",
    "x",
    "",
    "   ",
    "café naïve Ångström résumé",
    "Crème brûlée in São Paulo and Zürich",
    "中文 日本語 한국어",
    "我爱北京天安门。",
    "I love pizza 🍕🍕!",
    "tab\tseparated\nnew line",
    "$5.99 for 3 items (50% off!)",
    "2024-06-11T10:30:00Z",
    "e-mail co-operate state-of-the-art",
    "https://example.com/path?query=1",
    "supercalifragilisticexpialidociousandmuchmuchlongerthanahundredcharacterssothatitbecomesanunknowntokenintheend",
    "The quick brown fox jumps over the lazy dog.",
    "the quick brown fox jumps over the lazy dog",
    "A man, a plan, a canal: Panama",
    "To be, or not to be, that is the question.",
    "It was the best of times, it was the worst of times.",
    "Ask not what your country can do for you.",
    "The mitochondria is the powerhouse of the cell.",
    "Neural networks learn representations from data.",
    "Rain again today; bring an umbrella.",
    "Our flight was delayed by three hours.",
    "The recipe calls for two cups of sugar.",
    "Turn left at the second traffic light.",
    "The museum exhibits paintings from the Renaissance.",
    "Mount Everest is the highest mountain on Earth.",
    "Elephants are the largest land animals.",
    "The invoice is due at the end of the month.",
    "Can you recommend a good book about history?",
    "The meeting has been moved to Thursday afternoon.",
]


def long_sentences():
    docs = [json.loads(l)["text"] for l in open(os.path.join(REPO, "data", "demo", "corpus.jsonl"), encoding="utf-8")]
    return [" ".join(docs[200:206]), " ".join(docs[300:330])]  # ~150 and ~800 tokens


def cos(a, b):
    import torch
    return float(torch.nn.functional.cosine_similarity(a[None].double(), b[None].double())[0])


def run(name, folder, max_len, out_path, checks):
    import torch
    import torch.nn.functional as F
    from transformers import BertModel
    from make_tokenizer_cases import reference_encoder

    texts = SENTENCES + long_sentences()
    enc, desc = reference_encoder(os.path.join(folder, "vocab.txt"))
    model, info = BertModel.from_pretrained(folder, output_loading_info=True, attn_implementation="eager")
    model = model.float().eval()
    c = {"tokenizer": desc, "loading_info": {k: sorted(v) if isinstance(v, (list, set)) else str(v)
                                             for k, v in info.items()},
         "stored_dtype": str(next(BertModel.from_pretrained(folder).parameters()).dtype), "max_length": max_len}
    vecs, all_ids = [], []
    with torch.no_grad():
        for t in texts:
            ids = enc(t, max_len)
            h = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long)).last_hidden_state[0]
            v = F.normalize(h.double().mean(0), dim=0).float()
            vecs.append(v)
            all_ids.append(ids)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as fh:
        for t, ids, v in zip(texts, all_ids, vecs):
            fh.write(json.dumps({"text": t, "ids": ids, "vector": [float("%.8g" % x) for x in v.tolist()]},
                                ensure_ascii=False) + "\n")
    c["sentences"] = len(texts)
    c["token_counts"] = [len(i) for i in all_ids]
    # sentence-transformers on the folder as committed (git keeps no empty 2_Normalize folder)
    for variant in ("without-2_Normalize-folder", "with-2_Normalize-folder"):
        try:
            from sentence_transformers import SentenceTransformer
            tmp = tempfile.mkdtemp()
            dst = os.path.join(tmp, name)
            shutil.copytree(folder, dst)
            norm = os.path.join(dst, "2_Normalize")
            if variant.startswith("without"):
                shutil.rmtree(norm, ignore_errors=True)
            else:
                os.makedirs(norm, exist_ok=True)
            st = SentenceTransformer(dst, device="cpu")
            e = torch.tensor(st.encode(texts, convert_to_numpy=True, batch_size=16))
            cs = [cos(e[i], vecs[i]) for i in range(len(texts))]
            c["sentence_transformers_" + variant] = {
                "min_cosine": min(cs), "mean_cosine": sum(cs) / len(cs), "max_seq_length": st.max_seq_length,
                "norm_of_first": float(e[0].norm()), "modules": [type(m).__name__ for m in st],
                "below_0.9999": [(texts[i][:60], cs[i]) for i in range(len(texts)) if cs[i] < 0.9999]}
        except Exception as ex:
            c["sentence_transformers_" + variant] = {"error": repr(ex)}
    # GPU half-precision agreement (what a CUDA encoder in fp16/bf16 can expect)
    if torch.cuda.is_available():
        for dt in (torch.float16, torch.bfloat16):
            m = BertModel.from_pretrained(folder).to("cuda", dtype=dt).eval()
            cs = []
            with torch.no_grad():
                for t, ids, v in zip(texts, all_ids, vecs):
                    h = m(input_ids=torch.tensor([ids], device="cuda")).last_hidden_state[0].float()
                    cs.append(cos(F.normalize(h.mean(0), dim=0).cpu(), v))
            c["gpu_" + str(dt).split(".")[-1]] = {"min_cosine": min(cs), "mean_cosine": sum(cs) / len(cs)}
    checks[name] = c
    print(name, json.dumps({k: v for k, v in c.items() if k != "token_counts"}, default=str)[:2000])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mini", default=os.path.join(REPO, "models", "zerovec-mini"))
    ap.add_argument("--minilm", default="/tmp/minilm_random")
    ap.add_argument("--l6", default=os.path.join(REPO, "models", "zerovec-l6"))
    ap.add_argument("--only", default="", help="comma-separated names (default: all present)")
    args = ap.parse_args()
    os.chdir(REPO)
    checks = {}
    runs = (("zerovec-mini", args.mini, 128, "tests/data/reference/zerovec-mini.jsonl"),
            ("minilm_random", args.minilm, 256, "tests/data/reference/minilm_random.jsonl"),
            ("zerovec-l6", args.l6, 512, "tests/data/reference/zerovec-l6.jsonl"))
    only = set(filter(None, args.only.split(",")))
    for name, folder, L, out in runs:
        if only and name not in only:
            continue
        try:
            run(name, folder, L, out, checks)
        except Exception as e:
            import traceback
            traceback.print_exc()
            checks[name] = {"error": repr(e)}
    os.makedirs("tools/model/results", exist_ok=True)
    suffix = "" if not only else "-" + "-".join(sorted(only))
    with open("tools/model/results/reference_checks%s.json" % suffix, "w", encoding="utf-8") as fh:
        json.dump(checks, fh, indent=1, ensure_ascii=False, default=str)


if __name__ == "__main__":
    main()
