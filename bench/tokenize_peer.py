#!/usr/bin/env python3
"""The peer of bench_tokenize: HF `tokenizers` on the same file, one thread
(RAYON_NUM_THREADS=1, one encode call), best of REPEATS; one JSON line."""
import json
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

tk = Tokenizer.from_file(os.path.join(sys.argv[1], "tokenizer.json"))
text = open(sys.argv[2], encoding="utf-8", newline="").read()  # bytes as they are: no CRLF translation
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
best, ids = 1e30, []
for _ in range(reps):
    t0 = time.perf_counter()
    ids = tk.encode(text, add_special_tokens=False).ids
    best = min(best, time.perf_counter() - t0)
n = len(text.encode("utf-8"))
print(json.dumps(dict(impl="hf-tokenizers", bytes=n, ids=len(ids), seconds=round(best, 6),
                      mb_per_s=round(n / best / 1e6, 2), id_sum=sum(ids))))
