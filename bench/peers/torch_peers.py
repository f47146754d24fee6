"""The PyTorch peers. Each returns a result dict (greedy_decode's keys plus
memory, budget and a note) and leaves nothing on the device behind it.

  torch-resident      transformers, all weights in bf16 on the GPU, the greedy
                      loop of common.greedy_decode (no per-token host sync);
  torch-generate      the same model through model.generate(), for reference;
  torch-streamer      peers/streamer.py: pinned layers, a side stream, double
                      buffering, every layer streamed every token;
  moe_streamer        peers/moe_streamer.py (mixture of experts): dense parts
                      resident, only the chosen experts copied, an LRU window;
  accelerate-dispatch infer_auto_device_map + dispatch_model with max_memory
                      at the budget (what from_pretrained(device_map='auto',
                      max_memory=...) does): what does not fit stays on the
                      CPU and its hooks copy it up for each forward;
  accelerate-cpu_offload  accelerate.cpu_offload(model, execution_device):
                      everything on the CPU, copied up module by module;
  accelerate-offload_folder  from_pretrained(device_map='auto', max_memory=
                      {0: device budget, 'cpu': host budget}, offload_folder):
                      what fits neither is read from disk by the hooks each
                      forward (from the checkpoint's own safetensors files:
                      transformers indexes them in place).
The two Accelerate peers copy from pageable memory and are slow (~1 token/s
on the full model), so they decode fewer tokens (--slow-new-tokens)."""
import os
import shutil
import time

import torch

from .common import (DevMemPoller, free_memory, greedy_decode, greedy_decode_batch, hf_step,
                     left_pad, load_hf)
from .streamer import LayerStreamer


def _mem_stats(dev, poller):
    if not dev.cuda:
        return dict(peak_device_bytes=None, cuda_mem_peak_delta_bytes=None)
    return dict(peak_device_bytes=torch.cuda.max_memory_allocated(),
                max_memory_reserved=torch.cuda.max_memory_reserved(),
                cuda_mem_peak_delta_bytes=poller.peak_delta)


def _begin(dev):
    free_memory(dev)
    if dev.cuda:
        torch.cuda.reset_peak_memory_stats()


def resident(model_dir, prompt, n_new, dev, warmup_tokens=3, load_kw=None, after=None,
             generate=True):
    """load_kw: more from_pretrained arguments; after(model, step) -> dict:
    extra keys for the result, computed after the timed decode (e.g. a
    second, hooked decode); generate: also time model.generate() (else the
    second result is None)."""
    _begin(dev)
    with DevMemPoller(dev) as poller:
        t0 = time.perf_counter()
        model = load_hf(model_dir, device_map=dev.name, **(load_kw or {}))
        load_s = time.perf_counter() - t0
        step = hf_step(model)
        greedy_decode(step, model.config, prompt, warmup_tokens, dev)       # warm-up
        res = greedy_decode(step, model.config, prompt, n_new, dev)
        # The same model through generate(): prefill = a 1-token generate,
        # decode = (n_new-token generate - that) / (n_new - 1).
        gen = _generate_times(model, prompt, n_new, dev) if generate else None
    res.update(_mem_stats(dev, poller), load_s=load_s, budget_bytes=None)
    if after is not None:
        res.update(after(model, step))
    del model, step
    free_memory(dev)
    return res, gen


def _generate_times(model, prompt, n_new, dev):
    ids = torch.tensor([prompt], dtype=torch.long, device=dev.name)
    # eos_token_id=None: generate() neither stops at EOS nor masks it (the
    # min_new_tokens processor needs an EOS), so its tokens are the plain
    # argmax chain, as in every other case.
    kw = dict(do_sample=False, eos_token_id=None, pad_token_id=0)

    def timed(n):
        dev.sync()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(ids, **dict(kw, min_new_tokens=n, max_new_tokens=n))
        dev.sync()
        return time.perf_counter() - t0, out[0, len(prompt):].tolist()

    timed(2)                                            # warm-up
    t1, _ = timed(1)
    tn, toks = timed(n_new)
    return dict(tokens=toks, prefill_ms=t1 * 1e3, decode_steps=n_new - 1,
                decode_s=tn - t1, tokens_per_second=(n_new - 1) / (tn - t1),
                budget_bytes=None, peak_device_bytes=None,
                note="model.generate(do_sample=False, min_new_tokens=max_new_tokens=n, no EOS); "
                     "decode = (t(n tokens) - t(1 token)) / (n-1)")


