#!/usr/bin/env bash
# carried_tests.sh OUT — runs every test binary carried in build-gpu/ on the
# GPU machine (the GPU's own kernels and plans against their references),
# each under a 200 s limit, its log in OUT/<name>.log; prints PASS or FAIL
# per test, with the first error lines of a failure. Sourced or run by the
# device-call scripts (engine_h200.sh, wait_h200.sh), which set
# OT_TEST_DATA, OMP_TARGET_OFFLOAD and LD_LIBRARY_PATH first.
out=${1:?usage: bench/carried_tests.sh OUT}
for t in build-gpu/test_*; do
  [ -x "$t" ] || continue
  if timeout 200 "$t" > "$out/$(basename "$t").log" 2>&1; then echo "PASS $(basename "$t")"
  else echo "FAIL $(basename "$t")"; grep -a -E "ERROR|error" "$out/$(basename "$t").log" | head -5; fi
done
