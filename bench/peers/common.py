"""Timing, memory accounting and the greedy decode loop shared by the peers."""
import gc
import threading
import time

import torch


class Dev:
    """The device the peers run on: 'cuda' (the benchmark) or 'cpu' (smoke test)."""

    def __init__(self, name):
        self.name = "cuda:0" if name == "cuda" else name
        self.cuda = self.name.startswith("cuda")

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()


def free_memory(dev):
    """Give back what the last case held: Python objects, the caching
    allocator's device blocks and its cached pinned host blocks."""
    gc.collect()
    if dev.cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        host_empty = getattr(torch._C, "_host_emptyCache", None)
        if host_empty is not None:
            host_empty()


def device_used_bytes():
    """Device-wide bytes in use (cudaMemGetInfo: total - free). It counts every
    process on the GPU, so it also sees an omptensor subprocess."""
    free, total = torch.cuda.mem_get_info(0)
    return total - free


class DevMemPoller:
    """Peak of cudaMemGetInfo's used bytes above the value at entry, sampled
    every `interval` s by a thread while the block runs. Each sample is one
    cheap driver call; the GIL is held for microseconds every 5 ms, which does
    not disturb the timed loops. On the CPU it records nothing (peak None)."""

    def __init__(self, dev, interval=0.005):
        self.dev, self.interval = dev, interval
        self.baseline = self.peak = None
        self._stop = threading.Event()

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, device_used_bytes())
            self._stop.wait(self.interval)

    def __enter__(self):
        if self.dev.cuda:
            self.baseline = self.peak = device_used_bytes()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.dev.cuda:
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, device_used_bytes())
        return False

    @property
    def peak_delta(self):
        return None if self.peak is None else self.peak - self.baseline


def new_cache(config):
    from transformers import DynamicCache
    try:
        return DynamicCache(config=config)       # transformers >= 4.56
    except TypeError:
        return DynamicCache()


def greedy_decode(step, config, prompt_ids, n_new, dev, stop_at=None):
    """Greedy generation with a KV cache, timed.

    step(ids, cache) -> logits of the last position, shape (1, vocab). The
    first call is the prefill (the whole prompt); the n_new-1 following calls
    are the decode steps, each feeding the token just chosen. Tokens stay on
    the device until the end, so no step waits for the host (generate() syncs
    every token for its stopping criteria; this loop does not).
    stop_at (a time.perf_counter() value) ends the decode early, for the slow
    peers whose steps wait for their own copies (so the host clock is close).
    Returns tokens (the ids made), prefill_ms (first forward and argmax),
    decode_steps, decode_s and tokens_per_second = decode_steps / decode_s."""
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=dev.name)
    cache = new_cache(config)
    with torch.inference_mode():
        dev.sync()
        t0 = time.perf_counter()
        logits = step(ids, cache)                               # (1, vocab)
        tok = logits.argmax(-1, keepdim=True)                   # (1, 1)
        top2 = [logits.topk(2, -1).values]                      # (1, 2) each
        dev.sync()
        t1 = time.perf_counter()
        toks = [tok]
        for _ in range(n_new - 1):
            if stop_at is not None and time.perf_counter() > stop_at:
                break
            logits = step(tok, cache)
            tok = logits.argmax(-1, keepdim=True)
            top2.append(logits.topk(2, -1).values)
            toks.append(tok)
        dev.sync()
        t2 = time.perf_counter()
    steps = len(toks) - 1
    top2 = torch.cat(top2).float()
    # top-1 minus top-2 logit per token: where two cases diverge, a margin of
    # zero (or one bf16 step) means a tie broken differently, not a bug.
    margins = (top2[:, 0] - top2[:, 1]).tolist()
    return dict(tokens=torch.cat(toks, 1)[0].tolist(), top2_margins=margins,
                prefill_ms=(t1 - t0) * 1e3,
                decode_steps=steps, decode_s=t2 - t1,
                tokens_per_second=steps / (t2 - t1) if steps else None)


def left_pad(prompts, dev, pad_id=0):
    """prompts (lists of ids, lengths may differ) as one left-padded batch:
    ids [B, T], attention mask [B, T] (0 on the padding) and position ids
    [B, T] (each sequence's positions count from its first real token)."""
    T = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), T), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, T - len(p):] = torch.tensor(p, dtype=torch.long)
        mask[i, T - len(p):] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids.to(dev.name), mask.to(dev.name), pos.to(dev.name)


