#!/usr/bin/env python3
"""Reference for GPT-2 mixed-precision training (issue 22): the test model
tests/data/models/gpt2_small trained 20 AdamW steps on the batch of
tests/data/train/gpt2_small (its manifest's inputs/targets), once in fp32 and
once under torch.autocast(bfloat16) (fp32 master weights and AdamW, bf16
matmuls, fp32 layer norms, softmax and loss: PyTorch's recipe) and once
under torch.autocast(float16) with a GradScaler, on the GPU
(CUDA autocast's op lists; --device cpu works but CPU autocast differs).

Writes tests/data/train/gpt2_small_bf16/: manifest.json (per-step losses of
both runs, their distance, the optimizer) and params_after.safetensors (the
bf16 run's parameters after the 20 steps, f32). Needs torch and
transformers (the GPU machine has both):

    python3 scripts/gen_train_mixed_ref.py --out tests/data/train/gpt2_small_bf16
"""
import argparse
import json
import math
import os

import safetensors.torch
import torch
from transformers import GPT2LMHeadModel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STEPS = 20
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)


def run(model_dir, inputs, targets, dev, autocast, dtype=torch.bfloat16):
    """STEPS updates; autocast in `dtype`, f16 with torch.amp.GradScaler
    (init_scale 2^16, growth_interval 2000: PyTorch's defaults). Returns the
    losses, the final parameters and (f16) each step's scale log2."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").to(dev)
    model.train()  # the config's dropout is 0
    params = dict(model.named_parameters())
    opt = torch.optim.AdamW(params.values(), foreach=False, fused=False, **ADAMW)
    scaler = torch.amp.GradScaler(dev.type, init_scale=2.0 ** 16, growth_interval=2000) \
        if autocast and dtype == torch.float16 else None
    losses, scales = [], []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=dtype, enabled=autocast):
            logits = model(input_ids=inputs, use_cache=False).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                                     targets.reshape(-1), reduction="mean")
        losses.append(loss.item())
        if scaler:
            scales.append(int(round(math.log2(scaler.get_scale()))))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    return losses, {n: p.detach().float().cpu().contiguous() for n, p in params.items()}, scales


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/train/gpt2_small_bf16"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    model_dir = os.path.join(ROOT, "tests/data/models/gpt2_small")
    with open(os.path.join(ROOT, "tests/data/train/gpt2_small/manifest.json")) as f:
        batch = json.load(f)["batch"]
    inputs = torch.tensor(batch["inputs"], device=dev)
    targets = torch.tensor(batch["targets"], device=dev)
    l32, p32, _ = run(model_dir, inputs, targets, dev, False)
    l16, p16, _ = run(model_dir, inputs, targets, dev, True)
    lh, ph, scales = run(model_dir, inputs, targets, dev, True, torch.float16)
    os.makedirs(a.out, exist_ok=True)
    safetensors.torch.save_file(p16, os.path.join(a.out, "params_after.safetensors"),
                                metadata={"what": f"parameters after {STEPS} AdamW steps under bf16 autocast"})
    safetensors.torch.save_file(ph, os.path.join(a.out, "params_after_f16.safetensors"),
                                metadata={"what": f"parameters after {STEPS} AdamW steps under f16 autocast + GradScaler"})
    dp = max(float((p16[n] - p32[n]).abs().max()) for n in p16)
    dph = max(float((ph[n] - p32[n]).abs().max()) for n in ph)
    m = {
        "magic": "omptensor-reference", "format_version": 1, "kind": "train_mixed",
        "model_dir": "tests/data/models/gpt2_small", "batch_from": "tests/data/train/gpt2_small/manifest.json",
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__, "steps": STEPS, "optimizer": ADAMW,
        "autocast": "torch.autocast(bfloat16) around forward and loss (loss in fp32), fp32 AdamW, eager attention, "
                    "TF32 off",
        "losses_fp32": l32, "losses_bf16": l16, "losses_f16": lh,
        "f16_scale_log2_per_step": scales,
        "f16_grad_scaler": "torch.amp.GradScaler(init_scale=2**16, growth_factor=2, backoff_factor=0.5, "
                           "growth_interval=2000): a step whose gradients hold Inf/NaN is skipped and halves the scale",
        "max_loss_gap_f16_fp32": max(abs(x - y) for x, y in zip(lh, l32)),
        "max_param_gap_f16_fp32": dph,
        "max_loss_gap_bf16_fp32": max(abs(x - y) for x, y in zip(l16, l32)),
        "max_param_gap_bf16_fp32": dp,
        "params_after": "params_after.safetensors (the bf16 run), params_after_f16.safetensors (the f16 run); the fp32 run's parameters are not kept (their "
                        "distance is max_param_gap_bf16_fp32)",
    }
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(m, f, indent=1)
    print(json.dumps({k: m[k] for k in ("max_loss_gap_bf16_fp32", "max_param_gap_bf16_fp32", "max_loss_gap_f16_fp32",
                                        "max_param_gap_f16_fp32", "f16_scale_log2_per_step")}))
    print("fp32", " ".join(f"{x:.5f}" for x in l32))
    print("bf16", " ".join(f"{x:.5f}" for x in l16))
    print("f16 ", " ".join(f"{x:.5f}" for x in lh))


if __name__ == "__main__":
    main()
