#!/usr/bin/env bash
# step_regs.sh [FLAGS] — the step kernel's registers, stack frame and spills
# as ptxas reports them, on the CPU machine: src/kernels/step_gpu.c (or
# SRC=FILE, a changed copy) compiled to PTX with build/nvptx's compile
# command plus FLAGS, then ptxas -v for sm_90 (CUDA 13's ptxas, or PTXAS=).
#   scripts/step_regs.sh                       # the build as it is
#   scripts/step_regs.sh -DST_Q4_PAIRED=0      # a build-time knob
#   SRC=/tmp/v.c scripts/step_regs.sh          # a changed copy
# 2026-12-07, main: 255 registers, 384 bytes stack frame, 160 bytes spill
# stores, 268 spill loads; with the q4 and q8b GEMV paths cut out still 255
# and 132 / 216. These are static totals; which loops the spills are in:
# scripts/step_sass.sh (the build's own ptxas 11.8 reports 136 / 220).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
b=$root/build/nvptx
ptxas=${PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
[ -x "$ptxas" ] || { echo "step_regs.sh: no ptxas (give PTXAS=/path/to/ptxas: the CUDA toolkit's)" >&2; exit 2; }
src=$(realpath "${SRC:-$root/src/kernels/step_gpu.c}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$root/scripts/step_cc.sh"
step_ptx step_regs.sh "$b" "$tmp/step.s" "$*" "$src"
"$ptxas" -c -v -arch=sm_90 -O3 "$tmp/step.s" -o "$tmp/step.o" 2>&1 | grep -A2 "properties for .*kstep_run" | tail -2
