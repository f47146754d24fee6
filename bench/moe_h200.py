#!/usr/bin/env python3
"""Mixture-of-experts decode benchmark on one GPU (issue 18): omptensor at a
budget of 10 % of a Mixtral-shaped model against the bytes it must move and
against PyTorch offload peers.

One run (one device call, under 9 minutes on the H200) does, most important
first (a time limit, --time-limit, skips what would not fit):
  1. makes the model once in --workdir (Mixtral shapes: 8 experts, top-2,
     hidden 4096, intermediate 14336, 32/8 heads, vocab 32000, 7 layers =
     20.8 GB of random bf16 drawn on the GPU from a seed, the hub's tensor
     names, <= 5 GB shards) and a 128-token prompt; a later run reuses both;
  2. measures pinned host->device bandwidth (the bounds' B_h2d);
  3. omptensor at the headline budget (10 %, map backend, each --strategies);
  4. the expert streamer (peers/moe_streamer.py) at 10 %: dense parts
     resident, only the chosen experts copied, an LRU window of the rest;
  5. Accelerate dispatch_model with max_memory = 10 % (fewer tokens: it
     copies whole layers from pageable memory);
  6. transformers resident (experts_implementation="eager"): the reference
     for tokens and, from hooks on its routers in a second untimed decode,
     the routing the bounds count;
  7. omptensor resident, omptensor 10 % traced (trace + SVG), omptensor at
     the other --budgets, the streamer at its other budgets, Accelerate at
     its other budgets, transformers resident with its default (grouped_mm)
     experts;
  8. prints a table and the Markdown for bench/RESULTS.md; the JSON goes to
     --out after every case (a run cut short keeps what it measured).

Bounds, per decoded token (peers/moe_model.py BOUND_FORMULA): the no-cache
bound counts the chosen experts' bytes (top-2 of every layer) plus the dense
bytes beyond the budget; the cache bound lets an optimal cache (Belady's MIN
over the reference's routing) keep what the budget's rest holds; the
own-bytes bound counts what the omptensor run's JSON says crossed (the
streamer: what it copied). Tokens are compared with the transformers
reference; a difference is reported with its position, never fatal.

On the GPU machine (files under $OUT come back; keep the log with tee):
    PYTHONUNBUFFERED=1 python3 bench/moe_h200.py --omptensor build-gpu/omptensor \\
        --omptensor-prologue .gpu/prologue.sh --workdir /tmp/omptensor-moe \\
        --out $OUT/moe-h200.json 2>&1 | tee $OUT/moe-h200.log
CPU smoke test (tiny Mixtral: hidden 64, intermediate 96, 4 experts top-2, 2
layers, vocab 256; every code path but the CUDA-only ones; any command that
answers like `omptensor run --json` can stand in for omptensor):
    python3 bench/moe_h200.py --tiny --device cpu --workdir /tmp/m --out /tmp/m/out.json \\
        --omptensor build/offload-host/omptensor
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
from peers import moe_model as MM  # noqa: E402
from peers import omptensor as O  # noqa: E402
from peers import report as R  # noqa: E402
from peers import torch_peers as P  # noqa: E402
from peers.common import Dev, greedy_decode  # noqa: E402

H.start_clock(T_START)
log = H.log

# Least time (s) a case needs; it is skipped when less is left.
MIN_SECONDS = {"omptensor": 25, "moe-streamer": 50, "accelerate-dispatch": 70,
               "torch-resident": 45}
# Columns of the table beside "× bound" (the no-cache bound).
EXTRA = [("× cache bound", "ratio_to_cache_bound", "{:.0%}"),
         ("× own-bytes bound", "ratio_to_own_bound", "{:.0%}"),
         ("GB crossed / token", "crossed_gb_per_token", "{:.3f}")]
EAGER = {"experts_implementation": "eager"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--omptensor", metavar="CMD",
                   help="the omptensor command (split like a shell line); without it "
                        "the omptensor cases are skipped")
    p.add_argument("--omptensor-prologue", metavar="FILE",
                   help="a shell file sourced before each omptensor command only (e.g. "
                        ".gpu/prologue.sh)")
    p.add_argument("--workdir", default="/tmp/omptensor-moe",
                   help="where the model and prompt are made once and reused")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "results", "moe-h200.json"))
    p.add_argument("--artifacts", help="folder for the trace, SVG and Markdown "
                                       "(default: the folder of --out)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   choices=["cuda", "cpu"])
    p.add_argument("--tiny", action="store_true",
                   help="a tiny Mixtral (hidden 64, 4 experts, 2 layers, vocab 256): smoke test")
    p.add_argument("--layers", type=int, help="decoder layers (default 7: 20.8 GB; tiny 2)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--prompt-len", type=int,
                   help="prompt tokens (default 128; tiny 16, so that the prefill's activations "
                        "fit the tiny model's budgets)")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--slow-new-tokens", type=int, default=8,
                   help="new tokens for the Accelerate peers (whole layers cross per token)")
    p.add_argument("--headline-budget", type=float,
                   help="percent of the weight bytes: the budget run first by omptensor, the "
                        "streamer and Accelerate, and traced (default 10; tiny 20, since the "
                        "tiny model's dense parts are 28 %% of it)")
    p.add_argument("--budgets", help="more omptensor budgets, percent (default 20,5; tiny 40,15)")
    p.add_argument("--streamer-budgets", default="",
                   help="more expert-streamer budgets, percent, run late (e.g. 20)")
    p.add_argument("--accelerate-budgets", default="50",
                   help="more Accelerate budgets, percent, run late")
    p.add_argument("--backend", default="map", help="omptensor backend of the budgeted cases")
    p.add_argument("--strategies", default="aggressive,balanced",
                   help="omptensor offload strategies at the headline budget (the first one "
                        "also for the trace and the other budgets)")
    p.add_argument("--no-trace", action="store_true", help="skip the traced omptensor case")
    p.add_argument("--skip", default="", help="comma-separated case-name patterns to skip "
                                              "(fnmatch, e.g. 'accelerate-*')")
    p.add_argument("--time-limit", type=float, default=540,
                   help="seconds for the whole run; cases that would not fit are skipped")
    p.add_argument("--case-timeout", type=float, default=120,
                   help="seconds before an omptensor case is killed")
    p.add_argument("--h2d-bw", type=float,
                   help="host->device bytes/s for the bounds instead of measuring it (e.g. "
                        "on the CPU, to see the ratios of a smoke test)")
    p.add_argument("--hbm-bw", type=float, default=4.3e12,
                   help="HBM bytes/s for the bound of cases with nothing to move")
    a = p.parse_args()
    if a.headline_budget is None:
        a.headline_budget = 20.0 if a.tiny else 10.0
    if a.prompt_len is None:
        a.prompt_len = 16 if a.tiny else 128
    if a.budgets is None:
        a.budgets = "40,15" if a.tiny else "20,5"
    return a


def pct_list(text):
    return [float(x) for x in text.split(",") if x.strip()]


# -- bounds and the reference's routing ------------------------------------------

def reference_routing(b):
    """The routing of the transformers reference's decode (else the
    streamer's own: the same model, run first), and which case it is from."""
    with_routing = [c for c in b.cases if c.get("status") == "ok" and c.get("routing")]
    ref = next((c for c in with_routing if c["case"] == "torch-resident"),
               with_routing[0] if with_routing else None)
    return (ref["routing"], ref["case"]) if ref else (None, None)