def streamer(model_dir, prompt, n_new, dev, warmup_tokens=2):
    _begin(dev)
    with DevMemPoller(dev) as poller:
        t0 = time.perf_counter()
        model = load_hf(model_dir)                       # on the CPU
        s = LayerStreamer(model, dev)
        load_s = time.perf_counter() - t0
        greedy_decode(s.step, model.config, prompt, warmup_tokens, dev)
        res = greedy_decode(s.step, model.config, prompt, n_new, dev)
    res.update(_mem_stats(dev, poller), load_s=load_s,
               budget_bytes=s.device_weight_bytes,
               streamed_bytes_per_token=s.layer_bytes * s.n_layers,
               note="streams all layers each token; budget = device bytes it keeps "
                    "for weights (embeddings, norm, lm_head, two layer slots)")
    del model, s
    free_memory(dev)
    return res


def streamer_batch(model_dir, prompts, n_new, dev, warmup_tokens=2):
    """The layer streamer on a left-padded batch (common.greedy_decode_batch):
    one stream of every layer per step serves the whole batch."""
    _begin(dev)
    with DevMemPoller(dev) as poller:
        t0 = time.perf_counter()
        model = load_hf(model_dir)                       # on the CPU
        s = LayerStreamer(model, dev)
        load_s = time.perf_counter() - t0
        greedy_decode_batch(s.step, model.config, prompts, warmup_tokens, dev)
        res = greedy_decode_batch(s.step, model.config, prompts, n_new, dev)
    res.update(_mem_stats(dev, poller), load_s=load_s,
               budget_bytes=s.device_weight_bytes,
               streamed_bytes_per_step=s.layer_bytes * s.n_layers,
               note=f"batch {len(prompts)}, left padded with an attention mask and per-sequence "
                    "positions; streams all layers each step; budget = device bytes it keeps for "
                    "weights (the KV cache of the batch comes on top)")
    del model, s
    free_memory(dev)
    return res


def _dispatch_load(model_dir, dev, budget_bytes, load_kw=None):
    """from_pretrained on the CPU, then infer_auto_device_map + dispatch_model
    with max_memory={0: budget}: (model, device_map, bytes placed on the GPU)."""
    from accelerate import dispatch_model, infer_auto_device_map
    model = load_hf(model_dir, **(load_kw or {}))        # on the CPU
    if dev.cuda:
        max_memory = {0: int(budget_bytes), "cpu": 200 << 30}
    else:   # smoke test: only the CPU exists, so nothing is offloaded
        max_memory = {"cpu": 200 << 30}
    no_split = list(getattr(model, "_no_split_modules", None) or ["LlamaDecoderLayer"])
    device_map = infer_auto_device_map(model, max_memory=max_memory,
                                       no_split_module_classes=no_split,
                                       dtype=torch.bfloat16)
    on_gpu = _bytes_on(model, device_map, lambda d: d not in ("cpu", "disk"))
    model = dispatch_model(model, device_map=device_map,
                           skip_keys=getattr(model, "_skip_keys_device_placement", None))
    return model, device_map, on_gpu


