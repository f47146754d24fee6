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


def torch_largest_batch(cfg, T, budget, dev, attn, hi, precision="fp32"):
    """Largest B whose step fits `budget` bytes of the GPU (the caching
    allocator limited by set_per_process_memory_fraction; None: the whole GPU)."""
    if dev.type != "cuda":
        return None
    idx = dev.index if dev.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(idx).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, (budget or total) / total), idx)
    lo, hi = 0, hi + 1
    try:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            t, _ = torch_step_time(cfg, mid, T, 1, dev, attn, precision)
            print(f"  torch {precision} B={mid} under {'the budget' if budget else 'the whole GPU'}: "
                  f"{'fits' if t else 'out of memory'}", flush=True)
            lo, hi = (mid, hi) if t else (lo, mid)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, idx)
    return lo


def run_ours(exe, model_dir, budget, T, steps, max_b, tmp, limit, precision="fp32", batches="", cpu_optimizer=False):
    """bench_train: the batch search at the budget (and timed steps at the
    batches found), or with `batches` timed steps at those B (checkpoint
    none). Streams its output; returns (rc, its JSON rows)."""
    jpath = os.path.join(tmp, "bench_train.jsonl")
    if os.path.exists(jpath):
        os.remove(jpath)
    cmd = ["timeout", "-k", "5", str(limit), exe, "--model", model_dir, "--budget", str(budget), "--seq", str(T), "--steps", str(steps),
           "--max-batch", str(max_b), "--json", jpath, "--precision", precision]
    if cpu_optimizer:  # AdamW on the host homes (ZeRO-Offload style): the moments never cross PCIe
        cmd.append("--cpu-optimizer")
    if batches:
        cmd += ["--batches", batches, "--checkpoints", ",".join("none" for _ in batches.split(","))]
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


