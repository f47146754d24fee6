#!/usr/bin/env bash
# step_sass.sh [FLAGS] — the step kernel's SASS on the CPU machine, loop by
# loop: src/kernels/step_gpu.c (or SRC=FILE) compiled with build/nvptx's
# command plus FLAGS and line tables, assembled by the build's own ptxas
# (toolchain/cuda-11.8) and disassembled by its nvdisasm (scripts/setup.sh
# --gpu fetches both), then scripts/step_sass.py: per loop its loads, FFMA
# and local-memory traffic with the source lines. Where a GPU is not to be
# had, it tells whether a change's hot loops spill.
#   scripts/step_sass.sh                 # the build as it is
#   scripts/step_sass.sh -DST_QG=1       # a build-time knob
#   KEEP=/tmp/step.sass scripts/step_sass.sh   # also keep the disassembly
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
b=$root/build/nvptx
tc=$root/toolchain/cuda-11.8/bin
[ -x "$tc/nvdisasm" ] || { echo "step_sass.sh: no $tc/nvdisasm (run scripts/setup.sh --gpu)" >&2; exit 2; }
src=$(realpath "${SRC:-$root/src/kernels/step_gpu.c}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$root/scripts/step_cc.sh"
step_ptx step_sass.sh "$b" "$tmp/step.s" "$* -gline-tables-only" "$src"
"$tc/ptxas" -c -arch=sm_90 -O3 -lineinfo -v "$tmp/step.s" -o "$tmp/step.cubin" 2>&1 | grep -A2 "properties for .*kstep_run" | tail -2
"$tc/nvdisasm" -g -c "$tmp/step.cubin" > "$tmp/step.sass"
[ -z "${KEEP:-}" ] || cp "$tmp/step.sass" "$KEEP"
python3 "$root/scripts/step_sass.py" "$tmp/step.sass" kstep
