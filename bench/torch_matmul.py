"""torch_matmul.py — same-run peers for bench_kernels on the GPU machine.

    python3 bench/torch_matmul.py [--n 4096] [--reps 20] [--copy-mib 1024]

Prints one JSON object on stdout:
  fp32_tflops   torch.matmul fp32 with TF32 off (cuBLAS SGEMM), n x n x n
  tf32_tflops   the same with TF32 on (for reference)
  bf16_tflops   torch.matmul bf16
  copy_gbps     device-to-device copy (dst.copy_(src)), read + write bytes
Times are medians of CUDA-event-timed calls after a warm-up. Not part of
the product or the tests: a benchmark peer only (bench/run_gpu.sh runs it)."""
import argparse
import json
import statistics
import sys


def timed(torch, fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--copy-mib", type=int, default=1024)
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"error": f"no torch: {e}"}))
        return 1
    if not torch.cuda.is_available():
        print(json.dumps({"error": "torch sees no CUDA device"}))
        return 1
    n, out = args.n, {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "n": args.n}
    flops = 2.0 * n * n * n
    prev = torch.backends.cuda.matmul.allow_tf32
    for name, dt, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                           ("bf16", torch.bfloat16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        sec = timed(torch, lambda: torch.matmul(a, b), args.reps)
        out[f"{name}_tflops"] = flops / sec / 1e12
        out[f"{name}_ms"] = sec * 1e3
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = prev
    nbytes = args.copy_mib << 20
    src = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    sec = timed(torch, lambda: dst.copy_(src), args.reps)
    out["copy_gbps"] = 2.0 * nbytes / sec / 1e9
    out["copy_mib"] = args.copy_mib
    del src, dst
    torch.cuda.empty_cache()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
