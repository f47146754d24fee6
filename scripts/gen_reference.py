#!/usr/bin/env python3
"""gen_reference.py — write the PyTorch/transformers reference data under tests/data/.

Python is used ONLY to generate these golden files; omptensor and its tests are
C and never run this script. The outputs are committed (a few MB in all).

Usage (from the repository root, in a virtualenv outside the repo):

    python3 -m venv .venv
    .venv/bin/pip install torch transformers numpy safetensors
    .venv/bin/python scripts/gen_reference.py            # writes tests/data/
    .venv/bin/python scripts/gen_reference.py --check    # regenerate into a
                                                                  # temp dir, compare bytes

What it writes (see tests/data/README.md for the full description):

    tests/data/models/<name>/   config.json, model.safetensors (or shards + index),
                                generation_config.json (as save_pretrained writes them),
                                logits.npy  float32 [prompt_len, vocab]: the logits of
                                            every prompt position, fp32 forward,
                                manifest.json (magic, format version, versions, seed,
                                            prompt ids, greedy continuation, shapes, ...)
    tests/data/train/gpt2_small/ one training step of gpt2_small on a fixed batch:
                                logits.npy, grads.safetensors (every parameter's gradient),
                                params_after.safetensors (weights after 10 AdamW steps),
                                manifest.json (batch, loss, the 10 losses, hyperparameters)

Deterministic: fixed seeds, torch.use_deterministic_algorithms(True), one CPU
thread, eager attention, no timestamps. Re-running on the same machine and
versions gives identical bytes (`--check` verifies that).
"""

import argparse
import copy
import filecmp
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile

import numpy as np
import safetensors
import safetensors.torch
import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

# Bump GENERATOR_VERSION whenever the script's output changes in meaning or content.
# Bump FORMAT_VERSION whenever the layout of the files or manifest changes; C readers
# check it and fail loudly on a mismatch.
MAGIC = "omptensor-reference"
FORMAT_VERSION = 1
GENERATOR_VERSION = 1
GENERATOR = "scripts/gen_reference.py"

BASE_SEED = 20240501
N_NEW_TOKENS = 16

# 13 ids: first/last id of a 256-vocab, a length that is not a multiple of 8.
PROMPT_256 = [1, 17, 42, 255, 0, 128, 7, 99, 200, 3, 64, 31, 5]
# Same, but with ids >= 256 for the 300-token vocabulary.
PROMPT_300 = [1, 299, 42, 255, 0, 128, 7, 270, 200, 3, 64, 31, 5]

# Weight init (larger than HF's default std 0.02 so logits are far from uniform
# and errors show): every Linear / Conv1D / Embedding weight ~ N(0, 0.2^2),
# every bias ~ N(0, 0.1^2), every norm weight ~ 1 + N(0, 0.1^2), norm bias ~ N(0, 0.1^2).
INIT_STD_WEIGHT = 0.2
INIT_STD_BIAS = 0.1
INIT_STD_NORM = 0.1

# Training reference hyperparameters (issue 7).
TRAIN_B, TRAIN_T = 2, 16
TRAIN_STEPS = 10
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)


def llama_common():
    # bos/eos None: generation never stops early; the greedy continuation is N_NEW_TOKENS long.
    return dict(
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        hidden_act="silu",
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )


