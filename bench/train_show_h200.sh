#!/usr/bin/env bash
# train_show_h200.sh OUT — issue 22's measurements on the GPU machine in one
# call, each part under its own time limit so that a slow one leaves the
# others their share (the JSON of every part that finished comes back):
#   1. same-B speed, GPT-2 124M, B = 8, T = 1024: omptensor fp32 / bf16
#      against PyTorch fp32 (TF32 off) / bf16 autocast, whole GPU;
#   2. the 4 GiB budget in bf16: the largest resident batch and an
#      offload/recompute batch (the search's cap, --max-batch), their
#      tokens/s, PyTorch at the same B and at the largest B it fits on the
#      whole GPU;
#   3. loss curves: 200 steps from the same initial weights on a token file,
#      omptensor train under 4 GiB against PyTorch (SVG beside the JSON);
#   4. GPT-2 774M and 1.5B under 4 GiB in bf16 against PyTorch on the whole GPU.
# Expects build-gpu/ (bench_train, omptensor, libomptensor) and the runtime
# prologue sourced, OMP_TARGET_OFFLOAD=MANDATORY (bench/run_gpu.sh's setup).
out=${1:?usage: bench/train_show_h200.sh OUT}
py() { PYTHONUNBUFFERED=1 timeout -k 5 "$1" python3 bench/train_h200.py "${@:2}" 2>&1 | grep -v -i warn; }
B=build-gpu/bench_train
py 75 --bench-train $B --configs gpt2-124m --speed-batches 8 --precisions fp32,bf16 --steps 3 \
    --out "$out/train-h200-speed.json" | grep -E "^speed|wrote"
py 140 --bench-train $B --configs gpt2-124m --budget 4GiB --precision bf16 --max-batch 32 --steps 2 \
    --no-budget-search --whole-gpu-largest --limit 70 --out "$out/train-h200-budget.json" | \
    grep -E "^(resident|offload|explicit) |largest|torch|^\||tokens/s"
py 90 --omptensor build-gpu/omptensor --configs gpt2-124m --curve-steps 200 --curve-batch 4 --precision bf16 \
    --budget 4GiB --limit 60 --out "$out/train-h200-curve.json" | grep -E "curve|wrote|error|rror"
py 100 --bench-train $B --configs gpt2-774m,gpt2-1.5b --budget 4GiB --precision bf16 --max-batch 4,2 --steps 1 \
    --no-budget-search --limit 45 --out "$out/train-h200-large.json" | grep -E "^(resident|offload|explicit) |largest|torch|^\|"
