"""The mixture-of-experts benchmark model, its byte accounting, the routing
of a decode and the bounds of bench/moe_h200.py.

The model is Mixtral-shaped (8 experts, top-2, hidden 4096, intermediate
14336, 32 heads / 8 KV heads, vocab 32000) with as many layers as asked (7:
20.8 GB of bf16), random weights from a seed, written straight into sharded
safetensors (<= 5 GB a shard, model.safetensors.index.json) under the Hugging
Face hub's Mixtral names (block_sparse_moe.experts.{e}.w1/w3/w2), which
transformers 5 fuses into its experts tensors on load and omptensor reads as
they are. A marker file records the config and seed it was made with."""
import json
import os
import time

import torch

from .model import MARKER, kv_cache_bytes, safetensors_sizes

FULL = dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
            num_hidden_layers=7, num_attention_heads=32, num_key_value_heads=8,
            num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=4096)
TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=96,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=512)
COMMON = dict(rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=None, router_jitter_noise=0.0,
              tie_word_embeddings=False, hidden_act="silu", attention_dropout=0.0,
              bos_token_id=1, eos_token_id=2, initializer_range=0.02, output_router_logits=False,
              router_aux_loss_coef=0.02, use_cache=True)
SHARD_BYTES = 5_000_000_000          # the hub's 5 GB shards
FORMAT = 1                           # bump when the tensors' recipe changes (remakes the model)


def mixtral_kw(tiny, layers=None):
    kw = dict(TINY if tiny else FULL, **COMMON)
    if layers:
        kw["num_hidden_layers"] = int(layers)
    return kw


