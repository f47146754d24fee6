#!/usr/bin/env bash
# check_install.sh [--no-run] PRESET — the installed omptensor as a user meets it.
#
# Installs build/PRESET (built already) into a temporary prefix, then, outside
# the source tree (copies in a temporary folder), against that prefix only:
#   - checks that scripts/demo.sh's build target makes every file the install
#     copies (an install right after the demo works);
#   - checks the installed files, the LICENSE, that the exported flags carry no warnings
#     (-W...) of the project's own build, and the rpaths of the binaries;
#   - runs the installed `omptensor --version` and `omptensor info` (linked
#     to libomptensor.so; with an offload target, info must list device 0);
#   - builds samples/custom_kernel with its CMakeLists.txt
#     (find_package(omptensor) -> omptensor::omptensor, then again with
#     omptensor::omptensor_static) and runs it: its own kernel must run on the
#     device and match a C loop;
#   - builds samples/embed with its Makefile (pkg-config --cflags --libs
#     omptensor; then STATIC=1) and runs it on tests/data/models/llama_gqa:
#     the reference's greedy tokens.
# With an offload target everything runs with OMP_TARGET_OFFLOAD=MANDATORY.
# --no-run: install, check and build only (a GPU build on a machine without
# a GPU: scripts/test.sh does this for nvptx).
# Any failure: a line saying what failed, and exit 1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
run=1
if [ "${1:-}" = --no-run ]; then run=0; shift; fi
preset=${1:?usage: scripts/check_install.sh [--no-run] PRESET}
build="$root/build/$preset"
fail() { echo "check_install.sh ($preset): FAILED: $*" >&2; exit 1; }
[ -f "$build/CMakeCache.txt" ] || fail "$build is not configured (cmake --preset $preset && cmake --build build/$preset)"

cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
cc=$(cache CMAKE_C_COMPILER)
offload=$(cache OT_OFFLOAD)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/omptensor-check-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[ "$offload" = none ] || export OMP_TARGET_OFFLOAD=MANDATORY
unset LD_LIBRARY_PATH

# The install right after scripts/demo.sh (issue 43: it stopped at the
# missing libomptensor.a, which the demo's build did not make): every file
# the install copies that the build makes must be made by the target the
# demo builds. (The target cannot be left out here: this tree is built.)
demo_target=$(sed -n 's/.*--target \([A-Za-z0-9_]*\).*/\1/p' "$root/scripts/demo.sh" | head -1)
[ -n "$demo_target" ] || fail "scripts/demo.sh: no 'cmake --build ... --target T' line found"
if [ -f "$build/build.ninja" ]; then
  # every file of the target's build graph
  made=$(ninja -C "$build" -t graph "$demo_target" | sed -n 's/.*label="\([^"]*\)".*/\1/p' | sort -u)
  for f in $(grep -o "\"$build/[^\"]*\"" "$build/cmake_install.cmake" | tr -d '"' | sort -u); do
    rel=${f#"$build/"}
    edge=$(ninja -C "$build" -t query "$rel" 2>/dev/null | sed -n '2,3p' || true)
    # made at configure time (omptensor.pc, version.h, the export files), not by a build rule
    grep -q '^  input: ' <<<"$edge" || continue
    grep -qxF "$rel" <<<"$made" && continue
    # libomptensor.so.0.1: a link the rule making libomptensor.so makes beside it
    if grep -q '^  input: CMAKE_SYMLINK' <<<"$edge" && grep -qxF "$(sed -n '2s/^ *//p' <<<"$edge")" <<<"$made"; then continue; fi
    fail "cmake --install copies $rel, which scripts/demo.sh's build (--target $demo_target) does not make: an install right after the demo would fail"
  done
  echo "--- the install after scripts/demo.sh's build (--target $demo_target): every built file it copies is made"
fi

echo "--- install build/$preset into $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }

libdir=lib
for f in bin/omptensor $libdir/libomptensor.so $libdir/libomptensor.a include/omptensor/omptensor.h \
         include/omptensor/version.h include/omptensor/ot_pragmas.h include/omptensor/program.h \
         $libdir/cmake/omptensor/omptensorConfig.cmake $libdir/cmake/omptensor/omptensorConfigVersion.cmake \
         $libdir/cmake/omptensor/omptensorTargets.cmake $libdir/pkgconfig/omptensor.pc share/doc/omptensor/LICENSE; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
# nothing of the project's own build flags in what a consumer inherits
if grep -E -- '-W(all|extra|pedantic|shadow|error)|-fsanitize=fuzzer|_POSIX_C_SOURCE|OT_OFFLOAD_NAME' \
     "$prefix/$libdir/cmake/omptensor/omptensorTargets.cmake" "$prefix/$libdir/pkgconfig/omptensor.pc"; then
  fail "the exported flags carry the project's own build flags (above)"
fi
# the installed binaries: an rpath to LLVM's OpenMP runtime, none into the build tree
llvm_libdir=$(cache OT_LLVM_LIBDIR)
for f in bin/omptensor $libdir/libomptensor.so; do
  rp=$(readelf -d "$prefix/$f" | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\2/p')
  case ":$rp:" in *":$llvm_libdir:"*) ;; *) fail "$f: rpath '$rp' lacks $llvm_libdir" ;; esac
  case "$rp" in *"$root"*) fail "$f: rpath '$rp' points into the source or build tree" ;; esac