MODELS = [
    # name, class, config kwargs, prompt, seed offset
    dict(
        name="llama_gqa",
        cls="LlamaForCausalLM",
        config=dict(
            llama_common(),
            hidden_size=64, intermediate_size=172, num_hidden_layers=3,
            num_attention_heads=8, num_key_value_heads=2, vocab_size=256,
            rope_theta=10000.0, tie_word_embeddings=False,
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 1,
    ),
    dict(
        name="llama_tied",
        cls="LlamaForCausalLM",
        config=dict(
            llama_common(),
            hidden_size=64, intermediate_size=172, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=4, vocab_size=256,
            rope_theta=500000.0, tie_word_embeddings=True,
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 2,
    ),
    dict(
        name="llama_odd",
        cls="LlamaForCausalLM",
        config=dict(
            llama_common(),
            hidden_size=48, intermediate_size=100, num_hidden_layers=2,
            num_attention_heads=3, num_key_value_heads=1, vocab_size=300,
            rope_theta=10000.0, tie_word_embeddings=False,
        ),
        prompt=PROMPT_300,
        seed=BASE_SEED + 3,
    ),
    # RoPE scaling (issue 18): Llama 3's llama3 type with an original context
    # short enough that the three frequency bands (scaled, smoothed, kept)
    # all occur at head_dim 16, and linear interpolation.
    dict(
        name="llama_rope_llama3",
        cls="LlamaForCausalLM",
        config=dict(
            llama_common(),
            hidden_size=64, intermediate_size=100, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
            rope_theta=500000.0, tie_word_embeddings=True,
            rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                              original_max_position_embeddings=64),
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 6,  # + 5 gave a greedy top-2 margin of 0.0016 (a tie)
    ),
    dict(
        name="llama_rope_linear",
        cls="LlamaForCausalLM",
        config=dict(
            llama_common(),
            hidden_size=48, intermediate_size=100, num_hidden_layers=2,
            num_attention_heads=3, num_key_value_heads=3, vocab_size=256,
            rope_theta=10000.0, tie_word_embeddings=False,
            rope_scaling=dict(rope_type="linear", factor=2.5),
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 5,
    ),
    # yarn (Qwen2.5 / DeepSeek long context): a ramp over the pairs and cos,
    # sin scaled by 0.1 ln(factor) + 1.
    dict(
        name="llama_rope_yarn",
        cls="LlamaForCausalLM",
        config=dict(
            llama_common(),
            hidden_size=64, intermediate_size=100, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
            rope_theta=10000.0, tie_word_embeddings=False,
            rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=32),
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 11,
    ),
    # dynamic (NTK): max_position_embeddings 16 < the 13 + 16 positions
    # generated, so the decode steps past 16 run with a growing base.
    dict(
        name="llama_rope_dynamic",
        cls="LlamaForCausalLM",
        config=dict(
            llama_common(),
            max_position_embeddings=16,
            hidden_size=48, intermediate_size=100, num_hidden_layers=2,
            num_attention_heads=3, num_key_value_heads=1, vocab_size=256,
            rope_theta=10000.0, tie_word_embeddings=True,
            rope_scaling=dict(rope_type="dynamic", factor=2.0),
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 12,
    ),
    # Llama decoders of other families (issue 18): Qwen2 (q/k/v biases,
    # tied, no window) and Mistral with a sliding window of 8, shorter than
    # the 13-token prompt: the window shapes the prompt and every new token.
    dict(
        name="qwen2_tiny",
        cls="Qwen2ForCausalLM",
        config=dict(
            llama_common(),
            hidden_size=64, intermediate_size=100, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
            rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False,
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 7,
    ),
    dict(
        name="mistral_tiny",
        cls="MistralForCausalLM",
        config=dict(
            llama_common(),
            hidden_size=48, intermediate_size=100, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=256,
            rope_theta=10000.0, tie_word_embeddings=False, sliding_window=8,
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 8,
    ),
    # Gemma: GELU (tanh) gate, RMSNorm by (1 + w), embeddings times
    # sqrt(hidden), tied, an explicit head_dim (24) that is not hidden/heads.
    dict(
        name="gemma_tiny",
        cls="GemmaForCausalLM",
        config=dict(
            max_position_embeddings=128, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
            bos_token_id=None, eos_token_id=None, pad_token_id=None,
            hidden_size=64, intermediate_size=100, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=1, head_dim=24, vocab_size=256,
            rope_theta=10000.0, tie_word_embeddings=True,
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 9,
    ),
    # Phi-3: q, k, v in one qkv_proj and gate, up in one gate_up_proj.
    dict(
        name="phi3_tiny",
        cls="Phi3ForCausalLM",
        config=dict(
            llama_common(),
            hidden_size=64, intermediate_size=100, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
            rope_theta=10000.0, tie_word_embeddings=False, sliding_window=None,
            resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0,
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 10,
    ),
    # Mixture of experts (issue 18): 4 experts, top 2, by the router of each
    # token. Mixtral with a sliding window of 8 over the 13-token prompt and
    # odd widths; Qwen2-MoE with q/k/v biases, a gated shared expert and the
    # chosen weights not renormalised (norm_topk_prob false, its default).
    dict(
        name="mixtral_tiny",
        cls="MixtralForCausalLM",
        config=dict(
            llama_common(),
            hidden_size=48, intermediate_size=60, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
            rope_theta=1000000.0, tie_word_embeddings=False, sliding_window=8,
            num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.0,
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 13,
    ),
    dict(
        name="qwen2_moe_tiny",
        cls="Qwen2MoeForCausalLM",
        config=dict(
            llama_common(),
            hidden_size=64, intermediate_size=100, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
            rope_theta=1000000.0, tie_word_embeddings=False, use_sliding_window=False,
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=40,
            shared_expert_intermediate_size=72, norm_topk_prob=False, decoder_sparse_step=1,
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 14,
    ),
    dict(
        name="gpt2_small",
        cls="GPT2LMHeadModel",
        config=dict(
            n_embd=64, n_layer=2, n_head=4, vocab_size=256, n_positions=128,
            activation_function="gelu_new", layer_norm_epsilon=1e-5,
            # No dropout anywhere, so the training reference is deterministic.
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=None, eos_token_id=None, pad_token_id=None,
            tie_word_embeddings=True,
        ),
        prompt=PROMPT_256,
        seed=BASE_SEED + 4,
    ),
]

# Variants: same weights as a base model, saved differently.
VARIANTS = [
    dict(name="llama_sharded", base="llama_gqa", dtype="float32", max_shard_size="200KB"),
    dict(name="llama_bf16", base="llama_gqa", dtype="bfloat16"),
    dict(name="llama_odd_f16", base="llama_odd", dtype="float16"),
]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def versions():
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "safetensors": safetensors.__version__,
    }


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_table(d):
    out = {}
    for fn in sorted(os.listdir(d)):
        if fn == "manifest.json":
            continue
        p = os.path.join(d, fn)
        out[fn] = {"bytes": os.path.getsize(p), "sha256": sha256(p)}
    return out


def st_metadata(what):
    # ONE key only: safetensors writes __metadata__ from a hash map, so the order of
    # several keys changes from run to run and the file would not be reproducible.
    return {MAGIC: f"format_version={FORMAT_VERSION}; {what}"}


def manifest_head(kind):
    return {
        "magic": MAGIC,
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "versions": versions(),
    }


def write_json(path, obj):
    """Indented JSON, but a list of plain numbers stays on one line (prompt ids, losses)."""
    def enc(o, ind):
        pad = "  " * ind
        if isinstance(o, dict):
            if not o:
                return "{}"
            items = [f'{pad}  {json.dumps(k)}: {enc(v, ind + 1)}' for k, v in o.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(o, (list, tuple)):
            if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in o):
                return "[" + ", ".join(json.dumps(x) for x in o) + "]"
            items = [f"{pad}  {enc(v, ind + 1)}" for v in o]
            return "[\n" + ",\n".join(items) + "\n" + pad + "]"
        return json.dumps(o)
    with open(path, "w") as f:
        f.write(enc(obj, 0) + "\n")


# causal-LM class name -> (config class, model class)
FAMILIES = {
    "LlamaForCausalLM": (LlamaConfig, LlamaForCausalLM),
    "GPT2LMHeadModel": (GPT2Config, GPT2LMHeadModel),
    "MistralForCausalLM": (transformers.MistralConfig, transformers.MistralForCausalLM),
    "Qwen2ForCausalLM": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
    "GemmaForCausalLM": (transformers.GemmaConfig, transformers.GemmaForCausalLM),
    "Phi3ForCausalLM": (transformers.Phi3Config, transformers.Phi3ForCausalLM),
    "MixtralForCausalLM": (transformers.MixtralConfig, transformers.MixtralForCausalLM),
    "Qwen2MoeForCausalLM": (transformers.Qwen2MoeConfig, transformers.Qwen2MoeForCausalLM),
}


def make_config(spec):
    kw = dict(spec["config"])
    cfg = FAMILIES[spec["cls"]][0](**kw)
    cfg._attn_implementation = "eager"
    if hasattr(cfg, "_experts_implementation"):  # MoE: one expert at a time, the plain loop
        cfg._experts_implementation = "eager"
    return cfg


@torch.no_grad()
def init_weights(model, seed):
    """Reinitialise every parameter from one generator, in named_parameters order.

    Tied parameters appear once in named_parameters, so tying is kept."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        is_norm = ("norm" in name) or (".ln_" in name) or name.startswith("transformer.ln_f")
        if is_norm and leaf == "weight":
            v = 1.0 + INIT_STD_NORM * torch.randn(p.shape, generator=g)
        elif leaf == "bias":
            v = INIT_STD_BIAS * torch.randn(p.shape, generator=g)
        else:
            v = INIT_STD_WEIGHT * torch.randn(p.shape, generator=g)
        p.copy_(v.to(p.dtype))


def build_model(spec):
    cfg = make_config(spec)
    cls = FAMILIES[spec["cls"]][1]
    torch.manual_seed(spec["seed"])
    model = cls(cfg).float()
    init_weights(model, spec["seed"])
    model.eval()
    return model


def load_model(spec_cls, d, dtype=torch.float32):
    cls = FAMILIES[spec_cls][1]
    kw = {"experts_implementation": "eager"} if FAMILIES[spec_cls][0]().__dict__.get("num_experts_per_tok") else {}
    m = cls.from_pretrained(d, dtype=dtype, attn_implementation="eager", **kw)
    m.eval()
    return m


@torch.no_grad()
def prompt_logits(model, prompt):
    ids = torch.tensor([prompt], dtype=torch.long)
    out = model(input_ids=ids, use_cache=False)
    return out.logits[0].float().numpy().astype(np.float32)  # (prompt_len, vocab)


@torch.no_grad()
def greedy(model, prompt, n):
    """Greedy continuation with HF generate (KV cache), cross-checked against a
    full-recompute argmax loop; also returns the top-1/top-2 logit margin of each step."""
    ids = torch.tensor([prompt], dtype=torch.long)
    out = model.generate(
        input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
        max_new_tokens=n, min_new_tokens=n, num_beams=1, pad_token_id=0,
        eos_token_id=None, bos_token_id=None,
    )
    gen = out[0, len(prompt):].tolist()
    seq = list(prompt)
    margins = []
    rp = getattr(model.config, "rope_parameters", None) or {}
    if rp.get("rope_type") == "dynamic":
        # dynamic RoPE: cached keys keep the frequencies they were rotated with,
        # a full recompute rotates them all with the current ones, so the two
        # differ by design past max_position_embeddings; the cross-check is a
        # step loop over the cache (what generate() and omptensor compute)
        o = model(input_ids=ids, use_cache=True)
        for _ in range(n):
            logits = o.logits[0, -1].float()
            top2 = torch.topk(logits, 2).values
            margins.append(float(top2[0] - top2[1]))
            seq.append(int(torch.argmax(logits)))
            o = model(input_ids=torch.tensor([[seq[-1]]]), past_key_values=o.past_key_values, use_cache=True)
        assert seq[len(prompt):] == gen, f"generate() {gen} != cached step loop {seq[len(prompt):]}"
        return gen, margins
    for _ in range(n):
        logits = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1].float()
        top2 = torch.topk(logits, 2).values
        margins.append(float(top2[0] - top2[1]))
        seq.append(int(torch.argmax(logits)))
    assert seq[len(prompt):] == gen, f"generate() {gen} != recompute loop {seq[len(prompt):]}"
    return gen, margins


def save_npy(path, arr):
    np.save(path, np.ascontiguousarray(arr))


def write_model_ref(d, spec, model_for_logits, weights_dtype, logits_desc, extra=None):
    prompt = spec["prompt"]
    logits = prompt_logits(model_for_logits, prompt)
    save_npy(os.path.join(d, "logits.npy"), logits)
    gen, margins = greedy(model_for_logits, prompt, N_NEW_TOKENS)
    lrange = float(logits.max() - logits.min())
    # A C result within the 1e-4*range tolerance could flip a step whose margin is < 2*tolerance.
    if min(margins) < 2e-4 * lrange:
        raise SystemExit(f"{spec['name']}: greedy top-2 margin {min(margins):g} too small; change the seed")
    cfg = model_for_logits.config
    m = manifest_head("model")
    m.update({
        "name": os.path.basename(d),
        "model_class": spec["cls"],
        "model_type": cfg.model_type,
        "seed": spec["seed"],
        "config_kwargs": spec["config"],
        "device": "cpu",
        "weights_dtype": weights_dtype,
        "init": {
            "weight_std": INIT_STD_WEIGHT, "bias_std": INIT_STD_BIAS,
            "norm_weight": f"1 + N(0, {INIT_STD_NORM}^2)", "norm_bias_std": INIT_STD_BIAS,
        },
        "attn_implementation": "eager",
        "prompt_ids": prompt,
        "prompt_len": len(prompt),
        "vocab_size": int(cfg.vocab_size),
        "logits": {
            "file": "logits.npy",
            "dtype": "float32",
            "shape": list(logits.shape),
            "what": logits_desc,
            "min": float(logits.min()),
            "max": float(logits.max()),
            "range": lrange,
            "sum": float(logits.astype(np.float64).sum()),
            "tolerance_fp32": "max abs error <= 1e-4 * range",
        },
        "generation": {
            "method": "greedy (generate, do_sample=False, num_beams=1, KV cache), checked against full recompute",
            "max_new_tokens": N_NEW_TOKENS,
            "generated_ids": gen,
            "top2_margins": margins,
            "min_top2_margin": min(margins),
        },
    })
    if extra:
        m.update(extra)
    m["files"] = file_table(d)
    write_json(os.path.join(d, "manifest.json"), m)
    return logits, gen


def gen_models(root, only=None):
    base_models = {}
    results = {}
    for spec in MODELS:
        if only and spec["name"] not in only:
            continue
        d = os.path.join(root, "models", spec["name"])
        os.makedirs(d)
        model = build_model(spec)
        model.save_pretrained(d, safe_serialization=True)
        # Logits from the files as written, not from the in-memory model.
        reloaded = load_model(spec["cls"], d)
        for (n1, p1), (n2, p2) in zip(model.state_dict().items(), reloaded.state_dict().items()):
            assert n1 == n2 and torch.equal(p1, p2), n1
        results[spec["name"]] = write_model_ref(
            d, spec, reloaded, "float32",
            "fp32 forward of the fp32 weights (HF transformers, eager attention, CPU)")
        base_models[spec["name"]] = (spec, model)

    for var in VARIANTS:
        if only and var["name"] not in only:
            continue
        spec, model = base_models[var["base"]]
        vspec = dict(spec, name=var["name"])
        d = os.path.join(root, "models", var["name"])
        os.makedirs(d)
        dtype = DTYPES[var["dtype"]]
        m = copy.deepcopy(model).to(dtype)
        kw = {}
        if "max_shard_size" in var:
            kw["max_shard_size"] = var["max_shard_size"]
        m.save_pretrained(d, safe_serialization=True, **kw)
        extra = {"variant_of": var["base"], "variant": {k: v for k, v in var.items() if k != "name"}}
        if var["dtype"] == "float32":
            reloaded = load_model(spec["cls"], d)
            logits, gen = write_model_ref(
                d, vspec, reloaded, "float32",
                "fp32 forward of the fp32 weights (HF transformers, eager attention, CPU)", extra)
            base_logits, base_gen = results[var["base"]]
            assert np.array_equal(logits, base_logits) and gen == base_gen, "sharded copy differs"
        else:
            # Reference logits: the low-precision weights upcast to fp32 (exact), fp32 forward.
            up = load_model(spec["cls"], d, dtype=torch.float32)
            # Also HF's own forward in the low precision (CPU), to show the expected spread.
            low = load_model(spec["cls"], d, dtype=dtype)
            low_logits = prompt_logits(low, spec["prompt"])
            save_npy(os.path.join(d, f"logits_{var['dtype']}_forward.npy"), low_logits)
            fp32_ref, _ = results[var["base"]]
            extra["low_precision_forward"] = {
                "file": f"logits_{var['dtype']}_forward.npy",
                "dtype": "float32",
                "shape": list(low_logits.shape),
                "what": f"HF forward entirely in {var['dtype']} on CPU (weights and activations "
                        f"{var['dtype']}; RMSNorm/softmax/rope upcast internally as HF does), "
                        "logits cast to float32. Informative: shows the error of low-precision compute.",
            }
            up_logits = prompt_logits(up, spec["prompt"])
            extra["errors_max_abs"] = {
                "what": "max abs differences between logit sets, to size low-precision tolerances",
                "logits.npy_vs_base_fp32_logits": float(np.abs(up_logits - fp32_ref).max()),
                f"logits_{var['dtype']}_forward.npy_vs_logits.npy": float(np.abs(low_logits - up_logits).max()),
                f"logits_{var['dtype']}_forward.npy_vs_base_fp32_logits":
                    float(np.abs(low_logits - fp32_ref).max()),
            }
            write_model_ref(
                d, vspec, up, var["dtype"],
                f"fp32 forward of the {var['dtype']} weights upcast to float32 (exact upcast; "
                "HF transformers, eager attention, CPU). NOT the base model's logits.", extra)


def train_run(model_dir, cls, inputs, targets, dtype):
    """TRAIN_STEPS rounds of forward, backward, AdamW step on one batch.
    Returns step-0 logits, step-0 grads, the per-step losses and the final parameters."""
    model = load_model(cls, model_dir).to(dtype)
    model.train()  # dropout probabilities are 0 in the config, so train() == eval() numerically
    params = dict(model.named_parameters())
    opt = torch.optim.AdamW(params.values(), foreach=False, fused=False, **ADAMW)
    losses = []
    for step in range(TRAIN_STEPS):
        opt.zero_grad(set_to_none=True)
        logits = model(input_ids=inputs, use_cache=False).logits  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="mean")
        loss.backward()
        if step == 0:
            logits0 = logits.detach().clone()
            grads = {n: p.grad.detach().clone().contiguous() for n, p in params.items()}
        losses.append(loss.item())
        opt.step()
    after = {n: p.detach().clone().contiguous() for n, p in params.items()}
    return logits0, grads, losses, after


def max_abs(a, b, names=None):
    names = names or a.keys()
    return max(float((a[n].double() - b[n].double()).abs().max()) for n in names)


def gen_train(root):
    spec = next(s for s in MODELS if s["name"] == "gpt2_small")
    d = os.path.join(root, "train", "gpt2_small")
    os.makedirs(d)
    model_dir = os.path.join(root, "models", "gpt2_small")

    g = torch.Generator().manual_seed(BASE_SEED + 100)
    tokens = torch.randint(0, spec["config"]["vocab_size"], (TRAIN_B, TRAIN_T + 1), generator=g)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    logits, grads, losses, after = train_run(model_dir, spec["cls"], inputs, targets, torch.float32)
    loss0 = losses[0]
    save_npy(os.path.join(d, "logits.npy"), logits.numpy().astype(np.float32))
    safetensors.torch.save_file(grads, os.path.join(d, "grads.safetensors"),
                                metadata=st_metadata("gradients of the step-0 mean loss"))
    safetensors.torch.save_file(after, os.path.join(d, "params_after.safetensors"),
                                metadata=st_metadata(f"parameters after {TRAIN_STEPS} AdamW steps"))
    grad_norm = float(torch.sqrt(sum((g_.double() ** 2).sum() for g_ in grads.values())))

    # The same run in float64, to measure how far an exact computation lands from this
    # fp32 reference (guides the tolerances a C implementation should use).
    _, g64, l64, a64 = train_run(model_dir, spec["cls"], inputs, targets, torch.float64)
    C = spec["config"]["n_embd"]
    key_bias = [n for n in after if n.endswith("attn.c_attn.bias")]
    a_nokb = {n: (t[:C].clone() if n in key_bias else t) for n, t in after.items()}
    a64_nokb = {n: (t[:C].clone() if n in key_bias else t) for n, t in a64.items()}
    a_kb = {n: after[n][C:2 * C] for n in key_bias}
    a64_kb = {n: a64[n][C:2 * C] for n in key_bias}
    a_vb = {n: after[n][2 * C:] for n in key_bias}
    a64_vb = {n: a64[n][2 * C:] for n in key_bias}
    measured = {
        "grads_max_abs": max_abs(grads, g64),
        "loss_max_abs": max(abs(x - y) for x, y in zip(losses, l64)),
        "params_after_max_abs_outside_key_bias": max(max_abs(a_nokb, a64_nokb), max_abs(a_vb, a64_vb)),
        "params_after_max_abs_key_bias": max_abs(a_kb, a64_kb),
    }

    m = manifest_head("train")
    m.update({
        "name": "gpt2_small",
        "model_dir": "tests/data/models/gpt2_small",
        "model_sha256": sha256(os.path.join(model_dir, "model.safetensors")),
        "model_class": spec["cls"],
        "batch": {
            "B": TRAIN_B, "T": TRAIN_T, "seed": BASE_SEED + 100,
            "tokens": tokens.tolist(),
            "inputs": inputs.tolist(),
            "targets": targets.tolist(),
            "note": "tokens is (B, T+1); inputs = tokens[:, :T], targets = tokens[:, 1:]",
        },
        "loss": {
            "what": "mean over B*T of cross_entropy(logits, targets), natural log",
            "step0": loss0,
            "per_step": losses,
            "note": f"per_step[i] is the loss computed before the i-th optimizer update "
                    f"({TRAIN_STEPS} forward/backward/update rounds on the same batch)",
        },
        "optimizer": {
            "name": "AdamW (torch.optim.AdamW, foreach=False, fused=False)",
            "lr": ADAMW["lr"], "beta1": ADAMW["betas"][0], "beta2": ADAMW["betas"][1],
            "eps": ADAMW["eps"], "weight_decay": ADAMW["weight_decay"],
            "update": "t=1..; m=b1*m+(1-b1)*g; v=b2*v+(1-b2)*g^2; "
                      "p -= lr * (m/(1-b1^t)) / (sqrt(v)/sqrt(1-b2^t) + eps); "
                      "decoupled weight decay p *= (1-lr*wd) first (wd=0 here); no grad clipping; "
                      "constant lr",
            "steps": TRAIN_STEPS,
        },
        "logits": {"file": "logits.npy", "dtype": "float32",
                   "shape": [TRAIN_B, TRAIN_T, spec["config"]["vocab_size"]],
                   "what": "step-0 logits of the inputs (fp32)"},
        "grads": {
            "file": "grads.safetensors",
            "what": "gradient of step-0 mean loss w.r.t. every parameter, HF parameter names. "
                    "lm_head is tied to transformer.wte.weight: its gradient is the sum of both uses "
                    "and there is no separate lm_head.weight entry.",
            "global_norm": grad_norm,
            "names": list(grads.keys()),
        },
        "params_after": {"file": "params_after.safetensors",
                         "what": f"all parameters after {TRAIN_STEPS} AdamW steps"},
        "tolerances_suggested": {
            "logits": "max abs <= 1e-4 * range",
            "loss": "abs <= 1e-5",
            "grads": "max abs <= 1e-4 * max|grad| per tensor (llm.c uses ~1e-2 relative for float kernels)",
            "losses_10_steps": "abs <= 1e-4 each",
            "params_after": "max abs <= 5e-5, EXCEPT the key slice [n_embd:2*n_embd] of every "
                            "attn.c_attn.bias: its gradient is mathematically zero (softmax ignores "
                            "a constant added to all scores), numerically ~1e-9 noise, and Adam "
                            "turns noise into +-lr steps; there only check |p_after - p_before| <= steps*lr",
        },
        "measured_float64_vs_this_reference": measured,
    })
    m["files"] = file_table(d)
    write_json(os.path.join(d, "manifest.json"), m)


def generate(root, only=None):
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    if only:  # just these models, into root/models/<name>; nothing else is touched
        for name in only:
            shutil.rmtree(os.path.join(root, "models", name), ignore_errors=True)
        os.makedirs(os.path.join(root, "models"), exist_ok=True)
        gen_models(root, only)
        return
    if os.path.exists(root):
        for sub in ("models", "train"):
            shutil.rmtree(os.path.join(root, sub), ignore_errors=True)
    os.makedirs(root, exist_ok=True)
    gen_models(root)
    gen_train(root)


def compare_trees(a, b):
    bad = []
    for dirpath, _, files in os.walk(a):
        for fn in files:
            pa = os.path.join(dirpath, fn)
            pb = os.path.join(b, os.path.relpath(pa, a))
            if not os.path.exists(pb) or not filecmp.cmp(pa, pb, shallow=False):
                bad.append(os.path.relpath(pa, a))
    for dirpath, _, files in os.walk(b):
        for fn in files:
            pb = os.path.join(dirpath, fn)
            if not os.path.exists(os.path.join(a, os.path.relpath(pb, b))):
                bad.append(os.path.relpath(pb, b) + " (extra)")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out", default=os.path.join(here, "tests", "data"),
                    help="output root (default: tests/data of this repository)")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary folder and compare byte for byte with --out")
    ap.add_argument("--only", default="",
                    help="comma-separated model names: (re)write only those (a new model added to MODELS)")
    args = ap.parse_args()
    only = [n for n in args.only.split(",") if n]
    transformers.logging.set_verbosity_error()
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            generate(tmp)
            bad = [p for p in compare_trees(os.path.join(tmp), args.out)
                   if p.split(os.sep)[0] in ("models", "train")]
            if bad:
                print("gen_reference: differs: " + ", ".join(sorted(bad)), file=sys.stderr)
                return 1
            print("gen_reference: identical")
            return 0
    generate(args.out, only)
    print(f"gen_reference: wrote {args.out}" + (f" ({', '.join(only)})" if only else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
