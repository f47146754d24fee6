#!/usr/bin/env bash
# mpi_h200.sh OUT — issue 25's measurements on the one-GPU machine in one
# call: 2 MPI ranks sharing the GPU (half the budget each) against 1 rank.
#   1. batch inference: a 256-prompt job (ids, 64..128 tokens, NEW=32 new
#      tokens each) on bench/peers/model.py's Llama (7B shapes, 16 layers,
#      random bf16, ~7 GB; made once on the GPU in WORK), at --batch 1 and
#      --batch BATCH (8): 1 rank under BUDGET (16GB), 2 ranks under BUDGET/2
#      each; wall time, tokens/s of the job, and the two outputs compared
#      (every id once, the same tokens);
#   2. data-parallel training: GPT-2 124M (--init random) at T = SEQ (512),
#      a global batch of 2 x 4 sequences: 1 process --accum 2 (plain, and
#      --grad-reduce ordered: the reduction's code on one rank) against 2
#      ranks --accum 1 under TRAIN_BUDGET/2 each; per step: ms, and the
#      reduction's time on the comm thread, the part the step waited for and
#      the staging copies (--json grad_reduce_per_step): the all-reduce share.
# Prints one line per case and the Markdown rows for bench/RESULTS.md;
# writes mpi-h200.json and the logs to OUT.
#
# Needs, in the working tree on the GPU machine:
#   build-gpu/omptensor, build-gpu/libomptensor.so*   an nvptx build with -DOT_MPI=ON
#   .gpu/  (shared/gpu/bundle.sh: the LLVM OpenMP runtime, jansson, yaml; sourced here if not yet)
#   .mpi/  (bench/mpi_bundle.sh .mpi: Open MPI's mpirun, orted, libmpi, plugins, PMIx, hwloc, libevent)
# and python3 with torch + transformers (the model; the GPU machine has them).
set -u
out=${1:?usage: bench/mpi_h200.sh OUT}
mkdir -p "$out"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
[ -n "${OT_PROLOGUE_DONE:-}" ] || { [ -f "$root/.gpu/prologue.sh" ] && . "$root/.gpu/prologue.sh" && OT_PROLOGUE_DONE=1; }
if ! command -v orterun >/dev/null 2>&1; then
  [ -f "$root/.mpi/ompi-env.sh" ] || { echo "mpi_h200.sh: no mpirun here and no .mpi/ (bench/mpi_bundle.sh .mpi)" >&2; exit 1; }
  OT_MPI_BUNDLE=$root/.mpi . "$root/.mpi/ompi-env.sh"
fi
export LD_LIBRARY_PATH=${BIN:-$root/build-gpu}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMP_TARGET_OFFLOAD=MANDATORY
exe=${BIN:-$root/build-gpu}/omptensor # BIN: another build folder (a CPU smoke test)
# root on the GPU machine; 2 ranks on one GPU; no binding (each rank's OpenMP threads and spinning GPU wait)
mpirun_=(orterun --allow-run-as-root --oversubscribe --bind-to none)
WORK=${WORK:-/tmp/mpi-bench}
NEW=${NEW:-32}
BATCH=${BATCH:-8}
BUDGET_GB=${BUDGET_GB:-16}
TRAIN_BUDGET_GB=${TRAIN_BUDGET_GB:-16}
SEQ=${SEQ:-512}
ONLY=${ONLY:-} # batch | train: one half of the run (each fits one 600 s device call); both when empty
mkdir -p "$WORK"
"$exe" --version || { echo "mpi_h200.sh: $exe does not start" >&2; exit 1; }
half() { python3 -c "print(f'{$1 / 2:g}GB')"; }

# ---- 1. the model and the prompts (MODEL=DIR VOCAB=N: another model, e.g. a CPU smoke test) ----
timeout 240 python3 - "$WORK" "$NEW" "${MODEL:-}" "${VOCAB:-}" <<'EOF' || { echo "mpi_h200.sh: no model" >&2; exit 1; }
import json, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
work, new, given, vocab = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
if given:
    d = given
