#!/usr/bin/env bash
# step_variants.sh OUT — the step kernel's build-time knobs compared in one
# device call, each against the default build measured in the same call:
#   OT_STEP_THREADS=512 with ptxas -maxrregcount=128 (16 warps per
#   multiprocessor instead of 8, registers spilled where 128 do not do),
#   ST_Q8_U=16 and 32 (q8b blocks a lane has in flight; default 8);
#   ST_Q4_PAIRED=1 (q4b rows read as pairs of blocks, 9 aligned words);
#   ST_QG=1 (q8b and q4b rows read 16 bytes a lane in 144-byte groups,
#   kernels/qgroup.h: scripts/step_variant.sh qg -DST_QG=1);
# each first through tests/test_step_gpu (TEST_VARIANTS, default all);
# then Nsight Compute on the default build's q8b and q4b step kernel
# (2 layers), and bench_step --batch 32.
#
# Each variant is bench_step and test_step_gpu linked with step_gpu.c
# compiled another way (scripts/step_variant.sh NAME FLAGS), carried as
# gpu-carry-var/NAME/bin.tar.xz beside the default build
# (scripts/gpu_suite.sh pack, carried as gpu-carry/) and the runtime bundle:
#   . .gpu/prologue.sh && bash bench/step_variants.sh $OUT
# VARIANTS (default: every one carried), DTYPES (default "bf16 q8b q4b"),
# NCU=0 and BATCH=0 skip parts. A variant named DTYPE-NAME (bf16-ld, made
# by bench/step_loadonly.py: the loads without their arithmetic, wrong
# results) runs for that dtype only; leave such variants out of
# TEST_VARIANTS.
set -u
out=${1:?usage: bench/step_variants.sh OUT}
mkdir -p "$out/logs" build-gpu
[ -x build-gpu/bench_step ] || tar -C build-gpu -xJf gpu-carry/nvptx.tar.xz
export OMP_TARGET_OFFLOAD=MANDATORY OT_TEST_DATA=$PWD/tests/data
base_ld=$PWD/build-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
log=$out/step_variants.log
say() { echo "$@" | tee -a "$log"; }
part() { # part SECONDS NAME LIBDIR COMMAND...
  local limit=$1 name=$2 lib=$3
  shift 3
  say "=== $name"
  local bin=$1
  shift
  [ -n "$lib" ] && bin=$lib/$(basename "$bin") # the variant's own binary (they link libomptensor statically)
  LD_LIBRARY_PATH=$base_ld timeout "$limit" "$bin" "$@" > "$out/logs/$name.log" 2>&1
  local rc=$?
  grep -E "step|tokens/s|busy|kernel|host|OK|FAIL|diff" "$out/logs/$name.log" | head -n 16 | tee -a "$log"
  say "=== $name rc=$rc"
}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>&1 | tee -a "$log"
vars=${VARIANTS:-$(ls gpu-carry-var 2>/dev/null)}
for v in $vars; do
  mkdir -p "build-var/$v"
  tar -C "build-var/$v" -xJf "gpu-carry-var/$v/bin.tar.xz"
done
for v in ${TEST_VARIANTS-$vars}; do # the step kernel against the per-op path, every dtype
  part 120 "$v-test_step_gpu" "$PWD/build-var/$v" build-gpu/test_step_gpu
done
for d in ${DTYPES:-bf16 q8b q4b}; do
  part 45 "default-$d" "" build-gpu/bench_step --layers 16 --dtype "$d" --top 4 --json "$out/logs/default-$d.json"
  for v in $vars; do
    case "$v:$d" in q8u*:bf16 | q8u*:q4b | q4*:bf16 | q4*:q8b | qg*:bf16) continue ;; esac # a dtype's knob changes that dtype only
    case "$v" in bf16-* | q8b-* | q4b-*) [ "${v%%-*}" = "$d" ] || continue ;; esac # DTYPE-NAME: that dtype only
    part 45 "$v-$d" "$PWD/build-var/$v" build-gpu/bench_step --layers 16 --dtype "$d" --top 4 \
      --json "$out/logs/$v-$d.json"
  done
done
if [ "${NCU:-1}" != 0 ]; then
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  for d in q8b q4b; do
    say "=== ncu-$d"
    # the step kernel's launch inside bench_step's profiled decode step (its
    # NVTX range): counted launches (--launch-skip 3) landed on a quantized
    # model's prompt, whose f32 norms run as one-instruction launches (8.5-10.7
    # us each; its GEMMs take the portable kernel), never on a decode step
    LD_LIBRARY_PATH=$base_ld timeout 150 "$ncu" --target-processes all --nvtx --nvtx-include "bench_step_decode/" \
      -k regex:kstep --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
      --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis --section SourceCounters \
      build-gpu/bench_step --layers 16 --steps 5 --prompt 128 --top 0 --dtype "$d" > "$out/logs/ncu-$d.txt" 2>&1
    say "=== ncu-$d rc=$? ($(wc -l < "$out/logs/ncu-$d.txt") lines)"
  done
fi
if [ "${BATCH:-1}" != 0 ]; then
  part 90 batch32 "" build-gpu/bench_step --layers 16 --steps 12 --batch 32 --json "$out/logs/batch32.json"
fi
cat "$out"/logs/*.json > "$out/steps.jsonl" 2>/dev/null
(cd "$out" && tar czf logs.tgz logs && rm -rf logs)
