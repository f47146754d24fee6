#!/usr/bin/env bash
# step_h200.sh OUT — issue 44's first GPU call, most telling first, every
# part under its own time limit and logged to OUT as it goes (a call cut
# short keeps what ran):
#   1. tests/test_step_gpu (the step kernel against the per-op path) and
#      tests/test_gpu_helpers (the helper miscompile's reduction);
#   2. bench_step on the 7 GB model (16 layers, bf16) with the step kernel
#      off and on (UNROLLS="4 8 16": also with 4, 8 and 16 loads in flight
#      per lane; default 8 only): busy fraction, tokens/s, share of the
#      measured HBM ceiling, where the host's time goes; then q8b and q4b
#      off and on (QUANT_KS="1": on only); then --batch 32 (resident batch
#      32 against batch 1, f32 and bf16 KV caches: BATCH_KV; BATCH=0 skips it);
#   3. the whole nvptx suite with OMPTENSOR_STEP_KERNEL=1 (SUITE=0 skips it;
#      ~290 s on the H100: SUITE_LIMIT, default 300).
# LAYERS=N changes the model's depth (a CPU smoke test of the script:
#   mkdir -p build-gpu && ln -sf ../build/offload-host/tests/test_* ../build/offload-host/bench/bench_step build-gpu/
#   LAYERS=1 SUITE=0 bash bench/step_h200.sh /tmp/st)
# Needs build-gpu/ (scripts/gpu_suite.sh pack, carried as gpu-carry/) and
# the runtime bundle:
#   . .gpu/prologue.sh && bash bench/step_h200.sh $OUT
set -u
out=${1:?usage: bench/step_h200.sh OUT}
log=$out/step_h200.log
. "$(dirname "$0")/parts.sh"
parts_setup bench_step
part 90 test_step_gpu build-gpu/test_step_gpu
part 60 test_gpu_helpers build-gpu/test_gpu_helpers
layers=${LAYERS:-16}
part 45 bench_step-bf16-k0 env OMPTENSOR_STEP_KERNEL=0 build-gpu/bench_step --layers "$layers" --dtype bf16 \
  --top 12 --json "$out/logs/step-bf16-k0.json"
for u in ${UNROLLS:-8}; do
  part 45 "bench_step-bf16-k1-u$u" env OMPTENSOR_STEP_KERNEL=1 build-gpu/bench_step --layers "$layers" --dtype bf16 \
    --step-unroll $u --top 12 --json "$out/logs/step-bf16-k1-u$u.json"
done
for d in q8b q4b; do
  for k in ${QUANT_KS:-0 1}; do
    part 40 "bench_step-$d-k$k" env OMPTENSOR_STEP_KERNEL=$k build-gpu/bench_step --layers "$layers" --dtype "$d" \
      --top 6 --json "$out/logs/step-$d-k$k.json"
  done
done
if [ "${BATCH:-1}" != 0 ]; then
  for kv in ${BATCH_KV:-f32 bf16}; do # the library's default KV dtype, and transformers' for a bf16 model
    part 90 "bench_step-batch32-kv$kv" build-gpu/bench_step --layers "$layers" --steps 12 --batch 32 --kv-dtype "$kv" \
      --json "$out/logs/step-batch32-kv$kv.json"
  done
fi
cat "$out"/logs/*.json > "$out/steps.jsonl"
if [ "${SUITE:-1}" != 0 ]; then
  say "=== suite (OMPTENSOR_STEP_KERNEL=1)"
  OMPTENSOR_STEP_KERNEL=1 timeout "${SUITE_LIMIT:-300}" bash scripts/gpu_suite.sh run "$out/suite" 2>&1 | grep -v '^PASS' | tee -a "$log"
  (cd "$out" && tar czf suite.tgz suite && rm -rf suite)
fi
(cd "$out" && tar czf logs.tgz logs && rm -rf logs) # few files come back from a device call
