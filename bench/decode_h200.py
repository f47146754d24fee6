#!/usr/bin/env python3
"""Decode benchmark on one GPU: omptensor against PyTorch, offloaded and resident.

One run (one device call, under 9 minutes on the H200) does, in order:
  1. makes the model once (Llama-2-7B shapes, 16 layers, random bf16 weights
     generated on the GPU, sharded safetensors, ~7.0 GB) in --workdir and a
     128-token prompt from a fixed seed; a later run in the same workdir
     reuses both;
  2. measures pinned host->device bandwidth (the bound for offloaded cases);
  3. runs the PyTorch peers: transformers resident (and through generate()),
     a hand-written layer streamer, Accelerate dispatch_model at the 25 %
     budget and Accelerate cpu_offload (the last two decode fewer tokens:
     they run at ~1 token/s);
  4. runs the omptensor cases as subprocesses (with --omptensor): resident;
     50/25/10 % budgets x balanced/aggressive x map/usm; int8 at 25 %; a
     traced 25 % run, with its SVG timeline;
  5. prints a table and the Markdown for bench/RESULTS.md, and writes the
     JSON to --out after every case (a run cut short keeps what it measured).

Each case's tokens are compared with the resident transformers case. Cases
run most important first and a time limit (--time-limit) skips what would not
fit; a failing or timed-out case is recorded, never fatal.

On the GPU machine (files under $OUT come back; keep the log with tee):
    PYTHONUNBUFFERED=1 python3 bench/decode_h200.py --omptensor build-gpu/omptensor \
        --omptensor-prologue .gpu/prologue.sh --out $OUT/decode-h200.json \
        2>&1 | tee $OUT/decode-h200.log
CPU smoke test (tiny model, every code path but the CUDA-only parts; any
command that answers like `omptensor run --json` can stand in for omptensor):
    python3 bench/decode_h200.py --tiny --device cpu --workdir /tmp/b --out /tmp/b/out.json
"""
import time

T_START = time.perf_counter()           # the time limit counts from here

import argparse  # noqa: E402
import datetime  # noqa: E402
import fnmatch  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from peers import model as M  # noqa: E402
from peers import omptensor as O  # noqa: E402
from peers import report as R  # noqa: E402
from peers import torch_peers as P  # noqa: E402
from peers.common import Dev, free_memory, h2d_bandwidth  # noqa: E402

# Least time (s) a case needs; it is skipped when less is left.
MIN_SECONDS = {"torch-resident": 20, "torch-streamer": 30, "accelerate-dispatch": 40,
               "accelerate-cpu_offload": 40, "omptensor": 12}
MEM_DEFINITION = ("peak device (runtime): omptensor's own peak_device_bytes, PyTorch's "
                  "torch.cuda.max_memory_allocated(); peak device (cudaMemGetInfo Δ): "
                  "device-wide used bytes at their peak during the case (sampled every "
                  "5 ms) minus before it, so it includes the caching allocator's reserve "
                  "(PyTorch) or the subprocess's own CUDA context (omptensor). For an omptensor "
                  "case with the budget probe (OMPTENSOR_DEBUG=probe) it is the drop omptensor "
                  "read at the decode plan's peak, from the context's start (the probe's own "
                  "allocation would be the poller's peak); with managed memory it includes UVM's "
                  "cache of evicted pages. probe (sched.h, ot_budget_probe): map: ok = a cudaMalloc of "
                  "(free at start - budget - 512 MiB) succeeded there (device memory cannot be evicted); "
                  "usm: ok = that drop <= budget + 512 MiB, inconclusive when larger (a cudaMalloc "
                  "evicts live managed pages, so it cannot decide).")
REQUIRED_KEYS = ("case", "backend", "budget_bytes", "tokens_per_second", "prefill_ms",
                 "bound_tokens_per_second", "peak_device_bytes", "tokens_match")
TPS_DEFINITION = ("tokens/s = decode steps / decode time: the prefill (the whole "
                  "prompt, first token) is timed apart as prefill ms and the next "
                  "new_tokens-1 forwards are the decode steps (omptensor: the "
                  "tokens_per_second of its --json summary).")