def tensor_specs(kw):
    """(name, shape, std) of every tensor, in file order. Matrices are drawn
    from N(0, 1/fan_in) (so each projection keeps unit scale: the router's
    logits have std ~1 on the normed hidden state and the choice of experts
    changes from token to token), the embeddings from N(0, 1), norms are 1
    (std None)."""
    d, f, v = kw["hidden_size"], kw["intermediate_size"], kw["vocab_size"]
    hd = d // kw["num_attention_heads"]
    q, kv = kw["num_attention_heads"] * hd, kw["num_key_value_heads"] * hd
    s = lambda fan_in: fan_in ** -0.5  # noqa: E731
    out = [("model.embed_tokens.weight", (v, d), 1.0)]
    for i in range(kw["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (d,), None),
                (p + "self_attn.q_proj.weight", (q, d), s(d)),
                (p + "self_attn.k_proj.weight", (kv, d), s(d)),
                (p + "self_attn.v_proj.weight", (kv, d), s(d)),
                (p + "self_attn.o_proj.weight", (d, q), s(q)),
                (p + "post_attention_layernorm.weight", (d,), None),
                (p + "block_sparse_moe.gate.weight", (kw["num_local_experts"], d), s(d))]
        for e in range(kw["num_local_experts"]):
            x = f"{p}block_sparse_moe.experts.{e}."
            out += [(x + "w1.weight", (f, d), s(d)), (x + "w3.weight", (f, d), s(d)),
                    (x + "w2.weight", (d, f), s(f))]
    out += [("model.norm.weight", (d,), None), ("lm_head.weight", (v, d), s(d))]
    return out


def _numel(shape):
    n = 1
    for x in shape:
        n *= x
    return n


def _shards(specs, limit=SHARD_BYTES):
    """Consecutive groups of specs of at most `limit` bytes each (bf16)."""
    shards, cur, size = [], [], 0
    for spec in specs:
        b = 2 * _numel(spec[1])
        if cur and size + b > limit:
            shards.append(cur)
            cur, size = [], 0
        cur.append(spec)
        size += b
    if cur:
        shards.append(cur)
    return shards


def _header(group):
    """The safetensors header of one shard (padded to 8 bytes) and its tensors' offsets."""
    meta, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, _ in group:
        n = 2 * _numel(shape)
        meta[name] = dict(dtype="BF16", shape=list(shape), data_offsets=[off, off + n])
        off += n
    raw = json.dumps(meta, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return raw, off


def config_json(kw):
    import transformers
    cfg = dict(kw, model_type="mixtral", architectures=["MixtralForCausalLM"],
               torch_dtype="bfloat16", dtype="bfloat16",
               transformers_version=transformers.__version__)
    return json.dumps(cfg, indent=2, sort_keys=True) + "\n"


def ensure_model(workdir, tiny, seed, device, log, layers=None):
    """Create the model in workdir (once) and return (its directory, kw).

    Each shard's tensors are drawn on `device` (the GPU when there is one)
    into one flat bf16 buffer with a seeded generator, copied to pinned host
    memory and written with its header: the checkpoint is a function of the
    config and the seed only. Needs one shard (<= 5 GB) of free device memory."""
    kw = mixtral_kw(tiny, layers)
    out_dir = os.path.join(workdir, "mixtral-tiny" if tiny else f"mixtral{kw['num_hidden_layers']}l")
    want = json.dumps(dict(kw, seed=seed, format=FORMAT), sort_keys=True)
    marker = os.path.join(out_dir, MARKER)
    if os.path.exists(marker) and open(marker).read() == want:
        log(f"model: reusing {out_dir}")
        return out_dir, kw
    t0 = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    if os.path.exists(marker):
        os.remove(marker)
    for name in os.listdir(out_dir):          # shards of an older recipe
        if name.endswith(".safetensors") or name.endswith(".index.json"):
            os.remove(os.path.join(out_dir, name))
    cuda = device.startswith("cuda")
    shards = _shards(tensor_specs(kw))
    biggest = max(_header(g)[1] for g in shards)
    if cuda:
        free, _ = torch.cuda.mem_get_info(0)
        if biggest > free - (1 << 30):
            raise RuntimeError(f"model making needs {biggest / 1e9:.1f} GB of free device memory, "
                               f"{free / 1e9:.1f} GB free")
    gen = torch.Generator(device=device).manual_seed(seed)
    dev_buf = torch.empty(biggest // 2, dtype=torch.bfloat16, device=device)
    if cuda:
        from .common import PinnedHost
        host = PinnedHost(biggest // 2, torch.bfloat16, True)
        host_buf = host.t
    else:
        host, host_buf = None, dev_buf
    weight_map, total, n = {}, 0, len(shards)
    try:
        for k, group in enumerate(shards):
            fname = f"model-{k + 1:05d}-of-{n:05d}.safetensors"
            raw, nbytes = _header(group)
            off = 0
            with torch.no_grad():
                for name, shape, std in group:
                    view = dev_buf[off:off + _numel(shape)]
                    if std is None:
                        view.fill_(1.0)
                    else:
                        view.normal_(0.0, std, generator=gen)
                    off += _numel(shape)
                    weight_map[name] = fname
                if cuda:
                    host_buf[:off].copy_(dev_buf[:off])      # synchronous: pinned, ~50 GB/s
            data = host_buf[:off].view(torch.uint8).numpy()
            tmp = os.path.join(out_dir, fname + ".tmp")
            with open(tmp, "wb") as f:
                f.write(len(raw).to_bytes(8, "little"))
                f.write(raw)
                f.write(memoryview(data))
            os.replace(tmp, os.path.join(out_dir, fname))
            total += nbytes
    finally:
        del dev_buf
        if host is not None:
            host.close()
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(dict(metadata=dict(total_size=total), weight_map=weight_map), f, indent=2)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        f.write(config_json(kw))
    with open(marker, "w") as f:
        f.write(want)
    log(f"model: {total / 1e9:.2f} GB in {n} shards made and written to {out_dir} in "
        f"{time.perf_counter() - t0:.1f} s")
    return out_dir, kw


# -- byte accounting --------------------------------------------------------

def byte_accounting(model_dir, kw, prompt_len, new_tokens):
    """The bytes the bounds are counted on, from the checkpoint's headers:
    weight_bytes (all), expert_bytes (one expert: w1 + w3 + w2), dense_bytes
    (everything that is not an expert: attention, norms, routers, embeddings,
    lm_head), kv_cache_bytes (bf16 K and V of prompt + new tokens)."""
    sizes = safetensors_sizes(model_dir)
    experts = {k: v for k, v in sizes.items() if ".experts." in k}
    n_exp = kw["num_hidden_layers"] * kw["num_local_experts"]
    expert_bytes = sum(experts.values()) // n_exp
    return dict(weight_bytes=sum(sizes.values()), expert_bytes=expert_bytes,
                experts_total_bytes=sum(experts.values()), n_experts_total=n_exp,
                dense_bytes=sum(sizes.values()) - sum(experts.values()),
                kv_cache_bytes=kv_cache_bytes(kw, prompt_len + new_tokens))


# -- routing ----------------------------------------------------------------

class RouterRecorder:
    """Forward hooks on each layer's router (transformers' MoE block `gate`):
    for every forward of one token, the sorted distinct experts each layer
    chose (top-k of the softmax of its logits, as transformers routes).
    Choices stay on the device until routing() (no sync per step)."""

    def __init__(self, model, top_k):
        self.top_k, self.steps, self.handles = top_k, [], []
        layers = model.model.layers
        self.n_layers = len(layers)
        self._cur = None
        for i, layer in enumerate(layers):
            block = getattr(layer, "mlp", None) or getattr(layer, "block_sparse_moe")
            self.handles.append(block.gate.register_forward_hook(self._hook(i)))

    def _hook(self, i):
        def hook(mod, inp, out):
            logits = out[0] if isinstance(out, tuple) else out
            logits = logits.reshape(-1, logits.shape[-1])
            if logits.shape[0] != 1:               # the prefill: not a decode step
                return
            if i == 0:
                self._cur = []
                self.steps.append(self._cur)
            self._cur.append(torch.topk(logits.float().softmax(-1), self.top_k, -1).indices[0])
        return hook

    def remove(self):
        for h in self.handles:
            h.remove()

    def routing(self):
        """[decode step][layer] -> sorted list of expert ids."""
        return [[sorted(set(t.tolist())) for t in step] for step in self.steps]


def routing_stats(routing, n_experts):
    """How the decode's routing varies: per layer, the distinct experts over
    all steps, and the share of steps whose choice repeats the previous
    step's (what a cache across tokens can reuse)."""
    if not routing:
        return None
    n_layers = len(routing[0])
    distinct = [len({e for step in routing for e in step[layer]}) for layer in range(n_layers)]
    repeats = sum(len(set(routing[t][layer]) & set(routing[t - 1][layer]))
                  for t in range(1, len(routing)) for layer in range(n_layers))
    chosen = sum(len(routing[t][layer]) for t in range(1, len(routing)) for layer in range(n_layers))
    return dict(steps=len(routing), distinct_experts_per_layer=distinct, of_experts=n_experts,
                reuse_from_previous_token=repeats / chosen if chosen else None)


def belady_misses(seq, slots):
    """Fewest loads a cache of `slots` items needs to serve `seq` (Belady's
    MIN: evict the item used furthest in the future), starting warm with the
    first `slots` distinct items (free: the prefill touched every expert)."""
    if slots <= 0:
        return len(seq)
    nxt, last = [0] * len(seq), {}
    for i in range(len(seq) - 1, -1, -1):
        nxt[i] = last.get(seq[i], float("inf"))
        last[seq[i]] = i
    cache, misses = {}, 0                   # item -> its next use
    for i, x in enumerate(seq):
        if x not in cache and len(cache) >= slots:
            misses += 1
            del cache[max(cache, key=cache.get)]
        cache[x] = nxt[i]
    return misses


BOUND_FORMULA = (
    "bounds per decoded token (one new token through every layer): "
    "no-cache bound = B_h2d / (C + max(0, dense - (budget - KV))), C = the bytes of the experts the "
    "token's routing chooses (the distinct top-k of each layer, from the reference run: "
    "top-2 x layers x one expert's bytes), dense = every non-expert byte (attention, norms, routers, "
    "embeddings, lm_head), KV = the bf16 KV cache; cache bound = the same with C = the bytes of the "
    "experts an optimal cache (Belady's MIN over the reference routing, warm start) must still load, "
    "the cache holding floor((budget - KV - dense) / expert bytes) experts; own-bytes bound "
    "(omptensor) = B_h2d / the bytes its JSON says crossed per decode step "
    "(decode_bytes_to_device_per_token + experts.decode_fill_bytes / steps; the streamer: the "
    "experts it copied). Each bound is also capped by reading the token's bytes from HBM once: "
    "min(B_h2d / crossing, HBM_BW / (dense + chosen experts' bytes)), HBM_BW = {hbm:.2e} B/s, "
    "which is the whole bound when nothing must cross (no budget). B_h2d is the pinned "
    "host->device bandwidth measured in this run.")


def bound_tps(crossing, active, h2d_bw, hbm_bw):
    """tokens/s <= min(B_h2d / bytes crossing, HBM_BW / bytes read) per token;
    None when bytes must cross and no bandwidth is known."""
    if crossing is None:
        return None
    hbm = hbm_bw / active
    if crossing <= 0:
        return hbm
    return min(h2d_bw / crossing, hbm) if h2d_bw else None


def bounds(acc, kw, budget, routing, h2d_bw, hbm_bw):
    """The no-cache and the cache bound (tokens/s) of a case at `budget`
    (None: resident) and what they count, per BOUND_FORMULA."""
    L, k = kw["num_hidden_layers"], kw["num_experts_per_tok"]
    eb, dense, kv = acc["expert_bytes"], acc["dense_bytes"], acc["kv_cache_bytes"]
    steps = len(routing) if routing else 0
    chosen = (sum(len(x) for step in routing for x in step) / steps) if steps else L * k
    out = dict(chosen_experts_per_token=chosen, chosen_expert_bytes_per_token=chosen * eb)
    active = dense + chosen * eb
    if budget is None:
        out.update(bound_tokens_per_second=hbm_bw / active, cache_bound_tokens_per_second=hbm_bw / active,
                   bound_bytes_per_token=0, cache_bound_bytes_per_token=0,
                   active_bytes_per_token=active)
        return out
    dense_cross = max(0, dense - max(0, budget - kv))
    slots = max(0, budget - kv - dense) // eb
    out.update(bound_dense_bytes_per_token=dense_cross, bound_cache_slots=int(slots),
               bound_bytes_per_token=dense_cross + chosen * eb)
    if steps:
        seq = [(layer, e) for step in routing for layer, x in enumerate(step) for e in x]
        misses = belady_misses(seq, int(slots))
        out["cache_bound_bytes_per_token"] = dense_cross + misses * eb / steps
    else:
        out["cache_bound_bytes_per_token"] = None
    out["bound_tokens_per_second"] = bound_tps(out["bound_bytes_per_token"], active, h2d_bw, hbm_bw)
    out["cache_bound_tokens_per_second"] = bound_tps(out["cache_bound_bytes_per_token"], active,
                                                     h2d_bw, hbm_bw)
    out["active_bytes_per_token"] = active
    return out


def omptensor_crossed_per_token(summary):
    """Bytes an omptensor run's JSON says crossed per decode step: the plan's
    per-step uploads plus the experts brought into the window; None when the
    JSON does not say (an omptensor without the experts report)."""
    steps = (summary.get("n_tokens") or len(summary.get("tokens") or [])) - 1
    ex = summary.get("experts")
    if steps <= 0 or not isinstance(ex, dict) or "decode_fill_bytes" not in ex:
        return None
    return (summary.get("decode_bytes_to_device_per_token") or 0) + ex["decode_fill_bytes"] / steps
