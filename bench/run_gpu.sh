#!/usr/bin/env bash
# run_gpu.sh — every benchmark on the GPU machine, in one go (< 5 min on an H200).
#
#   bench/run_gpu.sh "$OUT" [BIN_DIR]      (BIN_DIR default build-gpu)
#
# with the LLVM 19 OpenMP runtime on LD_LIBRARY_PATH where the binaries were
# not built (docs/gpu.md, "Running on a GPU machine").
#
# Runs, in order, each under a time limit, writing logs and JSON lines to OUT:
#   torch_matmul.py  same-run peers: torch.matmul fp32 (TF32 off) / bf16 at 4096^3, d2d copy
#                    -> torch_matmul.json (its numbers go to bench_kernels)
#   bench_transfer   pinned PCIe ceilings and copy/kernel overlap   -> bench_transfer.log
#   bench_kernels    per-op GB/s, TFLOP/s vs ceilings              -> bench_kernels.log, kernels.jsonl
#   bench_stream     scheduler streaming (map, usm)                 -> bench_stream.log, stream.jsonl,
#                                                                     stream-trace-*.json (Chrome traces)
# then prints a compact summary (the tables). OMP_TARGET_OFFLOAD defaults to
# MANDATORY: a binary that cannot reach the GPU fails instead of running on the host.
# Extra arguments for the benches: BK_ARGS, BS_ARGS (e.g. BS_ARGS="--dtype f32").
set -u
out=${1:?usage: bench/run_gpu.sh OUTDIR [BIN_DIR]}
bin=${2:-build-gpu}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
export OMP_TARGET_OFFLOAD=${OMP_TARGET_OFFLOAD:-MANDATORY}
t0=$SECONDS
status=()

step() { # name limit_s log cmd...
  local name=$1 limit=$2 log=$3
  shift 3
  if [ ! -x "$1" ] && ! command -v "$1" >/dev/null 2>&1; then
    status+=("$name: MISSING ($1)")
    return
  fi
  local s=$SECONDS
  timeout -k 5 "$limit" "$@" >"$log" 2>&1
  local rc=$?
  local what="rc=$rc"
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && what="TIMED OUT after ${limit}s"
  status+=("$name: $what, $((SECONDS - s)) s")
  echo "[run_gpu +$((SECONDS - t0))s] $name: $what" >&2
}

# 1. peers (defaults: docs/gpu.md's measurements, used if torch is missing or fails)
fp32=51 bf16=780
step torch_matmul 60 "$out/torch_matmul.log" python3 "$here/torch_matmul.py"
grep '^{' "$out/torch_matmul.log" | tail -1 >"$out/torch_matmul.json"
peer() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$out/torch_matmul.json" "$1" 2>/dev/null; }
v=$(peer fp32_tflops) && [ -n "$v" ] && fp32=$v
v=$(peer bf16_tflops) && [ -n "$v" ] && bf16=$v

# 2..4. the benches
step bench_transfer 30 "$out/bench_transfer.log" "$bin/bench_transfer" 1024
# shellcheck disable=SC2086
step bench_kernels 100 "$out/bench_kernels.log" "$bin/bench_kernels" --json "$out/kernels.jsonl" \
  --peer-fp32-tflops "$fp32" --peer-bf16-tflops "$bf16" ${BK_ARGS:-}
# shellcheck disable=SC2086
step bench_stream 90 "$out/bench_stream.log" "$bin/bench_stream" --json "$out/stream.jsonl" \
  --trace "$out/stream-trace.json" ${BS_ARGS:-}

# summary: the tables, without the trace summaries' detail
echo "================ run_gpu.sh summary ($(date -u +%FT%TZ), $((SECONDS - t0)) s) ================"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader 2>/dev/null
printf '%s\n' "${status[@]}"
echo "--- torch peers (TFLOP/s fp32 $fp32, bf16 $bf16)"
cat "$out/torch_matmul.json" 2>/dev/null
echo "--- bench_transfer"
grep -v '^prologue' "$out/bench_transfer.log" 2>/dev/null | tail -8
echo "--- bench_kernels"
grep -v '^omptensor:' "$out/bench_kernels.log" 2>/dev/null | tail -70
echo "--- bench_stream"
awk '/trace summary of one replay/ {skip=16} skip>0 {skip--; next} {print}' "$out/bench_stream.log" 2>/dev/null |
  grep -v '^omptensor:' | tail -30
echo "--- one trace summary per backend: $out/bench_stream.log; JSON lines: $out/*.jsonl"
