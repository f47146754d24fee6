# step_cc.sh — sourced by scripts/step_regs.sh and scripts/step_variant.sh:
#   step_cc BUILD OUT "FLAGS" SRC
# prints BUILD's compile command of src/kernels/step_gpu.c (from its
# compile_commands.json) with FLAGS added, its output OUT and its source
# SRC (step_gpu.c itself or a changed copy), to be run with eval in BUILD;
# returns 1 where BUILD has no such command.
step_cc() {
  local b=$1 out=$2 flags=$3 src=$4 root obj cc
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  obj=CMakeFiles/ot_kernels.dir/src/kernels/step_gpu.c.o
  cc=$(cd "$b" && python3 -c "
import json
for e in json.load(open('compile_commands.json')):
    if e['file'].endswith('src/kernels/step_gpu.c') and '$obj' in e['command']: print(e['command']); break")
  [ -n "$cc" ] || return 1
  cc=${cc/-o $obj/$flags -o $out}
  cc=${cc/ -c $root\/src\/kernels\/step_gpu.c/ -c $src}
  printf '%s\n' "$cc"
}