done

if [ $run = 1 ]; then
  echo "--- installed command"
  "$prefix/bin/omptensor" --version | tee "$tmp/version.txt"
  grep -q "^omptensor [0-9][0-9.]* (offload: " "$tmp/version.txt" || fail "omptensor --version"
  "$prefix/bin/omptensor" info >"$tmp/info.txt" 2>&1 || { cat "$tmp/info.txt"; fail "omptensor info"; }
  cat "$tmp/info.txt"
  if [ "$offload" != none ]; then
    grep -q "^device 0: " "$tmp/info.txt" || fail "the installed omptensor (libomptensor.so) finds no offload device"
  fi
fi

echo "--- samples/custom_kernel: find_package(omptensor), outside the tree"
cp -r "$root/samples/custom_kernel" "$tmp/custom_kernel"
for kind in shared static; do
  b="$tmp/ck-$kind"
  static=OFF; [ $kind = static ] && static=ON
  cmake -S "$tmp/custom_kernel" -B "$b" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUSTOM_KERNEL_STATIC=$static >"$tmp/ck-$kind.log" 2>&1 \
    || { cat "$tmp/ck-$kind.log"; fail "custom_kernel ($kind): configure"; }
  cmake --build "$b" >>"$tmp/ck-$kind.log" 2>&1 || { cat "$tmp/ck-$kind.log"; fail "custom_kernel ($kind): build"; }
  readelf -d "$b/custom_kernel" >"$tmp/ck-$kind.dyn"
  needs_so=0; grep -q 'NEEDED.*libomptensor\.so' "$tmp/ck-$kind.dyn" && needs_so=1
  [ $kind = shared ] && [ $needs_so = 0 ] && fail "custom_kernel (shared) is not linked to libomptensor.so"
  [ $kind = static ] && [ $needs_so = 1 ] && fail "custom_kernel (static) needs libomptensor.so"
  echo "custom_kernel ($kind): built"
  [ $run = 1 ] || continue
  "$b/custom_kernel" || fail "custom_kernel ($kind) failed (exit $?)"
done

echo "--- samples/embed: Makefile with pkg-config, outside the tree"
cp -r "$root/samples/embed" "$tmp/embed"
rm -f "$tmp/embed/CMakeLists.txt"   # only the Makefile here
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
# the prompt and the first greedy tokens of tests/data/models/llama_gqa/manifest.json
ids="1 17 42 255 0 128 7 99 200 3 64 31 5"
want="tokens: 239 186 184 248"
for kind in shared static; do
  extra=""; [ $kind = static ] && extra="STATIC=1"
  make -C "$tmp/embed" clean >/dev/null
  make -C "$tmp/embed" CC="$cc" $extra >"$tmp/embed-$kind.log" 2>&1 || { cat "$tmp/embed-$kind.log"; fail "embed ($kind): make"; }
  echo "embed ($kind): $(grep -m1 "$cc" "$tmp/embed-$kind.log")"
  [ $run = 1 ] || continue
  # shellcheck disable=SC2086
  "$tmp/embed/embed" "$root/tests/data/models/llama_gqa" -n 4 $ids | tee "$tmp/embed-$kind.out" \
    || fail "embed ($kind) failed"
  grep -q "^$want\$" "$tmp/embed-$kind.out" || fail "embed ($kind): expected '$want' (the reference's greedy tokens)"
done
if [ $run = 1 ]; then
  echo "check_install.sh ($preset): the installed omptensor builds and runs both samples (shared and static)"
else
  echo "check_install.sh ($preset): the installed omptensor builds both samples (shared and static; not run)"
fi
