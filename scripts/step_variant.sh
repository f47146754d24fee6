#!/usr/bin/env bash
# step_variant.sh NAME "FLAGS" — bench_step and test_step_gpu of
# build/nvptx with src/kernels/step_gpu.c compiled with FLAGS added (compile
# and link commands taken from the build's compile_commands.json and
# ninja), as gpu-carry-var/NAME/bin.tar.xz for bench/step_variants.sh.
#   scripts/step_variant.sh t512 "-DOT_STEP_THREADS=512 -Xcuda-ptxas -maxrregcount=128"
#   scripts/step_variant.sh q8u16 -DST_Q8_U=16
# SRC=FILE compiles FILE (beside step_gpu.c, e.g. a copy with a measurement
# change: loads without their arithmetic) in its place.
# Prints the step kernel's registers, stack and shared memory (nvlink -v).
set -euo pipefail
name=${1:?usage: scripts/step_variant.sh NAME FLAGS}
flags=${2:?usage: scripts/step_variant.sh NAME FLAGS}
root=$(cd "$(dirname "$0")/.." && pwd)
b=$root/build/nvptx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$b"
. "$root/scripts/step_cc.sh"
cc=$(step_cc "$b" "$tmp/step.o" "$flags" "$(realpath "${SRC:-$root/src/kernels/step_gpu.c}")") ||
  { echo "step_variant.sh: no compile command for step_gpu.c in $b" >&2; exit 2; }
eval "$cc"
# the binaries link libomptensor.a: the archive with this step_gpu.c.o in
# place of the build's, then bench_step and test_step_gpu linked against it
mkdir -p "$tmp/m" "$root/gpu-carry-var/$name"
cp libomptensor.a "$tmp/libomptensor.a"
cp "$tmp/step.o" "$tmp/m/step_gpu.c.o"
ar r "$tmp/libomptensor.a" "$tmp/m/step_gpu.c.o"
for t in bench/bench_step tests/test_step_gpu; do
  link=$(ninja -t commands "$t" | tail -n 1)
  link=${link#: && }
  link=${link% && :}
  link=${link// libomptensor.a / $tmp/libomptensor.a }
  eval "${link/-o $t /-v -o $tmp/$(basename "$t") }" > "$tmp/link.log" 2>&1 || { tail -20 "$tmp/link.log" >&2; exit 1; }
  grep -A1 "kstep" "$tmp/link.log" | tail -n 1
done
tar -C "$tmp" -cJf "$root/gpu-carry-var/$name/bin.tar.xz" bench_step test_step_gpu
echo "step_variant.sh: gpu-carry-var/$name ($flags)"
