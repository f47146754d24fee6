#!/usr/bin/env python3
"""GPT-2 training under a fixed device budget: omptensor against PyTorch (issue 7).

One run on the GPU machine does, per model config (bench/models/*/config.json,
weights initialized, tokens random):
  1. bench_train (C, omptensor): the largest micro-batch B whose plan keeps
     everything resident (no live copy evicted) at --budget, the largest that
     trains with offload/recompute (checkpoint auto), and the tokens/s of a
     training step (forward, backward, AdamW) at each; the budget is checked
     on every traced step;
  2. PyTorch's own step (GPT2LMHeadModel, fp32, TF32 off as in omptensor's
     cuBLAS calls, torch.optim.AdamW) at the same B and T, on the whole GPU,
     and the largest B PyTorch fits under the same budget
     (torch.cuda.set_per_process_memory_fraction);
  3. prints the table and writes the JSON to --out.

    PYTHONUNBUFFERED=1 python3 bench/train_h200.py --bench-train build-gpu/bench_train \
        --budget 4GiB --out $OUT/train-h200.json 2>&1 | tee $OUT/train-h200.log
CPU smoke test of the PyTorch side: --device cpu --configs tiny --seq 32
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
AUTOCAST = {"fp32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
TINY = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128, "vocab_size": 256}


def parse_bytes(s):
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1e3, "mb": 1e6, "gb": 1e9, "b": 1}
    low = s.strip().lower()
    for u, m in units.items():
        if low.endswith(u):
            return int(float(low[: -len(u)]) * m)
    return int(low)


def load_config(name):
    if name == "tiny":
        return dict(TINY)
    with open(os.path.join(HERE, "models", name, "config.json")) as f:
        return json.load(f)


def torch_model(cfg, dev):
    from transformers import GPT2Config, GPT2LMHeadModel
    c = GPT2Config(n_embd=cfg["n_embd"], n_layer=cfg["n_layer"], n_head=cfg["n_head"],
                   n_positions=cfg["n_positions"], vocab_size=cfg["vocab_size"],
                   activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(c).to(dev)


def torch_step_time(cfg, B, T, steps, dev, attn, precision="fp32"):
    """Median seconds of forward + backward + AdamW at batch B, and the peak
    device bytes; None if it runs out of memory. precision bf16 / f16: the
    forward and loss under torch.autocast (fp32 master weights, the AdamW of
    fp32 parameters), f16 with a GradScaler, as the PyTorch recipes do."""
    torch.manual_seed(0)
    model = torch_model(cfg, dev)
    model.config._attn_implementation = attn
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
    V = cfg["vocab_size"]
    scaler = torch.amp.GradScaler(dev.type) if precision == "f16" else None
    times = []
    try:
        for i in range(steps + 1):
            x = torch.randint(0, V, (B, T), device=dev)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            with torch.autocast(dev.type, dtype=AUTOCAST[precision], enabled=precision != "fp32"):
                loss = model(input_ids=x, labels=x).loss
            if scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            opt.zero_grad(set_to_none=True)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            if i:
                times.append(time.perf_counter() - t)
    except torch.OutOfMemoryError:
        return None, None
    finally:
        peak = torch.cuda.max_memory_allocated() if dev.type == "cuda" else 0
        del model, opt
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    times.sort()
    return times[len(times) // 2], peak


def torch_largest_batch(cfg, T, budget, dev, attn, hi):
    """Largest B whose step fits `budget` bytes of the GPU (the caching
    allocator limited by set_per_process_memory_fraction)."""
    if dev.type != "cuda":
        return None
    idx = dev.index if dev.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(idx).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, budget / total), idx)
    lo, hi = 0, hi + 1
    try:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            t, _ = torch_step_time(cfg, mid, T, 1, dev, attn)
            print(f"  torch B={mid} under the budget: {'fits' if t else 'out of memory'}", flush=True)
            lo, hi = (mid, hi) if t else (lo, mid)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, idx)
    return lo


def run_ours(exe, model_dir, budget, T, steps, max_b, tmp, limit):
    jpath = os.path.join(tmp, "bench_train.jsonl")
    if os.path.exists(jpath):
        os.remove(jpath)
    cmd = ["timeout", "-k", "5", str(limit), exe, "--model", model_dir, "--budget", str(budget), "--seq", str(T), "--steps", str(steps),
           "--max-batch", str(max_b), "--json", jpath]
    print("$", " ".join(cmd), flush=True)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1) as p:
        for line in p.stdout:  # streamed: a run cut short still shows how far it got
            print(line, end="", flush=True)
    r = p
    rows = []
    if os.path.exists(jpath):
        with open(jpath) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    return r.returncode, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-train", help="the bench_train binary (omitted: PyTorch only)")
    ap.add_argument("--configs", default="gpt2-124m,gpt2-350m")
    ap.add_argument("--budget", default="4GiB")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--max-batch", default="32,8",
                    help="per config (comma-separated, the last repeats): every activation has a pinned host "
                         "home, so host memory caps the offloaded batch")
    ap.add_argument("--limit", type=int, default=240, help="seconds for each bench_train run")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--attn", default="eager", help="transformers attention: eager | sdpa")
    ap.add_argument("--precisions", default="fp32", help="PyTorch steps to time: fp32,bf16,f16 (autocast)")
    ap.add_argument("--torch-batches", default="", help="B values for PyTorch when not taken from bench_train")
    ap.add_argument("--no-budget-search", action="store_true", help="skip PyTorch's largest batch under --budget")
    ap.add_argument("--tmp", default="/tmp/train-h200")
    ap.add_argument("--out", default="train-h200.json")
    a = ap.parse_args()
    os.makedirs(a.tmp, exist_ok=True)
    dev = torch.device(a.device)
    budget = parse_bytes(a.budget)
    torch.backends.cuda.matmul.allow_tf32 = False  # omptensor's cuBLAS calls compute in fp32
    torch.backends.cudnn.allow_tf32 = False
    out = {"date": datetime.date.today().isoformat(), "host": platform.node(), "budget": budget, "seq": a.seq,
           "torch": torch.__version__, "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
           "attn": a.attn, "models": {}}
    caps = [int(x) for x in a.max_batch.split(",")]
    for ci, name in enumerate(a.configs.split(",")):
        max_b = caps[min(ci, len(caps) - 1)]
        cfg = load_config(name)
        res = out["models"][name] = {"config": cfg}
        print(f"== {name}: n_embd {cfg['n_embd']}, n_layer {cfg['n_layer']}, T={a.seq}, budget {budget / 2**30:.2f} GiB",
              flush=True)
        ours = []
        if a.bench_train:
            rc, ours = run_ours(a.bench_train, os.path.join(HERE, "models", name), budget, a.seq, a.steps,
                                max_b, a.tmp, a.limit)
            res["omptensor_rc"] = rc
        res["omptensor"] = ours
        fit = next((r for r in ours if r["bench"] == "train_fit"), None)
        batches = sorted({r["B"] for r in ours if r["bench"] == "train"} |
                         {int(b) for b in a.torch_batches.split(",") if b}) or [1]
        res["torch"] = []
        for B in batches:
            for prec in a.precisions.split(","):
                t, peak = torch_step_time(cfg, B, a.seq, a.steps, dev, a.attn, prec)
                row = {"B": B, "precision": prec, "step_ms": t * 1e3 if t else None,
                       "tokens_per_second": B * a.seq / t if t else None, "peak": peak}
                res["torch"].append(row)
                print(f"  torch B={B} {prec}: " + (f"{t * 1e3:.1f} ms, {B * a.seq / t:.0f} tok/s, peak "
                                                   f"{peak / 2**30:.2f} GiB" if t else "out of memory"), flush=True)
        if not a.no_budget_search:
            res["torch_largest_B_at_budget"] = torch_largest_batch(cfg, a.seq, budget, dev, a.attn, max_b)
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    # the table
    print("\n| model | case | B | checkpoint | tokens/s | step ms | PyTorch tokens/s (same B) | ours / PyTorch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, res in out["models"].items():
        tmap = {r["B"]: r for r in res["torch"] if r.get("precision", "fp32") == "fp32"}
        for r in res["omptensor"]:
            if r["bench"] != "train":
                continue
            tt = tmap.get(r["B"], {}).get("tokens_per_second")
            peer = f"{tt:.0f}" if tt else "OOM"
            ratio = f"{r['tokens_per_second'] / tt:.2f}" if tt else "-"
            print(f"| {name} | {r['label']} | {r['B']} | {r['checkpoint']} ({r['recomputed']} layers) | "
                  f"{r['tokens_per_second']:.0f} | {r['step_ms']:.1f} | {peer} | {ratio} |")
        fit = next((r for r in res["omptensor"] if r["bench"] == "train_fit"), None)
        if fit:
            print(f"{name}: largest B at the budget: resident {fit['resident_B']}, offload/recompute "
                  f"{fit['offload_B']}{' (cap)' if fit['capped'] else ''}; PyTorch "
                  f"{res.get('torch_largest_B_at_budget')}")
        rs = [r for r in res["omptensor"] if r["bench"] == "train"]
        by = {r["label"]: r for r in rs}
        if "resident" in by and "offload" in by:
            print(f"{name}: offloaded / resident tokens/s = "
                  f"{by['offload']['tokens_per_second'] / by['resident']['tokens_per_second']:.2f} (target >= 0.70)")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    sys.exit(main())