def log(msg):
    print(f"[{time.perf_counter() - T_START:6.1f} s] {msg}", flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--omptensor", metavar="CMD",
                   help="the omptensor command (split like a shell line); without it "
                        "the omptensor cases are skipped")
    p.add_argument("--omptensor-prologue", metavar="FILE",
                   help="a shell file sourced before each omptensor command only (e.g. "
                        ".gpu/prologue.sh, which puts the LLVM OpenMP runtime on "
                        "LD_LIBRARY_PATH), so the PyTorch process keeps its own libraries")
    p.add_argument("--workdir", default="/tmp/omptensor-bench",
                   help="where the model and prompt are made once and reused")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "results", "decode-h200.json"))
    p.add_argument("--artifacts", help="folder for the trace, SVG and Markdown "
                                       "(default: the folder of --out)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   choices=["cuda", "cpu"])
    p.add_argument("--tiny", action="store_true",
                   help="a tiny model (hidden 64, 2 layers, vocab 256): smoke test")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--slow-new-tokens", type=int, default=8,
                   help="new tokens for the Accelerate peers (~1 token/s each)")
    p.add_argument("--budgets", default="50,25,10",
                   help="omptensor budgets, percent of the weight bytes")
    p.add_argument("--headline-budget", type=float, default=25,
                   help="the budget (percent) run first and for int8 and the trace")
    p.add_argument("--peer-budget", type=float, default=25,
                   help="Accelerate dispatch_model budget, percent of the weight bytes")
    p.add_argument("--backends", default="map,usm")
    p.add_argument("--strategies", default="balanced,aggressive")
    p.add_argument("--usm-placements", default="auto",
                   help="comma-separated usm placements to run (auto, resident, streamed, remote)")
    p.add_argument("--skip", default="", help="comma-separated case-name patterns to skip "
                                              "(fnmatch, e.g. 'accelerate-*,*usm*')")
    p.add_argument("--time-limit", type=float, default=510,
                   help="seconds for the whole run; cases that would not fit are skipped")
    p.add_argument("--case-timeout", type=float, default=90,
                   help="seconds before an omptensor case is killed")
    p.add_argument("--hbm-bw", type=float, default=4.3e12,
                   help="HBM bytes/s for the bound of cases with nothing to move")
    return p.parse_args()


class Bench:
    """Holds the header and the cases, computes bounds, saves after each case."""

    def __init__(self, args, dev):
        self.args, self.dev = args, dev
        self.cases = []
        self.skip = [s for s in args.skip.split(",") if s]
        self.artifacts = args.artifacts or os.path.dirname(os.path.abspath(args.out))
        os.makedirs(self.artifacts, exist_ok=True)
        os.makedirs(args.workdir, exist_ok=True)

    # -- time and selection ------------------------------------------------
    def remaining(self):
        return self.args.time_limit - (time.perf_counter() - T_START)

    def stop_at(self):
        """When a slow peer must stop decoding to leave time for the report."""
        return T_START + self.args.time_limit - 10

    def wanted(self, name, kind, budget=None):
        """False (and the case recorded as skipped) when excluded or out of time."""
        if any(fnmatch.fnmatch(name, pat) for pat in self.skip):
            return False
        need = MIN_SECONDS[kind]
        if self.remaining() < need:
            self.add(dict(case=name, backend=kind.split("-")[0], status="skipped",
                          budget_bytes=budget,
                          note=f"time limit: {self.remaining():.0f} s left, needs ~{need} s"))
            return False
        log(f"case {name}")
        return True

    # -- recording ---------------------------------------------------------
    def bound(self, case):
        h = self.header
        w = case.get("weight_bytes") or (h["int8_weight_bytes_estimate"]
                                         if case.get("dtype") == "int8" else h["weight_bytes"])
        return M.bound_tokens_per_second(w, case.get("budget_bytes"), h["kv_cache_bytes"],
                                         h.get("h2d_bytes_per_s"), self.args.hbm_bw)

    def add(self, case):
        case.setdefault("status", "ok")
        for key in REQUIRED_KEYS:                # present in every case, maybe null
            case.setdefault(key, None)
        if case["status"] == "ok":
            case["bound_tokens_per_second"] = self.bound(case)
        self.cases.append(case)
        R.finalize(self.cases)
        R.write_json(self.args.out, self.header, self.cases)
        if case["status"] == "ok":
            log(f"  {case['case']}: {R._num(case.get('tokens_per_second'))} tokens/s, "
                f"prefill {R._num(case.get('prefill_ms'), '{:.1f}')} ms, "
                f"bound {R._num(case.get('bound_tokens_per_second'))}, "
                f"tokens {R._tokens_cell(case)}")
        else:
            # the last lines of stderr, without progress lines ("load: 42%")
            lines = [ln for ln in (case.get("stderr_tail") or "").splitlines()
                     if ln.strip() and not re.fullmatch(r"\s*[\w ]+: \d+%\s*", ln)]
            log(f"  {case['case']}: {case['status']}: {case.get('note') or ''}"
                + "".join(f"\n      {ln}" for ln in lines[-4:]))

    def failed(self, name, backend, budget, exc):
        free_memory(self.dev)
        self.add(dict(case=name, backend=backend, budget_bytes=budget, status="failed",
                      note=f"{type(exc).__name__}: {exc}",
                      stderr_tail=traceback.format_exc()[-2000:]))