def write_tokens(path, n, vocab, seed=0):
    """An llm.c .bin of n ids from a fixed random Markov chain (each token has
    4 possible successors, probabilities 0.55/0.25/0.15/0.05): learnable, so
    a loss curve falls from ln(vocab) toward the chain's entropy (1.1 nats)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    succ = rng.integers(0, vocab, size=(vocab, 4)).tolist()
    pick = rng.choice(4, size=n, p=[0.55, 0.25, 0.15, 0.05]).tolist()
    seq = [0] * n
    t = 0
    for i in range(n):  # plain ints: ~1 s for 2 M tokens
        seq[i] = t
        t = succ[t][pick[i]]
    tok = np.array(seq, dtype=np.uint16)
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, n]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tok.tobytes())
    return tok.astype(np.int64)


def torch_curve(model_dir, tok, B, T, steps, lr, dev, attn, precision):
    """PyTorch's losses over `steps` updates from the checkpoint in model_dir,
    on the windows omptensor train takes (src/io/tokens.c: B*T+1 tokens per
    step, inputs/targets shifted by one, the next step B*T further on)."""
    from transformers import GPT2LMHeadModel
    model = GPT2LMHeadModel.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    x_all = torch.tensor(tok, device=dev)
    pos, losses = 0, []
    for _ in range(steps):
        if pos + B * T + 1 > len(tok):
            pos = 0
        w = x_all[pos:pos + B * T + 1]
        pos += B * T
        x, y = w[:-1].view(B, T), w[1:].view(B, T)
        with torch.autocast(dev.type, dtype=AUTOCAST[precision], enabled=precision != "fp32"):
            logits = model(input_ids=x).logits
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def svg_curves(path, series, title):
    """A plain SVG line chart of {label: [loss per step]} (no plotting library)."""
    W, H, L, R, Tm, Bm = 720, 420, 60, 20, 40, 50
    ys = [v for vals in series.values() for v in vals]
    n = max(len(v) for v in series.values())
    lo, hi = min(ys), max(ys)
    hi = hi if hi > lo else lo + 1
    def px(i):
        return L + (W - L - R) * i / max(1, n - 1)
    def py(v):
        return Tm + (H - Tm - Bm) * (hi - v) / (hi - lo)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{L}" y1="{H - Bm}" x2="{W - R}" y2="{H - Bm}" stroke="black"/>',
           f'<line x1="{L}" y1="{Tm}" x2="{L}" y2="{H - Bm}" stroke="black"/>']
    for k in range(6):
        v = lo + (hi - lo) * k / 5
        out.append(f'<text x="{L - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
        out.append(f'<line x1="{L}" y1="{py(v):.1f}" x2="{W - R}" y2="{py(v):.1f}" stroke="#ddd"/>')
    for k in range(6):
        i = (n - 1) * k / 5
        out.append(f'<text x="{px(i):.1f}" y="{H - Bm + 16}" text-anchor="middle">{int(i) + 1}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">step</text>')
    out.append(f'<text x="16" y="{(Tm + H - Bm) / 2}" transform="rotate(-90 16 {(Tm + H - Bm) / 2})" '
               f'text-anchor="middle">loss</text>')
    for c, (label, vals) in enumerate(series.items()):
        pts = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in enumerate(vals))
        col = colors[c % len(colors)]
        out.append(f'<polyline fill="none" stroke="{col}" stroke-width="1.5" points="{pts}"/>')
        out.append(f'<text x="{W - R - 200}" y="{Tm + 16 + 16 * c}" fill="{col}">{label}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def run_curve(a, dev, out):
    """200 steps of GPT-2 124M from the same initial weights on the same
    token file: omptensor train (under --budget) against PyTorch (whole GPU),
    in each of --curve-precisions; the losses and one SVG beside --out."""
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = load_config(a.configs.split(",")[0])
    d = os.path.join(a.tmp, "curve-init")
    torch.manual_seed(0)
    c = GPT2Config(n_embd=cfg["n_embd"], n_layer=cfg["n_layer"], n_head=cfg["n_head"], n_positions=cfg["n_positions"],
                   vocab_size=cfg["vocab_size"], activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                   attn_pdrop=0.0)
    GPT2LMHeadModel(c).save_pretrained(d, safe_serialization=True)
    B, T, steps = a.curve_batch, a.seq, a.curve_steps
    path = os.path.join(a.tmp, "curve-tokens.bin")
    tok = write_tokens(path, steps * B * T + 1, cfg["vocab_size"])
    series = {}
    curves = out["curves"] = []
    for prec in (a.curve_precisions or a.precision).split(","):
        cmd = ["timeout", "-k", "5", str(a.limit), a.omptensor, "train", d, "--data", path, "--batch", str(B),
               "--seq", str(T), "--steps", str(steps), "--lr", str(a.curve_lr), "--precision", prec,
               "--gpu-memory-limit", a.budget, "--json"]
        print("$", " ".join(cmd), flush=True)
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            print(r.stderr[-3000:], flush=True)
            curves.append({"precision": prec, "omptensor_rc": r.returncode})
            continue
        ours = json.loads(r.stdout)
        l_ours = [s_["loss"] for s_ in ours["steps"]]
        t0 = time.perf_counter()
        l_torch = torch_curve(d, tok, B, T, steps, a.curve_lr, dev, a.attn, prec)
        t_torch = time.perf_counter() - t0
        gap = max(abs(x - y) for x, y in zip(l_ours, l_torch))
        last10 = sum(abs(x - y) for x, y in zip(l_ours[-10:], l_torch[-10:])) / 10
        curves.append({"B": B, "T": T, "steps": steps, "lr": a.curve_lr, "precision": prec,
                       "budget": a.budget, "omptensor_losses": l_ours, "torch_losses": l_torch,
                       "omptensor_tokens_per_second": ours.get("tokens_per_second"),
                       "torch_tokens_per_second": steps * B * T / t_torch, "max_abs_gap": gap,
                       "mean_abs_gap_last_10": last10})
        series[f"omptensor {prec}, {a.budget} budget"] = l_ours
        series[f"PyTorch {prec}" + (" (autocast)" if prec != "fp32" else " (TF32 off)")] = l_torch
        for attn in [x for x in a.curve_torch_attn.split(",") if x and x != a.attn]:
            l_alt = torch_curve(d, tok, B, T, steps, a.curve_lr, dev, attn, prec)
            curves[-1][f"torch_{attn}_losses"] = l_alt
            series[f"PyTorch {prec}, {attn} attention"] = l_alt
            print(f"curve {prec}: PyTorch with {attn} attention {l_alt[0]:.3f} -> {l_alt[-1]:.3f}; max |gap| to "
                  f"{a.attn} {max(abs(x - y) for x, y in zip(l_alt, l_torch)):.4f}, to omptensor "
                  f"{max(abs(x - y) for x, y in zip(l_alt, l_ours)):.4f}", flush=True)
        print(f"curve {prec}: loss {l_ours[0]:.3f} -> {l_ours[-1]:.3f} (omptensor), {l_torch[0]:.3f} -> "
              f"{l_torch[-1]:.3f} (PyTorch); max |gap| {gap:.4f}, mean over the last 10 steps {last10:.4f}", flush=True)
    if series:
        svg = os.path.splitext(a.out)[0] + "-curve.svg"
        svg_curves(svg, series, f"GPT-2 124M, {steps} steps of {B} x {T} tokens, AdamW lr {a.curve_lr}")
        print(f"curve: {svg}", flush=True)


def run_speed(a, dev, out):
    """Same B, same T, the whole GPU: omptensor's step against PyTorch's, in
    each precision (the issue's >= 0.8x targets)."""
    rows = out["speed"] = []
    for name in a.configs.split(","):
        cfg = load_config(name)
        for prec in a.precisions.split(","):
            _, ours = run_ours(a.bench_train, os.path.join(HERE, "models", name), parse_bytes(a.speed_budget), a.seq,
                               a.steps, 1, a.tmp, a.limit, prec, a.speed_batches)
            for r in ours:
                if r.get("bench") != "train":
                    continue
                t, peak = torch_step_time(cfg, r["B"], a.seq, a.steps, dev, a.attn, prec)
                tt = r["B"] * a.seq / t if t else None
                row = {"model": name, "precision": prec, "B": r["B"], "omptensor_tokens_per_second": r["tokens_per_second"],
                       "omptensor_step_ms": r["step_ms"], "torch_tokens_per_second": tt,
                       "torch_step_ms": t * 1e3 if t else None, "torch_peak": peak,
                       "ratio": r["tokens_per_second"] / tt if tt else None}
                rows.append(row)
                print(f"speed {name} {prec} B={r['B']}: omptensor {r['tokens_per_second']:.0f} tok/s, PyTorch "
                      f"{tt or 0:.0f} tok/s, ratio {row['ratio'] or 0:.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-train", help="the bench_train binary (omitted: PyTorch only)")
    ap.add_argument("--omptensor", help="the omptensor CLI (for --curve-steps)")
    ap.add_argument("--configs", default="gpt2-124m,gpt2-350m")
    ap.add_argument("--budget", default="4GiB")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--max-batch", default="32,8",
                    help="per config (comma-separated, the last repeats): the largest B the search tries")
    ap.add_argument("--limit", type=int, default=240, help="seconds for each bench_train run")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--attn", default="eager", help="transformers attention: eager | sdpa")
    ap.add_argument("--precision", default="fp32", help="the budget search's and the curve's: fp32 | bf16")
    ap.add_argument("--precisions", default="", help="PyTorch steps to time at the budget's batches (default: "
                                                     "--precision); with --speed-batches, both sides")
    ap.add_argument("--torch-batches", default="", help="B values for PyTorch when not taken from bench_train")
    ap.add_argument("--no-budget-search", action="store_true", help="skip PyTorch's largest batch under --budget")
    ap.add_argument("--whole-gpu-largest", action="store_true",
                    help="also PyTorch's largest batch on the whole GPU and its tokens/s")
    ap.add_argument("--speed-batches", default="", help="only the same-B comparison at these B (whole GPU)")
    ap.add_argument("--speed-budget", default="100GiB", help="omptensor's budget for --speed-batches")
    ap.add_argument("--curve-steps", type=int, default=0, help="only the loss curves: steps of both trainers")
    ap.add_argument("--curve-batch", type=int, default=8)
    ap.add_argument("--curve-precisions", default="",
                    help="curves in each of these precisions (default: --precision); e.g. bf16,fp32 tells a bf16 "
                         "trajectory's drift from a defect")
    ap.add_argument("--curve-torch-attn", default="",
                    help="extra PyTorch curves with these attention implementations (e.g. sdpa: scores kept in fp32 "
                         "under autocast, as omptensor's flash attention keeps them)")
    ap.add_argument("--cpu-optimizer", action="store_true", help="bench_train --cpu-optimizer in the budget runs")
    ap.add_argument("--curve-lr", type=float, default=3e-4)
    ap.add_argument("--tmp", default="/tmp/train-h200")
    ap.add_argument("--out", default="train-h200.json")
    a = ap.parse_args()
    os.makedirs(a.tmp, exist_ok=True)
    a.precisions = a.precisions or a.precision
    dev = torch.device(a.device)
    budget = parse_bytes(a.budget)
    torch.backends.cuda.matmul.allow_tf32 = False  # omptensor's cuBLAS calls compute in fp32
    torch.backends.cudnn.allow_tf32 = False
    out = {"date": datetime.date.today().isoformat(), "host": platform.node(), "budget": budget, "seq": a.seq,
           "torch": torch.__version__, "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
           "attn": a.attn, "precision": a.precision, "models": {}}
    if a.curve_steps:
        run_curve(a, dev, out)
    elif a.speed_batches:
        run_speed(a, dev, out)
    else:
        run_budget(a, dev, budget, out)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {a.out}")