else:
    from peers import model as M
    d = M.ensure_model(work, False, 0, "cuda", print)
    vocab = M.FULL["vocab_size"]
import random
rng = random.Random(7919)  # peers.model.write_batch_prompts' kind of set, without needing torch here
path = os.path.join(work, "prompts.jsonl")
with open(path, "w") as f:
    for i in range(256):
        n = rng.randint(64, 128)
        f.write(json.dumps(dict(id=i, prompt_ids=[1] + [rng.randrange(3, int(vocab)) for _ in range(n - 1)])) + "\n")
with open(path) as f, open(os.path.join(work, "job.jsonl"), "w") as g:  # every prompt NEW new tokens
    for line in f:
        o = json.loads(line); o["max_new_tokens"] = new; g.write(json.dumps(o) + "\n")
open(os.path.join(work, "model_dir"), "w").write(d)
EOF
model=$(cat "$WORK/model_dir")

results=()
# batch CASE RANKS BUDGET BATCHN: the whole job, timed
batch_case() {
  local name=$1 ranks=$2 budget=$3 bn=$4 o="$WORK/$1.jsonl" t0 t1 rc
  rm -f "$o"
  local args=(run "$model" --prompts "$WORK/job.jsonl" --out "$o" --gpu-memory-limit "$budget" --greedy --json)
  [ "$bn" -gt 1 ] && args+=(--batch "$bn")
  t0=$(date +%s.%N)
  if [ "$ranks" = 1 ]; then timeout -k 5 200 "$exe" "${args[@]}" >"$out/$name.json" 2>"$out/$name.log"
  else timeout -k 5 200 "${mpirun_[@]}" -n "$ranks" "$exe" "${args[@]}" >"$out/$name.json" 2>"$out/$name.log"; fi
  rc=$?
  t1=$(date +%s.%N)
  python3 - "$name" "$ranks" "$budget" "$bn" "$rc" "$t0" "$t1" "$o" >>"$out/cases.jsonl" <<'EOF'
import json, sys
name, ranks, budget, bn, rc, t0, t1, path = sys.argv[1:]
toks, ids = 0, set()
try:
    for line in open(path):
        o = json.loads(line); ids.add(o["id"]); toks += len(o["tokens"])
except FileNotFoundError:
    pass
wall = float(t1) - float(t0)
print(json.dumps(dict(case=name, kind="batch", ranks=int(ranks), budget_per_rank=budget, batch=int(bn), rc=int(rc),
                      wall_s=round(wall, 2), prompts=len(ids), tokens=toks,
                      tokens_per_second=round(toks / wall, 1) if wall > 0 else 0)))
EOF
  tail -1 "$out/cases.jsonl"
}
[ "$ONLY" = train ] || for bn in 1 "$BATCH"; do
  batch_case "b${bn}_r1" 1 "${BUDGET_GB}GB" "$bn"
  batch_case "b${bn}_r2" 2 "$(half "$BUDGET_GB")" "$bn"
  # the same tokens for every id, whoever ran it
  python3 - "$WORK/b${bn}_r1.jsonl" "$WORK/b${bn}_r2.jsonl" <<'EOF'
import json, os, sys
a, b = ({json.loads(l)["id"]: json.loads(l)["tokens"] for l in open(p)} if os.path.exists(p) else {} for p in sys.argv[1:])
same = sum(a[k] == b.get(k) for k in a)
print(f"outputs: {len(a)} ids by 1 rank, {len(b)} by 2 ranks, {same} with the same tokens")
EOF
done

# ---- 2. data-parallel training ----
python3 - "$WORK/tokens.npy" "${TRAIN_VOCAB:-50257}" <<'EOF'
import struct, sys
n, v = 400000, int(sys.argv[2])  # a .npy of int32 ids, without numpy
h = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % n
h += " " * (117 - len(h)) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode())
    f.write(struct.pack("<%di" % n, *((i * 7919) % v for i in range(n))))
