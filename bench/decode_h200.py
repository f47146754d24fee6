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

Batched decode (--batches; the cases above are then not run): the same model
at the budgets --batch-budgets (25, 10 %), aggregate decode tokens/s at each
batch size N: `omptensor run --prompts IN --out OUT --batch N --json` on N
prompts (2N with --batch-refill) of a fixed seed and lengths from
prompt-len/2 to prompt-len (token ids: the model has no tokenizer.json),
--ignore-eos; the layer streamer on the first N of them, left padded (an
attention mask, per-sequence positions, every layer streamed once per step
for the batch); generate() on the same padded batch under Accelerate
max_memory at the budget (--slow-new-tokens). Bound = N x the batch-1 bound
at that budget; × batch 1 and × best PyTorch (same batch) beside it. Order:
the headline batch (32) at 25 % for omptensor and the streamer, batch 1,
the other batches, generate() at 25 % (batch 32, 1), omptensor at 10 %,
then the other generate() cases. On the GPU machine:
    PYTHONUNBUFFERED=1 python3 bench/decode_h200.py --omptensor build-gpu/omptensor \
        --omptensor-prologue .gpu/prologue.sh --batches 1,8,32,64 \
        --out $OUT/decode-h200-batch.json 2>&1 | tee $OUT/decode-h200-batch.log
CPU smoke test (bench/peers/batch_standin.py runs a binary without --batch
one prompt after another and adds the `batch` object; the tiny model needs
larger budgets and short prompts, its ops' activations being most of it):
    python3 bench/decode_h200.py --tiny --device cpu --batches 1,2 --batch-budgets 90,60 \
        --prompt-len 16 --workdir /tmp/bb --out /tmp/bb/out.json \
        --omptensor "python3 bench/peers/batch_standin.py build/offload-host/omptensor"
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
               "accelerate-cpu_offload": 40, "omptensor": 12,
               "omptensor-batch": 15, "torch-streamer-batch": 30, "accelerate-generate": 45}


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
    g = p.add_argument_group("batched decode (--batches; replaces the batch-1 cases above)")
    g.add_argument("--batches", metavar="N,N,...",
                   help="e.g. 1,8,32,64: instead of the cases above, aggregate decode tokens/s "
                        "at each batch size (omptensor run --prompts --batch N, the layer "
                        "streamer batched, generate() on a padded batch under Accelerate)")
    g.add_argument("--batch-budgets", default="25,10",
                   help="budgets of the batched cases, percent of the weight bytes")
    g.add_argument("--headline-batch", type=int, default=32,
                   help="the batch run first (then batch 1, then the rest)")
    g.add_argument("--batch-refill", action="store_true",
                   help="2N prompts for batch N (a finished prompt's slot takes the next)")
    g.add_argument("--batch-offload", default="balanced", help="omptensor --offload of the batched cases")
    g.add_argument("--batch-kv-dtype", default="bf16",
                   help="omptensor --kv-dtype of the batched cases (default bf16: the PyTorch peers keep "
                        "the bf16 model's KV cache in bf16)")
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


BATCH_BOUND_FORMULA = (
    "bound tokens/s (batch B) = B x the batch-1 bound at that budget (every step moves the "
    "same weight bytes whatever B; the batch-1 bound's KV is one sequence's): {one} "
    "bound_kv_batch in the JSON takes the KV cache of all B sequences off the budget instead "
    "(lower, and none where that KV leaves nothing of the budget for weights).")


def batch_order(batches, headline):
    """The headline batch first, then batch 1, then the rest as given."""
    first = [x for x in (headline, 1) if x in batches]
    return first + [x for x in batches if x not in first]


def run_batched(args, b, model_dir, cfg_kw):
    """The --batches cases, most important first: at the first budget (25 %)
    omptensor and the streamer at the headline batch, batch 1, the rest; the
    generate() peer at that budget for the headline batch and batch 1; the
    other budgets for omptensor; then the remaining generate() cases."""
    dev, w = b.dev, b.header["weight_bytes"]
    batches = batch_order([int(x) for x in args.batches.split(",") if x], args.headline_batch)
    budgets = [float(x) for x in args.batch_budgets.split(",") if x]
    cmd = H.omptensor_command(args, b)
    backend = args.backends.split(",")[0]
    n_new = args.new_tokens
    prompts = {}

    def prompt_set(n):
        if n not in prompts:
            prompts[n] = M.write_batch_prompts(args.workdir, cfg_kw["vocab_size"], n,
                                               args.prompt_len, args.seed)
        return prompts[n]

    def n_prompts(bs):
        return bs * (2 if args.batch_refill else 1)

    def by_id(seq_tokens):
        return {str(i): t for i, t in enumerate(seq_tokens)}

    def extra(bs, pct, budget):
        return dict(batch=bs, budget_fraction=None if pct is None else pct / 100,
                    n_prompts=n_prompts(bs), kv_cache_bytes_batch=M.kv_cache_bytes(
                        cfg_kw, args.prompt_len + n_new) * bs)

    def omptensor_case(bs, pct):
        if not cmd:
            return
        budget = int(pct / 100 * w)
        kind = f"omptensor-{pct:g}%-{backend}-{args.batch_offload}"
        name = f"omptensor-{pct:g}%-b{bs}-{backend}-{args.batch_offload}"
        if not b.wanted(name, "omptensor-batch", budget):
            return
        path, _ = prompt_set(n_prompts(bs))
        out = os.path.join(args.workdir, f"out-{name.replace('%', 'pct')}.jsonl")
        H.free_memory_for_subprocess(b)
        try:
            res = O.run_batch_case(cmd, path, out, model_dir, bs, n_new, budget,
                                   args.batch_offload, backend,
                                   max(5.0, min(args.case_timeout, b.remaining() - 5)), dev, log,
                                   extra_args=["--kv-dtype", args.batch_kv_dtype])
        except Exception as e:  # noqa: BLE001 - e.g. the command does not exist
            b.failed(name, "omptensor", budget, e)
            return
        b.add(dict(res, **extra(bs, pct, budget), case=name, kind=kind,
                   backend=res.get("backend", backend), offload=args.batch_offload,
                   kv_dtype=args.batch_kv_dtype))

    def streamer_case(bs):
        name = f"torch-streamer-b{bs}"
        _, ps = prompt_set(n_prompts(bs))

        def fn():
            r = P.streamer_batch(model_dir, ps[:bs], n_new, dev)
            r["seq_tokens_by_id"] = by_id(r.pop("seq_tokens"))
            return dict(r, **extra(bs, None, None), kind="torch-streamer")
        b.run(name, "torch-streamer-batch", "torch", None, fn)

    def generate_case(bs, pct):
        budget = int(pct / 100 * w)
        name = f"accelerate-generate-{pct:g}%-b{bs}"
        _, ps = prompt_set(n_prompts(bs))

        def fn():
            r = P.generate_batch(model_dir, ps[:bs], args.slow_new_tokens, dev, budget)
            r["seq_tokens_by_id"] = by_id(r.pop("seq_tokens"))
            return dict(r, **extra(bs, pct, budget), kind=f"accelerate-generate-{pct:g}%")
        b.run(name, "accelerate-generate", "accelerate", budget, fn)

    head = budgets[0]
    for bs in batches:
        omptensor_case(bs, head)
        streamer_case(bs)
    for bs in batches[:2]:
        generate_case(bs, head)
    for pct in budgets[1:]:
        for bs in batches:
            omptensor_case(bs, pct)
    for bs in batches[2:]:
        generate_case(bs, head)
    for pct in budgets[1:]:
        for bs in batches:
            generate_case(bs, pct)