def generate_batch(model_dir, prompts, n_new, dev, budget_bytes):
    """transformers generate() on a left-padded batch (attention mask) of a
    model dispatched by Accelerate at max_memory={0: budget}: prefill = a
    1-token generate, decode = (t(n_new tokens) - t(1 token)); aggregate
    tokens/s = B * (n_new - 1) / decode."""
    _begin(dev)
    with DevMemPoller(dev) as poller:
        t0 = time.perf_counter()
        model, device_map, on_gpu = _dispatch_load(model_dir, dev, budget_bytes)
        load_s = time.perf_counter() - t0
        ids, mask, _ = left_pad(prompts, dev)
        kw = dict(do_sample=False, eos_token_id=None, pad_token_id=0, attention_mask=mask)

        def timed(m, n):
            dev.sync()
            t = time.perf_counter()
            with torch.inference_mode():
                out = m.generate(ids, **dict(kw, min_new_tokens=n, max_new_tokens=n))
            dev.sync()
            return time.perf_counter() - t, out[:, ids.shape[1]:].tolist()

        timed(model, 1)                                  # warm-up (one prefill)
        t1, _ = timed(model, 1)
        tn, toks = timed(model, n_new)
    steps = n_new - 1
    res = dict(seq_tokens=toks, prefill_ms=t1 * 1e3, decode_steps=steps, decode_s=tn - t1,
               batch=len(prompts), tokens_per_second=len(prompts) * steps / (tn - t1),
               load_s=load_s, budget_bytes=int(budget_bytes), gpu_weight_bytes=on_gpu,
               device_map_summary=_summarize_map(device_map),
               note=f"generate(), batch {len(prompts)} left padded (attention mask), "
                    f"Accelerate max_memory={{0: budget}}: {on_gpu / 1e9:.2f} GB of weights on "
                    f"the GPU; decode = t({n_new} tokens) - t(1 token)")
    res.update(_mem_stats(dev, poller))
    del model
    free_memory(dev)
    return res


def dispatch(model_dir, prompt, n_new, dev, budget_bytes, stop_at=None, load_kw=None):
    _begin(dev)
    with DevMemPoller(dev) as poller:
        t0 = time.perf_counter()
        model, device_map, on_gpu = _dispatch_load(model_dir, dev, budget_bytes, load_kw)
        load_s = time.perf_counter() - t0
        res = greedy_decode(hf_step(model), model.config, prompt, n_new, dev, stop_at)
    res.update(_mem_stats(dev, poller), load_s=load_s, budget_bytes=int(budget_bytes),
               gpu_weight_bytes=on_gpu,
               device_map_summary=_summarize_map(device_map),
               note=f"max_memory={{0: budget}}; {on_gpu / 1e9:.2f} GB of weights placed "
                    f"on the GPU, the rest copied from pageable CPU memory per forward; "
                    f"{len(res['tokens'])} new tokens")
    del model
    free_memory(dev)
    return res


def moe_streamer(model_dir, prompt, n_new, dev, budget_bytes, kv_bytes, warmup_tokens=2,
                 stop_at=None):
    """peers/moe_streamer.py at `budget_bytes`: dense parts resident, the
    chosen experts copied per layer into an LRU window of the budget's rest."""
    from .moe_streamer import ExpertStreamer
    _begin(dev)
    s = None
    try:
        with DevMemPoller(dev) as poller:
            t0 = time.perf_counter()
            model = load_hf(model_dir)                   # on the CPU
            s = ExpertStreamer(model, dev, budget_bytes, kv_bytes)
            load_s = time.perf_counter() - t0
            step = hf_step(model)
            greedy_decode(step, model.config, prompt, warmup_tokens, dev)
            s.reset_stats()
            res = greedy_decode(step, model.config, prompt, n_new, dev, stop_at)
    except BaseException:
        if s is not None:
            s.close()                                    # unpin before the memory goes
        raise
    steps = max(1, len(s.routing))
    res.update(_mem_stats(dev, poller), load_s=load_s, budget_bytes=int(budget_bytes),
               device_weight_bytes=s.device_weight_bytes, resident_bytes=s.resident_bytes,
               window_slots=s.n_slots, expert_bytes=s.expert_bytes, routing=s.routing,
               decode_fills=s.decode["fills"], decode_hits=s.decode["hits"],
               crossed_bytes_per_token=s.decode["fill_bytes"] / steps,
               note=f"dense parts resident, experts pinned on the host; a window of "
                    f"{s.n_slots} experts (LRU); {len(res['tokens'])} new tokens")
    if dev.cuda and res["peak_device_bytes"] > budget_bytes:
        res["note"] += (f"; peak allocated {res['peak_device_bytes'] / 1e9:.2f} GB is over the "
                        f"budget (the window is at least 2 experts)")
    s.close()
    del model, s, step
    free_memory(dev)
    return res


