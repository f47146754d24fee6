# step_cc.sh — sourced by scripts/step_regs.sh, scripts/step_sass.sh and
# scripts/step_variant.sh:
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

# step_ptx NAME BUILD OUT "FLAGS" SRC — SRC compiled to PTX at OUT as
# step_cc gives it (FLAGS added to the device-only compile); on failure the
# compiler's last lines and an exit, messages under NAME (the caller).
step_ptx() {
  local name=$1 b=$2 out=$3 flags=$4 src=$5 cc
  cc=$(step_cc "$b" "$out" "$flags --offload-device-only -S" "$src") ||
    { echo "$name: no compile command for step_gpu.c in $b (configure the nvptx preset)" >&2; exit 2; }
  (cd "$b" && eval "$cc") 2> "$out.log" || { tail -20 "$out.log" >&2; exit 1; }
}
