#!/usr/bin/env python3
"""Quantized weights across PCIe on one GPU (issue 21): decode with the
weights in 8 and 4 bits, against the bf16 PyTorch streamer.

One device call (a few minutes on the H200):
  1. the model of decode_h200.py (Llama-2-7B shapes, 16 layers, random bf16
     weights, ~7.0 GB; made once in --workdir) and its 128-token prompt;
  2. pinned host->device bandwidth (PCIe: the bound of what must cross);
  3. the PyTorch layer streamer in bf16 (the peer: every layer over PCIe);
  4. omptensor resident in bf16 (the reference logits), then at each budget
     (--budgets, percent of the bf16 weights: 25 and 10) with the weights
     in each --dtypes and each --computes (auto: ops may run on the host's
     cores, issue 20; gpu: every op on the GPU) (bf16, int8 = q8b, int4 = q4b = GGUF Q4_0, q4k = GGUF
     Q4_K; quantized at load by omptensor from the bf16 checkpoint);
     every case writes its prompt's logits (--logits-out);
  5. the table (stdout, Markdown beside --out) and the JSON (--out),
     rewritten after every case.

Per case: W the case's weight bytes as omptensor loaded them (at their
size), KV the bf16 cache of prompt + new tokens; own bound = B_pcie /
max(0, W - (budget - KV)) tokens/s (B_hbm / W when everything fits);
× streamer = tokens/s over the bf16 streamer's; logit error = max |logit -
bf16 resident logit| over the prompt, as a fraction of the bf16 logits'
range, with the rms and the share of positions whose top-1 token agrees.

On the GPU machine:
    PYTHONUNBUFFERED=1 python3 bench/quant_h200.py --omptensor build-gpu/omptensor \\
        --omptensor-prologue .gpu/prologue.sh --out $OUT/decode-h200-quant.json \\
        2>&1 | tee $OUT/decode-h200-quant.log
CPU smoke test (tiny model; the bounds then mean little):
    python3 bench/quant_h200.py --tiny --device cpu --omptensor build/offload-host/omptensor \\
        --budgets 60 --workdir /tmp/qb --out /tmp/qb/out.json
"""
import time

T_START = time.perf_counter()

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from peers import harness as H  # noqa: E402
from peers import model as M  # noqa: E402
from peers import omptensor as O  # noqa: E402
from peers import torch_peers as P  # noqa: E402
from peers.common import Dev  # noqa: E402