def make_header(args, dev, model_dir, cfg_kw):
    import accelerate
    import transformers
    w = M.safetensors_bytes(model_dir)
    h = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             command=" ".join(shlex.quote(a) for a in [sys.executable] + sys.argv),
             host=platform.node(), python=platform.python_version(),
             torch=torch.__version__, torch_cuda=torch.version.cuda,
             transformers=transformers.__version__, accelerate=accelerate.__version__,
             device=dev.name, model_dir=model_dir, config=cfg_kw, seed=args.seed,
             prompt_len=args.prompt_len, new_tokens=args.new_tokens,
             slow_new_tokens=args.slow_new_tokens, weight_bytes=w,
             int8_weight_bytes_estimate=M.int8_weight_bytes(cfg_kw),
             kv_cache_bytes=M.kv_cache_bytes(cfg_kw, args.prompt_len + args.new_tokens),
             hbm_bytes_per_s=args.hbm_bw,
             bound_formula=M.BOUND_FORMULA.format(hbm=args.hbm_bw),
             tokens_per_second_definition=TPS_DEFINITION,
             memory_definition=MEM_DEFINITION)
    if dev.cuda:
        props = torch.cuda.get_device_properties(0)
        h.update(gpu=props.name, gpu_total_bytes=props.total_memory)
    return h


def run_torch_peers(b, model_dir, prompt):
    """The PyTorch cases that need the GPU the least and run the fastest come
    first; the two slow Accelerate peers run after the omptensor cases."""
    a, dev = b.args, b.dev
    if b.wanted("torch-resident", "torch-resident"):
        try:
            res, gen = P.resident(model_dir, prompt, a.new_tokens, dev)
            b.add(dict(res, case="torch-resident", backend="torch"))
            b.add(dict(gen, case="torch-generate", backend="torch"))
        except Exception as e:  # noqa: BLE001 - a failing peer is recorded
            b.failed("torch-resident", "torch", None, e)
    if b.wanted("torch-streamer", "torch-streamer"):
        try:
            res = P.streamer(model_dir, prompt, a.new_tokens, dev)
            b.add(dict(res, case="torch-streamer", backend="torch"))
        except Exception as e:  # noqa: BLE001
            b.failed("torch-streamer", "torch", None, e)


def run_slow_peers(b, model_dir, prompt, budget_bytes):
    a, dev = b.args, b.dev
    pct = f"{a.peer_budget:g}%"
    name = f"accelerate-dispatch-{pct}"
    if b.wanted(name, "accelerate-dispatch", budget_bytes):
        try:
            res = P.dispatch(model_dir, prompt, a.slow_new_tokens, dev, budget_bytes,
                             stop_at=b.stop_at())
            b.add(dict(res, case=name, backend="accelerate"))
        except Exception as e:  # noqa: BLE001
            b.failed(name, "accelerate", budget_bytes, e)
    if b.wanted("accelerate-cpu_offload", "accelerate-cpu_offload", 0):
        try:
            res = P.cpu_offload(model_dir, prompt, a.slow_new_tokens, dev,
                                stop_at=b.stop_at())
            b.add(dict(res, case="accelerate-cpu_offload", backend="accelerate"))
        except Exception as e:  # noqa: BLE001
            b.failed("accelerate-cpu_offload", "accelerate", 0, e)


def run_omptensor(b, model_dir, prompt_file):
    a, dev = b.args, b.dev
    if not a.omptensor:
        log("omptensor: no --omptensor given, its cases are skipped")
        return
    free_memory(dev)                    # leave the GPU to the subprocesses
    cmd = a.omptensor
    if a.omptensor_prologue:            # bash -c '. FILE >&2 && exec CMD ARGS...'
        cmd = ("bash -c " + shlex.quote('. "$0" >&2 && exec "$@"') + " "
               + shlex.quote(os.path.abspath(a.omptensor_prologue)) + " " + cmd)
    try:                                # what the binary finds, kept in the header
        p = subprocess.run(shlex.split(cmd) + ["info"], capture_output=True,
                           timeout=30, env=O._env(dev))
        b.header["omptensor_info"] = O._tail(p.stdout + p.stderr, 3000)
    except (OSError, subprocess.TimeoutExpired) as e:
        b.header["omptensor_info"] = f"error: {e}"
    fractions = [float(x) / 100 for x in a.budgets.split(",") if x]
    specs = O.case_specs(fractions, a.backends.split(","), a.strategies.split(","),
                         placements=a.usm_placements.split(","),
                         headline=a.headline_budget / 100)
    w = b.header["weight_bytes"]
    for spec in specs:
        budget = None if spec["fraction"] is None else int(spec["fraction"] * w)
        if not b.wanted(spec["name"], "omptensor", budget):
            continue
        timeout = max(5.0, min(a.case_timeout, b.remaining() - 5))
        try:
            res = O.run_case(cmd, spec, model_dir, prompt_file, a.new_tokens,
                             budget, timeout, dev, b.artifacts, log)
        except Exception as e:  # noqa: BLE001 - e.g. the command does not exist
            b.failed(spec["name"], spec["backend"], budget, e)
            continue
        b.add(dict(res, case=spec["name"], backend=res.get("backend", spec["backend"]),
                   requested_backend=spec["backend"], offload=spec["offload"],
                   dtype=spec["dtype"] or "bf16", budget_fraction=spec["fraction"]))


