#!/usr/bin/env bash
# multigpu_h200x2.sh OUT — issue 26's measurements on nvidia-h200-x2 in one
# call: a batch job on the 7 GB Llama of bench/peers/model.py (7B shapes,
# 16 layers, random bf16; made once in WORK) at --batch BATCH (32), on one
# GPU and split over two (--devices 2), one step through the stages at a time
# (--micro-batches 1) and pipelined (--micro-batches 2 and 4), at
#   1.75 GB per GPU  (both GPUs offloading; one GPU at 1.75 GB the peer), and
#   3.5 GB per GPU   (the model resident on the two; one GPU resident, 16 GB, the peer).
# Pipelined cases pass --stage-copies auto (peer to peer between the GPUs
# where they reach each other); two more rows take the host path instead.
# Per case: the decode tokens/s of the job (all sequences together: its
# decode tokens over its decode time, from run --json) and the whole job's
# tokens/s of wall time (prompts included), and whether every id's tokens are
# those of the one-GPU run. Writes OUT/multigpu-h200x2.json (a list of
# objects with gpus, budget_bytes_per_gpu, batch, micro_batches,
# tokens_per_second, ...: the rows for bench/results/multigpu-h200x2.json),
# the logs, and prints the Markdown table for bench/RESULTS.md.
#
# Needs, in the working tree on the GPU machine: build-gpu/omptensor and
# build-gpu/libomptensor.so* (nvptx), .gpu/ (shared/gpu/bundle.sh), python3
# with torch + transformers (the model). CPU smoke test (emulated devices):
#   BIN=build/offload-host MODEL=tests/data/models/llama_text VOCAB=256 NEW=4 N=8 BATCH=4 \
#   LOW=300KB HIGH=600KB ONE_HIGH=1GB bash bench/multigpu_h200x2.sh OUT
set -u
out=${1:?usage: bench/multigpu_h200x2.sh OUT}
mkdir -p "$out"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
[ -n "${OT_PROLOGUE_DONE:-}" ] || { [ -f "$root/.gpu/prologue.sh" ] && . "$root/.gpu/prologue.sh" && OT_PROLOGUE_DONE=1; }
bin=${BIN:-$root/build-gpu}
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMP_TARGET_OFFLOAD=MANDATORY
exe=$bin/omptensor
WORK=${WORK:-/tmp/multigpu-bench}
NEW=${NEW:-32} N=${N:-64} BATCH=${BATCH:-32}
LOW=${LOW:-1750MB} HIGH=${HIGH:-3500MB} ONE_HIGH=${ONE_HIGH:-16GB}
mkdir -p "$WORK"
"$exe" --version || { echo "multigpu_h200x2.sh: $exe does not start" >&2; exit 1; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,memory.used --format=csv

timeout 240 python3 - "$WORK" "$NEW" "$N" "${MODEL:-}" "${VOCAB:-}" <<'PY' || { echo "multigpu_h200x2.sh: no model" >&2; exit 1; }
import json, os, random, sys
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
work, new, n, given, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
if given:
    d = given
else:
    from peers import model as M
    d = M.ensure_model(work, False, 0, "cuda", print)
    vocab = M.FULL["vocab_size"]
rng = random.Random(7919)
with open(os.path.join(work, "job.jsonl"), "w") as f:
    for i in range(n):
        k = rng.randint(min(64, 4 * new), min(128, 8 * new))
        ids = [1] + [rng.randrange(3, int(vocab)) for _ in range(k - 1)]
        f.write(json.dumps(dict(id=i, prompt_ids=ids, max_new_tokens=new)) + "\n")
open(os.path.join(work, "model_dir"), "w").write(d)
PY
model=$(cat "$WORK/model_dir")
: >"$out/cases.jsonl"

# CASE GPUS BUDGET MICRO: the job, timed; the one-GPU case of its budget row is the reference
job_case() {
  local name=$1 gpus=$2 budget=$3 micro=$4 ref=${5:-} copies=${6:-auto} o="$WORK/$1.jsonl" lim
  rm -f "$o"
  lim=$budget
  [ "$gpus" = 2 ] && lim="0:$budget,1:$budget"
  local args=(run "$model" --prompts "$WORK/job.jsonl" --out "$o" --batch "$BATCH" --gpu-memory-limit "$lim"
              --offload aggressive --greedy --json)
  [ "$gpus" = 2 ] && args+=(--devices 2 --micro-batches "$micro")
  [ "$gpus" = 2 ] && [ "$micro" -gt 1 ] && args+=(--stage-copies "$copies")
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout -k 5 300 "$exe" "${args[@]}" >"$out/$name.json" 2>"$out/$name.log"
  rc=$?
  t1=$(date +%s.%N)
  python3 - "$name" "$gpus" "$budget" "$micro" "$rc" "$t0" "$t1" "$o" "$out/$name.json" "$BATCH" "$copies" \
    "${ref:+$WORK/$ref.jsonl}" >>"$out/cases.jsonl" <<'PY'
import json, re, sys
name, gpus, budget, micro, rc, t0, t1, path, js, batch, copies, ref = sys.argv[1:]
def size(s):
    m = re.fullmatch(r"([0-9.]+)\s*([KMG]?)B?", s.strip(), re.I)
    return int(float(m[1]) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m[2].upper()])
def toks(p):
    try:
        return {json.loads(l)["id"]: json.loads(l)["tokens"] for l in open(p)}
    except FileNotFoundError:
        return {}
got = toks(path)
n_tok = sum(len(t) for t in got.values())
try:
    j = json.load(open(js)); b = j.get("batch", {})
except Exception:
    j, b = {}, {}
dec = b.get("decode_tokens", 0) / (b["decode_ms"] / 1e3) if b.get("decode_ms") else None
wall = float(t1) - float(t0)
same = None
if ref:
    r = toks(ref); same = bool(r) and all(got.get(k) == v for k, v in r.items())
print(json.dumps(dict(case=name, gpus=int(gpus), budget_bytes_per_gpu=size(budget), batch=int(batch),
                      micro_batches=int(micro), stage_copies=copies if int(gpus) > 1 and int(micro) > 1 else None,
                      rc=int(rc), tokens_per_second=round(dec, 2) if dec else None,
                      job_tokens_per_second=round(n_tok / wall, 2) if wall > 0 else None, prompts=len(got),
                      tokens=n_tok, peak_device_bytes=j.get("peak_device_bytes"), same_tokens_as_one_gpu=same)))
PY
  tail -1 "$out/cases.jsonl"
}
job_case g1_low 1 "$LOW" 1
for m in 1 2 4; do job_case "g2_low_m$m" 2 "$LOW" "$m" g1_low; done
job_case g1_resident 1 "$ONE_HIGH" 1
for m in 1 2 4; do job_case "g2_high_m$m" 2 "$HIGH" "$m" g1_resident; done
# activations between the GPUs through pinned host memory instead of peer to peer (--stage-copies)
job_case g2_low_m2_host 2 "$LOW" 2 g1_low host
job_case g2_high_m4_host 2 "$HIGH" 4 g1_resident host

python3 - "$out/cases.jsonl" "$out/multigpu-h200x2.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
json.dump(rows, open(sys.argv[2], "w"), indent=1)
peer = {}
print("\n| case | GPUs | budget per GPU | batch | micro-batches | stage copies | decode tokens/s | vs one GPU | job tokens/s | same tokens |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    if r["gpus"] == 1:
        peer = r
    t, p = r["tokens_per_second"], peer.get("tokens_per_second")
    ratio = f"{t / p:.2f}x" if t and p else ""
    print(f"| {r['case']} | {r['gpus']} | {r['budget_bytes_per_gpu'] / 1e9:g} GB | {r['batch']} | {r['micro_batches']} | "
          f"{r.get('stage_copies') or ''} | "
          f"{t} | {ratio} | {r['job_tokens_per_second']} | {r['same_tokens_as_one_gpu']} |")
PY
