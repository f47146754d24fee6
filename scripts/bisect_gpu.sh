#!/usr/bin/env bash
# bisect_gpu.sh pack COMMIT... | run [SECONDS] — one GPU test binary built at
# several commits, run side by side in one device call, to find the commit
# that broke a GPU path no CPU test sees.
#
#   On the CPU machine (after scripts/setup.sh --gpu):
#     scripts/bisect_gpu.sh pack 9cdb461 d67f1f7 0660136 HEAD
#   builds TEST (default test_step_gpu, a binary that links libomptensor
#   statically) at each commit in a git worktree under $BISECT_DIR (default
#   /tmp/ot-bisect), ccache shared across them (CCACHE_BASEDIR), and packs
#   them as gpu-carry-bis/bis.tar.xz (about 150 KB a binary: the device
#   images are near-identical). Then one device call, carrying .gpu and
#   gpu-carry-bis:
#     . .gpu/prologue.sh && scripts/bisect_gpu.sh run 15
#   runs each binary in the order packed, SECONDS each (default 15), and
#   prints its first failing and passing lines.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
test=${TEST:-test_step_gpu}
case "${1:-}" in
  pack)
    shift
    [ $# -gt 0 ] || { echo "bisect_gpu.sh: give commits" >&2; exit 2; }
    dir=${BISECT_DIR:-/tmp/ot-bisect}
    bins=$(mktemp -d); trap 'rm -rf "$bins"' EXIT
    export CCACHE_BASEDIR=$(dirname "$root") CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
    i=0
    for c in "$@"; do
      h=$(git rev-parse --short "$c")
      w=$dir/$h
      [ -d "$w" ] || git worktree add -f "$w" "$h" > /dev/null
      ln -sfn "$root/toolchain" "$w/toolchain"
      (cd "$w" && cmake --preset nvptx > "$w.log" 2>&1 && cmake --build build/nvptx --target "$test" >> "$w.log" 2>&1) ||
        { echo "bisect_gpu.sh: $c did not build (log: $w.log)" >&2; exit 1; }
      cp "$w/build/nvptx/tests/$test" "$bins/$(printf %02d $i)_$h"
      echo "bisect_gpu.sh: $c -> $h"
      i=$((i + 1))
    done
    mkdir -p gpu-carry-bis
    XZ_OPT="-T2 -6e --lzma2=dict=192MiB" tar -C "$bins" -cJf gpu-carry-bis/bis.tar.xz .
    ls -l gpu-carry-bis/bis.tar.xz ;;
  run)
    s=${2:-15}
    mkdir -p build-bis && tar -C build-bis -xJf gpu-carry-bis/bis.tar.xz
    export OMP_TARGET_OFFLOAD=MANDATORY OT_TEST_DATA=$root/tests/data
    for b in build-bis/[0-9]*; do
      echo "### $(basename "$b")"
      timeout "$s" "$b" 2>&1 | grep -a -E "FAILED|PASSED|OK \]|rror|launches" | head -6 || true
    done ;;
  *) sed -n '2,19p' "$0"; exit 2 ;;
esac
