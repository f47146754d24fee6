#!/usr/bin/env bash
# gpu_check.sh OUT — the GPU session's checks in one device call: the tests
# that matter on a GPU, the demo resident and at a quarter of the weights
# (with device memory sampled by nvidia-smi, so a backend that keeps more on
# the GPU than its own count says is caught), then the kernel and stream
# benchmarks (bench/run_gpu.sh). Binaries (and libomptensor.so.0.1) in
# build-gpu/.
set -u
out=${1:?usage: bench/gpu_check.sh OUT}
export OMP_TARGET_OFFLOAD=MANDATORY OT_TEST_DATA=$PWD/tests/data
# the command links libomptensor.so, carried beside it
export LD_LIBRARY_PATH=$PWD/build-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for t in build-gpu/test_*; do
  if $t > "$out/tests.log" 2>&1; then echo "ok   $(basename "$t")"; else echo "FAIL $(basename "$t")"; grep -B2 -A3 "ERROR" "$out/tests.log" | head -10; fi
done
peak_mem() { # runs "$@" while sampling device memory used; prints the peak in MiB
  local base peak=0 m
  base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
  "$@" > "$out/run.log" 2>&1 &
  local pid=$!
  while kill -0 $pid 2>/dev/null; do
    m=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
    [ "$m" -gt "$peak" ] && peak=$m
    sleep 0.1
  done
  wait $pid
  echo "rc=$? device memory peak $((peak - base)) MiB above idle; $(grep -E 'tokens/s' "$out/run.log")"
}
for b in map usm; do
  for lim in 100GB 1750MB; do
    echo "=== demo 7GB bf16 backend $b limit $lim"
    peak_mem build-gpu/omptensor demo --size 7GB -n 32 --backend $b --gpu-memory-limit $lim --offload aggressive \
      --trace "$out/t_${b}_$lim.json"
  done
done
bench/run_gpu.sh "$out/bench" build-gpu > "$out/bench_summary.txt" 2>&1
grep -A60 "bench_kernels: device" "$out/bench_summary.txt" | head -70
grep -A14 "bench_stream: device" "$out/bench_summary.txt"
(cd "$out" && tar czf bench.tgz bench && rm -rf bench run.log)
