#!/usr/bin/env python3
"""Hybrid compute on one GPU (issue 20): decode with ops on the host's cores.

One device call (a few minutes on the H200):
  1. the model of decode_h200.py (Llama-2-7B shapes, 16 layers, random bf16
     weights, ~7.0 GB; made once in --workdir) and its 128-token prompt;
  2. the two bandwidths a hybrid step reads at: pinned host->device (PCIe)
     and the host's matvec over 2 GB of bf16 weights, measured twice: torch
     (`W @ x` on the CPU, every core) and omptensor's host kernel
     (bench_host_read, --host-read); the bound takes the faster;
  3. the PyTorch layer streamer (the peer: every layer over PCIe each token);
  4. omptensor at each budget (--budgets, 25 and 10 %) with --compute gpu,
     hybrid and auto (the default), batch 1;
  5. the table (stdout, and Markdown beside --out) and the JSON (--out),
     rewritten after every case.

Bounds per case (W weight bytes, KV the bf16 cache of prompt + new tokens,
N = max(0, W - (budget - KV)) the bytes that cannot stay resident):
  PCIe bound   = B_pcie / N                       tokens/s (every one crosses)
  hybrid bound = (B_pcie + B_host) / N            (both read at once)

On the GPU machine:
    PYTHONUNBUFFERED=1 python3 bench/hybrid_h200.py --omptensor build-gpu/omptensor \\
        --omptensor-prologue .gpu/prologue.sh --host-read build-gpu/bench_host_read \\
        --out $OUT/decode-h200-hybrid.json 2>&1 | tee $OUT/decode-h200-hybrid.log
CPU smoke test (tiny model; the bounds then mean little):
    python3 bench/hybrid_h200.py --tiny --device cpu --omptensor build/offload-host/omptensor \\
        --host-read build/offload-host/bench/bench_host_read --host-read-gib 0.05 \\
        --workdir /tmp/hb --out /tmp/hb/out.json
"""
import time

T_START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from peers import harness as H  # noqa: E402
from peers import model as M  # noqa: E402
from peers import omptensor as O  # noqa: E402
from peers import torch_peers as P  # noqa: E402
from peers.common import Dev  # noqa: E402

H.start_clock(T_START)
log = H.log
MIN_SECONDS = {"torch-streamer": 30, "omptensor": 12}
COMPUTES = ("gpu", "hybrid", "auto")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--omptensor", metavar="CMD", help="the omptensor command (its cases are skipped without)")
    p.add_argument("--omptensor-prologue", metavar="FILE", help="sourced before omptensor (the GPU bundle)")
    p.add_argument("--host-read", metavar="CMD", help="bench_host_read (omptensor's host matvec bandwidth)")
    p.add_argument("--host-read-gib", type=float, default=2.0)
    p.add_argument("--workdir", default="/tmp/omptensor-bench")
    p.add_argument("--out", default="decode-h200-hybrid.json")
    p.add_argument("--artifacts", help="folder for the Markdown (default: beside --out)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="a tiny model (smoke test)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--slow-new-tokens", type=int, default=8, help=argparse.SUPPRESS)  # the shared header's
    p.add_argument("--budgets", default="25,10", help="percent of the weight bytes")
    p.add_argument("--computes", default=",".join(COMPUTES))
    p.add_argument("--offload", default="balanced")
    p.add_argument("--hybrid-offloads", default="aggressive",
                   help="also run compute hybrid with these --offload strategies")
    p.add_argument("--omp-threads", default="", help="also run hybrid with OMP_NUM_THREADS=N,N,...")
    p.add_argument("--skip", default="")
    p.add_argument("--time-limit", type=float, default=420)
    p.add_argument("--case-timeout", type=float, default=90)
    p.add_argument("--hbm-bw", type=float, default=4.3e12)
    return p.parse_args()


def torch_host_matvec(gib, dtype, reps=5):
    """W @ x on the CPU over `gib` GiB of [11008, 4096] matrices, every
    core: bytes of W / the fastest pass (the peer of the host kernel)."""
    torch.set_num_threads(os.cpu_count() or 1)
    n, k = 11008, 4096
    per = n * k * torch.finfo(dtype).bits // 8
    mats = [torch.randn(n, k).to(dtype) for _ in range(max(1, int(gib * (1 << 30) / per + 0.5)))]
    x = torch.randn(k).to(dtype)
    best = None
    for _ in range(reps):
        t0 = time.perf_counter()
        for w in mats:
            w @ x
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    nbytes = per * len(mats)
    del mats
    return dict(bytes=nbytes, threads=torch.get_num_threads(), gbs=nbytes / best / 1e9)


def omptensor_host_read(args, dev):
    """bench_host_read's JSON line (its own read and matvec GB/s)."""
    cmd = shlex.split(args.host_read) + [str(args.host_read_gib), "bf16", "1"]
    if args.omptensor_prologue:
        cmd = ["bash", "-c", '. "$0" >&2 && exec "$@"', os.path.abspath(args.omptensor_prologue)] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=O._env(dev))
    recs = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    read = [r for r in recs if r.get("bench") == "host_read"]
    if p.returncode or not read:
        raise RuntimeError(f"bench_host_read failed (rc {p.returncode}): {p.stderr[-500:]}")
    out = dict(read[0])
    for r in recs:                     # the library's own: its kernel beside a PCIe stream
        if r.get("bench") == "host_rates":
            out.update(host_gbs_beside_pcie=r["host_gbs_beside_pcie"], pcie_gbs_beside_host=r["pcie_gbs_beside_host"])
    return out


