#!/usr/bin/env bash
# batch_mma_gpu.sh OUT — one device call for a batched decode step inside
# the step kernel (its GEMM rows on tensor cores, kernels/mma_gpu.h;
# OMPTENSOR_STEP_MMA), most telling first, each part under its own time
# limit and logged to OUT as it goes (a call cut short keeps what ran):
#   1. test_step_gpu (test_batch_mma: the batched step with the tensor-core
#      rows against the per-op path, cuBLAS);
#   2. bench_step --batch 32 with OMPTENSOR_STEP_MMA=1: batch 32 against
#      batch 1 in the same process (issue 44's >= 20x);
#   3. bench_step --batch 32 as the default runs it (op by op, cuBLAS);
#   4. the whole nvptx suite (default settings), SUITE_S seconds at most
#      (default 300).
# On the CPU machine first: cmake --build build/nvptx && scripts/gpu_suite.sh pack
# then, carrying .gpu and gpu-carry:
#   . .gpu/prologue.sh && bash bench/batch_mma_gpu.sh $OUT
set -u
out=${1:?usage: bench/batch_mma_gpu.sh OUT}
log=$out/batch_mma_gpu.log
. "$(dirname "$0")/parts.sh"
parts_setup bench_step
B="--layers 16 --steps 12 --batch 32 --kv-dtype bf16 --top 8"
part 70 test_step_gpu build-gpu/test_step_gpu
part 110 batch32-mma env OMPTENSOR_STEP_KERNEL=1 OMPTENSOR_STEP_MMA=1 build-gpu/bench_step $B --json "$out/logs/batch32-mma.json"
part 90 batch32-default build-gpu/bench_step $B --json "$out/logs/batch32-default.json"
PART_TAIL=6 part "${SUITE_S:-300}" suite bash scripts/gpu_suite.sh run "$out/suite"
cat "$out"/logs/*.json > "$out/batch.jsonl" 2>/dev/null
