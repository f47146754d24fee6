"""The frame the device-call benchmarks share (decode_h200.py, moe_h200.py):
the clock and its time limit, the log, the cases (each recorded, with its
bound, and the JSON rewritten after every one, so a run cut short keeps what
it measured), the header, the bandwidth measurement, the omptensor command
and its cases, and the closing summary of token agreement."""
import datetime
import fnmatch
import os
import platform
import re
import shlex
import subprocess
import sys
import time
import traceback

import torch

from . import omptensor as O
from . import report as R
from .common import free_memory, h2d_bandwidth

_T0 = [time.perf_counter()]

REQUIRED_KEYS = ("case", "backend", "budget_bytes", "tokens_per_second", "prefill_ms",
                 "bound_tokens_per_second", "peak_device_bytes", "tokens_match")
TPS_DEFINITION = ("tokens/s = decode steps / decode time: the prefill (the whole "
                  "prompt, first token) is timed apart as prefill ms and the next "
                  "new_tokens-1 forwards are the decode steps (omptensor: the "
                  "tokens_per_second of its --json summary).")
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


def start_clock(t0):
    """The time limit and the log count from t0 (the script's first line)."""
    _T0[0] = t0


def log(msg):
    print(f"[{time.perf_counter() - _T0[0]:6.1f} s] {msg}", flush=True)


class Bench:
    """Holds the header and the cases, computes bounds, saves after each case.

    min_seconds: {kind: least seconds a case of that kind needs}; bound(case)
    -> dict of the bound keys of an ok case (at least bound_tokens_per_second),
    recomputed for every case whenever one is added (so a bound that needs a
    later case's data, e.g. the reference's routing, fills in when it comes);
    peer_class: report.finalize's grouping for "× best PyTorch"; finalize:
    another finalize(cases) in its place."""

    def __init__(self, args, dev, min_seconds, bound, peer_class=None, finalize=None):
        self.args, self.dev = args, dev
        self.min_seconds, self.bound, self.peer_class = min_seconds, bound, peer_class
        # finalize(cases): the ratios and token agreement (default
        # report.finalize with peer_class; the batched cases: finalize_batch)
        self.finalize = finalize or (lambda cases: R.finalize(cases, self.peer_class))
        self.cases, self.header = [], {}
        self.skip = [s for s in args.skip.split(",") if s]
        self.artifacts = args.artifacts or os.path.dirname(os.path.abspath(args.out))
        os.makedirs(self.artifacts, exist_ok=True)
        os.makedirs(args.workdir, exist_ok=True)

    # -- time and selection ------------------------------------------------
    def remaining(self):
        return self.args.time_limit - (time.perf_counter() - _T0[0])

    def stop_at(self):
        """When a slow peer must stop decoding to leave time for the report."""
        return _T0[0] + self.args.time_limit - 10

    def wanted(self, name, kind, budget=None):
        """False (and the case recorded as skipped) when excluded or out of time."""
        if any(fnmatch.fnmatch(name, pat) for pat in self.skip):
            return False
        need = self.min_seconds[kind]
        if self.remaining() < need:
            self.add(dict(case=name, backend=kind.split("-")[0], status="skipped",
                          budget_bytes=budget,
                          note=f"time limit: {self.remaining():.0f} s left, needs ~{need} s"))
            return False
        log(f"case {name}")
        return True

    # -- recording ---------------------------------------------------------
    def refresh(self):
        for c in self.cases:
            if c["status"] == "ok":
                c.update(self.bound(c))
        self.finalize(self.cases)
        R.write_json(self.args.out, self.header, self.cases)

    def add(self, case):
        case.setdefault("status", "ok")
        for key in REQUIRED_KEYS:                # present in every case, maybe null
            case.setdefault(key, None)
        self.cases.append(case)
        self.refresh()
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

    def run(self, name, kind, backend, budget, fn):
        """One PyTorch case: fn() -> result dict (or a list of (name, dict)),
        recorded; an exception is recorded as a failure, never raised."""
        if not self.wanted(name, kind, budget):
            return None
        try:
            res = fn()
        except Exception as e:  # noqa: BLE001 - a failing peer is recorded
            self.failed(name, backend, budget, e)
            return None
        for n, r in (res if isinstance(res, list) else [(name, res)]):
            if r is not None:
                self.add(dict(r, case=n, backend=backend))
        return res


