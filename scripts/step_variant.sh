#!/usr/bin/env bash
# step_variant.sh NAME "FLAGS" — libomptensor.so of build/nvptx with
# src/kernels/step_gpu.c compiled with FLAGS added (its compile and link
# commands taken from the build's own compile_commands.json and ninja), as
# gpu-carry-var/NAME/libomptensor.so.0.1.xz for bench/step_variants.sh.
#   scripts/step_variant.sh t512 "-DOT_STEP_THREADS=512 -Xcuda-ptxas -maxrregcount=128"
#   scripts/step_variant.sh q8u16 -DST_Q8_U=16
# Prints the step kernel's registers, stack and shared memory (nvlink -v).
set -euo pipefail
name=${1:?usage: scripts/step_variant.sh NAME FLAGS}
flags=${2:?usage: scripts/step_variant.sh NAME FLAGS}
root=$(cd "$(dirname "$0")/.." && pwd)
b=$root/build/nvptx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$b"
obj=CMakeFiles/ot_kernels.dir/src/kernels/step_gpu.c.o
cc=$(python3 -c "
import json, sys
for e in json.load(open('compile_commands.json')):
    if e['file'].endswith('src/kernels/step_gpu.c') and '$obj' in e['command']: print(e['command']); break")
[ -n "$cc" ] || { echo "step_variant.sh: no compile command for step_gpu.c in $b" >&2; exit 2; }
eval "${cc/-o $obj/$flags -o $tmp/step.o}"
link=$(ninja -t commands libomptensor.so | grep -- '-o libomptensor.so.0.1.0 ')
link=${link#: && }
link=${link% && :}
link=${link/$obj/$tmp/step.o}
eval "${link/-o libomptensor.so.0.1.0 /-v -o $tmp/libomptensor.so.0.1 }" > "$tmp/link.log" 2>&1 ||
  { tail -20 "$tmp/link.log" >&2; exit 1; }
grep -A1 "kstep" "$tmp/link.log" | tail -n 1
mkdir -p "$root/gpu-carry-var/$name"
xz -T2 -c "$tmp/libomptensor.so.0.1" > "$root/gpu-carry-var/$name/libomptensor.so.0.1.xz"
echo "step_variant.sh: gpu-carry-var/$name ($flags)"
