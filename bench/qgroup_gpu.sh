#!/usr/bin/env bash
# qgroup_gpu.sh OUT — one device call for the q8b/q4b rows read 16 bytes a
# lane (src/kernels/qgroup.h), most telling first, each part under its own
# time limit and logged to OUT as it goes (a call cut short keeps what ran):
#   1. the per-op path with it (OMPTENSOR_GEMV_QG=1): the tests that run
#      q8b/q4b GEMVs on the GPU (test_k_matmul, test_model_quant,
#      test_model_gguf, test_step_gpu's per-op side);
#   2. bench_kernels --only matvec without and with it: each dtype's time
#      per call and share of the copy ceiling (the issue's >= 75 % target);
#   3. bench/step_variants.sh for q8b and q4b: the qg variant (the step
#      kernel built with ST_QG=1; its test_step_gpu first) and the
#      load-only variants (q8b-ld/q4b-ld: today's loads without their
#      arithmetic; q8b-ld16/q4b-ld16: the same bytes as 16-byte loads),
#      each beside the default build, ncu on the default q8b/q4b kernels.
# On the CPU machine first:
#   cmake --build build/nvptx && scripts/gpu_suite.sh pack
#   python3 bench/step_loadonly.py /tmp/ld
#   for v in q8b-ld q4b-ld q8b-ld16 q4b-ld16; do SRC=/tmp/ld/$v.c scripts/step_variant.sh $v -DOT_STEP_LOADONLY; done
#   scripts/step_variant.sh qg -DST_QG=1
# then, carrying .gpu, gpu-carry and gpu-carry-var:
#   . .gpu/prologue.sh && bash bench/qgroup_gpu.sh $OUT
set -u
out=${1:?usage: bench/qgroup_gpu.sh OUT}
log=$out/qgroup_gpu.log
PART_TAIL=12
. "$(dirname "$0")/parts.sh"
parts_setup bench_kernels
for t in test_k_matmul test_model_quant test_model_gguf test_step_gpu; do
  part 120 "gemv_qg-$t" env OMPTENSOR_GEMV_QG=1 "build-gpu/$t"
done
part 120 matvec-default build-gpu/bench_kernels --only matvec --json "$out/logs/matvec-default.json"
part 120 matvec-qg env OMPTENSOR_GEMV_QG=1 build-gpu/bench_kernels --only matvec --json "$out/logs/matvec-qg.json"
VARIANTS=${VARIANTS:-"qg q8b-ld q4b-ld q8b-ld16 q4b-ld16"} TEST_VARIANTS=${TEST_VARIANTS:-qg} DTYPES="q8b q4b" \
  BATCH=0 bash bench/step_variants.sh "$out/var" 2>&1 | tee -a "$log"
cat "$out"/logs/*.json > "$out/matvec.jsonl" 2>/dev/null
