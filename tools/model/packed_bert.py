"""Packed forward pass of a transformers BertModel for contrastive training (issue 20).

Why: train.py's contrastive step embedded each side of a batch as padded slices through
BertModel; most texts are ~10 tokens and a few are 128, so a step was mostly padding and
hundreds of small kernels (8.1k pairs/s on the H200 for a 14M-parameter model). Here all
texts of a step are packed several to a row of ROW tokens (two-pointer packing of the
length-sorted texts: the longest text left opens a row, the shortest fill it), attention
is block-diagonal (a token sees only its own text), positions restart at each text, and
the whole step is one forward pass of fixed row length, which torch.compile can fuse.

The module reads the BertModel's own parameters (no copy): the optimizer, export and
evaluation keep using the BertModel. `check_against_bert` compares it with BertModel on
real texts before training uses it (train.py stops if they differ).
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

ROW = 128


def pack(lens, row=ROW):
    """(row_of, offset_of, rows): a row and a start offset for each text of length
    lens[i] <= row, packed two-pointer over the length-sorted texts."""
    lens = np.asarray(lens, dtype=np.int64)
    n = lens.size
    if n and lens.max() > row:
        raise ValueError("a text of %d tokens does not fit a row of %d" % (lens.max(), row))
    order = np.argsort(-lens, kind="stable")
    sl = lens[order].tolist()
    row_of = np.empty(n, dtype=np.int64)
    off_of = np.empty(n, dtype=np.int64)
    i, j, r = 0, n - 1, 0
    while i <= j:
        used = sl[i]
        row_of[order[i]] = r
        off_of[order[i]] = 0
        i += 1
        while i <= j and used + sl[j] <= row:
            row_of[order[j]] = r
            off_of[order[j]] = used
            used += sl[j]
            j -= 1
        r += 1
    return row_of, off_of, r


class PackedBert(torch.nn.Module):
    """forward(ids [R, L], pos [R or 1, L], seg [R, L] or None) -> last hidden state
    [R, L, H] of `bert` where seg holds each token's text number (-1 for padding); with
    seg None attention spans the whole row."""

    def __init__(self, bert, use_sdpa=True):
        super().__init__()
        self.bert = bert
        self.use_sdpa = use_sdpa and hasattr(F, "scaled_dot_product_attention")

    def _attention(self, q, k, v, mask, p):
        if self.use_sdpa:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        a = F.dropout(s.softmax(-1), p)
        return a @ v

    def forward(self, ids, pos, seg):
        b = self.bert
        cfg = b.config
        drop = cfg.hidden_dropout_prob if self.training else 0.0
        adrop = cfg.attention_probs_dropout_prob if self.training else 0.0
        e = b.embeddings
        x = e.word_embeddings(ids) + e.position_embeddings(pos) + e.token_type_embeddings.weight[0]
        x = F.dropout(e.LayerNorm(x), drop, self.training)
        R, L, H = x.shape
        nh = cfg.num_attention_heads
        hd = H // nh
        mask = None  # seg None: every token sees the whole row (MLM's packed stream)
        if seg is not None:
            # a token sees the tokens of its own text; a padding token sees itself (no empty row)
            mask = (seg[:, :, None] == seg[:, None, :]) & (seg[:, None, :] >= 0)
            mask = (mask | torch.eye(L, dtype=torch.bool, device=ids.device)).unsqueeze(1)
        for layer in b.encoder.layer:
            att = layer.attention
            sa = att.self
            w = torch.cat([sa.query.weight, sa.key.weight, sa.value.weight])
            bias = torch.cat([sa.query.bias, sa.key.bias, sa.value.bias])
            qkv = F.linear(x, w, bias).view(R, L, 3, nh, hd).permute(2, 0, 3, 1, 4)
            a = self._attention(qkv[0], qkv[1], qkv[2], mask, adrop)
            a = a.transpose(1, 2).reshape(R, L, H)
            a = F.dropout(att.output.dense(a), drop, self.training)
            x = att.output.LayerNorm(a + x)
            f = F.gelu(layer.intermediate.dense(x))
            f = F.dropout(layer.output.dense(f), drop, self.training)
            x = layer.output.LayerNorm(f + x)
        return x


def packed_inputs(ids, lens, idx, row=ROW, row_multiple=16):
    """The packed rows for texts idx (token ids in ids[idx, :lens[idx]]): (ids, pos, seg,
    flat, text_of_token, lens) where flat[t] is token t's place in the rows and
    text_of_token[t] its text's number in idx. Rows are padded to a multiple of
    row_multiple (fewer shapes for torch.compile)."""
    dev = ids.device
    ln = lens[idx]
    ln_cpu = ln.cpu().numpy()
    row_of, off_of, rows = pack(ln_cpu, row)
    rows = -(-rows // row_multiple) * row_multiple
    total = int(ln_cpu.sum())
    n = len(ln_cpu)
    text = torch.repeat_interleave(torch.arange(n, device=dev), ln, output_size=total)
    starts = torch.cumsum(ln, 0) - ln
    p = torch.arange(total, device=dev) - starts[text]
    row_t = torch.from_numpy(row_of).to(dev)
    off_t = torch.from_numpy(off_of).to(dev)
    flat = row_t[text] * row + off_t[text] + p
    r_ids = torch.zeros(rows * row, dtype=torch.long, device=dev)
    r_pos = torch.zeros(rows * row, dtype=torch.long, device=dev)
    r_seg = torch.full((rows * row,), -1, dtype=torch.long, device=dev)
    r_ids[flat] = ids[idx[text], p].long()
    r_pos[flat] = p
    r_seg[flat] = text
    return (r_ids.view(rows, row), r_pos.view(rows, row), r_seg.view(rows, row), flat, text, ln)


def embed_packed(forward, ids, lens, idx, row=ROW):
    """Mean-pooled, L2-normalised embeddings of texts idx through forward (a PackedBert,
    possibly compiled), as train.embed() gives them through BertModel."""
    r_ids, r_pos, r_seg, flat, text, ln = packed_inputs(ids, lens, idx, row)
    hidden = forward(r_ids, r_pos, r_seg)
    H = hidden.shape[-1]
    tok = hidden.reshape(-1, H)[flat].float()
    sums = torch.zeros(len(ln), H, device=hidden.device, dtype=torch.float32).index_add_(0, text, tok)
    return F.normalize(sums / ln[:, None].float(), dim=-1)


@torch.no_grad()
def check_against_bert(packed, embed_fn, ids, lens, idx, tol=2e-3):
    """Max |difference| between embed_packed and embed_fn (train.embed through the
    BertModel) on texts idx, both in eval mode; raises if above tol."""
    was = packed.bert.training
    packed.eval()
    a = embed_packed(packed, ids, lens, idx, row=max(ROW, ids.shape[1]))
    b = embed_fn(packed.bert, ids[idx], lens[idx])
    packed.train(was)
    diff = float((a - b).abs().max())
    if not diff <= tol:
        raise RuntimeError("packed forward differs from BertModel by %.3g (> %.3g)" % (diff, tol))
    return diff


def mlm_loss(packed, head, inp, labels):
    """Masked-LM loss of BertForMaskedLM (bert = packed.bert, head = its .cls) on full
    rows inp [B, L]: the prediction head runs on the masked tokens only (labels >= 0),
    not on all B * L (its vocabulary projection was a fifth of a step's work)."""
    pos = torch.arange(inp.shape[1], device=inp.device)[None, :]
    hidden = packed(inp, pos, None)
    sel = (labels >= 0).reshape(-1).nonzero().squeeze(1)
    h = hidden.reshape(-1, hidden.shape[-1]).index_select(0, sel)
    logits = head(h)
    return F.cross_entropy(logits.float(), labels.reshape(-1).index_select(0, sel))


def bert_from_tensors(tensors, config):
    """A module with BertModel's attribute layout (what PackedBert reads) holding
    `tensors`, a BertModel state dict (names with or without a leading "bert."), for
    machines without transformers; config is the model's config.json as a dict."""
    nn = torch.nn
    pre = "" if "embeddings.word_embeddings.weight" in tensors else "bert."
    H = config["hidden_size"]

    def param(name):
        return nn.Parameter(tensors[pre + name].float())

    def linear(name):
        w = tensors[pre + name + ".weight"]
        m = nn.Linear(w.shape[1], w.shape[0])
        m.weight, m.bias = param(name + ".weight"), param(name + ".bias")
        return m

    def layer_norm(name):
        m = nn.LayerNorm(H, eps=config["layer_norm_eps"])
        m.weight, m.bias = param(name + ".weight"), param(name + ".bias")
        return m

    def node(**children):
        m = nn.Module()
        for k, v in children.items():
            setattr(m, k, v)
        return m

    b = nn.Module()
    b.config = type("Config", (), dict(
        hidden_dropout_prob=config.get("hidden_dropout_prob", 0.1),
        attention_probs_dropout_prob=config.get("attention_probs_dropout_prob", 0.1),
        num_attention_heads=config["num_attention_heads"],
        hidden_size=H))()
    b.embeddings = node(**{n: nn.Embedding.from_pretrained(tensors[pre + "embeddings.%s.weight" % n].float(),
                                                           freeze=False)
                           for n in ("word_embeddings", "position_embeddings", "token_type_embeddings")},
                        LayerNorm=layer_norm("embeddings.LayerNorm"))
    layers = nn.ModuleList()
    for i in range(config["num_hidden_layers"]):
        p = "encoder.layer.%d." % i
        layers.append(node(
            attention=node(self=node(**{n: linear(p + "attention.self." + n) for n in ("query", "key", "value")}),
                           output=node(dense=linear(p + "attention.output.dense"),
                                       LayerNorm=layer_norm(p + "attention.output.LayerNorm"))),
            intermediate=node(dense=linear(p + "intermediate.dense")),
            output=node(dense=linear(p + "output.dense"), LayerNorm=layer_norm(p + "output.LayerNorm"))))
    b.encoder = node(layer=layers)
    return b


def read_safetensors(path):
    """{name: tensor} of a safetensors file (F16, BF16 or F32), without the safetensors
    package."""
    import json
    import struct
    dtypes = {"F16": np.float16, "F32": np.float32}
    with open(path, "rb") as fh:
        raw = fh.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        a, b = v["data_offsets"]
        buf = raw[8 + n + a: 8 + n + b]
        if v["dtype"] == "BF16":
            u = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=dtypes[v["dtype"]]).astype(np.float32)
        out[name] = torch.from_numpy(arr.reshape(v["shape"]).copy())
    return out
