"""The benchmark model, its prompt, its weight bytes and the per-case bound.

The model is a LlamaForCausalLM with Llama-2-7B shapes but 16 layers, random
bf16 weights (no download exists), saved once as sharded safetensors and
reused on later runs (a marker file records the config and seed it was made
with)."""
import json
import os
import random
import struct
import time

import torch

# Llama-2-7B shapes, 16 layers (~7.0 GB of bf16 weights).
FULL = dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008,
            num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=32,
            max_position_embeddings=4096)
# --tiny: the same architecture, small enough for a CPU smoke test.
TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=160,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
            max_position_embeddings=512)
COMMON = dict(rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
              bos_token_id=1, eos_token_id=2, initializer_range=0.02)
MARKER = ".bench-complete"


def llama_config(tiny):
    from transformers import LlamaConfig
    kw = dict(TINY if tiny else FULL, **COMMON)
    return LlamaConfig(dtype="bfloat16", **kw), kw


def _save(model, out_dir):
    """save_pretrained as safetensors in 2 GB shards (transformers 4 and 5)."""
    import inspect
    kw = dict(max_shard_size="2GB")
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        kw["safe_serialization"] = True
    model.save_pretrained(out_dir, **kw)


def _patch_config_json(out_dir, kw):
    """transformers 5 writes rope_theta under "rope_parameters" only; real
    Llama-2 checkpoints have it top-level, and so may other readers
    (omptensor's loader). Write both spellings; transformers reads either."""
    path = os.path.join(out_dir, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg.setdefault("rope_theta", kw["rope_theta"])
    cfg.setdefault("torch_dtype", "bfloat16")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)


def ensure_model(workdir, tiny, seed, device, log):
    """Create the model in workdir (once) and return its directory.

    Weights are generated where they will be fastest to make (on the GPU when
    there is one): built directly on `device` in bf16, then every matrix is
    drawn from N(0, 0.02) with a seeded generator and every norm weight set
    to 1, so the checkpoint is a function of the seed only."""
    from transformers import LlamaForCausalLM
    cfg, kw = llama_config(tiny)
    out_dir = os.path.join(workdir, "llama-tiny" if tiny else "llama7b16")
    want = json.dumps(dict(kw, seed=seed), sort_keys=True)
    marker = os.path.join(out_dir, MARKER)
    if os.path.exists(marker) and open(marker).read() == want:
        log(f"model: reusing {out_dir}")
        return out_dir
    t0 = time.perf_counter()
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.ndim == 1:
                p.fill_(1.0)                       # RMSNorm weights
            else:
                p.normal_(0.0, kw["initializer_range"], generator=gen)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    _save(model, out_dir)
    _patch_config_json(out_dir, kw)
    del model
    with open(marker, "w") as f:
        f.write(want)
    log(f"model: generated in {t1 - t0:.1f} s, saved to {out_dir} in "
        f"{time.perf_counter() - t1:.1f} s")
    return out_dir


def write_prompt(workdir, vocab, length, seed):
    """A fixed prompt: BOS then length-1 ids drawn from [3, vocab) with a seed.
    File format (omptensor --prompt-ids-file): one line of comma-separated ids."""
    rng = random.Random(seed)
    ids = [1] + [rng.randrange(3, vocab) for _ in range(length - 1)]
    path = os.path.join(workdir, f"prompt-{length}.txt")
    with open(path, "w") as f:
        f.write(",".join(map(str, ids)) + "\n")
    return path, ids


def write_batch_prompts(workdir, vocab, n, max_len, seed):
    """n prompts for the batched cases, lengths drawn from [max_len // 2,
    max_len], each BOS then ids from [3, vocab), one seeded stream: the first
    k of n prompts are the same for every n >= k, so a case with fewer
    prompts runs a prefix of the same set. File (omptensor --prompts): one
    {"id": i, "prompt_ids": [...]} per line. Returns (path, [ids, ...])."""
    import json as _json
    rng = random.Random(seed * 7919 + 1)
    prompts = []
    for _ in range(n):
        length = rng.randint(max(1, max_len // 2), max_len)
        prompts.append([1] + [rng.randrange(3, vocab) for _ in range(length - 1)])
    path = os.path.join(workdir, f"prompts-{n}x{max_len}.jsonl")
    with open(path, "w") as f:
        for i, p in enumerate(prompts):
            f.write(_json.dumps(dict(id=i, prompt_ids=p)) + "\n")
    return path, prompts


def safetensors_sizes(model_dir):
    """{tensor name: bytes} of the checkpoint, read from the safetensors
    headers (8-byte little-endian header length, then a JSON header)."""
    sizes = {}
    for name in sorted(os.listdir(model_dir)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(model_dir, name), "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        for key, info in header.items():
            if key != "__metadata__":
                begin, end = info["data_offsets"]
                sizes[key] = end - begin
    return sizes


def safetensors_bytes(model_dir):
    """Bytes of all tensors in the checkpoint."""
    return sum(safetensors_sizes(model_dir).values())


def int8_weight_bytes(kw, block=32, scale_bytes=2):
    """Estimated bytes of the model with every matrix in block-quantized int8
    (one byte per weight plus one f16 scale per `block` weights, like ggml's
    Q8_0) and the norms in bf16. Used for the int8 bound when omptensor's
    JSON does not report its own weight bytes."""
    h, i, v, n = (kw["hidden_size"], kw["intermediate_size"], kw["vocab_size"],
                  kw["num_hidden_layers"])
    kvh = kw["num_key_value_heads"] * (h // kw["num_attention_heads"])
    matrices = n * (2 * h * h + 2 * h * kvh + 3 * h * i) + 2 * v * h
    norms = (2 * n + 1) * h
    return int(matrices * (1 + scale_bytes / block) + 2 * norms)


def kv_cache_bytes(kw, tokens, elem_bytes=2):
    """bf16 K and V for every layer over `tokens` positions, batch 1."""
    kvh = kw["num_key_value_heads"] * (kw["hidden_size"] // kw["num_attention_heads"])
    return 2 * kw["num_hidden_layers"] * tokens * kvh * elem_bytes


BOUND_FORMULA = (
    "bound tokens/s = B_h2d / max(0, W - (budget - KV)), where B_h2d is the pinned "
    "host->device bandwidth measured in this run, W the weight bytes the case "
    "must read per token (bf16 checkpoint, or the int8-block estimate), KV the "
    "bf16 KV cache for prompt+new tokens (budget - KV = what the budget can keep "
    "of the weights). When nothing must cross (no budget, or W <= budget - KV) "
    "the bound is the HBM bound HBM_BW / W with HBM_BW = {hbm:.2e} B/s.")


def bound_tokens_per_second(weight_bytes, budget_bytes, kv_bytes, h2d_bw, hbm_bw):
    """The per-case bound (see BOUND_FORMULA); None without a bandwidth."""
    if budget_bytes is None:
        return hbm_bw / weight_bytes
    crossing = max(0, weight_bytes - max(0, budget_bytes - kv_bytes))
    if crossing == 0:
        return hbm_bw / weight_bytes
    if not h2d_bw:
        return None
    return h2d_bw / crossing
