#!/usr/bin/env python3
"""Models larger than host memory (issue 23): decode with weights read from
the checkpoint on disk, under a device budget and a host budget, on one GPU.

One run (one device call, under 9 minutes on the H200) does, in order:
  1. makes the model of decode_h200.py once (Llama-2-7B shapes, 16 layers,
     random bf16 weights, sharded safetensors, ~7.0 GB) in --workdir and its
     128-token prompt (reused when present);
  2. measures the disk under the model's shard files (peers/diskio.py):
     O_DIRECT sequential reads (--disk-reads: 1 stream of 8 and 64 MiB
     requests, 4 streams of 16 and 64 MiB; aligned buffers), then one
     buffered stream after fsync + posix_fadvise(DONTNEED) dropped the
     files' pages (/proc/sys/vm/drop_caches is tried first and whether it
     worked is recorded); mincore() says what the page cache held before
     and after each;
  3. measures pinned host->device bandwidth (decode_h200's measurement);
  4. runs omptensor (with --omptensor) at --gpu-budget 1.75GB and
     --cpu-budget 2GB (`run MODEL --prompt-ids-file P --gpu-memory-limit G
     --cpu-memory-limit C --json`), then the reference rows: --gpu-budget
     only (the host holds every weight: the mode before issue 23) and
     resident; then a traced disk run (its SVG timeline has the disk lane).
     Before each case the files' pages are dropped; after it the page cache
     they hold, /proc/meminfo's Cached and the process's peak RSS are kept;
  5. runs the Accelerate peer: transformers from_pretrained(device_map=
     'auto', max_memory={0: G, 'cpu': C}, offload_folder=--offload-folder),
     greedy decode of the same prompt (--slow-new-tokens), as it comes and
     again with the files' pages dropped before every forward ('-cold');
  6. prints the table and the Markdown for bench/RESULTS.md (also beside
     --out) and writes the JSON to --out after every case.

Order: omptensor disk, omptensor host-only, Accelerate, resident, traced;
each case has its own time limit (--case-timeout, --peer-timeout) and a
case that would not fit in --time-limit is skipped and recorded.

The bound (BOUND_FORMULA below): W weight bytes, G and C the budgets, KV the
bf16 KV cache, ring the staging ring; streamed S = W - (G - KV) bytes cross
PCIe per token, of which the host can keep C - ring, so D = S - (C - ring)
must come from the disk; disk and PCIe overlap, so a token takes at least
max(D / B_disk, S / B_pcie). B_disk: the best O_DIRECT configuration
measured. Shown twice: from this estimate, and from omptensor's own bytes
(its "disk" object's decode_disk_bytes_per_token and its
decode_bytes_to_device_per_token). The target: the disk case at >= 85 % of
the estimate's bound.

On the GPU machine (files under $OUT come back; keep the log with tee):
    PYTHONUNBUFFERED=1 python3 bench/disk_h200.py --omptensor build-gpu/omptensor \\
        --omptensor-prologue .gpu/prologue.sh --out $OUT/disk-h200.json \\
        2>&1 | tee $OUT/disk-h200.log
(device tool: carry [".gpu", "build-gpu"]; the model goes to --workdir, by
default /tmp/omptensor-bench, ~7 GB of the machine's 64 GiB disk.)
CPU smoke test (tiny model, every code path but the CUDA-only parts; --h2d-bw
stands in for the PCIe measurement so the bounds are computed; an omptensor
without --cpu-memory-limit runs with --no-cpu-limit-flag):
    python3 bench/disk_h200.py --tiny --device cpu --workdir /tmp/db --out /tmp/db/out.json \\
        --omptensor build/offload-host/omptensor --h2d-bw 25e9
"""
import time

T_START = time.perf_counter()           # the time limit counts from here

import argparse  # noqa: E402
import os  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from peers import diskio as D  # noqa: E402
from peers import harness as H  # noqa: E402
from peers import model as M  # noqa: E402
from peers import omptensor as O  # noqa: E402
from peers import report as R  # noqa: E402
from peers import torch_peers as P  # noqa: E402
from peers.common import Dev  # noqa: E402

H.start_clock(T_START)
log = H.log

# omptensor's --json names, in one place (the disk object is new in issue 23:
# a name missing from the output reads as n/a, never as an error).
J_DISK = "disk"                                   # the object
J = dict(cpu_budget="cpu_budget_bytes", host_peak="host_peak_bytes",
         host_weights="host_weight_bytes", disk_weights="disk_weight_bytes",
         ring="ring_bytes", io="io", disk_per_token="decode_disk_bytes_per_token",
         prefill_disk="prefill_disk_bytes", disk_read="disk_bytes_read",
         disk_reads="disk_reads", disk_s="disk_s")
