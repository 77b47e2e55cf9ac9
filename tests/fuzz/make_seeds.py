#!/usr/bin/env python3
"""Writes the structured seeds of the checkpoint and request_validation fuzzers
(tests/fuzz/corpus/<target>/). Run from the repository root after changing a fuzz
input layout; the generated files are committed. Needs protoc for the requests."""
import json, os, struct, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.abspath(__file__))


def bert_tensors(v, h, layers, inter, pos, types, prefix=""):
    t = [("embeddings.word_embeddings.weight", [v, h]),
         ("embeddings.position_embeddings.weight", [pos, h]),
         ("embeddings.token_type_embeddings.weight", [types, h]),
         ("embeddings.LayerNorm.weight", [h]), ("embeddings.LayerNorm.bias", [h])]
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for m in ("query", "key", "value"):
            t += [(p + f"attention.self.{m}.weight", [h, h]), (p + f"attention.self.{m}.bias", [h])]
        t += [(p + "attention.output.dense.weight", [h, h]), (p + "attention.output.dense.bias", [h]),
              (p + "attention.output.LayerNorm.weight", [h]), (p + "attention.output.LayerNorm.bias", [h]),
              (p + "intermediate.dense.weight", [inter, h]), (p + "intermediate.dense.bias", [inter]),
              (p + "output.dense.weight", [h, inter]), (p + "output.dense.bias", [h]),
              (p + "output.LayerNorm.weight", [h]), (p + "output.LayerNorm.bias", [h])]
    return [(prefix + n, s) for n, s in t]


def header(tensors, dtype="F32"):
    size = {"F32": 4, "F16": 2, "BF16": 2}[dtype]
    out, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in sorted(tensors):
        n = size
        for d in shape:
            n *= d
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    return json.dumps(out, separators=(",", ":")).encode()


def config(v, h, layers, heads, inter, pos, **extra):
    c = {"model_type": "bert", "vocab_size": v, "hidden_size": h, "num_hidden_layers": layers,
         "num_attention_heads": heads, "intermediate_size": inter,
         "max_position_embeddings": pos, "type_vocab_size": 2, "hidden_act": "gelu"}
    c.update(extra)
    return json.dumps(c).encode()


def ckpt_seed(flags, cfg, hdr):
    return bytes([flags]) + struct.pack("<H", len(cfg)) + cfg + hdr


def write(target, name, data):
    d = os.path.join(ROOT, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def checkpoint_seeds():
    tiny = bert_tensors(10, 4, 1, 8, 8, 2)
    write("checkpoint", "valid_f32", ckpt_seed(0, config(10, 4, 1, 2, 8, 8), header(tiny)))
    write("checkpoint", "valid_st_layout_f16", ckpt_seed(4 | 8, config(12, 4, 1, 1, 8, 8),
                                                         header(bert_tensors(12, 4, 1, 8, 8, 2), "F16")))
    write("checkpoint", "valid_bert_prefix_bf16",
          ckpt_seed(0, config(10, 4, 2, 2, 4, 4, layer_norm_eps=1e-5),
                    header(bert_tensors(10, 4, 2, 4, 4, 2, "bert."), "BF16")))
    write("checkpoint", "truncated_data", ckpt_seed(1, config(10, 4, 1, 2, 8, 8), header(tiny)))
    write("checkpoint", "header_len_past_end", ckpt_seed(2, config(10, 4, 1, 2, 8, 8), header(tiny)))
    write("checkpoint", "shape_mismatch", ckpt_seed(0, config(10, 8, 1, 2, 8, 8), header(tiny)))
    write("checkpoint", "bad_config", ckpt_seed(0, b'{"model_type":"bert","hidden_size":-3}', b"{}"))


REQUESTS = r'''
# "message: text-format body", one request a block, blocks separated by dashes
zerovec.v1.CreateCollectionRequest: name: "docs" dim: 4 metric: METRIC_L2 index: "HNSW32"
---
zerovec.v1.CreateCollectionRequest: name: "../etc" dim: 4
---
zerovec.v1.UpsertRequest: collection: "docs" items { id: "a" vector: [0.5, 0.5, 0.5, 0.5] namespace: "agent" metadata { key: "k" value: "v" } timestamp_ms: 5 } items { id: "b" text: "hello world" }
---
zerovec.v1.UpsertRequest: collection: "docs" items { id: "a" vector: [1, 2] } items { id: "a" vector: [nan, 1] }
---
zerovec.v1.SearchRequest: collection: "docs" query { vector { values: [0.1, 0.2, 0.3, 0.4] } } k: 3 filter { namespace: "agent" metadata_equals { key: "k" value: "v" } min_timestamp_ms: 1 max_timestamp_ms: 9 } include_documents: true
---
zerovec.v1.SearchRequest: collection: "docs" query { text: "what is this" } k: -1
---
zerovec.v1.SearchBatchRequest: collection: "docs" queries { text: "q1" } queries { vector { values: [1, 0, 0, 0] } } k: 1000
---
zerovec.v1.GetRequest: collection: "docs" ids: "a" ids: "b" include_vectors: true
---
zerovec.v1.DeleteRequest: collection: "a/b" ids: ""
---
zerovec.v1.EmbedRequest: texts: "one" texts: ""
---
zerovec.v1.StatsRequest: collection: "x\000y"
'''


def request_seeds():
    proto = os.path.join(ROOT, "..", "..", "proto")
    blocks = [b.strip() for b in REQUESTS.split("---")]
    n = 0
    for block in blocks:
        lines = [l for l in block.splitlines() if l and not l.startswith("#")]
        if not lines:
            continue
        msg, body = lines[0].split(":", 1)
        out = subprocess.run(["protoc", "--proto_path=" + proto, "--encode=" + msg,
                              "zerovec/v1/zerovec.proto"], input=body.encode(),
                             capture_output=True, check=True).stdout
        write("request_validation", f"{n:02d}_{msg.split('.')[-1]}", out)
        n += 1


if __name__ == "__main__":
    checkpoint_seeds()
    request_seeds()
