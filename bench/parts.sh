# parts.sh — sourced by bench/step_h200.sh and bench/qgroup_gpu.sh once they
# have set `out` and `log`:
#   parts_setup BIN          out/logs made, the build unpacked into build-gpu/
#                            (scripts/gpu_suite.sh pack, carried as gpu-carry/)
#                            unless build-gpu/BIN is there, the
#                            environment every part runs in, and the GPU
#                            (name, memory in use) to stdout and the log
#   say TEXT...              to stdout and the log
#   part SECONDS NAME CMD... CMD under a time limit, its output to
#                            out/logs/NAME.log, its last PART_TAIL lines
#                            (default 25) and its exit status to stdout and
#                            the log (a call cut short keeps what ran)
say() { echo "$@" | tee -a "$log"; }
part() {
  local limit=$1 name=$2
  shift 2
  say "=== $name"
  timeout "$limit" "$@" > "$out/logs/$name.log" 2>&1
  local rc=$?
  tail -n "${PART_TAIL:-25}" "$out/logs/$name.log" | tee -a "$log"
  say "=== $name rc=$rc"
}
parts_setup() {
  mkdir -p "$out/logs" build-gpu
  [ -x "build-gpu/$1" ] || tar -C build-gpu -xJf gpu-carry/nvptx.tar.xz
  export OMP_TARGET_OFFLOAD=MANDATORY OT_TEST_DATA=$PWD/tests/data
  export LD_LIBRARY_PATH=$PWD/build-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>&1 | tee -a "$log"
}
