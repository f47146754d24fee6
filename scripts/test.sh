#!/usr/bin/env bash
# test.sh — set up, build and run every test: the README's test command and CI's.
#
# Builds and runs the cmocka suite for the presets host (target regions on the
# host), offload-host (x86_64 host-offload plugin: maps really copy; configured
# with -DOT_MPI=ON, so that test_cli_mpi runs batch jobs and training on 2 and 3
# Open MPI ranks; the preset's own default is OFF, and the host build checks
# that a build without MPI says mpirun needs one) and asan
# (offload-host under AddressSanitizer + UBSan + LeakSanitizer) — for host and
# offload-host then also installs the build and builds and runs two samples
# against the installed library (scripts/check_install.sh) —, compiles
# (does not run) the GPU builds nvptx and nvptx-usm with the CUDA 11.8 device tools and
# amdgcn (AMD gfx90a and gfx942) with Debian's ROCm device libraries, and the
# samples against each one's installed tree (check_install.sh --no-run), and
# last runs the libFuzzer targets (preset fuzz, scripts/fuzz.sh) for
# OT_FUZZ_SECONDS each (default 30: eight targets, about 5 minutes in all).
#
#   scripts/test.sh [PRESET ...]     default: host offload-host asan nvptx nvptx-usm amdgcn fuzz
set -euo pipefail
cd "$(dirname "$0")/.."

presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(host offload-host asan nvptx nvptx-usm amdgcn fuzz)

setup_flags=()
for p in "${presets[@]}"; do
  case "$p" in
    nvptx*) setup_flags+=(--gpu) ;;
    amdgcn*) setup_flags+=(--amdgcn) ;;
  esac
done
scripts/setup.sh "${setup_flags[@]}"

jobs=$(nproc 2>/dev/null || echo 2)
failed=()
run_fuzz=0
for p in "${presets[@]}"; do
  if [ "$p" = fuzz ]; then run_fuzz=1; continue; fi # its own step, below
  echo "=== preset $p: configure + build"
  extra=()
  [ "$p" = offload-host ] && extra=(-DOT_MPI=ON)
  cmake --preset "$p" "${extra[@]}" >/dev/null
  cmake --build "build/$p" -j"$jobs"
  case "$p" in
    nvptx*|amdgcn*)
      echo "=== preset $p: compiled (GPU binaries are run on a GPU machine, not here)"
      echo "=== preset $p: install + build the samples against it, not run (scripts/check_install.sh --no-run)"
      if ! scripts/check_install.sh --no-run "$p" 2>&1; then failed+=("$p"); fi
      ;;
    *)
      echo "=== preset $p: tests"
      if ! ctest --test-dir "build/$p" -j"$jobs" --output-on-failure 2>&1; then
        failed+=("$p")
      else
        case "$p" in
          host|offload-host)
            # the installed library as a user meets it (find_package, pkg-config)
            echo "=== preset $p: install + build the samples against it (scripts/check_install.sh)"
            if ! scripts/check_install.sh "$p" 2>&1; then failed+=("$p"); fi
            ;;
        esac
      fi
      ;;
  esac
done
if [ $run_fuzz -eq 1 ]; then
  echo "=== preset fuzz: every libFuzzer target for ${OT_FUZZ_SECONDS:-30} s (scripts/fuzz.sh)"
  if ! scripts/fuzz.sh "${OT_FUZZ_SECONDS:-30}" 2>&1; then failed+=(fuzz); fi
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: FAILED in preset(s): ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all presets passed (${presets[*]})"
