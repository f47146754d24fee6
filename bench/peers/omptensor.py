"""The omptensor cases: one `omptensor run` subprocess each, with
OMP_TARGET_OFFLOAD=MANDATORY on the GPU (a missing device is then an error,
never a silent run on the CPU). A case that fails or times out is recorded
with its stderr tail; it never stops the benchmark."""
import gzip
import json
import os
import shlex
import shutil
import subprocess
import time

from .common import DevMemPoller


def case_specs(fractions, backends, strategies, headline=0.25, int8=True, trace=True,
               placements=("auto",), trace_strategy="balanced"):
    """The cases in priority order (the most important first, so a run that
    reaches its time limit loses the least important ones): resident; the
    headline budget (25 %) on the first backend, then int8 and the traced run
    at that budget; the other budgets; then the other backends."""
    specs = [dict(name="omptensor-resident", fraction=None, offload="none",
                  backend="auto", dtype=None)]

    def add(frac, backend, offload, dtype=None, traced=False, placement=None):
        pct = f"{round(frac * 100)}%"
        pl = [placement] if backend == "usm" and placement and placement != "auto" else []
        name = "-".join(["omptensor", pct] + (["int8"] if dtype else []) +
                        [backend, offload] + pl + (["trace"] if traced else []))
        specs.append(dict(name=name, fraction=frac, offload=offload, backend=backend,
                          dtype=dtype, trace=traced, placement=placement if backend == "usm" else None,
                          tag="-".join([f"{round(frac * 100)}", backend, offload] + pl)))

    def is_head(f):
        return abs(f - headline) < 1e-9

    others = sorted(f for f in fractions if not is_head(f))
    b0 = backends[0]
    for s in strategies:
        add(headline, b0, s)
    if int8:
        add(headline, b0, "aggressive", dtype="int8")
    if trace:
        add(headline, b0, trace_strategy, traced=True)
    for f in others:
        for s in strategies:
            add(f, b0, s)
    for b in backends[1:]:
        for f in [headline] + others:
            for s in strategies:
                for pl in (placements if b == "usm" else [None]):
                    add(f, b, s, placement=pl)
    return specs


def _argv(cmd, sub):
    return shlex.split(cmd) + sub


def _parse_json(stdout):
    """The --json object: the whole stdout, else the last line that parses,
    else the text from the first '{' to the last '}'."""
    text = stdout.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    a, b = text.find("{"), text.rfind("}")
    if a >= 0 and b > a:
        return json.loads(text[a:b + 1])
    raise ValueError("no JSON object on stdout")


def _env(dev):
    env = dict(os.environ)
    if dev.cuda:
        env["OMP_TARGET_OFFLOAD"] = "MANDATORY"
        # the independent budget check (sched.h, ot_budget_probe): its result is
        # the summary's budget_probe; its time is not in decode_ms
        env["OMPTENSOR_DEBUG"] = "probe"
    return env


def _tail(text, n=2000):
    text = text.decode(errors="replace") if isinstance(text, bytes) else (text or "")
    return text[-n:]


def run_case(cmd, spec, model_dir, prompt_file, n_new, budget_bytes, timeout, dev,
             artifacts, log, extra_args=()):
    """Run one case; return its result dict (status ok|failed|timeout).
    extra_args: more `omptensor run` flags (e.g. --ignore-eos)."""
    argv = _argv(cmd, ["run", model_dir, "--prompt-ids-file", prompt_file,
                       "--max-new-tokens", str(n_new), "--json",
                       "--offload", spec["offload"], "--backend", spec["backend"]])
    if budget_bytes is not None:
        argv += ["--gpu-memory-limit", str(int(budget_bytes))]
    if spec.get("dtype"):
        argv += ["--dtype", spec["dtype"]]
    if spec.get("placement"):
        argv += ["--usm-placement", spec["placement"]]
    argv += list(extra_args)
    trace_path = None
    if spec.get("trace"):
        trace_path = os.path.join(artifacts, f"trace-{spec['tag']}.json")
        argv += ["--trace", trace_path]
    res = dict(budget_bytes=None if budget_bytes is None else int(budget_bytes))
    summary = _run(argv, timeout, dev, log, res)
    if summary is None:
        return res
    res["omptensor"] = summary                       # the whole summary, kept
    for key in ("backend", "device", "strategy", "weight_bytes", "peak_device_bytes",
                "bytes_to_device", "bytes_to_host", "uploads", "evictions",
                "transfer_overlap_s", "tokens", "n_tokens", "tokens_per_second",
                "prefill_ms", "decode_ms", "logits_checksum",
                "decode_bytes_to_device_per_token", "budget_probe", "usm_placement",
                "bytes_read_remote", "experts"):
        if key in summary:
            res[key] = summary[key]
    if summary.get("budget_bytes") is not None:
        res["budget_bytes_reported"] = summary["budget_bytes"]
    _apply_probe(res, summary.get("budget_probe"))
    if trace_path:
        svg = os.path.join(artifacts, f"timeline-{spec['tag']}.svg")
        res.update(_trace_outputs(cmd, trace_path, svg, dev, log))
    return res