def make_bench(args, dev):
    def bound(case):
        h = b.header
        routing, source = reference_routing(b)
        out = MM.bounds(h["bytes"], h["config"], case.get("budget_bytes"), routing,
                        h.get("h2d_bytes_per_s"), args.hbm_bw)
        out["routing_source"] = source
        tps = case.get("tokens_per_second")
        if "omptensor" in case:              # what its JSON says crossed
            case["crossed_bytes_per_token"] = MM.omptensor_crossed_per_token(case["omptensor"])
        own = case.get("crossed_bytes_per_token")
        own_bound = MM.bound_tps(own, out["active_bytes_per_token"], h.get("h2d_bytes_per_s"),
                                 args.hbm_bw)
        out["crossed_gb_per_token"] = None if own is None else own / 1e9
        out["own_bound_tokens_per_second"] = own_bound
        for key, bnd in (("ratio_to_cache_bound", out["cache_bound_tokens_per_second"]),
                         ("ratio_to_own_bound", own_bound)):
            out[key] = tps / bnd if tps and bnd else None
        if case.get("routing") and routing and source != case["case"]:
            n = 0
            while n < min(len(routing), len(case["routing"])) and routing[n] == case["routing"][n]:
                n += 1
            out["routing_match_prefix"] = n
        return out
    # × best PyTorch: against the PyTorch cases of the same budget (the issue's
    # "best peer at the same budget"), resident against resident.
    b = H.Bench(args, dev, MIN_SECONDS, bound,     # bound() reads b.header when called
                peer_class=lambda c: c["budget_bytes"])
    return b


def record_routing(top_k, prompt, n_new, dev):
    """after() of the reference: a second, untimed decode with hooks on the routers."""
    def after(model, step):
        rec = MM.RouterRecorder(model, top_k)
        try:
            again = greedy_decode(step, model.config, prompt, n_new, dev)
        finally:
            rec.remove()
        routing = rec.routing()
        return dict(routing=routing, routing_stats=MM.routing_stats(routing, model.config.num_local_experts),
                    routing_run_same_tokens=again["tokens"])
    return after


