#!/bin/sh
# mpi_bundle_check.sh DIR OMPTENSOR MODEL_DIR — on the CPU machine, as root:
# runs a 2-rank batch job with the Open MPI that bench/mpi_bundle.sh packed
# into DIR while this machine's own is hidden (a private mount namespace:
# its folders emptied, its libraries and programs replaced by empty files,
# so that anything still reaching for them fails). What the GPU machine,
# which has no MPI, will see.
set -eu
dir=$(cd "${1:?usage: bench/mpi_bundle_check.sh DIR OMPTENSOR MODEL_DIR}" && pwd)
exe=$(readlink -f "${2:?}")
model=$(readlink -f "${3:?}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '{"id": "a", "prompt_ids": [1, 2, 3], "max_new_tokens": 4}\n{"id": "b", "prompt_ids": [4, 5], "max_new_tokens": 4}\n' \
  >"$work/in.jsonl"
unshare -m --propagation private sh -eu -c '
  lib=/usr/lib/x86_64-linux-gnu
  for d in $lib/openmpi $lib/pmix2 /usr/share/openmpi /etc/openmpi; do [ -d "$d" ] && mount -t tmpfs none "$d"; done
  : >/tmp/ompi-hidden-empty
  for f in $lib/libmpi.so.40.* $lib/libopen-rte.so.40.* $lib/libopen-pal.so.40.* $lib/libhwloc.so.15.* \
           $lib/libevent_core-2.1.so.7.* $lib/libevent_pthreads-2.1.so.7.* /usr/bin/orterun /usr/bin/orted; do
    [ -f "$f" ] && mount --bind /tmp/ompi-hidden-empty "$f"
  done
  rm -rf /tmp/ompi
  OT_MPI_BUNDLE=$1 . "$1/ompi-env.sh"
  cd "$4"
  echo "libmpi: $(ldd "$2" | grep libmpi)"
  OMP_NUM_THREADS=1 orterun --allow-run-as-root --oversubscribe -n 2 "$2" run "$3" --prompts in.jsonl --out out.jsonl
  test "$(wc -l <out.jsonl)" = 2
  echo "mpi_bundle_check.sh: 2 ranks ran the job with the carried Open MPI alone"
  rm -rf /tmp/ompi
' sh "$dir" "$exe" "$model" "$work"