EOF
train_case() { # NAME RANKS BUDGET ACCUM EXTRA...
  local name=$1 ranks=$2 budget=$3 accum=$4
  shift 4
  local args=(train "${TRAIN_MODEL:-$root/bench/models/gpt2-124m}" --init random --no-dropout --data "$WORK/tokens.npy" --batch 4
              --seq "$SEQ" --accum "$accum" --steps 6 --gpu-memory-limit "$budget" --json "$@")
  if [ "$ranks" = 1 ]; then timeout -k 5 150 "$exe" "${args[@]}" >"$out/$name.json" 2>"$out/$name.log"
  else timeout -k 5 150 "${mpirun_[@]}" -n "$ranks" "$exe" "${args[@]}" >"$out/$name.json" 2>"$out/$name.log"; fi
  local rc=$?
  python3 - "$name" "$ranks" "$budget" "$rc" "$out/$name.json" >>"$out/cases.jsonl" <<'EOF'
import json, sys
name, ranks, budget, rc, path = sys.argv[1:]
try:
    o = json.load(open(path))
except Exception:
    o = {}
steps = o.get("steps", [])
ms = [s["ms"] for s in steps[1:]] or [s["ms"] for s in steps]
step_ms = sum(ms) / len(ms) if ms else 0
g = o.get("grad_reduce_per_step", {})
r2 = lambda x: None if x is None else round(x, 2)
print(json.dumps(dict(case=name, kind="train", ranks=int(ranks), budget_per_rank=budget, rc=int(rc),
                      step_ms=round(step_ms, 1), tokens_per_second=o.get("tokens_per_second"),
                      losses=[round(s["loss"], 5) for s in steps], grad_reduce=r2(g.get("reduce_ms")),
                      grad_wait=r2(g.get("wait_ms")), grad_copy=r2(g.get("copy_ms")), grad_bytes=g.get("bytes"),
                      reduce_share=round(g["reduce_ms"] / step_ms, 3) if g and step_ms else None,
                      exposed_share=round((g["wait_ms"] + g["copy_ms"]) / step_ms, 3) if g and step_ms else None)))
EOF
  tail -1 "$out/cases.jsonl"
}
[ "$ONLY" = batch ] || {
train_case t_r1 1 "${TRAIN_BUDGET_GB}GB" 2
train_case t_r1_ordered 1 "${TRAIN_BUDGET_GB}GB" 2 --grad-reduce ordered
train_case t_r2 2 "$(half "$TRAIN_BUDGET_GB")" 1
train_case t_r2_allreduce 2 "$(half "$TRAIN_BUDGET_GB")" 1 --grad-reduce allreduce
}

# ---- the table ----
python3 - "$out/cases.jsonl" "$out/mpi-h200.json" <<'EOF'
import json, sys
cases = [json.loads(l) for l in open(sys.argv[1])]
json.dump(cases, open(sys.argv[2], "w"), indent=1)
print("\n| batch job (256 prompts) | ranks | budget per rank | --batch | wall s | tokens/s |")
print("| --- | --- | --- | --- | --- | --- |")
for c in cases:
    if c["kind"] == "batch":
        print(f"| {c['case']} | {c['ranks']} | {c['budget_per_rank']} | {c['batch']} | {c['wall_s']} | "
              f"{c['tokens_per_second']}{'' if c['rc'] == 0 else ' (rc %d)' % c['rc']} |")
print("\n| training step (GPT-2 124M, 8 x T seqs) | ranks | step ms | reduce ms (comm thread) | waited ms | copies ms | reduce share | exposed share |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for c in cases:
    if c["kind"] == "train":
        print(f"| {c['case']} | {c['ranks']} | {c['step_ms']} | {c['grad_reduce']} | {c['grad_wait']} | "
              f"{c['grad_copy']} | {c['reduce_share']} | {c['exposed_share']}{'' if c['rc'] == 0 else ' (rc %d)' % c['rc']} |")
EOF