def main():
    args = parse_args()
    import transformers
    transformers.utils.logging.disable_progress_bar()   # keep the log short
    dev = Dev(args.device)
    b = Bench(args, dev)
    log(f"device {dev.name}; workdir {args.workdir}; out {args.out}; "
        f"time limit {args.time_limit:.0f} s")

    # 1. the model and the prompt
    _, cfg_kw = M.llama_config(args.tiny)
    model_dir = M.ensure_model(args.workdir, args.tiny, args.seed, dev.name, log)
    prompt_file, prompt = M.write_prompt(args.workdir, cfg_kw["vocab_size"],
                                         args.prompt_len, args.seed)
    b.header = make_header(args, dev, model_dir, cfg_kw)
    w = b.header["weight_bytes"]
    log(f"model {model_dir}: {w / 1e9:.3f} GB of weights; prompt {prompt_file}")

    # 2. the bound's bandwidth
    if dev.cuda:
        try:
            bw, pageable = h2d_bandwidth()
            b.header.update(h2d_bytes_per_s=bw, h2d_pageable_bytes_per_s=pageable)
            log(f"host->device: pinned {bw / 1e9:.1f} GB/s, pageable {pageable / 1e9:.1f} GB/s")
        except Exception as e:  # noqa: BLE001 - the cases still run, without bounds
            log(f"host->device bandwidth FAILED ({type(e).__name__}: {e}); no bounds")
        free_memory(dev)
    else:
        log("host->device bandwidth: no GPU, bounds of offloaded cases left empty")
    log(b.header["bound_formula"])

    # 3-4. the cases, most important first
    peer_budget = int(args.peer_budget / 100 * w)
    run_torch_peers(b, model_dir, prompt)
    run_omptensor(b, model_dir, prompt_file)
    run_slow_peers(b, model_dir, prompt, peer_budget)

    # 5. the report
    ref = R.finalize(b.cases)
    R.write_json(args.out, b.header, b.cases)
    md = R.markdown(b.cases, b.header)
    md_path = os.path.join(b.artifacts, "decode-h200.md")
    with open(md_path, "w") as f:
        f.write(md + "\n")
    print("\n" + R.text_table(b.cases, w))
    if ref:
        print(f"\nreference tokens ({ref['case']}): {ref['tokens']}")
        eos = cfg_kw["eos_token_id"]
        if eos in ref["tokens"]:
            print(f"note: the reference emits EOS ({eos}) at position "
                  f"{ref['tokens'].index(eos)}; a case that stops at EOS differs from there")
    differ = [c for c in b.cases if c.get("tokens_match") is False]
    print("tokens: " + ("every case that ran agrees with the reference" if not differ else
                        "MISMATCH in " + ", ".join(
                            f"{c['case']} (from position {c['match_prefix']}, reference "
                            f"top-2 margin there "
                            f"{R._num(c.get('reference_top2_margin_at_divergence'), '{:.4f}')}"
                            + ("; int8 weights, expected" if c.get("dtype") == "int8" else "")
                            + ")" for c in differ)))
    if differ:
        print("       (bf16 logits near 4 differ by steps of 0.03: a margin that small "
              "is a tie that fp32 or another summation order can break either way)")
    omp_differ = [c["case"] for c in b.cases
                  if c.get("tokens_match_omptensor_resident") is False and c.get("dtype") != "int8"]
    if omp_differ:
        print("omptensor bf16 cases whose tokens differ from omptensor-resident (the budget "
              "must not change results): " + ", ".join(omp_differ))
    print(f"\n----- Markdown for bench/RESULTS.md (also {md_path}) -----\n{md}")
    log(f"done: {args.out}")


if __name__ == "__main__":
    main()
