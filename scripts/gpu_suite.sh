#!/usr/bin/env bash
# gpu_suite.sh pack [BUILD] | run OUT — the whole GPU test suite in one device call.
#
#   On the CPU machine, after `cmake --build build/nvptx`:
#     scripts/gpu_suite.sh pack            # build/nvptx (or BUILD) -> gpu-carry/nvptx.tar.xz (≈ 4 MB)
#     ../shared/gpu/bundle.sh .gpu build/nvptx/omptensor   # the OpenMP runtime bundle (28 MB)
#   then one device call, carrying gpu-carry and .gpu:
#     . .gpu/prologue.sh && scripts/gpu_suite.sh run $OUT
#
# `pack` flattens the test binaries, the command and libomptensor into one folder
# (the CLI tests find `omptensor` beside their own binary); xz with a large
# dictionary, since the device images in every binary are near-identical.
# `run` unpacks it into build-gpu/ and runs every test binary there under
# OMP_TARGET_OFFLOAD=MANDATORY (bench/carried_tests.sh: PASS/FAIL per binary,
# each log in OUT), then prints the count.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  pack)
    b=${2:-build/nvptx}
    [ -x "$b/omptensor" ] || { echo "gpu_suite.sh: no $b/omptensor: build the nvptx preset first" >&2; exit 2; }
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    cp -L "$b"/tests/test_* "$b/omptensor" "$tmp/"
    cp -L "$b"/libomptensor.so* "$tmp/" 2>/dev/null || true
    cp -L "$b"/bench/bench_* "$tmp/" 2>/dev/null || true # the benchmarks (bench/) beside the tests
    mkdir -p gpu-carry
    XZ_OPT="-T2 -6e --lzma2=dict=192MiB" tar -C "$tmp" -cJf gpu-carry/nvptx.tar.xz .
    ls -l gpu-carry/nvptx.tar.xz ;;
  run)
    out=${2:?usage: scripts/gpu_suite.sh run OUT}
    mkdir -p "$out" build-gpu
    tar -C build-gpu -xJf gpu-carry/nvptx.tar.xz
    export OMP_TARGET_OFFLOAD=MANDATORY OT_TEST_DATA=$PWD/tests/data
    export LD_LIBRARY_PATH=$PWD/build-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    bash bench/carried_tests.sh "$out" | tee "$out/summary.txt"
    echo "gpu_suite: $(grep -c '^PASS' "$out/summary.txt") passed, $(grep -c '^FAIL' "$out/summary.txt") failed" ;;
  *) sed -n '2,16p' "$0"; exit 2 ;;
esac
