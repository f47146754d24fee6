#!/usr/bin/env python3
"""A small Llama as a GGUF file and as the Hugging Face checkpoint it stands
for, for tests/test_model_gguf.c (issue 21):

    python3 -m venv /tmp/gv && /tmp/gv/bin/pip install gguf numpy
    /tmp/gv/bin/python scripts/gen_gguf_model_ref.py tests/data/gguf

writes
  llama_src/      config.json + model.safetensors (bf16): the model;
  llama-mixed.gguf  the same weights as llama.cpp's converter lays them out
                  (gguf.GGUFWriter; q_proj and k_proj rows permuted as
                  convert_hf_to_gguf.py's LlamaModel.permute does; llama.cpp's
                  names; metadata from the config), each matrix in another
                  ggml type (F32, F16, BF16, Q8_0, Q4_0 by gguf.quants; Q4_K
                  and Q6_K, which gguf.quants cannot quantize, by the min/max
                  fit below: any valid blocks do, the reference is what
                  gguf.quants.dequantize reads back from them);
  llama-mixed.json  the prompt; the logits of the GGUF's own weights
                  (gguf.quants.dequantize of every tensor, unpermuted) by an
                  independent NumPy forward pass (scripts/ref_numpy.py's
                  llama_forward); the logits of llama_src's bf16 weights by the
                  same pass, and the two's distance (the quantization's);
                  every tensor's ggml type;
  bad-model-*.gguf  model files the loader must refuse by name: an
                  unsupported architecture, a mixture of experts, a Q5_K
                  matrix.
"""
import json
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_numpy import llama_forward  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/gguf"
os.makedirs(os.path.join(out, "llama_src"), exist_ok=True)
rng = np.random.default_rng(20261203)

# K-quant rows need the hidden and intermediate sizes to be multiples of 256
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 256,
       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
       "vocab_size": 128, "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
       "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
       "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2}
D, F, L, H, KV, hd, V = 256, 256, 2, 4, 2, 64, 128


