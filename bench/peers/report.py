"""Ratios, token agreement, the printed table, the Markdown rows and the JSON."""
import json
import os

PYTORCH_KINDS = ("torch", "accelerate")


def _gb(x):
    return "—" if x is None else f"{x / 1e9:.2f} GB"


def _num(x, fmt="{:.2f}"):
    return "—" if x is None else fmt.format(x)


def finalize(cases, peer_class=None):
    """Fill tokens_match / match_prefix against the reference (the first ok
    case, torch-resident when it ran) and the two ratios:
    ratio_to_bound = tokens/s / bound; ratio_to_best_pytorch = tokens/s / the
    best PyTorch case of the same class: peer_class(case) (default: resident
    cases against the resident PyTorch cases, budgeted cases against the best
    offloading PyTorch case)."""
    peer_class = peer_class or (lambda c: c["budget_bytes"] is None)
    ok = [c for c in cases if c.get("status") == "ok" and c.get("tokens")]
    ref = next((c for c in ok if c["case"] == "torch-resident"), ok[0] if ok else None)
    best = {}
    for c in ok:
        if c["backend"] in PYTORCH_KINDS and c.get("tokens_per_second"):
            k = peer_class(c)
            best[k] = max(best.get(k, 0), c["tokens_per_second"])
    # omptensor promises the same tokens under any budget and strategy on one
    # backend: each omptensor case is also compared with omptensor-resident.
    omp_ref = next((c for c in ok if c["case"] == "omptensor-resident"), None)
    for c in cases:
        if omp_ref is not None and c["case"].startswith("omptensor") and c in ok:
            c["tokens_match_omptensor_resident"] = (
                c["tokens"] == omp_ref["tokens"][:len(c["tokens"])])
        c["reference_case"] = ref["case"] if ref else None
        if c.get("status") != "ok" or not c.get("tokens") or ref is None:
            c.setdefault("tokens_match", None)
            continue
        a, b = c["tokens"], ref["tokens"]
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        c["match_prefix"] = n
        if n < len(a) and n < len(ref.get("top2_margins") or []):
            c["reference_top2_margin_at_divergence"] = ref["top2_margins"][n]
        c["tokens_match"] = n == len(a) and len(a) <= len(b) and len(a) > 0
        tps, bound = c.get("tokens_per_second"), c.get("bound_tokens_per_second")
        c["ratio_to_bound"] = tps / bound if tps and bound else None
        peer = best.get(peer_class(c))
        c["ratio_to_best_pytorch"] = tps / peer if tps and peer else None
    return ref


def _prefix_equal(a, b):
    """Equal over the shorter one (the generate() peer decodes fewer tokens)."""
    n = min(len(a), len(b))
    return n > 0 and a[:n] == b[:n]


def finalize_batch(cases):
    """The batched cases (decode_h200.py --batches): each has batch, budget
    fraction and seq_tokens_by_id ({prompt id: tokens}). Fills
    ratio_to_bound (tokens/s / bound), ratio_to_batch1 (/ the same case
    kind's batch-1 tokens/s at the same budget: kind = the name without its
    batch), ratio_to_best_pytorch (/ the best PyTorch case at the same batch)
    and seq_match = (prompts whose tokens agree with the reference, prompts
    shared): the reference per prompt is the first ok case that ran it."""
    ok = [c for c in cases if c.get("status") == "ok" and c.get("tokens_per_second")]
    best, one, ref = {}, {}, {}
    for c in ok:
        if c["backend"] in PYTORCH_KINDS:
            best[c["batch"]] = max(best.get(c["batch"], 0), c["tokens_per_second"])
        if c["batch"] == 1:
            one.setdefault(c["kind"], c["tokens_per_second"])
        for k, t in (c.get("seq_tokens_by_id") or {}).items():
            ref.setdefault(k, (c["case"], t))
    for c in cases:
        if c not in ok:
            continue
        tps, bound = c["tokens_per_second"], c.get("bound_tokens_per_second")
        c["ratio_to_bound"] = tps / bound if bound else None
        c["ratio_to_batch1"] = tps / one[c["kind"]] if c["kind"] in one else None
        c["ratio_to_best_pytorch"] = tps / best[c["batch"]] if best.get(c["batch"]) else None
        seqs = c.get("seq_tokens_by_id") or {}
        same = {k: _prefix_equal(t, ref[k][1]) for k, t in seqs.items()}
        c["seq_match"] = (sum(same.values()), len(seqs))
        c["seq_differ"] = sorted((k for k, v in same.items() if not v), key=int)
        c["seq_reference"] = sorted({ref[k][0] for k in seqs})
    return None