def measure_host(b, args):
    h = b.header
    try:
        t = torch_host_matvec(args.host_read_gib, torch.bfloat16)
        h.update(torch_host_bf16_bytes=t["bytes"], torch_host_threads=t["threads"],
                 torch_host_bf16_gbs=t["gbs"])
        log(f"host matvec (torch, bf16, {t['threads']} threads, {t['bytes'] / 1e9:.2f} GB): {t['gbs']:.1f} GB/s")
        t = torch_host_matvec(min(args.host_read_gib, 1.44), torch.float32)
        h.update(torch_host_f32_gbs=t["gbs"])
        log(f"host matvec (torch, f32, {t['bytes'] / 1e9:.2f} GB): {t['gbs']:.1f} GB/s")
    except Exception as e:  # noqa: BLE001
        log(f"torch host matvec FAILED: {e}")
    if args.host_read:
        try:
            r = omptensor_host_read(args, b.dev)
            h.update(omptensor_host_read=r, omptensor_host_gemv_gbs=r["gemv_gbs"],
                     host_read_gbs=r["read_gbs"], host_gbs_beside_pcie=r.get("host_gbs_beside_pcie"),
                     pcie_gbs_beside_host=r.get("pcie_gbs_beside_host"))
            log(f"host (omptensor bench_host_read, {r['threads']} threads, {r['bytes'] / 1e9:.2f} GB bf16): "
                f"plain read {r['read_gbs']:.1f} GB/s, matvec {r['gemv_gbs']:.1f} GB/s "
                f"({100 * r['gemv_over_read']:.0f} % of the read); beside a PCIe stream the matvec "
                f"{r.get('host_gbs_beside_pcie') or 0:.1f} GB/s and the stream {r.get('pcie_gbs_beside_host') or 0:.1f} GB/s")
        except Exception as e:  # noqa: BLE001
            log(f"bench_host_read FAILED: {e}")
    best = max([h.get(k) or 0 for k in ("torch_host_bf16_gbs", "omptensor_host_gemv_gbs")])
    h["host_matvec_bytes_per_s"] = best * 1e9 if best else None


def make_bound(b):
    def bound(case):
        h = b.header
        budget, w, kv = case.get("budget_bytes"), h["weight_bytes"], h["kv_cache_bytes"]
        pcie, host = h.get("h2d_bytes_per_s"), h.get("host_matvec_bytes_per_s")
        out = dict(bound_tokens_per_second=M.bound_tokens_per_second(w, budget, kv, pcie, b.args.hbm_bw))
        n = None if budget is None else max(0, w - max(0, budget - kv))
        out.update(non_resident_bytes=n, pcie_bound_tokens_per_second=None, hybrid_bound_tokens_per_second=None,
                   shared_bound_tokens_per_second=None)
        if n and pcie:
            out["pcie_bound_tokens_per_second"] = pcie / n
            if host:
                out["hybrid_bound_tokens_per_second"] = (pcie + host) / n
            both = (h.get("host_gbs_beside_pcie") or 0) + (h.get("pcie_gbs_beside_host") or 0)
            if both:   # both streams at once, as measured: what host memory gives them together
                out["shared_bound_tokens_per_second"] = both * 1e9 / n
        return out
    return bound


