#!/usr/bin/env python3
"""ref_numpy.py — an independent NumPy forward pass that reproduces tests/data's logits
from the checkpoint files alone (config.json + *.safetensors), without torch/transformers.

It exists to pin down, in a few readable lines, the exact math the C implementation
must match (weight layouts, RoPE layout, GQA head mapping, GELU variant, norms).
Like gen_reference.py it is a tool for people, not part of the product or its tests.

    .venv/bin/python scripts/ref_numpy.py            # checks every model dir
    .venv/bin/python scripts/ref_numpy.py DIR...     # or the given ones

Prints the max abs error against each logits.npy (and the training loss of
tests/data/train/gpt2_small) and exits 1 if any exceeds 1e-4 * logit range.
"""

import json
import os
import struct
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data")


def bf16_to_f32(raw):
    u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
    return u.view(np.float32)


def read_safetensors(path):
    """Minimal safetensors reader: u64 little-endian header length, JSON header, data."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[base + a: base + b]
        dt = info["dtype"]
        if dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4")
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            arr = bf16_to_f32(raw)
        else:
            raise ValueError(f"{path}: {name}: dtype {dt}")
        out[name] = arr.astype(np.float32).reshape(info["shape"])
    return out


def load_weights(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        w = {}
        for shard in sorted(set(json.load(open(idx))["weight_map"].values())):
            w.update(read_safetensors(os.path.join(d, shard)))
        return w
    return read_safetensors(os.path.join(d, "model.safetensors"))


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def causal_attention(q, k, v):
    # q: (H, T, hd), k/v: (H, T, hd) -> (H, T, hd)
    T, hd = q.shape[1], q.shape[2]
    s = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    return softmax(s) @ v


def llama_forward(cfg, w, ids):
    D = cfg["hidden_size"]
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or D // H
    eps = cfg["rms_norm_eps"]
    # transformers >= 5 writes rope_parameters.rope_theta; older versions a top-level rope_theta.
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta", 10000.0))
    T = len(ids)

    def rmsnorm(x, g):  # x (T, D); normalise in fp32, then multiply by the weight
        return g * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))

    # RoPE, HF "rotate_half" layout: dimension i pairs with i + hd/2 (NOT adjacent pairs).
    inv_freq = 1.0 / (np.float32(theta) ** (np.arange(0, hd, 2, dtype=np.float32) / hd))
    ang = np.arange(T, dtype=np.float32)[:, None] * inv_freq[None, :]          # (T, hd/2)
    cos = np.cos(np.concatenate([ang, ang], -1))                               # (T, hd)
    sin = np.sin(np.concatenate([ang, ang], -1))

    def rope(x):  # x (heads, T, hd)
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + np.concatenate([-x2, x1], -1) * sin

    x = w["model.embed_tokens.weight"][ids]                                    # (T, D)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rmsnorm(x, w[p + "input_layernorm.weight"])
        # nn.Linear weights are (out, in): y = x @ W.T
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd).transpose(1, 0, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KV, hd).transpose(1, 0, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KV, hd).transpose(1, 0, 2)
        q, k = rope(q), rope(k)
        # GQA: query head h uses kv head h // (H // KV)  (HF repeat_kv)
        rep = H // KV
        k, v = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)
        a = causal_attention(q, k, v).transpose(1, 0, 2).reshape(T, H * hd)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"])
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * u) @ w[p + "mlp.down_proj.weight"].T  # SwiGLU
    x = rmsnorm(x, w["model.norm.weight"])
    # Tied embeddings: the file has no lm_head.weight; use embed_tokens.
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T


def gpt2_forward(cfg, w, ids):
    D, H = cfg["n_embd"], cfg["n_head"]
    hd = D // H
    eps = cfg["layer_norm_epsilon"]
    ids = np.asarray(ids)
    T = ids.shape[-1]

    def layernorm(x, g, b):  # biased variance (divide by D)
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * g + b

    def gelu_new(x):  # tanh approximation ("gelu_new" = "gelu_pytorch_tanh")
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))

    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][np.arange(T)]
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        h = layernorm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        # Conv1D weights are (in, out): y = x @ W + b  (transposed w.r.t. nn.Linear)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]    # (T, 3D): q | k | v
        q, k, v = [t.reshape(T, H, hd).transpose(1, 0, 2) for t in np.split(qkv, 3, -1)]
        a = causal_attention(q, k, v).transpose(1, 0, 2).reshape(T, D)
        x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = layernorm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        h = gelu_new(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = layernorm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"])
    return x @ w["transformer.wte.weight"].T  # lm_head tied to wte, no separate tensor


def forward(d, ids):
    cfg = json.load(open(os.path.join(d, "config.json")))
    w = {k: v.astype(np.float64) for k, v in load_weights(d).items()}  # float64 oracle
    fn = llama_forward if cfg["model_type"] == "llama" else gpt2_forward
    return fn(cfg, w, ids)


def main(argv):
    dirs = argv or sorted(os.path.join(ROOT, "models", n) for n in os.listdir(os.path.join(ROOT, "models")))
    bad = 0
    for d in dirs:
        m = json.load(open(os.path.join(d, "manifest.json")))
        assert m["magic"] == "omptensor-reference" and m["format_version"] == 1, d
        ref = np.load(os.path.join(d, "logits.npy"))
        got = forward(d, m["prompt_ids"])
        err = float(np.abs(got - ref).max())
        rng = float(ref.max() - ref.min())
        ok = err <= 1e-4 * rng
        bad += not ok
        print(f"{os.path.basename(d):16s} max|err| {err:.3e}  range {rng:.3f}  {'ok' if ok else 'FAIL'}")
    t = os.path.join(ROOT, "train", "gpt2_small")
    if not argv and os.path.exists(t):
        m = json.load(open(os.path.join(t, "manifest.json")))
        d = os.path.join(os.path.dirname(ROOT), "..", m["model_dir"])
        cfg = json.load(open(os.path.join(d, "config.json")))
        w = {k: v.astype(np.float64) for k, v in load_weights(d).items()}
        logits = np.stack([gpt2_forward(cfg, w, row) for row in m["batch"]["inputs"]])
        tg = np.array(m["batch"]["targets"])
        lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
        loss = float((lse - np.take_along_axis(logits, tg[..., None], -1)[..., 0]).mean())
        lerr = abs(loss - m["loss"]["step0"])
        ref = np.load(os.path.join(t, "logits.npy"))
        err = float(np.abs(logits - ref).max())
        ok = lerr <= 1e-5 and err <= 1e-4 * float(ref.max() - ref.min())
        bad += not ok
        print(f"{'train/gpt2_small':16s} max|err| {err:.3e}  loss {loss:.7f} vs {m['loss']['step0']:.7f}  "
              f"{'ok' if ok else 'FAIL'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
