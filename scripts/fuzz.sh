#!/usr/bin/env bash
# fuzz.sh — build the libFuzzer targets (preset `fuzz`) and run each one.
#
#   scripts/fuzz.sh [SECONDS] [TARGET ...]   default: 60 s each, every fuzz/fuzz_*.c
#
# Each target first replays fuzz/regressions/<target>/ (every input that ever
# crashed; must pass), then fuzzes for SECONDS starting from
# fuzz/corpus/<target>/ and the regressions. New coverage goes to a scratch
# corpus under build/fuzz/, never into the committed seeds. Any crash, leak,
# timeout, out-of-memory or sanitizer report fails the script; the input is
# kept as build/fuzz/artifacts/<target>/crash-* — add it to
# fuzz/regressions/<target>/ together with the parser fix and a unit test.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$(nproc 2>/dev/null || echo 2)"

# Leaks count as failures; UBSan stops at the first report (the build has
# -fno-sanitize-recover=all) so libFuzzer sees it as a crash.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

failed=()
for t in "${targets[@]}"; do
  bin=build/fuzz/fuzz/$t
  seeds=fuzz/corpus/$t
  regs=fuzz/regressions/$t
  work=build/fuzz/corpus-work/$t
  art=build/fuzz/artifacts/$t
  mkdir -p "$work" "$art" "$regs"
  log=build/fuzz/$t.log
  echo "=== fuzz $t: regressions ($(ls "$regs" | wc -l) inputs), then ${secs} s"
  ok=1
  if [ -n "$(ls -A "$regs")" ]; then
    "$bin" -runs=0 -timeout=10 "$regs"/* >"$log.reg" 2>&1 || { ok=0; tail -40 "$log.reg"; }
  fi
  if [ $ok -eq 1 ]; then
    # -max_len: big enough for a real safetensors header seed.
    "$bin" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$art/" "$work" "$seeds" "$regs" >"$log" 2>&1 || { ok=0; tail -60 "$log"; }
  fi
  if [ $ok -eq 1 ]; then
    grep -E '^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "$log" | tr '\n' ' '; echo
  else
    echo "fuzz.sh: $t FAILED (log: $log; inputs: $art)" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: all targets clean (${targets[*]}, ${secs} s each)"