def finalize(b):
    """Ratios against the bounds and the streamer (the peer: the same at any budget)."""
    def run(cases):
        peer = next((c for c in cases if c["case"] == "torch-streamer" and c["status"] == "ok"), None)
        ref = peer.get("tokens") if peer else None
        for c in cases:
            if c["status"] != "ok" or not c.get("tokens_per_second"):
                continue
            tps = c["tokens_per_second"]
            for k in ("hybrid_bound", "pcie_bound", "shared_bound"):
                bd = c.get(k + "_tokens_per_second")
                c["ratio_to_" + k] = tps / bd if bd else None
            c["ratio_to_streamer"] = tps / peer["tokens_per_second"] if peer else None
            if ref and c.get("tokens"):
                same = c["tokens"] == ref
                c["tokens_match"] = same
                c["match_prefix"] = next((i for i, (x, y) in enumerate(zip(c["tokens"], ref)) if x != y),
                                         min(len(c["tokens"]), len(ref)))
                if not same:
                    c["tokens_first_differ"] = c["match_prefix"]
    return run


def omptensor_cases(b, cmd, model_dir, prompt_file):
    a = b.args
    w = b.header["weight_bytes"]
    computes = [c for c in a.computes.split(",") if c]
    threads = [t for t in a.omp_threads.split(",") if t]
    for pct in [float(x) for x in a.budgets.split(",") if x]:
        budget = int(pct / 100 * w)
        runs = [(c, None, a.offload) for c in computes] + [("hybrid", t, a.offload) for t in threads]
        runs += [("hybrid", None, o) for o in a.hybrid_offloads.split(",") if o and o != a.offload]
        for compute, nt, offload in runs:
            name = f"omptensor-{pct:g}%-{offload}-{compute}" + (f"-t{nt}" if nt else "")
            if not b.wanted(name, "omptensor", budget):
                continue
            spec = dict(name=name, fraction=pct / 100, offload=offload, backend="map", dtype=None,
                        tag=name.replace("%", "pct"))
            extra = ["--compute", compute] if compute != "auto" else []
            old = os.environ.get("OMP_NUM_THREADS")
            if nt:
                os.environ["OMP_NUM_THREADS"] = nt
            try:
                res = O.run_case(cmd, spec, model_dir, prompt_file, a.new_tokens, budget,
                                 max(5.0, min(a.case_timeout, b.remaining() - 5)), b.dev, b.artifacts, log,
                                 extra_args=extra)
            except Exception as e:  # noqa: BLE001
                b.failed(name, "map", budget, e)
                continue
            finally:
                if nt:
                    if old is None:
                        os.environ.pop("OMP_NUM_THREADS", None)
                    else:
                        os.environ["OMP_NUM_THREADS"] = old
            summ = res.get("omptensor") or {}
            res.update(compute=(summ.get("compute") or {}).get("used", compute), requested_compute=compute,
                       compute_detail=summ.get("compute"), omp_num_threads=nt)
            b.add(dict(res, case=name, backend="map", offload=offload, dtype="bf16", budget_fraction=pct / 100))


def fmt(x, f="{:.2f}"):
    return "—" if x is None else f.format(x)