def greedy_decode_batch(step, config, prompts, n_new, dev, stop_at=None):
    """greedy_decode for a batch of prompts of different lengths, left padded:
    step(ids [B, T], cache, attention_mask [B, past+T], position_ids [B, T])
    -> logits of the last position, (B, vocab). Every sequence decodes n_new
    tokens (no EOS stop). Returns seq_tokens (one list per prompt),
    prefill_ms, decode_steps, decode_s and tokens_per_second = B *
    decode_steps / decode_s (the aggregate)."""
    ids, mask, pos = left_pad(prompts, dev)
    cache = new_cache(config)
    ones = torch.ones((len(prompts), 1), dtype=mask.dtype, device=mask.device)
    with torch.inference_mode():
        dev.sync()
        t0 = time.perf_counter()
        logits = step(ids, cache, mask, pos)                    # (B, vocab)
        tok = logits.argmax(-1, keepdim=True)                   # (B, 1)
        dev.sync()
        t1 = time.perf_counter()
        toks = [tok]
        pos = pos[:, -1:]
        for _ in range(n_new - 1):
            if stop_at is not None and time.perf_counter() > stop_at:
                break
            mask = torch.cat([mask, ones], 1)
            pos = pos + 1
            logits = step(tok, cache, mask, pos)
            tok = logits.argmax(-1, keepdim=True)
            toks.append(tok)
        dev.sync()
        t2 = time.perf_counter()
    steps = len(toks) - 1
    return dict(seq_tokens=torch.cat(toks, 1).tolist(), prefill_ms=(t1 - t0) * 1e3,
                decode_steps=steps, decode_s=t2 - t1, batch=len(prompts),
                tokens_per_second=len(prompts) * steps / (t2 - t1) if steps else None)


def hf_step(model):
    """step() for a (possibly hooked) LlamaForCausalLM: one forward through
    the model's own code, lm_head on the last position only (as generate())."""
    import inspect
    # transformers >= 5.24 names the cache argument `cache` (`past_key_values`
    # still works there, with a deprecation warning)
    key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def step(ids, cache):
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1, **{key: cache})
        return out.logits[:, -1]
    return step


def load_hf(model_dir, device_map=None, **kw):
    """from_pretrained in bf16 (on the CPU unless device_map says otherwise),
    the class from config.json (LlamaForCausalLM, MixtralForCausalLM, ...);
    kw go to from_pretrained (e.g. experts_implementation)."""
    import transformers
    from transformers import AutoModelForCausalLM
    major = int(transformers.__version__.split(".")[0])
    kw["dtype" if major >= 5 else "torch_dtype"] = torch.bfloat16
    if device_map is not None:
        kw["device_map"] = device_map
    model = AutoModelForCausalLM.from_pretrained(model_dir, **kw)
    return model.eval()


class PinnedHost:
    """A host tensor of exactly `numel` elements whose pages are pinned with
    cudaHostRegister (torch's pinned allocator rounds a request up to a power
    of two: 19.7 GB of experts would take 32 GB). Without CUDA it is plain
    memory. close() unregisters it; use it before dropping the tensor."""

    def __init__(self, numel, dtype, cuda):
        self.t = torch.empty(numel, dtype=dtype)
        self.registered = False
        if cuda and numel:
            nbytes = numel * self.t.element_size()
            rc = torch.cuda.cudart().cudaHostRegister(self.t.data_ptr(), nbytes, 0)
            if int(rc) != 0:
                raise RuntimeError(f"cudaHostRegister of {nbytes} bytes failed: error {int(rc)}")
            self.registered = True

    def close(self):
        if self.registered:
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaHostUnregister(self.t.data_ptr())
            self.registered = False


def h2d_bandwidth(nbytes=1 << 30, reps=5):
    """Host->device copy bandwidth in bytes/s: best of `reps` copies of a
    pinned buffer into a preallocated device buffer, timed with CUDA events
    (one untimed copy first). Also one pageable copy, for reference (what
    Accelerate's hooks move from)."""
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    src.fill_(1)
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src, non_blocking=True)
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3)
    pageable = torch.ones(nbytes // 4, dtype=torch.uint8)
    d2 = dst[: pageable.numel()]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    d2.copy_(pageable)
    torch.cuda.synchronize()
    pageable_bw = pageable.numel() / (time.perf_counter() - t0)
    del src, dst, d2, pageable
    return nbytes / best, pageable_bw
