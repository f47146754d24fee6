#!/bin/sh
# mpi_bundle.sh DIR — on the CPU machine (Debian 12, scripts/setup.sh run):
# packs this machine's Open MPI runtime into DIR/ompi.tar.xz so that an
# OT_MPI=ON build runs under mpirun on a machine that has no MPI and no
# internet (the GPU machine), with DIR/ompi-env.sh to source there.
#
# What it carries (about 5 MB packed): the files of the Debian packages
# openmpi-bin (orterun = mpirun, orted), libopenmpi3 (libmpi, libopen-rte,
# libopen-pal and the MCA plugins in openmpi/lib/openmpi3), openmpi-common
# (the help texts mpirun prints from), libpmix2 (PMIx and its plugins),
# libhwloc15 and libevent's core and pthreads libraries, their paths kept
# below DIR's prefix; and every other library those link that is not glibc's
# (fabric, UCX, verbs, PSM, munge, numa, ...: so that no plugin fails to load).
#
# On the other machine, after unpacking the binaries:
#   . DIR/ompi-env.sh       # unpacks to /tmp/ompi (once), sets OPAL_PREFIX, PATH, LD_LIBRARY_PATH
#   mpirun --allow-run-as-root --oversubscribe -n 2 build-gpu/omptensor ...
# OPAL_PREFIX relocates Open MPI's own paths (libdir, the plugins, the help
# texts: Debian builds them relative to the prefix); PMIx's plugins are named
# by PMIX_MCA_mca_base_component_path; /etc/openmpi's defaults (not below the
# prefix) become OMPI_MCA_* variables. Checked on the CPU machine with the
# system's Open MPI hidden (bench/mpi_bundle_check.sh).
set -eu
dir=${1:?usage: bench/mpi_bundle.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
command -v orterun >/dev/null || { echo "mpi_bundle.sh: no Open MPI here (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/ompi
mkdir -p "$root/libs"
for p in openmpi-bin libopenmpi3 openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7; do
  dpkg -L "$p" | while read -r f; do
    case "$f" in */doc/*|*/man/*|*/lintian/*|*/include/*|*.a|*java*|*fortran*|*mpif*|*oshmem*) continue ;; esac
    [ -f "$f" ] || [ -L "$f" ] || continue
    mkdir -p "$root$(dirname "$f")"
    cp -P "$f" "$root$f"
  done
done
# the libraries named above by links into pmix2/ (libpmix.so.2 -> pmix2/lib/...): kept as links, relative
# every other library the runtime's objects link, glibc's aside
find "$root" -name '*.so*' -type f -o -path '*/bin/*' -type f | while read -r o; do
  ldd "$o" 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $3}'
done | sort -u | while read -r l; do
  case "$(basename "$l")" in libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s*|libstdc++*) continue ;; esac
  [ -e "$root$l" ] || [ -e "$root/usr$l" ] || [ -e "$root$(readlink -f "$l")" ] || cp -Ln "$l" "$root/libs/"
done
cp "$here/mpi_env.sh" "$root/ompi-env.sh"
XZ_OPT="-T1 -6" tar -C "$tmp" -cJf "$dir/ompi.tar.xz" ompi
cp "$here/mpi_env.sh" "$dir/ompi-env.sh"
echo "mpi_bundle.sh: $dir/ompi.tar.xz ($(du -h "$dir/ompi.tar.xz" | cut -f1)) and $dir/ompi-env.sh; source the latter on the other machine"
