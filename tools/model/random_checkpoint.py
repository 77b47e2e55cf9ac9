#!/usr/bin/env python3
"""Writes a deterministic random checkpoint of the all-MiniLM-L6-v2 shape in the
sentence-transformers layout. Every value is a pure function of (tensor name, flat
index), so C++ tests can regenerate model.safetensors bit-exactly (see
tests/data/minilm_random/README.md for the rule).

  python3 tools/model/random_checkpoint.py --out /tmp/minilm_random
        [--vocab tests/data/minilm_random/vocab.txt] [--no-weights]

Needs numpy only (the safetensors file is written by hand: 8-byte little-endian
header length, JSON header, raw little-endian data).
"""

import argparse
import json
import os
import shutil
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_VOCAB = os.path.join(REPO, "tests", "data", "minilm_random", "vocab.txt")

HIDDEN, LAYERS, HEADS, INTER, VOCAB, MAXPOS, TYPES = 384, 6, 12, 1536, 30522, 512, 2

CONFIG = {
    "_name_or_path": "zerovec/minilm_random",
    "architectures": ["BertModel"],
    "attention_probs_dropout_prob": 0.1,
    "classifier_dropout": None,
    "gradient_checkpointing": False,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": HIDDEN,
    "initializer_range": 0.02,
    "intermediate_size": INTER,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": MAXPOS,
    "model_type": "bert",
    "num_attention_heads": HEADS,
    "num_hidden_layers": LAYERS,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "torch_dtype": "float32",
    "transformers_version": "4.8.2",
    "type_vocab_size": TYPES,
    "use_cache": True,
    "vocab_size": VOCAB,
}

MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
]


def pooling_config(dim):
    return {
        "word_embedding_dimension": dim,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }


def tokenizer_config(max_len):
    return {
        "clean_up_tokenization_spaces": True,
        "cls_token": "[CLS]",
        "do_basic_tokenize": True,
        "do_lower_case": True,
        "mask_token": "[MASK]",
        "model_max_length": max_len,
        "never_split": None,
        "pad_token": "[PAD]",
        "sep_token": "[SEP]",
        "strip_accents": None,
        "tokenize_chinese_chars": True,
        "tokenizer_class": "BertTokenizer",
        "unk_token": "[UNK]",
    }


SPECIAL_TOKENS_MAP = {"cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]",
                      "sep_token": "[SEP]", "unk_token": "[UNK]"}


def tensor_shapes():
    """(name, shape) in the order BertModel.state_dict() lists them."""
    out = [
        ("embeddings.word_embeddings.weight", (VOCAB, HIDDEN)),
        ("embeddings.position_embeddings.weight", (MAXPOS, HIDDEN)),
        ("embeddings.token_type_embeddings.weight", (TYPES, HIDDEN)),
        ("embeddings.LayerNorm.weight", (HIDDEN,)),
        ("embeddings.LayerNorm.bias", (HIDDEN,)),
    ]
    for l in range(LAYERS):
        p = "encoder.layer.%d." % l
        for m in ("query", "key", "value"):
            out.append((p + "attention.self.%s.weight" % m, (HIDDEN, HIDDEN)))
            out.append((p + "attention.self.%s.bias" % m, (HIDDEN,)))
        out += [
            (p + "attention.output.dense.weight", (HIDDEN, HIDDEN)),
            (p + "attention.output.dense.bias", (HIDDEN,)),
            (p + "attention.output.LayerNorm.weight", (HIDDEN,)),
            (p + "attention.output.LayerNorm.bias", (HIDDEN,)),
            (p + "intermediate.dense.weight", (INTER, HIDDEN)),
            (p + "intermediate.dense.bias", (INTER,)),
            (p + "output.dense.weight", (HIDDEN, INTER)),
            (p + "output.dense.bias", (HIDDEN,)),
            (p + "output.LayerNorm.weight", (HIDDEN,)),
            (p + "output.LayerNorm.bias", (HIDDEN,)),
        ]
    out += [("pooler.dense.weight", (HIDDEN, HIDDEN)), ("pooler.dense.bias", (HIDDEN,))]
    return out


MASK64 = (1 << 64) - 1


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & MASK64
    return h


def splitmix64_scalar(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def value_scalar(name, i):
    """Pure-Python statement of the rule, for one element (used to check the vector path)."""
    x = splitmix64_scalar((fnv1a64(name.encode("utf-8")) + i) & MASK64)
    u = (x >> 11) * 2.0 ** -53
    v = 2.0 * u - 1.0
    if name.endswith("LayerNorm.weight"):
        d = 1.0 + 0.1 * v
    elif name.endswith(".bias"):
        d = 0.02 * v
    else:
        d = v * 0.0346410161513775
    return float(np.float32(d))


def tensor_values(name, n):
    h = np.uint64(fnv1a64(name.encode("utf-8")))
    with np.errstate(over="ignore"):
        z = np.arange(n, dtype=np.uint64) + h
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)
    v = 2.0 * u - 1.0
    if name.endswith("LayerNorm.weight"):
        d = 1.0 + 0.1 * v
    elif name.endswith(".bias"):
        d = 0.02 * v
    else:
        d = v * 0.0346410161513775
    return d.astype(np.float32)


def write_safetensors(path, tensors):
    header = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, arr in tensors:
        nbytes = arr.size * 4
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(hb)))
        fh.write(hb)
        for _, arr in tensors:
            fh.write(np.ascontiguousarray(arr, dtype="<f4").tobytes())


def dump(path, obj):
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True)
        fh.write("\n")


def write_folder(out, vocab, weights=True):
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    os.makedirs(os.path.join(out, "2_Normalize"), exist_ok=True)
    dump(os.path.join(out, "config.json"), CONFIG)
    dump(os.path.join(out, "modules.json"), MODULES)
    dump(os.path.join(out, "sentence_bert_config.json"), {"max_seq_length": 256, "do_lower_case": False})
    dump(os.path.join(out, "1_Pooling", "config.json"), pooling_config(HIDDEN))
    dump(os.path.join(out, "tokenizer_config.json"), tokenizer_config(512))
    dump(os.path.join(out, "special_tokens_map.json"), SPECIAL_TOKENS_MAP)
    if vocab and os.path.abspath(vocab) != os.path.abspath(os.path.join(out, "vocab.txt")):
        shutil.copyfile(vocab, os.path.join(out, "vocab.txt"))
    if weights:
        tensors = []
        for name, shape in tensor_shapes():
            n = int(np.prod(shape))
            arr = tensor_values(name, n).reshape(shape)
            for i in (0, 1, n - 1):
                assert arr.reshape(-1)[i] == value_scalar(name, i), (name, i)
            tensors.append((name, arr))
        write_safetensors(os.path.join(out, "model.safetensors"), tensors)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", default=DEFAULT_VOCAB)
    ap.add_argument("--no-weights", action="store_true")
    args = ap.parse_args()
    write_folder(args.out, args.vocab if os.path.exists(args.vocab) else None, not args.no_weights)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