# -- the cases ------------------------------------------------------------------

def budget_of(b, pct):
    return int(pct / 100 * b.header["weight_bytes"])


def run_streamer(b, model_dir, prompt, pct):
    a = b.args
    budget = budget_of(b, pct)
    b.run(f"moe-streamer-{pct:g}%", "moe-streamer", "torch", budget,
          lambda: P.moe_streamer(model_dir, prompt, a.new_tokens, b.dev, budget,
                                 b.header["bytes"]["kv_cache_bytes"], stop_at=b.stop_at()))


def run_accelerate(b, model_dir, prompt, pct):
    a = b.args
    budget = budget_of(b, pct)
    b.run(f"accelerate-dispatch-{pct:g}%", "accelerate-dispatch", "accelerate", budget,
          lambda: P.dispatch(model_dir, prompt, a.slow_new_tokens, b.dev, budget,
                             stop_at=b.stop_at()))


def run_resident(b, model_dir, prompt, eager=True):
    a, kw = b.args, b.header["config"]
    if eager:
        def reference():
            res, gen = P.resident(model_dir, prompt, a.new_tokens, b.dev, load_kw=EAGER,
                                  after=record_routing(kw["num_experts_per_tok"], prompt,
                                                       a.new_tokens, b.dev))
            res["note"] = ("the reference: experts_implementation='eager' (the streamer's "
                           "arithmetic); routing from a second, hooked decode")
            return [("torch-resident", res), ("torch-generate", gen)]
        b.run("torch-resident", "torch-resident", "torch", None, reference)
    else:
        b.run("torch-resident-grouped_mm", "torch-resident", "torch", None,
              lambda: dict(P.resident(model_dir, prompt, a.new_tokens, b.dev, generate=False)[0],
                           note="transformers' default experts_implementation (grouped_mm)"))


def omptensor_specs(a):
    """(headline specs, resident, the rest) in the order they run."""
    strategies = a.strategies.split(",")
    head = a.headline_budget / 100
    others = [x / 100 for x in pct_list(a.budgets)]
    specs = O.case_specs([head] + others, [a.backend], strategies[:1], headline=head,
                         int8=False, trace=not a.no_trace, trace_strategy=strategies[0])
    resident = [s for s in specs if s["fraction"] is None]
    heads = [s for s in O.case_specs([head], [a.backend], strategies, headline=head, int8=False,
                                     trace=False) if s["fraction"] is not None]
    rest = [s for s in specs if s["fraction"] is not None and s["name"] not in
            {h["name"] for h in heads}]
    return heads, resident, rest