def run_budget(a, dev, budget, out):
    """The largest batch at --budget, resident and with offload/recompute,
    the tokens/s at each, PyTorch at the same B (whole GPU) and its largest B
    under the budget (and on the whole GPU)."""
    caps = [int(x) for x in a.max_batch.split(",")]
    for ci, name in enumerate(a.configs.split(",")):
        max_b = caps[min(ci, len(caps) - 1)]
        cfg = load_config(name)
        res = out["models"][name] = {"config": cfg}
        print(f"== {name}: n_embd {cfg['n_embd']}, n_layer {cfg['n_layer']}, T={a.seq}, budget {budget / 2**30:.2f} GiB,"
              f" {a.precision}", flush=True)
        ours = []
        if a.bench_train:
            rc, ours = run_ours(a.bench_train, os.path.join(HERE, "models", name), budget, a.seq, a.steps,
                                max_b, a.tmp, a.limit, a.precision, cpu_optimizer=a.cpu_optimizer)
            res["omptensor_rc"] = rc
            res["cpu_optimizer"] = a.cpu_optimizer
        res["omptensor"] = ours
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
            res["torch_largest_B_at_budget"] = torch_largest_batch(cfg, a.seq, budget, dev, a.attn, max_b, a.precision)
        if a.whole_gpu_largest:
            bw = torch_largest_batch(cfg, a.seq, None, dev, a.attn, 256, a.precision)
            t, peak = torch_step_time(cfg, bw, a.seq, a.steps, dev, a.attn, a.precision) if bw else (None, 0)
            res["torch_whole_gpu"] = {"B": bw, "tokens_per_second": bw * a.seq / t if t else None, "peak": peak}
            print(f"  torch {a.precision} largest B on the whole GPU: {bw}, "
                  f"{bw * a.seq / t if t else 0:.0f} tok/s", flush=True)
    print("\n| model | case | precision | B | checkpoint | tokens/s | step ms | PyTorch tokens/s (same B) | ours / PyTorch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, res in out["models"].items():
        tmap = {r["B"]: r for r in res["torch"] if r.get("precision", "fp32") == a.precision}
        for r in res["omptensor"]:
            if r["bench"] != "train":
                continue
            tt = tmap.get(r["B"], {}).get("tokens_per_second")
            peer = f"{tt:.0f}" if tt else "OOM"
            ratio = f"{r['tokens_per_second'] / tt:.2f}" if tt else "-"
            print(f"| {name} | {r['label']} | {a.precision} | {r['B']} | {r['checkpoint']} ({r['recomputed']} layers) | "
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
                  f"{by['offload']['tokens_per_second'] / by['resident']['tokens_per_second']:.2f}")
        w = res.get("torch_whole_gpu")
        if w and w.get("tokens_per_second") and "offload" in by:
            print(f"{name}: offloaded tokens/s / PyTorch's at its largest whole-GPU batch (B={w['B']}) = "
                  f"{by['offload']['tokens_per_second'] / w['tokens_per_second']:.2f} (target >= 0.70)")


if __name__ == "__main__":
    sys.exit(main())