J_TOP = dict(tps="tokens_per_second", pcie_per_token="decode_bytes_to_device_per_token",
             budget="budget_bytes", peak_device="peak_device_bytes")

# Least time (s) a case needs; it is skipped when less is left.
MIN_SECONDS = {"omptensor": 20, "accelerate-offload": 60}
TARGET = 0.85

BOUND_FORMULA = (
    "bound tokens/s = 1 / max(D / B_disk, S / B_pcie): S = max(0, W - (G - KV)) bytes cross PCIe "
    "per token (W the weight bytes, G the device budget, KV the bf16 KV cache of prompt + new "
    "tokens), of which the host budget C keeps at most C - ring (ring = a staging ring of "
    "twice the largest decoder-layer tensor, unless --ring-estimate), so D = max(0, S - (C - ring)) "
    "bytes must come from the disk; disk reads and PCIe copies overlap. B_disk = the best O_DIRECT "
    "read measured in this run, B_pcie = pinned host->device. 'own bytes': the same with omptensor's "
    "reported decode_disk_bytes_per_token and decode_bytes_to_device_per_token for D and S. "
    "Issue 23's literal form, min(B_disk, B_pcie) / D, is kept as bound_literal (the same whenever "
    "the disk is the slower road). Host-only rows: D = 0, bound = B_pcie / S; resident: HBM / W.")