def bf16_round(x):
    u = x.astype(np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.view(np.float32)


W = {}
W["model.embed_tokens.weight"] = rng.normal(0, 1.0, (V, D))
W["lm_head.weight"] = rng.normal(0, 1 / 16, (V, D))
W["model.norm.weight"] = 1 + rng.normal(0, 0.1, D)
for l in range(L):
    p = f"model.layers.{l}."
    W[p + "input_layernorm.weight"] = 1 + rng.normal(0, 0.1, D)
    W[p + "post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, D)
    W[p + "self_attn.q_proj.weight"] = rng.normal(0, 1 / 16, (H * hd, D))
    W[p + "self_attn.k_proj.weight"] = rng.normal(0, 1 / 16, (KV * hd, D))
    W[p + "self_attn.v_proj.weight"] = rng.normal(0, 1 / 16, (KV * hd, D))
    W[p + "self_attn.o_proj.weight"] = rng.normal(0, 1 / 16, (D, H * hd))
    W[p + "mlp.gate_proj.weight"] = rng.normal(0, 1 / 16, (F, D))
    W[p + "mlp.up_proj.weight"] = rng.normal(0, 1 / 16, (F, D))
    W[p + "mlp.down_proj.weight"] = rng.normal(0, 1 / 16, (D, F))
W = {k: bf16_round(v) for k, v in W.items()}

# ---- the Hugging Face checkpoint (bf16 safetensors) -------------------------------------
with open(os.path.join(out, "llama_src", "config.json"), "w") as f:
    json.dump(cfg, f, indent=1)
header, blobs, off = {}, [], 0
for k in sorted(W):
    raw = (W[k].view(np.uint32) >> 16).astype("<u2").tobytes()
    header[k] = {"dtype": "BF16", "shape": list(W[k].shape), "data_offsets": [off, off + len(raw)]}
    blobs.append(raw)
    off += len(raw)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(out, "llama_src", "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ---- K-quant blocks (min/max fits; rows of whole 256-value super-blocks) ------------------
def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def q4_k(x):
    b = x.reshape(-1, 8, 32).astype(np.float32)
    lo, hi = np.minimum(b.min(-1), 0), np.maximum(b.max(-1), 0)
    scale, mins = (hi - lo) / 15, -lo
    d, dmin = f16(scale.max(-1) / 63), f16(mins.max(-1) / 63)
    df, dmf = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    sc = np.clip(np.rint(np.divide(scale, df, out=np.zeros_like(scale), where=df > 0)), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(np.divide(mins, dmf, out=np.zeros_like(mins), where=dmf > 0)), 0, 63).astype(np.uint8)
    ds, dm = df * sc, dmf * m
    q = np.clip(np.rint(np.divide(b + dm[..., None], ds[..., None], out=np.zeros_like(b), where=ds[..., None] > 0)),
                0, 15).astype(np.uint8)
    s = np.zeros((b.shape[0], 12), np.uint8)
    s[:, 0:4], s[:, 4:8] = sc[:, 0:4], m[:, 0:4]
    s[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    s[:, 0:4] |= (sc[:, 4:8] >> 4) << 6
    s[:, 4:8] |= (m[:, 4:8] >> 4) << 6
    q = q.reshape(-1, 4, 2, 32)
    qs = (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(-1, 128)
    blk = np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2), s, qs], -1)
    return blk.reshape(x.shape[0], -1)


def q6_k(x):
    b = x.reshape(-1, 16, 16).astype(np.float32)
    scale = np.abs(b).max(-1) / 31
    d = f16(scale.max(-1) / 127)
    df = d.astype(np.float32)[:, None]
    sc = np.clip(np.rint(np.divide(scale, df, out=np.zeros_like(scale), where=df > 0)), -128, 127).astype(np.int8)
    ds = df * sc
    q = (np.clip(np.rint(np.divide(b, ds[..., None], out=np.zeros_like(b), where=ds[..., None] > 0)), -32, 31) + 32)
    q = q.astype(np.uint8).reshape(-1, 2, 128)  # two halves of 128
    ql = np.zeros((q.shape[0], 2, 64), np.uint8)
    qh = np.zeros((q.shape[0], 2, 32), np.uint8)
    for i in range(128):
        v = q[:, :, i]
        ql[:, :, i % 64] |= (v & 15) << (4 * (i // 64))
        qh[:, :, i % 32] |= (v >> 4) << (2 * (i // 32))
    blk = np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64), sc.view(np.uint8), d.view(np.uint8).reshape(-1, 2)], -1)
    return blk.reshape(x.shape[0], -1)


def quantize(x, t):
    if t == T.F32:
        return x.astype(np.float32)
    if t == T.F16:
        return x.astype(np.float16)
    if t == T.Q4_K:
        return q4_k(x)
    if t == T.Q6_K:
        return q6_k(x)
    return quants.quantize(x.astype(np.float32), t)


def dequant(q, t):
    return quants.dequantize(q, t).astype(np.float32).reshape(q.shape[0], -1) if q.ndim == 2 else \
        quants.dequantize(q, t).astype(np.float32)


# llama.cpp's convert_hf_to_gguf.py, LlamaModel.permute
def permute(w, n_head):
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


TYPES = {  # (gguf name, hf name, type)
    "token_embd.weight": ("model.embed_tokens.weight", T.Q8_0),
    "output.weight": ("lm_head.weight", T.Q6_K),
    "output_norm.weight": ("model.norm.weight", T.F32),
}
LAYER_TYPES = [
    {"attn_q": T.Q4_0, "attn_k": T.Q4_K, "attn_v": T.Q6_K, "attn_output": T.Q8_0, "ffn_gate": T.Q4_K, "ffn_up": T.F16,
     "ffn_down": T.BF16},
    {"attn_q": T.Q4_K, "attn_k": T.Q4_0, "attn_v": T.F32, "attn_output": T.Q4_K, "ffn_gate": T.Q6_K, "ffn_up": T.Q4_0,
     "ffn_down": T.Q4_K},
]
HF_OF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
         "ffn_down": "mlp.down_proj"}
for l in range(L):
    TYPES[f"blk.{l}.attn_norm.weight"] = (f"model.layers.{l}.input_layernorm.weight", T.F32)
    TYPES[f"blk.{l}.ffn_norm.weight"] = (f"model.layers.{l}.post_attention_layernorm.weight", T.F32)
    for g, t in LAYER_TYPES[l].items():
        TYPES[f"blk.{l}.{g}.weight"] = (f"model.layers.{l}.{HF_OF[g]}.weight", t)

w = gguf.GGUFWriter(os.path.join(out, "llama-mixed.gguf"), "llama")
w.add_name("omptensor-gguf-llama")
w.add_context_length(cfg["max_position_embeddings"])
w.add_embedding_length(D)
w.add_block_count(L)
w.add_feed_forward_length(F)
w.add_head_count(H)
w.add_head_count_kv(KV)
w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
w.add_rope_freq_base(cfg["rope_theta"])
w.add_rope_dimension_count(hd)
w.add_vocab_size(V)
w.add_tokenizer_model("llama")
toks = ["<unk>", "<s>", "</s>"] + [f"\u2581t{i}" for i in range(V - 3)]
w.add_token_list(toks)
w.add_token_scores([0.0, 0.0, 0.0] + [-float(i) for i in range(V - 3)])
w.add_token_types([2, 3, 3] + [1] * (V - 3))
w.add_bos_token_id(1)
w.add_eos_token_id(2)
deq, types = {}, {}
for g, (hf, t) in TYPES.items():
    x = W[hf]
    if ".attn_q." in g:
        x = permute(x, H)
    elif ".attn_k." in g:
        x = permute(x, KV)
    q = quantize(x, t)
    if t == T.BF16:
        w.add_tensor(g, (x.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(x.shape[0], -1),
                     raw_dtype=T.BF16)
    else:
        w.add_tensor(g, q, raw_dtype=t if t not in (T.F32, T.F16) else None)
    # what the file holds, read back by gguf.quants, in Hugging Face order (row
    # quantization commutes with the row permutation, so dequantize the HF rows)
    deq[hf] = dequant(quantize(W[hf], t), t) if t not in (T.F32, T.F16, T.BF16) else \
        W[hf].astype(np.float16).astype(np.float32) if t == T.F16 else W[hf].astype(np.float32)
    types[hf] = t.name
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

ids = [1, 17, 42, 99, 5, 63, 127, 8, 30, 77]
with np.errstate(all="ignore"):
    lq = llama_forward(cfg, deq, ids).astype(np.float32)
    ls = llama_forward(cfg, {k: v.astype(np.float32) for k, v in W.items()}, ids).astype(np.float32)
rng_q = float(lq.max() - lq.min())
dist = float(np.abs(lq - ls).max())
with open(os.path.join(out, "llama-mixed.json"), "w") as f:
    json.dump({"prompt_ids": ids, "logits": [[float(v) for v in r] for r in lq],
               "logits_src": [[float(v) for v in r] for r in ls], "quant_distance": dist, "logit_range": rng_q,
               "types": types}, f)
print(f"llama-mixed: logits range {rng_q:.3f}, |quantized - bf16| max {dist:.4f} ({dist / rng_q:.3%} of the range)")


# ---- model files to refuse ------------------------------------------------------------
def tiny(name, arch, extra=None, ttype=T.F32, shape=(2, 256)):
    g = gguf.GGUFWriter(os.path.join(out, name), arch)
    for k, v in (extra or {}).items():
        g.add_float32(k, v) if isinstance(v, float) else g.add_uint32(k, v)
    x = np.zeros(shape, np.float32)
    if ttype == T.F32:
        g.add_tensor("blk.0.attn_q.weight", x)
    else:  # hand-made zero blocks of the type
        bs, tb = gguf.GGML_QUANT_SIZES[ttype]
        g.add_tensor("blk.0.attn_q.weight", np.zeros((shape[0], shape[1] // bs * tb), np.uint8), raw_dtype=ttype)
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


base = {"embedding_length": 256, "block_count": 1, "feed_forward_length": 256, "attention.head_count": 4,
        "context_length": 64, "vocab_size": 16}
tiny("bad-model-arch.gguf", "gemma3", {f"gemma3.{k}": v for k, v in base.items()})
tiny("bad-model-moe.gguf", "llama", {**{f"llama.{k}": v for k, v in base.items()}, "llama.expert_count": 8})
# (complete metadata: the refusal must come from the tensor's type)
tiny("bad-model-q5k.gguf", "llama", {**{f"llama.{k}": v for k, v in base.items()},
                                     "llama.attention.layer_norm_rms_epsilon": 1e-5}, ttype=T.Q5_K)
print("wrote bad-model-arch.gguf, bad-model-moe.gguf, bad-model-q5k.gguf")
