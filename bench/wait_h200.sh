#!/usr/bin/env bash
# wait_h200.sh OUT — issue 16's context flag on the GPU machine, one device call:
# the test binaries carried in build-gpu/ (test_model_parity: the bf16 prefill's
# numerics), `omptensor info` and bench_launch with OMPTENSOR_GPU_WAIT=block (the OpenMP
# plugin's own choice) and spin (omptensor's default) in the same call, then
# bench/decode_h200.py (default: spin) resident, map aggressive at 25 % and
# 10 %, int8 at 25 %, with its PyTorch peers measured in the same run.
#   DECODE=0  skip the decode benchmark; DECODE_LIMIT seconds for it (default 360)
set -u
out=${1:?usage: bench/wait_h200.sh OUT}
mkdir -p "$out"
export OMP_TARGET_OFFLOAD=MANDATORY OT_TEST_DATA=$PWD/tests/data
export LD_LIBRARY_PATH=$PWD/build-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
bash bench/carried_tests.sh "$out" # the GPU's own numerics against their references
for w in block spin; do
  echo "=== OMPTENSOR_GPU_WAIT=$w"
  OMPTENSOR_GPU_WAIT=$w build-gpu/omptensor info | grep -E "GPU wait|selected"
  OMPTENSOR_GPU_WAIT=$w timeout 120 build-gpu/bench_launch 2000 2>&1 | tee "$out/launch-$w.log"
done
echo "=== a bad value is refused"
OMPTENSOR_GPU_WAIT=fast build-gpu/omptensor run tests/data/models/llama_text --prompt hi -n 1; echo "exit $?"
if [ "${DECODE:-1}" != 0 ]; then
  PYTHONUNBUFFERED=1 python3 bench/decode_h200.py --omptensor build-gpu/omptensor --workdir /tmp/dw \
    --out "$out/decode-h200.json" --artifacts "$out" --budgets 25,10 --backends map --strategies aggressive \
    --skip 'accelerate*,*trace*' --time-limit "${DECODE_LIMIT:-360}" > "$out/decode.log" 2>&1
  grep -E "tokens/s|bound|FAIL|fail|resident|generate" "$out/decode.log" | tail -40
fi