def batch_bound(args, b, cfg_kw):
    """Bench's bound() for the batched cases (see BATCH_BOUND_FORMULA)."""
    def bound(case):
        h, bs = b.header, case["batch"]
        one = M.bound_tokens_per_second(h["weight_bytes"], case.get("budget_bytes"),
                                        h["kv_cache_bytes"], h.get("h2d_bytes_per_s"), args.hbm_bw)
        kvb = case.get("kv_cache_bytes_batch") or 0
        bud = case.get("budget_bytes")
        kv_ok = bud is None or bud > kvb
        per = (M.bound_tokens_per_second(h["weight_bytes"], bud, kvb, h.get("h2d_bytes_per_s"),
                                         args.hbm_bw) if kv_ok else None)
        return dict(bound_tokens_per_second=one and bs * one,
                    bound_kv_batch=per and bs * per)
    return bound


BATCH_EXTRA = [("batch", "batch", "{:d}"), ("× batch 1", "ratio_to_batch1", "{:.1f}×")]


def main_batched(args, dev):
    _, cfg_kw = M.llama_config(args.tiny)
    model_dir = M.ensure_model(args.workdir, args.tiny, args.seed, dev.name, log)
    b = H.Bench(args, dev, MIN_SECONDS, None, finalize=R.finalize_batch)
    b.bound = batch_bound(args, b, cfg_kw)
    b.header = make_header(args, dev, model_dir, cfg_kw)
    b.header.update(batches=args.batches, batch_budgets=args.batch_budgets,
                    batch_refill=args.batch_refill,
                    batch_prompt_lengths=f"{max(1, args.prompt_len // 2)}..{args.prompt_len}")
    log(f"model {model_dir}: {b.header['weight_bytes'] / 1e9:.3f} GB of weights")
    H.measure_bandwidth(b)
    b.header["bound_formula"] = BATCH_BOUND_FORMULA.format(one=b.header["bound_formula"])
    run_batched(args, b, model_dir, cfg_kw)
    b.refresh()
    workload = (f"batches {args.batches}, {'2N' if args.batch_refill else 'N'} prompts of "
                f"{b.header['batch_prompt_lengths']} tokens (fixed seed; the PyTorch peers "
                f"left-pad them), {args.new_tokens} new tokens each ({args.slow_new_tokens} for "
                f"generate()), greedy, no EOS stop; tokens/s = aggregate decode tokens/s.")
    md = R.markdown(b.cases, b.header, title="Batched decode on the H200: omptensor --batch "
                    "against PyTorch (`bench/decode_h200.py --batches`)", extra=BATCH_EXTRA,
                    workload=workload,
                    peer_note="× best PyTorch: against the best PyTorch case at the same batch "
                              "(the streamer keeps embeddings, lm_head and two layers, whatever "
                              "the budget; generate() runs under Accelerate at the case's "
                              "budget). × batch 1: against the same case at batch 1. tokens: "
                              "per prompt against the first case that ran it. omptensor's "
                              "batch --json has no peak_device_bytes (— then).")
    md_path = os.path.join(b.artifacts, "decode-h200-batch.md")
    with open(md_path, "w") as f:
        f.write(md + "\n")
    print("\n" + R.text_table(b.cases, b.header["weight_bytes"], BATCH_EXTRA))
    differ = [c["case"] for c in b.cases if c.get("seq_differ")]
    print("tokens: " + ("every prompt agrees across the cases that ran it" if not differ else
                        "differ in " + ", ".join(differ) + " (seq_differ in the JSON)"))
    print(f"\n----- Markdown for bench/RESULTS.md (also {md_path}) -----\n{md}")
    log(f"done: {args.out}")


def main():
    args = parse_args()
    if args.batches:
        import transformers
        transformers.utils.logging.disable_progress_bar()
        return main_batched(args, Dev(args.device))
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
