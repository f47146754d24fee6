#!/usr/bin/env bash
# prefill_h200.sh OUT — issue 16's prefill on the GPU machine, one device call:
# bench/decode_h200.py's resident cases (transformers resident and generate(),
# omptensor resident: a fresh process, so its prefill is cold: the first cuBLAS
# call creates the handle and loads kernels), then the same 128-token prompt
# three times as one JSONL batch job, whose later lines are the steady state a
# batch job or server sees, with the prompt's GEMM inputs in bf16 (auto) and in
# f32 (OMPTENSOR_PREFILL_DTYPE=f32).
set -u
out=${1:?usage: bench/prefill_h200.sh OUT}
mkdir -p "$out"
export OMP_TARGET_OFFLOAD=MANDATORY LD_LIBRARY_PATH=$PWD/build-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PYTHONUNBUFFERED=1 python3 bench/decode_h200.py --omptensor build-gpu/omptensor --workdir /tmp/dw \
  --out "$out/decode-h200.json" --budgets 25 --backends map --strategies aggressive \
  --skip 'torch-streamer,accelerate*,*trace*,*int8*,*%*' --time-limit 200 > "$out/decode.log" 2>&1
grep -E "tokens/s" "$out/decode.log"
ids=$(tr -d ' \n' < /tmp/dw/prompt-128.txt)
for i in 1 2 3; do echo "{\"id\": $i, \"prompt_ids\": [$ids], \"max_new_tokens\": 8}"; done > /tmp/dw/p3.jsonl
for mode in auto f32; do
  rm -f "$out/batch-$mode.jsonl"
  OMPTENSOR_PREFILL_DTYPE=$mode build-gpu/omptensor run /tmp/dw/llama7b16 --prompts /tmp/dw/p3.jsonl \
    --out "$out/batch-$mode.jsonl" --offload none 2>/dev/null
  python3 -c "import json,sys; print('$mode prefill ms per line:', [round(json.loads(l)['prefill_ms'],1) for l in open(sys.argv[1])])" "$out/batch-$mode.jsonl"
done
