#!/usr/bin/env python3
"""Kernel time per op from an omptensor Chrome trace (--trace FILE): the
sum, count and mean of the kernel events by name, largest first, and the
span of the compute lane. Stdlib only; reads .json or .json.gz.

    python3 bench/trace_kernels.py trace.json [--top 30]
"""
import argparse
import collections
import gzip
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--by-tensor", action="store_true", help="one row per op(tensor), not per op")
    a = ap.parse_args()
    opener = gzip.open if a.trace.endswith(".gz") else open
    with opener(a.trace, "rt") as f:
        doc = json.load(f)
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    ks = [e for e in ev if e.get("cat") == "kernel" and e.get("ph") == "X"]
    if not ks:
        print("no kernel events")
        return 1
    tot = collections.defaultdict(float)
    cnt = collections.Counter()
    for e in ks:
        name = e["name"] if a.by_tensor else e["name"].split("(")[0]
        tot[name] += e["dur"]
        cnt[name] += 1
    span = max(e["ts"] + e["dur"] for e in ks) - min(e["ts"] for e in ks)
    busy = sum(tot.values())
    print(f"kernels: {len(ks)}, busy {busy / 1e3:.2f} ms of a {span / 1e3:.2f} ms span")
    print(f"{'op':32s} {'ms':>9s} {'calls':>6s} {'us/call':>9s} {'share':>6s}")
    for name, t in sorted(tot.items(), key=lambda kv: -kv[1])[: a.top]:
        print(f"{name:32s} {t / 1e3:9.2f} {cnt[name]:6d} {t / cnt[name]:9.1f} {100 * t / busy:5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
