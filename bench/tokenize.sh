#!/usr/bin/env bash
# tokenize.sh [BUILD] — tokenizing 1 MiB of mixed text: omptensor (bench_tokenize)
# against HF tokenizers (bench/tokenize_peer.py, needs `pip install tokenizers`)
# in the same call, for each reference tokenizer family in tests/data/tokenizers.
# The text: the families' corpus and test texts repeated to 1 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build/offload-host}
txt=$(mktemp)
python3 - "$txt" <<'PY'
import json, sys
parts = [open("tests/data/tokenizers/corpus.txt", encoding="utf-8", newline="").read()]
parts += [c["text"] for c in json.load(open("tests/data/tokenizers/llama3_style/expected.json"))["cases"]]
chunk = "\n".join(parts) + "\n"
text = (chunk * (1048576 // len(chunk.encode()) + 1))
data = text.encode()[:1048576].decode("utf-8", "ignore")
open(sys.argv[1], "w", encoding="utf-8", newline="").write(data)
PY
for d in tests/data/tokenizers/*/; do
  fam=$(basename "$d")
  # tokenizer.json alone on both sides: the peer (HF `tokenizers`) does not
  # read tokenizer_config.json, which a folder would add for us
  ours=$("$b/bench/bench_tokenize" "$d/tokenizer.json" "$txt" 5)
  peer=$(python3 bench/tokenize_peer.py "$d" "$txt" 5)
  python3 - "$fam" "$ours" "$peer" <<'PY'
import json, sys
o, p = json.loads(sys.argv[2]), json.loads(sys.argv[3])
same = "same ids" if (o["ids"], o["id_sum"]) == (p["ids"], p["id_sum"]) else "IDS DIFFER"
print(f"{sys.argv[1]:20s} omptensor {o['mb_per_s']:7.2f} MB/s  HF tokenizers {p['mb_per_s']:7.2f} MB/s  "
      f"ratio {o['mb_per_s'] / p['mb_per_s']:.2f}x  ({o['bytes']} bytes, {o['ids']} ids, {same})")
PY
done
rm -f "$txt"