def _budget(c, weight_bytes):
    b = c.get("budget_bytes")
    if b is None:
        return "none"
    return f"{100 * b / weight_bytes:.0f}% ({b / 1e9:.2f} GB)"


def _tokens_cell(c):
    if c.get("seq_match") is not None:          # a batched case: sequences that agree
        m, n = c["seq_match"]
        return f"same ({m}/{n} seqs)" if m == n else f"DIFFER ({m}/{n} seqs)"
    if c.get("tokens_match") is None:
        return "—"
    if c["tokens_match"]:
        return f"same ({len(c['tokens'])})"
    return f"DIFFER at {c['match_prefix']}/{len(c['tokens'])}"


def rows(cases, weight_bytes, extra=None):
    """One list of cells per case (status and note replace the numbers of a
    case that did not run to the end). extra: more columns after "× bound",
    (heading, key, format) each: the case's value of key, formatted (a
    format with % is a ratio)."""
    extra = extra or []
    out = []
    for c in cases:
        if c.get("status") != "ok":
            text = c.get("note") or c.get("stderr_tail") or ""
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            why = [lines[0] if c.get("note") else lines[-1]] if lines else []
            out.append([c["case"], c.get("backend", "—"), _budget(c, weight_bytes),
                        c.get("status", "?").upper()] + ["—"] * (6 + len(extra)) +
                       [why[0][:70].replace("|", "/") if why else "—"])
            continue
        out.append([c["case"], str(c.get("backend", "—")), _budget(c, weight_bytes),
                    _num(c.get("tokens_per_second")),
                    _num(c.get("ratio_to_bound"), "{:.0%}")] +
                   [_num(c.get(key), fmt) for _, key, fmt in extra] +
                   [_num(c.get("ratio_to_best_pytorch"), "{:.2f}×"),
                    _num(c.get("prefill_ms"), "{:.1f}"),
                    _gb(c.get("peak_device_bytes")),
                    _gb(c.get("cuda_mem_peak_delta_bytes")),
                    {True: "ok", False: "FAILED"}.get(c.get("budget_probe_ok"),
                                                      "inconclusive" if c.get("budget_probe") else "—"),
                    _tokens_cell(c)])
    return out


HEAD = ["case", "backend", "budget", "tokens/s", "× bound", "× best PyTorch",
        "prefill ms", "peak device (runtime)", "peak device (cudaMemGetInfo Δ)", "probe", "tokens"]


def head(extra=None):
    return HEAD[:5] + [h for h, _, _ in (extra or [])] + HEAD[5:]


def text_table(cases, weight_bytes, extra=None):
    body, top = rows(cases, weight_bytes, extra), head(extra)
    widths = [max(len(str(r[i])) for r in body + [top]) for i in range(len(top))]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths))
    return "\n".join([line(top), line(["-" * w for w in widths])] + [line(r) for r in body])


def markdown(cases, header, title="Decode on the H200: omptensor against PyTorch "
                                  "(`bench/decode_h200.py`)",
             model="Llama-2-7B shapes", extra=None, notes=(),
             peer_note="× best PyTorch: resident cases against the best resident PyTorch case, "
                       "budgeted cases against the best offloading PyTorch case.",
             workload=None):
    """workload: the sentence after the model's (default: batch 1, the
    prompt length, new tokens, greedy)."""
    w = header["weight_bytes"]
    bw = header.get("h2d_bytes_per_s")
    top = head(extra)
    out = [f"## {title}", "",
           f"{header['date']}, {header.get('gpu', 'no GPU')}, torch {header['torch']}, "
           f"transformers {header['transformers']}, accelerate {header['accelerate']}. "
           f"Model: {model}, {header['config']['num_hidden_layers']} layers, "
           f"random bf16 weights, {w / 1e9:.2f} GB; "
           + (workload or f"batch 1, prompt {header['prompt_len']} tokens, "
                          f"{header['new_tokens']} new tokens, greedy.") + " "
           f"Pinned host→device {_num(bw and bw / 1e9)} GB/s "
           f"(pageable {_num(header.get('h2d_pageable_bytes_per_s') and header['h2d_pageable_bytes_per_s'] / 1e9)} GB/s).",
           "", "    " + header["command"], "",
           "| " + " | ".join(top) + " |", "| " + " | ".join(["---"] * len(top)) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows(cases, w, extra)]
    out += ["", header["bound_formula"], "", header["tokens_per_second_definition"],
            header["memory_definition"], peer_note]
    out += [""] + list(notes) if notes else []
    return "\n".join(out)


def write_json(path, header, cases):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(header=header, cases=cases), f, indent=1, default=str)
    os.replace(tmp, path)