H.start_clock(T_START)
log = H.log
MIN_SECONDS = {"torch-streamer": 30, "omptensor": 12}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--omptensor", metavar="CMD", help="the omptensor command (its cases are skipped without)")
    p.add_argument("--omptensor-prologue", metavar="FILE", help="sourced before omptensor (the GPU bundle)")
    p.add_argument("--workdir", default="/tmp/omptensor-bench")
    p.add_argument("--out", default="decode-h200-quant.json")
    p.add_argument("--artifacts", help="folder for the Markdown and logits (default: beside --out)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="a tiny model (smoke test)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--slow-new-tokens", type=int, default=8, help=argparse.SUPPRESS)  # the shared header's
    p.add_argument("--budgets", default="25,10", help="percent of the bf16 weight bytes")
    p.add_argument("--dtypes", default="q4b,q4k,int8,bf16")
    p.add_argument("--offload", default="aggressive")
    p.add_argument("--computes", default="auto,gpu",
                   help="omptensor --compute of the budget cases (auto may put ops on the host's cores)")
    p.add_argument("--skip", default="")
    p.add_argument("--time-limit", type=float, default=420)
    p.add_argument("--case-timeout", type=float, default=120)
    p.add_argument("--hbm-bw", type=float, default=4.3e12)
    return p.parse_args()


def make_bound(b):
    def bound(case):
        h = b.header
        w = case.get("weight_bytes") or h["weight_bytes"]
        budget, kv = case.get("budget_bytes"), h["kv_cache_bytes"]
        n = None if budget is None else max(0, w - max(0, budget - kv))
        return dict(bound_tokens_per_second=M.bound_tokens_per_second(w, budget, kv, h.get("h2d_bytes_per_s"),
                                                                       b.args.hbm_bw),
                    crossing_bytes_per_token=n)
    return bound


def logit_stats(path, ref):
    if not path or ref is None or not os.path.exists(path):
        return {}
    got = np.load(path)
    if got.shape != ref.shape:
        return dict(logit_note=f"shape {got.shape} vs {ref.shape}")
    rng = float(ref.max() - ref.min())
    d = np.abs(got.astype(np.float64) - ref)
    return dict(logit_max_err=float(d.max() / rng), logit_rms_err=float(np.sqrt((d * d).mean()) / rng),
                top1_agree=float((got.argmax(-1) == ref.argmax(-1)).mean()))


def finalize(b):
    def run(cases):
        peer = next((c for c in cases if c["case"] == "torch-streamer" and c["status"] == "ok"), None)
        for c in cases:
            if c["status"] != "ok" or not c.get("tokens_per_second"):
                continue
            bd = c.get("bound_tokens_per_second")
            c["ratio_to_bound"] = c["tokens_per_second"] / bd if bd else None
            c["ratio_to_streamer"] = c["tokens_per_second"] / peer["tokens_per_second"] if peer else None
    return run


def omptensor_cases(b, cmd, model_dir, prompt_file):
    a = b.args
    w = b.header["weight_bytes"]
    dtypes = [d for d in a.dtypes.split(",") if d]
    computes = [c for c in a.computes.split(",") if c]
    # the bf16 resident run first (the reference logits), the others resident, then each budget
    runs = [(None, "bf16", "auto")] + [(None, d, "auto") for d in dtypes if d != "bf16"]
    runs += [(float(p), d, c) for p in a.budgets.split(",") if p for d in dtypes for c in computes]
    ref = None
    for pct, dt, compute in runs:
        name = (f"omptensor-resident-{dt}" if pct is None else f"omptensor-{pct:g}%-{dt}"
                + ("" if compute == "auto" else f"-{compute}"))
        budget = None if pct is None else int(pct / 100 * w)
        if not b.wanted(name, "omptensor", budget):
            continue
        logits = os.path.join(a.workdir, f"logits-{name.replace('%', 'pct')}.npy")
        spec = dict(name=name, fraction=None if pct is None else pct / 100,
                    offload="none" if pct is None else a.offload, backend="map",
                    dtype=None if dt == "bf16" else dt, tag=name.replace("%", "pct"))
        try:
            res = O.run_case(cmd, spec, model_dir, prompt_file, a.new_tokens, budget,
                             max(5.0, min(a.case_timeout, b.remaining() - 5)), b.dev, b.artifacts, log,
                             extra_args=["--logits-out", logits] + ([] if compute == "auto" else ["--compute", compute]))
        except Exception as e:  # noqa: BLE001
            b.failed(name, "map", budget, e)
            continue
        if pct is None and dt == "bf16" and os.path.exists(logits):
            ref = np.load(logits).astype(np.float64)
        res.update(logit_stats(logits, ref))
        if os.path.exists(logits):
            os.remove(logits)
        summ = res.get("omptensor") or {}
        b.add(dict(res, case=name, backend="map", offload=spec["offload"], dtype=dt, requested_compute=compute,
                   compute=(summ.get("compute") or {}).get("used", compute), budget_fraction=spec["fraction"]))


def fmt(x, f="{:.2f}"):
    return "—" if x is None else f.format(x)


def markdown(b, cmdline):
    h = b.header
    lines = [f"## Quantized weights across PCIe on the H200 (`bench/quant_h200.py`, issue 21)", "",
             f"{h.get('date')}, {h.get('gpu', b.dev.name)}, torch {torch.__version__}. Model: Llama-2-7B shapes, 16 "
             f"layers, random bf16 weights, {h['weight_bytes'] / 1e9:.2f} GB, quantized at load by omptensor; prompt "
             f"{b.args.prompt_len} tokens, {b.args.new_tokens} new, greedy, batch 1, --offload {b.args.offload}. "
             f"Pinned host→device {fmt((h.get('h2d_bytes_per_s') or 0) / 1e9, '{:.1f}')} GB/s.",
             "", "    " + cmdline, "",
             "| case | compute | budget | weights | crossing / token | tokens/s | own bound | × own bound | × bf16 streamer "
             "| logit err (max / rms, of range) | top-1 agree | peak device | probe |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in b.cases:
        if c["status"] != "ok":
            lines.append(f"| {c['case']} | — | — | — | — | {c['status'].upper()} | | | | | | | {c.get('note') or ''} |")
            continue
        bud = c.get("budget_bytes")
        lines.append("| " + " | ".join([
            c["case"], str(c.get("compute") or "torch"),
            "—" if bud is None else f"{100 * bud / h['weight_bytes']:.0f}% ({bud / 1e9:.2f} GB)",
            fmt((c.get("weight_bytes") or 0) / 1e9, "{:.2f} GB") if c.get("weight_bytes") else "—",
            fmt((c.get("crossing_bytes_per_token") or 0) / 1e9, "{:.2f} GB") if bud else "—",
            fmt(c.get("tokens_per_second")), fmt(c.get("bound_tokens_per_second"), "{:.1f}"),
            fmt(c.get("ratio_to_bound"), "{:.0%}"), fmt(c.get("ratio_to_streamer"), "{:.2f}×"),
            (fmt(c.get("logit_max_err"), "{:.3f}") + " / " + fmt(c.get("logit_rms_err"), "{:.4f}"))
            if c.get("logit_max_err") is not None else "—",
            fmt(c.get("top1_agree"), "{:.0%}"),
            fmt((c.get("peak_device_bytes") or 0) / 1e9, "{:.2f} GB"),
            {True: "ok", False: "FAILED"}.get(c.get("budget_probe_ok"), "—"),
        ]) + " |")
    lines += ["", "own bound = B_pcie / max(0, W - (budget - KV)) tokens/s, W the case's weight bytes (at its "
              "size), KV the bf16 cache of prompt + new tokens (B_hbm / W when nothing need cross); logit error "
              "against omptensor's bf16 resident run over the 128 prompt positions."]
    return "\n".join(lines)


def main():
    args = parse_args()
    import transformers
    transformers.utils.logging.disable_progress_bar()
    dev = Dev(args.device)
    b = H.Bench(args, dev, MIN_SECONDS, None)
    b.bound = make_bound(b)
    b.finalize = finalize(b)
    _, cfg_kw = M.llama_config(args.tiny)
    model_dir = M.ensure_model(args.workdir, args.tiny, args.seed, dev.name, log)
    prompt_file, prompt = M.write_prompt(args.workdir, cfg_kw["vocab_size"], args.prompt_len, args.seed)
    b.header = H.base_header(args, dev, model_dir, cfg_kw, M.safetensors_bytes(model_dir))
    b.header.update(kv_cache_bytes=M.kv_cache_bytes(cfg_kw, args.prompt_len + args.new_tokens))
    log(f"model {model_dir}: {b.header['weight_bytes'] / 1e9:.3f} GB")
    H.measure_bandwidth(b)
    b.run("torch-streamer", "torch-streamer", "torch", None,
          lambda: P.streamer(model_dir, prompt, args.new_tokens, dev))
    cmd = H.omptensor_command(args, b)
    if cmd:
        H.free_memory_for_subprocess(b)
        omptensor_cases(b, cmd, model_dir, prompt_file)
    b.refresh()
    md = markdown(b, "PYTHONUNBUFFERED=1 python3 bench/quant_h200.py " + " ".join(sys.argv[1:]))
    with open(os.path.join(b.artifacts, "decode-h200-quant.md"), "w") as f:
        f.write(md + "\n")
    print(md, flush=True)
    log(f"done: {args.out}")


if __name__ == "__main__":
    main()