def markdown(b, cmdline):
    h = b.header
    lines = [f"## Hybrid compute on the H200: decode with ops on the host's cores (`bench/hybrid_h200.py`, issue 20)",
             "",
             f"{h.get('date')}, {h.get('gpu', b.dev.name)}, torch {torch.__version__}. Model: Llama-2-7B shapes, 16 "
             f"layers, random bf16 weights, {h['weight_bytes'] / 1e9:.2f} GB; prompt {b.args.prompt_len} tokens, "
             f"{b.args.new_tokens} new, greedy, batch 1. Pinned host→device {fmt((h.get('h2d_bytes_per_s') or 0) / 1e9, '{:.1f}')} "
             f"GB/s; host matvec over bf16 weights: torch {fmt(h.get('torch_host_bf16_gbs'), '{:.1f}')} GB/s "
             f"({h.get('torch_host_threads')} threads; f32 {fmt(h.get('torch_host_f32_gbs'), '{:.1f}')}), omptensor "
             f"{fmt(h.get('omptensor_host_gemv_gbs'), '{:.1f}')} GB/s (a plain read {fmt(h.get('host_read_gbs'), '{:.1f}')}); "
             f"the bound takes {fmt((h.get('host_matvec_bytes_per_s') or 0) / 1e9, '{:.1f}')} GB/s. Both at once "
             f"(omptensor's measurement, host memory shared): the matvec {fmt(h.get('host_gbs_beside_pcie'), '{:.1f}')} "
             f"GB/s beside a PCIe stream of {fmt(h.get('pcie_gbs_beside_host'), '{:.1f}')} GB/s (their sum: the "
             f"shared bound).",
             "", "    " + cmdline, "",
             "| case | compute | budget | tokens/s | × hybrid bound | × shared bound | × PCIe bound | × streamer | host ops "
             "| host GB/token | PCIe GB/token | prefill ms | peak device | probe | tokens |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in b.cases:
        if c["status"] != "ok":
            lines.append(f"| {c['case']} | — | — | {c['status'].upper()} | | | | | | | | | | | {c.get('note') or ''} |")
            continue
        d = c.get("compute_detail") or {}
        bud = c.get("budget_bytes")
        lines.append("| " + " | ".join([
            c["case"], str(c.get("compute") or "torch"),
            "—" if bud is None else f"{100 * (c.get('budget_fraction') or bud / h['weight_bytes']):.0f}% ({bud / 1e9:.2f} GB)",
            fmt(c.get("tokens_per_second")),
            fmt(c.get("ratio_to_hybrid_bound"), "{:.0%}"), fmt(c.get("ratio_to_shared_bound"), "{:.0%}"),
            fmt(c.get("ratio_to_pcie_bound"), "{:.2f}×"),
            fmt(c.get("ratio_to_streamer"), "{:.2f}×"),
            str(d.get("host_ops", "—")),
            fmt((d.get("host_read_bytes_per_token") or 0) / 1e9 if d else None, "{:.2f}"),
            fmt((d.get("pcie_bytes_per_token") or 0) / 1e9 if d else (c.get("streamed_bytes_per_token") or 0) / 1e9, "{:.2f}"),
            fmt(c.get("prefill_ms"), "{:.1f}"),
            fmt((c.get("peak_device_bytes") or 0) / 1e9, "{:.2f} GB"),
            {True: "ok", False: "FAILED"}.get(c.get("budget_probe_ok"), "—"),
            "same" if c.get("tokens_match") else ("ref" if c["case"] == "torch-streamer" else
                                                   f"differ at {c.get('tokens_first_differ')}"),
        ]) + " |")
    lines += ["", "Bounds: N = max(0, W - (budget - KV)) bytes cannot stay resident (W the weights, KV the bf16 "
              "cache of prompt + new tokens); PCIe bound = B_pcie / N, hybrid bound = (B_pcie + B_host) / N "
              "tokens/s, B_host the faster host matvec above; shared bound = (the matvec beside a PCIe stream + "
              "that stream) / N, both measured at once (host memory serves both). tokens: against the streamer's (the model is "
              "random: nearly tied logits, so kernels that sum differently part after a few tokens)."]
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
    b.header.update(kv_cache_bytes=M.kv_cache_bytes(cfg_kw, args.prompt_len + args.new_tokens),
                    cpu_count=os.cpu_count())
    log(f"model {model_dir}: {b.header['weight_bytes'] / 1e9:.3f} GB")
    H.measure_bandwidth(b)
    measure_host(b, args)
    b.run("torch-streamer", "torch-streamer", "torch", None,
          lambda: P.streamer(model_dir, prompt, args.new_tokens, dev))
    cmd = H.omptensor_command(args, b)
    if cmd:
        H.free_memory_for_subprocess(b)
        omptensor_cases(b, cmd, model_dir, prompt_file)
    b.refresh()
    md = markdown(b, "PYTHONUNBUFFERED=1 python3 bench/hybrid_h200.py " + " ".join(sys.argv[1:]))
    with open(os.path.join(b.artifacts, "decode-h200-hybrid.md"), "w") as f:
        f.write(md + "\n")
    print(md, flush=True)
    log(f"done: {args.out}")


if __name__ == "__main__":
    main()