def _apply_probe(res, probe):
    if probe:
        # The probe's own cudaMalloc (almost the whole device) is what the
        # poller saw at its peak: the Δ column is then the drop omptensor
        # measured at the decode peak just before it, and the probe's result
        # says whether the budget held whatever UVM caches.
        res["cuda_mem_peak_delta_bytes_poller"] = res["cuda_mem_peak_delta_bytes"]
        res["cuda_mem_peak_delta_bytes"] = probe["free_at_start"] - probe["free_at_peak"]
        res["budget_probe_ok"] = bool(probe["ok"]) if probe.get("conclusive", True) else None


def _run(argv, timeout, dev, log, res):
    """Run one `omptensor ... --json` subprocess under the memory poller,
    filling res (command, wall_s, cuda_mem_peak_delta_bytes, rc, status);
    returns its --json object, or None (res then says why: timeout|failed)."""
    res["command"] = " ".join(shlex.quote(a) for a in argv)
    log(f"  $ {res['command']}")
    t0 = time.perf_counter()
    with DevMemPoller(dev) as poller:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=_env(dev))
        try:
            out, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            timed_out = True
    res["wall_s"] = time.perf_counter() - t0
    res["cuda_mem_peak_delta_bytes"] = poller.peak_delta
    res["rc"] = proc.returncode
    if timed_out:
        res.update(status="timeout", stderr_tail=_tail(err),
                   note=f"killed after {timeout:.0f} s")
        return None
    if proc.returncode != 0:
        res.update(status="failed", stderr_tail=_tail(err), stdout_tail=_tail(out, 500))
        return None
    try:
        summary = _parse_json(out.decode(errors="replace"))
    except ValueError as e:
        res.update(status="failed", stderr_tail=_tail(err), stdout_tail=_tail(out, 500),
                   note=f"bad --json output: {e}")
        return None
    res["status"] = "ok"
    res["_stderr"] = err
    return summary


def run_batch_case(cmd, prompts_file, out_file, model_dir, n_slots, n_new, budget_bytes,
                   offload, backend, timeout, dev, log, extra_args=()):
    """One `omptensor run MODEL --prompts IN --out OUT --batch N --json` case
    (a fresh OUT, so nothing is skipped as already done): the aggregate decode
    tokens/s of its --json `batch` object, each prompt's tokens from OUT."""
    if os.path.exists(out_file):
        os.remove(out_file)
    argv = _argv(cmd, ["run", model_dir, "--prompts", prompts_file, "--out", out_file,
                       "--batch", str(n_slots), "--max-new-tokens", str(n_new), "--ignore-eos",
                       "--json", "--offload", offload, "--backend", backend])
    if budget_bytes is not None:
        argv += ["--gpu-memory-limit", str(int(budget_bytes))]
    argv += list(extra_args)
    res = dict(budget_bytes=None if budget_bytes is None else int(budget_bytes), batch=n_slots)
    summary = _run(argv, timeout, dev, log, res)
    if summary is None:
        return res
    res["stderr_tail"] = _tail(res.pop("_stderr"), 1000)
    res["omptensor"] = summary
    agg = summary.get("batch")
    if not agg or summary.get("refused"):
        res.update(status="failed", note=(f"{summary.get('refused')} prompts refused"
                                          if summary.get("refused") else
                                          "no `batch` object in --json (a binary without --batch?)"))
        return res
    seq = {}
    with open(out_file) as f:
        for line in f:
            if line.strip():
                o = json.loads(line)
                seq[str(o["id"])] = o["tokens"]
    res.update(tokens_per_second=agg["decode_tokens_per_second"], prefill_ms=agg.get("prefill_ms"),
               decode_ms=agg.get("decode_ms"), decode_tokens=agg.get("decode_tokens"),
               decode_steps=agg.get("decode_steps"), slots=agg.get("slots"),
               n_prompts=summary.get("prompts"), seq_tokens_by_id=seq)
    # the batch summary has no peak_device_bytes yet: taken where present
    for key in ("peak_device_bytes", "budget_probe", "backend", "strategy"):
        for src in (agg, summary):
            if key in src:
                res[key] = src[key]
                break
    _apply_probe(res, res.get("budget_probe"))
    return res


def _trace_outputs(cmd, trace_path, svg, dev, log):
    """Keep the trace, draw its SVG timeline and its summary. The device tool
    brings back files of at most 16 MiB, so a larger trace is gzipped."""
    out = {}
    if not os.path.exists(trace_path):
        return dict(trace_note="omptensor wrote no trace file")
    for key, sub in (("trace_plot", ["trace", "plot", trace_path, "-o", svg]),
                     ("trace_summary", ["trace", "summarize", trace_path])):
        try:
            p = subprocess.run(_argv(cmd, sub), capture_output=True, timeout=120,
                               env=_env(dev))
            out[key] = (_tail(p.stdout, 4000) if p.returncode == 0
                        else f"rc {p.returncode}: {_tail(p.stderr, 1000)}")
        except (subprocess.TimeoutExpired, OSError) as e:
            out[key] = f"error: {e}"
    if os.path.exists(svg):
        out["timeline_svg"] = svg
    if os.path.getsize(trace_path) > 15 << 20:
        with open(trace_path, "rb") as f, gzip.open(trace_path + ".gz", "wb") as g:
            shutil.copyfileobj(f, g)
        os.remove(trace_path)
        trace_path += ".gz"
    out["trace_file"] = trace_path
    log(f"  trace: {trace_path}; timeline: {out.get('timeline_svg', out.get('trace_plot'))}")
    return out
