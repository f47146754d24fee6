#!/usr/bin/env bash
# engine_h200.sh OUT — issue 16's measurements on the GPU machine in one
# device call, every peer in the same call:
#   1. the test binaries carried in build-gpu/ (the GPU's own kernels and
#      plans against their references);
#   2. torch_matmul.py (same-run torch.matmul peers), then bench_kernels with
#      them, bench_launch and bench_plan (planning cost, replay per op);
#   3. bench/decode_h200.py: resident, map aggressive at 25 % and 10 %, int8
#      at 25 %, with transformers and the PyTorch streamer measured in it.
#   DECODE=0 skips 3; DECODE_LIMIT seconds for it (default 300)
set -u
out=${1:?usage: bench/engine_h200.sh OUT}
mkdir -p "$out"
export OMP_TARGET_OFFLOAD=MANDATORY OT_TEST_DATA=$PWD/tests/data
export LD_LIBRARY_PATH=$PWD/build-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bash bench/carried_tests.sh "$out" # the GPU's own numerics against their references
timeout 60 python3 bench/torch_matmul.py > "$out/torch_matmul.log" 2>&1
peer() { grep '^{' "$out/torch_matmul.log" | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1" 2>/dev/null; }
fp32=$(peer fp32_tflops); bf16=$(peer bf16_tflops)
echo "peers: torch.matmul fp32 ${fp32:-?} bf16 ${bf16:-?} TFLOP/s"
timeout 150 build-gpu/bench_kernels --json "$out/kernels.jsonl" ${fp32:+--peer-fp32-tflops $fp32} \
  ${bf16:+--peer-bf16-tflops $bf16} > "$out/bench_kernels.log" 2>&1; echo "bench_kernels rc=$?"
timeout 60 build-gpu/bench_launch 2000 > "$out/bench_launch.log" 2>&1; echo "bench_launch rc=$?"
timeout 120 build-gpu/bench_plan --json "$out/plan.jsonl" > "$out/bench_plan.log" 2>&1; echo "bench_plan rc=$?"
if [ "${DECODE:-1}" != 0 ]; then
  PYTHONUNBUFFERED=1 python3 bench/decode_h200.py --omptensor build-gpu/omptensor --workdir /tmp/dw \
    --out "$out/decode-h200.json" --budgets 25,10 --backends map --strategies aggressive \
    --skip 'accelerate*,*trace*' --time-limit "${DECODE_LIMIT:-300}" > "$out/decode.log" 2>&1
  grep -E "tokens/s, prefill" "$out/decode.log"
fi