def base_header(args, dev, model_dir, cfg_kw, weight_bytes):
    import accelerate
    import transformers
    h = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             command=" ".join(shlex.quote(a) for a in [sys.executable] + sys.argv),
             host=platform.node(), python=platform.python_version(),
             torch=torch.__version__, torch_cuda=torch.version.cuda,
             transformers=transformers.__version__, accelerate=accelerate.__version__,
             device=dev.name, model_dir=model_dir, config=cfg_kw, seed=args.seed,
             prompt_len=args.prompt_len, new_tokens=args.new_tokens,
             slow_new_tokens=args.slow_new_tokens, weight_bytes=weight_bytes,
             tokens_per_second_definition=TPS_DEFINITION,
             memory_definition=MEM_DEFINITION)
    if dev.cuda:
        props = torch.cuda.get_device_properties(0)
        h.update(gpu=props.name, gpu_total_bytes=props.total_memory)
    return h


def measure_bandwidth(b):
    """Pinned (and pageable) host->device bandwidth into the header."""
    if not b.dev.cuda:
        log("host->device bandwidth: no GPU, bounds of offloaded cases left empty")
        return
    try:
        bw, pageable = h2d_bandwidth()
        b.header.update(h2d_bytes_per_s=bw, h2d_pageable_bytes_per_s=pageable)
        log(f"host->device: pinned {bw / 1e9:.1f} GB/s, pageable {pageable / 1e9:.1f} GB/s")
    except Exception as e:  # noqa: BLE001 - the cases still run, without bounds
        log(f"host->device bandwidth FAILED ({type(e).__name__}: {e}); no bounds")
    free_memory(b.dev)


def omptensor_command(args, b):
    """The omptensor command line (wrapped to source --omptensor-prologue
    first), its `info` kept in the header; None without --omptensor."""
    if not args.omptensor:
        log("omptensor: no --omptensor given, its cases are skipped")
        return None
    cmd = args.omptensor
    if args.omptensor_prologue:            # bash -c '. FILE >&2 && exec CMD ARGS...'
        cmd = ("bash -c " + shlex.quote('. "$0" >&2 && exec "$@"') + " "
               + shlex.quote(os.path.abspath(args.omptensor_prologue)) + " " + cmd)
    try:                                # what the binary finds, kept in the header
        p = subprocess.run(shlex.split(cmd) + ["info"], capture_output=True,
                           timeout=30, env=O._env(b.dev))
        b.header["omptensor_info"] = O._tail(p.stdout + p.stderr, 3000)
    except (OSError, subprocess.TimeoutExpired) as e:
        b.header["omptensor_info"] = f"error: {e}"
    return cmd


def free_memory_for_subprocess(b):
    """Leave the GPU to an omptensor subprocess."""
    free_memory(b.dev)


def run_omptensor_specs(b, cmd, specs, model_dir, prompt_file, extra_args=()):
    """Each spec (omptensor.case_specs) as one subprocess case, in order."""
    a = b.args
    free_memory(b.dev)                  # leave the GPU to the subprocesses
    w = b.header["weight_bytes"]
    for spec in specs:
        budget = None if spec["fraction"] is None else int(spec["fraction"] * w)
        if not b.wanted(spec["name"], "omptensor", budget):
            continue
        timeout = max(5.0, min(a.case_timeout, b.remaining() - 5))
        try:
            res = O.run_case(cmd, spec, model_dir, prompt_file, a.new_tokens,
                             budget, timeout, b.dev, b.artifacts, log, extra_args=extra_args)
        except Exception as e:  # noqa: BLE001 - e.g. the command does not exist
            b.failed(spec["name"], spec["backend"], budget, e)
            continue
        b.add(dict(res, case=spec["name"], backend=res.get("backend", spec["backend"]),
                   requested_backend=spec["backend"], offload=spec["offload"],
                   dtype=spec["dtype"] or "bf16", budget_fraction=spec["fraction"]))


def print_summary(b, cfg_kw, md, md_path, extra=None):
    """The table (extra: report.rows' extra columns), the reference's tokens,
    which cases disagree, the Markdown."""
    ref = R.finalize(b.cases, b.peer_class)
    w = b.header["weight_bytes"]
    print("\n" + R.text_table(b.cases, w, extra))
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
