#!/usr/bin/env python3
"""A stand-in for `omptensor run ... --prompts IN --out OUT --batch N --json`
around an omptensor binary that predates --batch (the CPU builds): it drops
`--batch N`, runs the job one prompt after another, and adds the `batch`
object of batch.c's --json (slots, decode_tokens, decode_ms,
decode_tokens_per_second, ..., sequences) from OUT's lines. The tokens are
the real binary's; the aggregate is that of batch 1. For the CPU smoke test
of decode_h200.py --batches only:

    python3 bench/decode_h200.py --tiny --device cpu --batches 1,2 \\
        --omptensor "python3 bench/peers/batch_standin.py build/offload-host/omptensor"
"""
import json
import subprocess
import sys


def main(argv):
    real, rest = argv[0], argv[1:]
    if "--batch" not in rest:
        return subprocess.call([real] + rest)
    i = rest.index("--batch")
    slots = int(rest[i + 1])
    rest = rest[:i] + rest[i + 2:]
    out_file = rest[rest.index("--out") + 1]
    p = subprocess.run([real] + rest, stdout=subprocess.PIPE)
    if p.returncode != 0:
        sys.stdout.buffer.write(p.stdout)
        return p.returncode
    summary = json.loads(p.stdout.decode().strip().splitlines()[-1])
    lines = [json.loads(ln) for ln in open(out_file) if ln.strip()]
    tokens = sum(max(0, len(o["tokens"]) - 1) for o in lines)
    ms = sum(o["decode_ms"] for o in lines)
    summary["batch"] = dict(slots=slots, decode_tokens=tokens, decode_ms=ms,
                            decode_tokens_per_second=tokens / (ms / 1e3) if ms else 0.0,
                            prefill_steps=len(lines), prefill_ms=sum(o["prefill_ms"] for o in lines),
                            decode_steps=tokens, wall_ms=None, standin=True,
                            sequences=[dict(id=o["id"], tokens=len(o["tokens"]),
                                            tokens_per_second=o["tokens_per_second"])
                                       for o in lines])
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