def cpu_offload(model_dir, prompt, n_new, dev, stop_at=None):
    from accelerate import cpu_offload as accel_cpu_offload
    _begin(dev)
    with DevMemPoller(dev) as poller:
        t0 = time.perf_counter()
        model = load_hf(model_dir)                       # on the CPU
        accel_cpu_offload(model, execution_device=torch.device(dev.name))
        load_s = time.perf_counter() - t0
        res = greedy_decode(hf_step(model), model.config, prompt, n_new, dev, stop_at)
    res.update(_mem_stats(dev, poller), load_s=load_s, budget_bytes=0,
               note=f"all weights copied from pageable CPU memory per forward; "
                    f"{len(res['tokens'])} new tokens")
    del model
    free_memory(dev)
    return res


def offload_folder(model_dir, prompt, n_new, dev, gpu_bytes, cpu_bytes, folder, stop_at=None,
                   observe=None, drop=None):
    """Accelerate's disk offload through transformers: from_pretrained with
    device_map='auto', max_memory={0: gpu_bytes, 'cpu': cpu_bytes} and
    offload_folder (emptied first). Two greedy decodes of the one load: as
    it comes (what the page cache keeps of the weights read from disk helps
    it, host memory outside max_memory), then 'cold', drop() called before
    every forward (the files' pages dropped: each forward reads the disk).
    observe() -> dict, taken before the load, after it and after each
    decode (page cache, RSS). stop_at ends the decodes early (the first one
    halfway through the time left). Returns [(suffix, result)]: '' and, with
    drop, '-cold'."""
    _begin(dev)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder, exist_ok=True)
    observe = observe or (lambda: {})
    max_memory = {"cpu": int(cpu_bytes)}
    if dev.cuda:
        max_memory = {0: int(gpu_bytes), "cpu": int(cpu_bytes)}
    seen = dict(before_load=observe())
    with DevMemPoller(dev) as poller:
        t0 = time.perf_counter()
        model = load_hf(model_dir, device_map="auto", max_memory=max_memory, offload_folder=folder)
        load_s = time.perf_counter() - t0
        seen["loaded"] = observe()
        device_map = dict(getattr(model, "hf_device_map", None) or {"": "?"})
        step = hf_step(model)
        first_stop = stop_at
        if stop_at is not None and drop is not None:
            first_stop = time.perf_counter() + (stop_at - time.perf_counter()) / 2
        warm = greedy_decode(step, model.config, prompt, n_new, dev, first_stop)
        seen["decoded"] = observe()
        cold = None
        if drop is not None:
            def cold_step(ids, cache, warm_step=step):
                drop()
                return warm_step(ids, cache)
            cold = greedy_decode(cold_step, model.config, prompt, n_new, dev, stop_at)
            seen["decoded_cold"] = observe()
    placed = {k: _bytes_on(model, device_map, lambda d, k=k: str(d) == k)
              for k in sorted({str(v) for v in device_map.values()})}
    common = dict(_mem_stats(dev, poller), load_s=load_s, budget_bytes=int(gpu_bytes),
                  cpu_budget_bytes=int(cpu_bytes), offload_folder=folder, placed_bytes=placed,
                  max_memory={str(k): v for k, v in max_memory.items()},
                  device_map_summary=_summarize_map(device_map), observed=seen)
    out = []
    for suffix, r in (("", warm), ("-cold", cold)):
        if r is None:
            continue
        short = len(r["tokens"]) < n_new
        r.update(common, requested_new_tokens=n_new, cut_short=short,
                 note="max_memory={0: budget, 'cpu': host budget}, offload_folder; placed "
                      + ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in placed.items())
                      + ("; the files' pages dropped before every forward" if suffix
                         else "; the page cache as it comes")
                      + f"; {len(r['tokens'])} new tokens"
                      + (" (cut short by its time limit)" if short else ""))
        out.append((suffix, r))
    del model, step
    free_memory(dev)
    return out


def _bytes_on(model, device_map, pred):
    """Parameter bytes of the modules that device_map puts on a device matching pred."""
    total = 0
    for name, p in model.named_parameters():
        mod = name
        while mod and mod not in device_map:
            mod = mod.rpartition(".")[0]
        dev = device_map.get(mod if mod else "", device_map.get("", "cpu"))
        if pred(dev):
            total += p.numel() * p.element_size()
    return total


def _summarize_map(device_map):
    counts = {}
    for v in device_map.values():
        counts[str(v)] = counts.get(str(v), 0) + 1
    return counts
