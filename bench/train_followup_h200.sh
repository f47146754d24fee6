#!/usr/bin/env bash
# train_followup_h200.sh OUT — the rest of issue 22's measurements in one GPU
# call (after bench/train_show_h200.sh), each part under its own limit:
#   1. the f16 GradScaler reference: scripts/gen_train_mixed_ref.py into
#      OUT/gpt2_small_bf16 (copied into tests/data/train/ afterwards);
#   2. the 4 GiB budget in bf16 with --cpu-optimizer (AdamW on the host
#      homes): GPT-2 124M at the offload batch, against PyTorch's largest
#      whole-GPU batch;
#   3. GPT-2 774M and 1.5B under 4 GiB in bf16 with --cpu-optimizer;
#   4. loss curves in bf16 and fp32 (200 steps), to tell a bf16 trajectory's
#      drift from a defect.
# Expects build-gpu/ (bench_train, omptensor, libomptensor), the runtime
# prologue sourced and OMP_TARGET_OFFLOAD=MANDATORY.
out=${1:?usage: bench/train_followup_h200.sh OUT}
py() { PYTHONUNBUFFERED=1 timeout -k 5 "$1" python3 "${@:2}" 2>&1 | grep -v -i warn; }
B=build-gpu/bench_train
py 60 scripts/gen_train_mixed_ref.py --out "$out/gpt2_small_bf16" | tail -4
py 120 bench/train_h200.py --bench-train $B --configs gpt2-124m --budget 4GiB --precision bf16 --max-batch 32 \
    --steps 2 --no-budget-search --whole-gpu-largest --cpu-optimizer --limit 60 \
    --out "$out/train-h200-budget-cpuopt.json" | grep -E "^(resident|offload|explicit) |largest|torch|^\||tokens/s"
py 190 bench/train_h200.py --bench-train $B --configs gpt2-774m,gpt2-1.5b --budget 4GiB --precision bf16 \
    --max-batch 4,2 --steps 1 --no-budget-search --cpu-optimizer --limit 80 \
    --out "$out/train-h200-large-cpuopt.json" | grep -E "^(resident|offload|explicit) |largest|torch|^\||rror"
py 150 bench/train_h200.py --omptensor build-gpu/omptensor --configs gpt2-124m --curve-steps 200 --curve-batch 4 \
    --curve-precisions bf16,fp32 --budget 4GiB --limit 50 --out "$out/train-h200-curve2.json" | grep -E "curve|rror"
