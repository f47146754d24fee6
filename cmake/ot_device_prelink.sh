#!/usr/bin/env bash
# ot_device_prelink.sh — the compiler launcher of the amdgcn build
# (cmake/OtAmdgcn.cmake says why): runs the compile it is given, then
# finishes the object's device code on its own.
#
#   ot_device_prelink.sh CC LLVM_BIN RTL_DIR OFFLOAD_FLAGS... -- COMPILE_COMMAND...
#
# An object with target regions (it has offload entries) is device-linked
# by itself: `CC OFFLOAD_FLAGS -O -r` runs device LTO over its bitcode and
# the OpenMP device runtime (RTL_DIR/libomptarget.devicertl.a) and wraps the
# images with the code that registers them at start-up. clang keeps those
# images in a section of type SHT_LLVM_OFFLOADING, where a later link would
# take them for device code to link again (and make each program's image
# depend on them by name); it becomes plain data here, which the
# registration code still points to. An object without target regions
# keeps its device module, which holds no kernels: a program's link then
# still makes (and registers) an image of its own, a small one, as in every
# other build; a program with no image at all would leave libomptarget 19
# uninitialized, and its first omp_get_num_devices() crashes (seen with
# this scheme on the x86_64 offload plugin). Commands that are not object
# compiles run unchanged.
set -euo pipefail

cc=$1 bin=$2 rtl=$3
shift 3
flags=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do flags+=("$1"); shift; done
[ $# -gt 0 ] || { echo "ot_device_prelink.sh: no '--' before the compile command" >&2; exit 2; }
shift

"$@"

out="" opt=-O2 compile=0 prev=""
for a in "$@"; do
  [ "$prev" = -o ] && out=$a
  case "$a" in
    -c) compile=1 ;;
    -O?) opt=$a ;;
  esac
  prev=$a
done
[ "$compile" = 1 ] && [ -n "$out" ] || exit 0

sections=$("$bin/llvm-readelf" -S -W "$out") # not piped into grep -q: pipefail would see readelf's SIGPIPE
grep -q ' omp_offloading_entries ' <<<"$sections" || exit 0

tmp="$out.prelink.o"
trap 'rm -f "$tmp"' EXIT
"$cc" "${flags[@]}" "$opt" -r "$out" -o "$tmp" -L"$rtl" -lomptarget.devicertl ||
  {
    echo "ot_device_prelink.sh: the device link of $out failed (above);" \
      "its kernels may call only device code of their own file" >&2
    rm -f "$out"
    exit 1
  }
"$bin/llvm-objcopy" --set-section-type=.llvm.offloading.relocatable=1 "$tmp" "$out"
# By construction: nothing of this object is left for a program's link to redo.
if grep -q ' LLVM_OFFLOADING ' <<<"$("$bin/llvm-readelf" -S -W "$out")"; then
  echo "ot_device_prelink.sh: $out still has device code to link (a SHT_LLVM_OFFLOADING section)" >&2
  rm -f "$out"
  exit 1
fi