def parse_size(text, weight_bytes=None):
    """'1.75GB' (1e9), '2GiB', '300KB', '25%' (of the weight bytes), or bytes."""
    t = text.strip()
    m = re.fullmatch(r"([0-9.]+)\s*(%|[kKmMgGtT]i?[bB]|[bB])?", t)
    if not m:
        raise ValueError(f"bad size '{text}' (e.g. 1.75GB, 2GiB, 25%)")
    v, unit = float(m.group(1)), (m.group(2) or "").lower()
    if unit == "%":
        if weight_bytes is None:
            raise ValueError(f"'{text}': a percentage needs the model's weight bytes")
        return int(v / 100 * weight_bytes)
    if unit in ("", "b"):
        return int(v)
    scale = {"k": 1, "m": 2, "g": 3, "t": 4}[unit[0]]
    return int(v * ((1 << (10 * scale)) if "i" in unit else 10 ** (3 * scale)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--omptensor", metavar="CMD",
                   help="the omptensor command (split like a shell line); without it the "
                        "omptensor cases are skipped")
    p.add_argument("--omptensor-prologue", metavar="FILE",
                   help="a shell file sourced before each omptensor command only (e.g. "
                        ".gpu/prologue.sh)")
    p.add_argument("--no-cpu-limit-flag", action="store_true",
                   help="do not pass --cpu-memory-limit (a binary from before issue 23: the "
                        "disk cases then run with the host holding every weight, and say so)")
    p.add_argument("--workdir", default="/tmp/omptensor-bench",
                   help="where the model and prompt are made once and reused (a local disk: "
                        "the disk read there is what is measured)")
    p.add_argument("--offload-folder", help="Accelerate's offload_folder (default WORKDIR/offload)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "results", "disk-h200.json"))
    p.add_argument("--artifacts", help="folder for the trace, SVG and Markdown "
                                       "(default: the folder of --out)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   choices=["cuda", "cpu"])
    p.add_argument("--tiny", action="store_true",
                   help="a tiny model (hidden 64, 2 layers): smoke test; budgets default to "
                        "150KB / 300KB and the peer's host budget to 100KB")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--prompt-len", type=int, help="prompt tokens (default 128; 16 with --tiny)")
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--slow-new-tokens", type=int, default=6,
                   help="new tokens for the Accelerate peer (each forward reads the disk)")
    p.add_argument("--gpu-budget", help="device budget (default 1.75GB): 1.75GB, 2GiB, 25%% of "
                                        "the weights, bytes")
    p.add_argument("--cpu-budget", help="host budget (default 2GB)")
    p.add_argument("--peer-cpu-budget", help="the Accelerate peer's host budget (default: "
                                             "--cpu-budget; the smoke test takes less, so that "
                                             "something goes to disk)")
    p.add_argument("--offload", default="balanced", help="omptensor --offload")
    p.add_argument("--disk-reads", default="1x8,1x64,4x16,4x64",
                   help="O_DIRECT configurations STREAMSxMiB (requests of MiB)")
    p.add_argument("--disk-read-gb", type=float, default=0,
                   help="read at most this many GB per configuration (0: the whole files)")
    p.add_argument("--disk-read-s", type=float, default=12,
                   help="stop each read configuration after this many seconds")
    p.add_argument("--drop-caches", choices=["try", "no"],
                   help="try /proc/sys/vm/drop_caches (the whole machine's page cache) before "
                        "the disk reads (default: try; no with --tiny)")
    p.add_argument("--ring-estimate", help="the staging ring of the bound's estimate (default: "
                                           "twice the largest decoder-layer tensor)")
    p.add_argument("--skip", default="", help="comma-separated case-name patterns to skip "
                                              "(fnmatch, e.g. 'omptensor-resident,*trace')")
    p.add_argument("--time-limit", type=float, default=510,
                   help="seconds for the whole run; cases that would not fit are skipped")
    p.add_argument("--case-timeout", type=float, default=120,
                   help="seconds before an omptensor case is killed")
    p.add_argument("--peer-timeout", type=float, default=170,
                   help="seconds for the Accelerate peer (its decodes stop early to keep it)")
    p.add_argument("--h2d-bw", type=float,
                   help="pinned host->device bytes/s to use instead of measuring it (the smoke "
                        "test's bounds; recorded as given)")
    p.add_argument("--hbm-bw", type=float, default=4.3e12,
                   help="HBM bytes/s for the resident bound")
    a = p.parse_args()
    a.prompt_len = a.prompt_len or (16 if a.tiny else 128)
    a.gpu_budget = a.gpu_budget or ("150KB" if a.tiny else "1.75GB")
    a.cpu_budget = a.cpu_budget or ("300KB" if a.tiny else "2GB")
    a.peer_cpu_budget = a.peer_cpu_budget or ("100KB" if a.tiny else a.cpu_budget)
    a.drop_caches = a.drop_caches or ("no" if a.tiny else "try")
    a.offload_folder = a.offload_folder or os.path.join(a.workdir, "offload")
    return a


# -- the bound ---------------------------------------------------------------

def _time_per_token(d, s, disk_bw, pcie_bw):
    """max(D / B_disk, S / B_pcie), None where a needed bandwidth is missing."""
    parts = []
    if d:
        if not disk_bw:
            return None
        parts.append(d / disk_bw)
    if s:
        if not pcie_bw:
            return None
        parts.append(s / pcie_bw)
    return max(parts) if parts else 0.0


def estimate_bytes(h, gpu, cpu, ring):
    """(S, D) of BOUND_FORMULA from the model's bytes and the budgets."""
    s = max(0, h["weight_bytes"] - max(0, gpu - h["kv_cache_bytes"])) if gpu is not None else 0
    d = max(0, s - max(0, cpu - ring)) if cpu is not None else 0
    return s, d


def make_bound(b):
    def bound(case):
        h, a = b.header, b.args
        w = h["weight_bytes"]
        disk_bw, pcie_bw = h.get("disk_bytes_per_s"), h.get("h2d_bytes_per_s")
        gpu, cpu = case.get("budget_bytes"), case.get("cpu_budget_bytes")
        if gpu is None:
            return dict(bound_tokens_per_second=a.hbm_bw / w, streamed_bytes_est=0,
                        disk_bytes_est=0)
        ring = h["ring_estimate_bytes"]
        s, d = estimate_bytes(h, gpu, cpu, ring)
        t = _time_per_token(d, s, disk_bw, pcie_bw)
        out = dict(streamed_bytes_est=s, disk_bytes_est=d,
                   bound_time_per_token_s=t,
                   bound_tokens_per_second=(1 / t if t else (a.hbm_bw / w if t == 0 else None)),
                   bound_disk_tokens_per_second=disk_bw / d if d and disk_bw else None,
                   bound_pcie_tokens_per_second=pcie_bw / s if s and pcie_bw else None)
        one = _time_per_token(d, s, h.get("disk_single_stream_bytes_per_s"), pcie_bw)
        out["bound_single_stream_tokens_per_second"] = 1 / one if one else None
        lim = min(x for x in (disk_bw, pcie_bw) if x) if (disk_bw or pcie_bw) else None
        out["bound_literal_tokens_per_second"] = lim / d if d and lim else None
        d_own, s_own = case.get("disk_bytes_per_token"), case.get("decode_bytes_to_device_per_token")
        if d_own is not None or s_own is not None:
            t_own = _time_per_token(d_own or 0, s_own or 0, disk_bw, pcie_bw)
            out["bound_own_bytes_tokens_per_second"] = 1 / t_own if t_own else None
        return out
    return bound


def make_finalize(b):
    """report.finalize (tokens against the first case, × best PyTorch), then
    the ratios to the own-bytes bound, to the cold Accelerate run, and the
    target's verdict."""
    def run(cases):
        ref = R.finalize(cases)
        cold = next((c for c in cases if c["case"] == "accelerate-offload_folder-cold"
                     and c["status"] == "ok" and c.get("tokens_per_second")), None)
        for c in cases:
            tps = c.get("tokens_per_second") if c["status"] == "ok" else None
            own = c.get("bound_own_bytes_tokens_per_second")
            c["ratio_to_own_bytes_bound"] = tps / own if tps and own else None
            lit = c.get("bound_literal_tokens_per_second")
            c["ratio_to_literal_bound"] = tps / lit if tps and lit else None
            c["ratio_to_accelerate_cold"] = tps / cold["tokens_per_second"] if tps and cold else None
            if c.get("tier") == "disk" and c.get("ratio_to_bound") is not None:
                c["target_met"] = c["ratio_to_bound"] >= TARGET
        return ref
    return run


# -- the cases -----------------------------------------------------------------

def observe_files(paths_fn):
    """A snapshot of what the page cache holds of the files paths_fn() lists,
    Cached of /proc/meminfo and this process's RSS."""
    def snap():
        paths = paths_fn()
        return dict(files_cache=D.cache_report(paths), meminfo_cached=D.meminfo().get("Cached"),
                    rss=D.self_rss())
    return snap


RUSAGE_WRAP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "rusage_wrap.py")


def _run_rusage(path):
    """The `omptensor run` line of a rusage_wrap.py file (the traced case's
    `trace plot` and `trace summarize` add theirs after it); None without."""
    try:
        with open(path) as f:
            lines = [json.loads(ln) for ln in f if ln.strip()]
    except (OSError, ValueError):
        return None
    return next((r for r in lines if "run" in r.get("argv", [])), None)


def run_omptensor_case(b, cmd, name, tier, model_dir, prompt_file, files, gpu, cpu, trace=False):
    """One omptensor case (peers/omptensor.run_case) with the host budget,
    the disk object's keys lifted to the case, the page cache and RSS kept."""
    a = b.args
    if not b.wanted(name, "omptensor", gpu):
        return
    extra = []    # the --cpu-memory-limit flag
    if cpu is not None and not a.no_cpu_limit_flag:
        extra = ["--cpu-memory-limit", str(int(cpu))]
    spec = dict(name=name, offload=a.offload, backend="map", dtype=None, trace=trace,
                tag=name.replace("%", "pct"))
    H.free_memory_for_subprocess(b)
    D.drop_pages(files)
    before = dict(files_cache=D.cache_report(files), meminfo_cached=D.meminfo().get("Cached"))
    rusage = os.path.join(a.workdir, f"rusage-{name}.jsonl")
    if os.path.exists(rusage):
        os.remove(rusage)
    wrapped = " ".join(shlex.quote(x) for x in (sys.executable, RUSAGE_WRAP, rusage)) + " " + cmd
    try:
        res = O.run_case(wrapped, spec, model_dir, prompt_file, a.new_tokens, gpu,
                         max(5.0, min(a.case_timeout, b.remaining() - 5)), b.dev, b.artifacts,
                         log, extra_args=extra)
    except Exception as e:  # noqa: BLE001 - e.g. the command does not exist
        b.failed(name, "omptensor", gpu, e)
        return
    ru = _run_rusage(rusage)
    after = dict(files_cache=D.cache_report(files), meminfo_cached=D.meminfo().get("Cached"))
    summ = res.get("omptensor") or {}
    disk = summ.get(J_DISK) if isinstance(summ.get(J_DISK), dict) else {}
    if "_stderr" in res:                       # an ok run's stderr (a failed one has its tail)
        res["stderr_tail"] = O._tail(res.pop("_stderr"), 1500)
    res.update(tier=tier, cpu_budget_bytes=None if cpu is None else int(cpu),
               cpu_limit_passed=bool(extra), disk_object_present=bool(disk),
               disk_json={k: disk.get(v) for k, v in J.items()},
               host_peak_bytes=disk.get(J["host_peak"]), host_weight_bytes=disk.get(J["host_weights"]),
               disk_weight_bytes=disk.get(J["disk_weights"]), ring_bytes=disk.get(J["ring"]),
               io=disk.get(J["io"]), disk_bytes_per_token=disk.get(J["disk_per_token"]),
               prefill_disk_bytes=disk.get(J["prefill_disk"]),
               cache_before=before, cache_after=after,
               cache_after_bytes=after["files_cache"].get("cached_bytes"),
               meminfo_cached_delta_bytes=_delta(after["meminfo_cached"], before["meminfo_cached"]),
               # the process's own peak RSS: omptensor's allocations (pinned ones included),
               # the CUDA runtime's and the libraries'; page cache is not in it
               peak_rss_bytes=ru and ru.get("maxrss_bytes"), rusage=ru)
    if cpu is not None and not extra:
        res["note"] = "--no-cpu-limit-flag: run without --cpu-memory-limit (the host holds every weight)"
    b.add(dict(res, case=name, backend=res.get("backend", "map"), offload=a.offload,
               dtype="bf16", budget_fraction=None if gpu is None else gpu / b.header["weight_bytes"]))
    D.drop_pages(files)


def _delta(after, before):
    return None if after is None or before is None else after - before


class Dropper:
    """drop() for the cold Accelerate decode: the files' pages dropped before
    each forward, the time it takes kept (taken out of the decode's time
    afterwards), and the first drop checked (mincore) to say whether the
    filesystem dropped them at all."""

    def __init__(self, paths_fn):
        self.paths_fn, self.times, self.check = paths_fn, [], None

    def __call__(self):
        t0 = time.perf_counter()
        paths = self.paths_fn()
        D.drop_pages(paths)
        if self.check is None:
            self.check = D.cache_report(paths)
        self.times.append(time.perf_counter() - t0)

    def take_out(self, r):
        """greedy_decode's times without the drops (call 0 was the prefill's)."""
        if not self.times:
            return
        r.update(prefill_ms_with_drops=r["prefill_ms"], decode_s_with_drops=r["decode_s"],
                 tokens_per_second_with_drops=r["tokens_per_second"],
                 drop_s=sum(self.times), cached_after_first_drop=self.check)
        r["prefill_ms"] -= self.times[0] * 1e3
        r["decode_s"] -= sum(self.times[1:])
        if r["decode_steps"] and r["decode_s"] > 0:
            r["tokens_per_second"] = r["decode_steps"] / r["decode_s"]


def run_peer(b, model_dir, prompt, files, gpu, cpu):
    a = b.args
    folder = os.path.abspath(a.offload_folder)
    name = "accelerate-offload_folder"
    everything = lambda: files + D.files_under(folder)  # noqa: E731
    D.drop_pages(files)
    dropper = Dropper(everything)

    def fn():
        stop_at = min(b.stop_at(), time.perf_counter() + a.peer_timeout)
        out = P.offload_folder(model_dir, prompt, a.slow_new_tokens, b.dev, gpu, cpu, folder,
                               stop_at=stop_at, observe=observe_files(everything), drop=dropper)
        res = []
        for suffix, r in out:
            if suffix:
                dropper.take_out(r)
            seen = r["observed"]
            after = seen["decoded_cold" if suffix else "decoded"]
            base = seen["before_load"]
            r.update(tier="disk", offload_folder_files=len(D.files_under(folder)),
                     offload_folder_bytes=sum(os.path.getsize(f) for f in D.files_under(folder)),
                     cache_after_bytes=after["files_cache"].get("cached_bytes"),
                     meminfo_cached_delta_bytes=_delta(after["meminfo_cached"], base["meminfo_cached"]),
                     rss_delta_bytes=_delta(after["rss"].get("VmRSS"), base["rss"].get("VmRSS")))
            res.append((name + suffix, r))
        return res
    b.run(name, "accelerate-offload", "accelerate", gpu, fn)
    D.drop_pages(files)


# -- the report ----------------------------------------------------------------

# The report's unit of bytes: GB, MB for the tiny model (set in main).
UNIT = ["GB", 1e9]


def _gb(x, fmt="{:.2f}"):
    return "n/a" if x is None else fmt.format(x / UNIT[1])


def add_cells(cases):
    """Preformatted cells of the table's extra columns ('n/a' where the key was
    missing from omptensor's output)."""
    for c in cases:
        if c["status"] != "ok":
            continue
        c["cell_host_budget"] = _gb(c.get("cpu_budget_bytes")) if c.get("cpu_budget_bytes") else "—"
        own = c.get("disk_bytes_per_token")
        c["cell_disk"] = (f"{_gb(c.get('disk_bytes_est'))} / "
                          + (_gb(own) if c.get("backend") != "accelerate" else "—"))
        c["cell_pcie"] = _gb(c.get("decode_bytes_to_device_per_token")) if c.get("backend") != "accelerate" \
            else _gb(c.get("streamed_bytes_est"))
        c["cell_io"] = str(c.get("io") or ("mmap" if c.get("backend") == "accelerate" else "n/a"))
        c["cell_host_peak"] = (_gb(c.get("host_peak_bytes")) if c.get("backend") != "accelerate"
                               else "—")
        c["cell_rss"] = _gb(c.get("peak_rss_bytes") if c.get("backend") != "accelerate"
                            else c.get("rss_delta_bytes"))
        c["cell_cache"] = _gb(c.get("cache_after_bytes"))


def extra_columns():
    U = UNIT[0]
    return [("bound", "bound_tokens_per_second", "{:.2f}"),
            ("× own-bytes bound", "ratio_to_own_bytes_bound", "{:.0%}"),
            (f"host budget {U}", "cell_host_budget", "{}"),
            (f"disk {U}/token (est / own)", "cell_disk", "{}"),
            (f"PCIe {U}/token", "cell_pcie", "{}"),
            ("io", "cell_io", "{}"),
            (f"host peak {U} (own)", "cell_host_peak", "{}"),
            (f"RSS {U}", "cell_rss", "{}"),
            (f"page cache after {U}", "cell_cache", "{}")]


def disk_lines(h):
    U = UNIT[0]
    d = h.get("disk") or {}
    fs = h.get("filesystem") or {}
    out = [f"Disk under {h['model_dir']}: {fs.get('fstype', '?')} on {fs.get('source', '?')} "
           f"(block {fs.get('block', '?')}, model {fs.get('model', '?')}, rotational "
           f"{fs.get('rotational', '?')}); /proc/sys/vm/drop_caches: "
           + ("dropped" if (d.get("drop_caches") or {}).get("ok") else
              (d.get("drop_caches") or {}).get("message", "?"))
           + f"; after fsync + fadvise(DONTNEED) {_gb((d.get('cache_after_drop') or {}).get('cached_bytes'))} "
             f"{U} of the files' {_gb(d.get('files_bytes'))} {U} were cached.", "",
           f"| read | streams | request | {U}/s | {U} read | s | cached before | cached after |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in d.get("runs", []):
        if r.get("error"):
            out.append(f"| {r['io']} | {r['streams']} | {r['request_bytes'] >> 20} MiB | FAILED | | | | "
                       f"{r['error'][:60]} |")
            continue
        out.append(f"| {r['io']} | {r['streams']} | {r['request_bytes'] >> 20} MiB | "
                   f"{r['bytes_per_s'] / 1e9:.2f} | {r['bytes'] / 1e9:.2f} | {r['seconds']:.2f} | "
                   f"{_gb(r['cache_before'].get('cached_bytes'))} {U} | "
                   f"{_gb(r['cache_after'].get('cached_bytes'))} {U} |")
    return out


def verdict_lines(b):
    U = UNIT[0]
    h = b.header
    cases = {c["case"]: c for c in b.cases}
    disk = cases.get("omptensor-disk")
    out = [f"Budgets: device {_gb(h['gpu_budget_bytes'])} {U}, host {_gb(h['cpu_budget_bytes'])} {U} "
           f"(the Accelerate peer's host budget {_gb(h['peer_cpu_budget_bytes'])} {U}); "
           f"B_disk {_gb(h.get('disk_bytes_per_s'))} {U}/s ({h.get('disk_bandwidth_source')}; "
           f"the best O_DIRECT one stream "
           f"{_gb(h.get('disk_single_stream_bytes_per_s'))}, buffered after the drop "
           f"{_gb(h.get('disk_buffered_bytes_per_s'))}), B_pcie {_gb(h.get('h2d_bytes_per_s'))} {U}/s; "
           f"W {_gb(h['weight_bytes'], '{:.3f}')} {U}, KV {_gb(h['kv_cache_bytes'], '{:.3f}')} {U}, "
           f"ring estimate {_gb(h['ring_estimate_bytes'], '{:.3f}')} {U}."]
    if disk and disk["status"] == "ok":
        t = disk.get("bound_time_per_token_s")
        out.append(
            f"omptensor-disk: S = {_gb(disk.get('streamed_bytes_est'))} {U}, D = "
            f"{_gb(disk.get('disk_bytes_est'))} {U} per token (estimate); own: S "
            f"{_gb(disk.get('decode_bytes_to_device_per_token'))}, D {_gb(disk.get('disk_bytes_per_token'))} {U}, "
            f"host weights {_gb(disk.get('host_weight_bytes'))} {U}, weights on disk "
            f"{_gb(disk.get('disk_weight_bytes'))} {U}, ring {_gb(disk.get('ring_bytes'), '{:.3f}')} {U}, "
            f"io {disk.get('io') or 'n/a'}, host peak {_gb(disk.get('host_peak_bytes'))} {U}. "
            f"Bound {R._num(disk.get('bound_tokens_per_second'))} tokens/s"
            + (f" ({t * 1e3:.1f} ms a token: disk {R._num(disk.get('bound_disk_tokens_per_second'))}, "
               f"PCIe {R._num(disk.get('bound_pcie_tokens_per_second'))} tokens/s alone)" if t else "")
            + f", literal {R._num(disk.get('bound_literal_tokens_per_second'))}, with the one-stream "
              f"B_disk {R._num(disk.get('bound_single_stream_tokens_per_second'))}, from its own bytes "
              f"{R._num(disk.get('bound_own_bytes_tokens_per_second'))}.")
        r = disk.get("ratio_to_bound")
        out.append(f"Target (issue 23): decode ≥ {TARGET:.0%} of the bound: "
                   f"{R._num(disk.get('tokens_per_second'))} tokens/s = {R._num(r, '{:.0%}')} → "
                   + ("MET" if disk.get("target_met") else "MISSED" if r is not None else "n/a")
                   + f" ({R._num(disk.get('ratio_to_literal_bound'), '{:.0%}')} of the literal bound, "
                     f"{R._num(disk.get('ratio_to_own_bytes_bound'), '{:.0%}')} of its own bytes' bound)"
                   + f"; peak RSS {_gb(disk.get('peak_rss_bytes'))} {U}, the model's files in the page cache after it "
                     f"{_gb(disk.get('cache_after_bytes'))} {U}"
                   + f"; against Accelerate {R._num(disk.get('ratio_to_best_pytorch'), '{:.2f}×')} its "
                     f"faster row, {R._num(disk.get('ratio_to_accelerate_cold'), '{:.2f}×')} its cold one.")
    elif disk:
        out.append(f"omptensor-disk: {disk['status'].upper()}: {disk.get('note') or ''}")
    peer = cases.get("accelerate-offload_folder")
    if peer and peer["status"] == "ok":
        out.append(
            f"Accelerate placed {', '.join(f'{k} {_gb(v)} {U}' for k, v in peer['placed_bytes'].items())}; "
            f"its offload folder holds {peer['offload_folder_files']} files, "
            f"{_gb(peer['offload_folder_bytes'], '{:.3f}')} {U} (transformers reads a safetensors "
            f"checkpoint's offloaded weights in place, through mmap); after its decode the page cache "
            f"held {_gb(peer.get('cache_after_bytes'))} {U} of the model's files (/proc/meminfo Cached "
            f"{_gb(peer.get('meminfo_cached_delta_bytes'), '{:+.2f}')} {U} since before its load): host "
            f"memory beyond its {_gb(h['peer_cpu_budget_bytes'])} {U}. The '-cold' row drops the files' "
            f"pages before every forward.")
    return out


def main():
    args = parse_args()
    import transformers
    transformers.utils.logging.disable_progress_bar()
    dev = Dev(args.device)
    if args.tiny:
        UNIT[:] = ["MB", 1e6]
    b = H.Bench(args, dev, MIN_SECONDS, None)
    b.bound, b.finalize = make_bound(b), make_finalize(b)
    log(f"device {dev.name}; workdir {args.workdir}; out {args.out}; time limit {args.time_limit:.0f} s")

    # 1. the model and the prompt
    _, cfg_kw = M.llama_config(args.tiny)
    model_dir = M.ensure_model(args.workdir, args.tiny, args.seed, dev.name, log)
    prompt_file, prompt = M.write_prompt(args.workdir, cfg_kw["vocab_size"], args.prompt_len, args.seed)
    files = D.checkpoint_files(model_dir)
    sizes = M.safetensors_sizes(model_dir)
    w = sum(sizes.values())
    layer_max = max((v for k, v in sizes.items() if ".layers." in k), default=max(sizes.values()))
    gpu, cpu = parse_size(args.gpu_budget, w), parse_size(args.cpu_budget, w)
    peer_cpu = parse_size(args.peer_cpu_budget, w)
    h = b.header = H.base_header(args, dev, model_dir, cfg_kw, w)
    h.update(kv_cache_bytes=M.kv_cache_bytes(cfg_kw, args.prompt_len + args.new_tokens),
             gpu_budget_bytes=gpu, cpu_budget_bytes=cpu, peer_cpu_budget_bytes=peer_cpu,
             ring_estimate_bytes=(parse_size(args.ring_estimate) if args.ring_estimate
                                  else 2 * layer_max),
             hbm_bytes_per_s=args.hbm_bw, bound_formula=BOUND_FORMULA, target=TARGET,
             omptensor_json_names=dict(J, object=J_DISK, **J_TOP),
             host_memory_bytes=D.meminfo().get("MemTotal"), cpu_count=os.cpu_count())
    U = UNIT[0]
    log(f"model {model_dir}: {_gb(w, '{:.3f}')} {U} of weights in {len(files)} files; prompt "
        f"{prompt_file}; budgets: device {_gb(gpu, '{:.3f}')} {U}, host {_gb(cpu, '{:.3f}')} {U}")

    # 2. the disk
    h["filesystem"] = D.filesystem_of(model_dir)
    log(f"disk: {h['filesystem']}")
    h["disk"] = D.measure_disk(files, D.parse_read_configs(args.disk_reads),
                               args.disk_read_gb * 1e9 or None, args.disk_read_s, log,
                               drop_caches=args.drop_caches == "try")
    # B_disk: the best O_DIRECT read; where the filesystem has no O_DIRECT, the
    # buffered read after the drop (and the header says so)
    h.update(disk_bytes_per_s=h["disk"]["best_direct_bytes_per_s"] or h["disk"]["buffered_bytes_per_s"],
             disk_bandwidth_source="O_DIRECT" if h["disk"]["best_direct_bytes_per_s"] else
             "buffered after the drop (no O_DIRECT read succeeded)",
             disk_single_stream_bytes_per_s=h["disk"]["best_direct_single_stream_bytes_per_s"],
             disk_buffered_bytes_per_s=h["disk"]["buffered_bytes_per_s"])
    R.write_json(args.out, h, b.cases)

    # 3. PCIe
    if args.h2d_bw:
        h.update(h2d_bytes_per_s=args.h2d_bw, h2d_given=True)
        log(f"host->device: {args.h2d_bw / 1e9:.1f} GB/s as given (--h2d-bw), not measured")
    else:
        H.measure_bandwidth(b)
    R.write_json(args.out, h, b.cases)

    # 4-5. the cases, most important first
    cmd = H.omptensor_command(args, b)

    def omp(name, tier, g, c, trace=False):
        if cmd:
            run_omptensor_case(b, cmd, name, tier, model_dir, prompt_file, files, g, c, trace)

    omp("omptensor-disk", "disk", gpu, cpu)
    omp("omptensor-host", "host", gpu, None)
    run_peer(b, model_dir, prompt, files, gpu, peer_cpu)
    omp("omptensor-resident", "resident", None, None)
    omp("omptensor-disk-trace", "disk", gpu, cpu, trace=True)

    # 6. the report
    b.refresh()
    add_cells(b.cases)
    R.write_json(args.out, h, b.cases)
    md = R.markdown(b.cases, h, title="Models larger than host memory: weights streamed from disk "
                    "(`bench/disk_h200.py`, issue 23)", extra=extra_columns(),
                    workload=f"batch 1, prompt {args.prompt_len} tokens, {args.new_tokens} new tokens "
                             f"({args.slow_new_tokens} for Accelerate), greedy.",
                    peer_note="× best PyTorch: against the faster Accelerate row. disk GB/token: the "
                              "bound's estimate D / omptensor's own decode_disk_bytes_per_token; PCIe "
                              "GB/token: omptensor's decode_bytes_to_device_per_token (Accelerate: the "
                              "estimate S); RSS: omptensor's peak (getrusage of the subprocess), "
                              "Accelerate's growth from before its load (it runs in the benchmark's "
                              "process); page cache after: bytes of the model's files (and the offload "
                              "folder) cached after the case (mincore), host memory outside any budget. "
                              "n/a: omptensor's --json lacks the key.",
                    notes=disk_lines(h) + [""] + verdict_lines(b))
    md_path = os.path.join(b.artifacts, "disk-h200.md")
    with open(md_path, "w") as f:
        f.write(md + "\n")
    H.print_summary(b, cfg_kw, md, md_path, extra_columns())
    log(f"done: {args.out}")


if __name__ == "__main__":
    main()
