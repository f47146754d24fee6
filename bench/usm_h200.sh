#!/usr/bin/env bash
# usm_h200.sh OUT — issue 15's checks on the GPU machine in one device call:
# every test binary of the build in build-gpu/ (the nvptx-usm build, where
# the tests now exercise the usm backend on the GPU too), the usm GPU test
# in full, then bench/decode_h200.py with map and the usm placements at 25 %
# and 10 % budgets (the independent budget probe runs in every case).
#   TT        seconds per test binary (default 150)
#   DECODE=0  skip the decode benchmark
set -u
out=${1:?usage: bench/usm_h200.sh OUT}
mkdir -p "$out/tests"
export OMP_TARGET_OFFLOAD=MANDATORY OT_TEST_DATA=$PWD/tests/data
export LD_LIBRARY_PATH=$PWD/build-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
pass=0 fail=0
for t in build-gpu/test_*; do
  n=$(basename "$t")
  [ "$n" = test_usm_gpu ] && continue # run below, in full
  if timeout "${TT:-150}" "$t" > "$out/tests/$n.log" 2>&1; then pass=$((pass + 1)); rm -f "$out/tests/$n.log"
  else rc=$?; fail=$((fail + 1)); echo "FAIL($rc) $n"; grep -E "ERROR|FAIL|error" "$out/tests/$n.log" | head -8; fi
done
echo "tests: $pass passed, $fail failed"
echo "=== test_usm_gpu"
build-gpu/test_usm_gpu 2>&1 | tail -20
if [ "${DECODE:-1}" != 0 ]; then
  python3 bench/decode_h200.py --omptensor build-gpu/omptensor --workdir /tmp/dw --out "$out/decode-h200.json" \
    --artifacts "$out" --budgets 25,10 --backends map,usm --strategies aggressive \
    --usm-placements "${PLACEMENTS:-auto,remote,streamed}" --skip 'accelerate*,*int8*,*trace*' --time-limit "${DECODE_LIMIT:-330}" \
    > "$out/decode.log" 2>&1
  grep -E "tokens/s|bound|FAIL|fail" "$out/decode.log" | tail -30
fi
if [ "${STREAM:-1}" != 0 ]; then
  echo "=== bench_stream map, usm"
  timeout 150 build-gpu/bench_stream --backends map,usm --json "$out/stream.jsonl" --summaries none 2>&1 | tail -12
fi