def main():
    args = parse_args()
    import transformers
    transformers.utils.logging.disable_progress_bar()   # keep the log short
    dev = Dev(args.device)
    b = make_bench(args, dev)
    log(f"device {dev.name}; workdir {args.workdir}; out {args.out}; "
        f"time limit {args.time_limit:.0f} s")

    # 1. the model and the prompt
    model_dir, kw = MM.ensure_model(args.workdir, args.tiny, args.seed, dev.name, log, args.layers)
    prompt_file, prompt = M.write_prompt(args.workdir, kw["vocab_size"], args.prompt_len, args.seed)
    acc = MM.byte_accounting(model_dir, kw, args.prompt_len, args.new_tokens)
    b.header = H.base_header(args, dev, model_dir, kw, acc["weight_bytes"])
    b.header.update(bytes=acc, kv_cache_bytes=acc["kv_cache_bytes"], hbm_bytes_per_s=args.hbm_bw,
                    bound_formula=MM.BOUND_FORMULA.format(hbm=args.hbm_bw))
    w = acc["weight_bytes"]
    log(f"model {model_dir}: {w / 1e9:.4g} GB of weights: {acc['n_experts_total']} experts of "
        f"{acc['expert_bytes'] / 1e6:.4g} MB, dense parts {acc['dense_bytes'] / 1e9:.4g} GB; "
        f"headline budget {args.headline_budget:g}% = {budget_of(b, args.headline_budget) / 1e9:.4g} GB; "
        f"prompt {prompt_file}")

    # 2. the bounds' bandwidth
    if args.h2d_bw:
        b.header.update(h2d_bytes_per_s=args.h2d_bw, h2d_note="given by --h2d-bw, not measured")
        log(f"host->device: {args.h2d_bw / 1e9:.1f} GB/s given (--h2d-bw), not measured")
    else:
        H.measure_bandwidth(b)
    log(b.header["bound_formula"])

    # 3-7. the cases, most important first
    cmd = H.omptensor_command(args, b)
    heads, resident, rest = omptensor_specs(args)
    extra = ["--ignore-eos"]           # every case decodes new_tokens (the peers never stop)
    if cmd:
        H.run_omptensor_specs(b, cmd, heads, model_dir, prompt_file, extra)
    run_streamer(b, model_dir, prompt, args.headline_budget)
    run_accelerate(b, model_dir, prompt, args.headline_budget)
    run_resident(b, model_dir, prompt)
    if cmd:
        H.run_omptensor_specs(b, cmd, resident + rest, model_dir, prompt_file, extra)
    for pct in pct_list(args.streamer_budgets):
        run_streamer(b, model_dir, prompt, pct)
    for pct in pct_list(args.accelerate_budgets):
        run_accelerate(b, model_dir, prompt, pct)
    run_resident(b, model_dir, prompt, eager=False)

    # 8. the report
    b.refresh()
    routing, source = reference_routing(b)
    if routing:
        b.header["routing_stats"] = dict(MM.routing_stats(routing, kw["num_local_experts"]),
                                         source=source)
    R.write_json(args.out, b.header, b.cases)
    md = R.markdown(b.cases, b.header, title="Mixture-of-experts decode on the H200: omptensor "
                    "against PyTorch (`bench/moe_h200.py`, issue 18)",
                    model=f"Mixtral shapes ({kw['num_local_experts']} experts, top-"
                          f"{kw['num_experts_per_tok']}, hidden {kw['hidden_size']}, intermediate "
                          f"{kw['intermediate_size']}, {kw['num_attention_heads']}/"
                          f"{kw['num_key_value_heads']} heads, vocab {kw['vocab_size']})",
                    extra=EXTRA, notes=notes(b),
                    peer_note="× best PyTorch: against the fastest PyTorch case at the same budget "
                              "(the streamer, Accelerate), resident cases against the resident "
                              "PyTorch cases.")
    md_path = os.path.join(b.artifacts, "moe-h200.md")
    with open(md_path, "w") as f:
        f.write(md + "\n")
    H.print_summary(b, kw, md, md_path, EXTRA)
    log(f"done: {args.out}")


def notes(b):
    """The lines under the table: bytes, routing, the targets, the peers' placement."""
    h, acc = b.header, b.header["bytes"]
    out = [f"Bytes: {acc['n_experts_total']} experts of {acc['expert_bytes'] / 1e6:.4g} MB, dense "
           f"parts {acc['dense_bytes'] / 1e9:.4g} GB, KV cache {acc['kv_cache_bytes'] / 1e6:.4g} MB; "
           f"pinned host→device {R._num(h.get('h2d_bytes_per_s') and h['h2d_bytes_per_s'] / 1e9)} GB/s."]
    rs = h.get("routing_stats")
    if rs:
        out.append(f"Routing ({rs['source']}, {rs['steps']} decode steps): distinct experts per layer "
                   f"{rs['distinct_experts_per_layer']} of {rs['of_experts']}; "
                   f"{R._num(rs['reuse_from_previous_token'], '{:.0%}')} of the chosen experts were "
                   f"also chosen by the previous token in that layer.")
    head = h["weight_bytes"] * b.args.headline_budget / 100
    omp = [c for c in b.cases if c.get("status") == "ok" and c["case"].startswith("omptensor-")
           and c.get("budget_bytes") and abs(c["budget_bytes"] - head) < 2 and "trace" not in c["case"]]
    best = max(omp, key=lambda c: c.get("tokens_per_second") or 0) if omp else None
    if best:
        out.append(f"Targets at {b.args.headline_budget:g} % ({best['case']}): ≥ 80 % of the bound: "
                   f"{R._num(best.get('ratio_to_bound'), '{:.0%}')} of the no-cache bound, "
                   f"{R._num(best.get('ratio_to_cache_bound'), '{:.0%}')} of the cache bound; "
                   f"≥ 2× the best PyTorch offload peer: "
                   f"{R._num(best.get('ratio_to_best_pytorch'), '{:.2f}×')}.")
    for c in b.cases:
        if c.get("status") == "ok" and c.get("device_map_summary") is not None:
            out.append(f"{c['case']}: device map {c['device_map_summary']}, "
                       f"{c['gpu_weight_bytes'] / 1e9:.2f} GB of weights on the GPU.")
        if c.get("status") == "ok" and c.get("window_slots") is not None:
            out.append(f"{c['case']}: a window of {c['window_slots']} experts, decode "
                       f"{c['decode_fills']} copies / {c['decode_hits']} hits, routing equal to "
                       f"the reference for {c.get('routing_match_prefix', '—')} of "
                       f"{len(c['routing'])} steps.")
    return out


if __name__ == "__main__":
    main()
