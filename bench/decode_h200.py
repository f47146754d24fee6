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
import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from peers import harness as H  # noqa: E402
from peers import model as M  # noqa: E402
from peers import omptensor as O  # noqa: E402
from peers import report as R  # noqa: E402
from peers import torch_peers as P  # noqa: E402
from peers.common import Dev  # noqa: E402

H.start_clock(T_START)
log = H.log

# Least time (s) a case needs; it is skipped when less is left.
MIN_SECONDS = {"torch-resident": 20, "torch-streamer": 30, "accelerate-dispatch": 40,
               "accelerate-cpu_offload": 40, "omptensor": 12}


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


def make_bench(args, dev):
    def bound(case):
        h = b.header
        w = case.get("weight_bytes") or (h["int8_weight_bytes_estimate"]
                                         if case.get("dtype") == "int8" else h["weight_bytes"])
        return dict(bound_tokens_per_second=M.bound_tokens_per_second(
            w, case.get("budget_bytes"), h["kv_cache_bytes"], h.get("h2d_bytes_per_s"),
            args.hbm_bw))
    b = H.Bench(args, dev, MIN_SECONDS, bound)     # bound() reads b.header when called
    return b


def make_header(args, dev, model_dir, cfg_kw):
    h = H.base_header(args, dev, model_dir, cfg_kw, M.safetensors_bytes(model_dir))
    h.update(int8_weight_bytes_estimate=M.int8_weight_bytes(cfg_kw),
             kv_cache_bytes=M.kv_cache_bytes(cfg_kw, args.prompt_len + args.new_tokens),
             hbm_bytes_per_s=args.hbm_bw,
             bound_formula=M.BOUND_FORMULA.format(hbm=args.hbm_bw))
    return h


def run_torch_peers(b, model_dir, prompt):
    """The PyTorch cases that need the GPU the least and run the fastest come
    first; the two slow Accelerate peers run after the omptensor cases."""
    a, dev = b.args, b.dev
    b.run("torch-resident", "torch-resident", "torch", None, lambda: list(zip(
        ("torch-resident", "torch-generate"), P.resident(model_dir, prompt, a.new_tokens, dev))))
    b.run("torch-streamer", "torch-streamer", "torch", None,
          lambda: P.streamer(model_dir, prompt, a.new_tokens, dev))


def run_slow_peers(b, model_dir, prompt, budget_bytes):
    a, dev = b.args, b.dev
    b.run(f"accelerate-dispatch-{a.peer_budget:g}%", "accelerate-dispatch", "accelerate",
          budget_bytes, lambda: P.dispatch(model_dir, prompt, a.slow_new_tokens, dev,
                                           budget_bytes, stop_at=b.stop_at()))
    b.run("accelerate-cpu_offload", "accelerate-cpu_offload", "accelerate", 0,
          lambda: P.cpu_offload(model_dir, prompt, a.slow_new_tokens, dev, stop_at=b.stop_at()))


def run_omptensor(b, model_dir, prompt_file):
    a = b.args
    cmd = H.omptensor_command(a, b)
    if not cmd:
        return
    fractions = [float(x) / 100 for x in a.budgets.split(",") if x]
    specs = O.case_specs(fractions, a.backends.split(","), a.strategies.split(","),
                         placements=a.usm_placements.split(","),
                         headline=a.headline_budget / 100)
    H.run_omptensor_specs(b, cmd, specs, model_dir, prompt_file)


def main():
    args = parse_args()
    import transformers
    transformers.utils.logging.disable_progress_bar()   # keep the log short
    dev = Dev(args.device)
    b = make_bench(args, dev)
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
    H.measure_bandwidth(b)
    log(b.header["bound_formula"])

    # 3-4. the cases, most important first
    peer_budget = int(args.peer_budget / 100 * w)
    run_torch_peers(b, model_dir, prompt)
    run_omptensor(b, model_dir, prompt_file)
    run_slow_peers(b, model_dir, prompt, peer_budget)

    # 5. the report
    b.refresh()
    md = R.markdown(b.cases, b.header)
    md_path = os.path.join(b.artifacts, "decode-h200.md")
    with open(md_path, "w") as f:
        f.write(md + "\n")
    H.print_summary(b, cfg_kw, md, md_path)
    log(f"done: {args.out}")


if __name__ == "__main__":
    main()
