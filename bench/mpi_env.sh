# mpi_env.sh — source it (as DIR/ompi-env.sh, beside DIR/ompi.tar.xz from
# bench/mpi_bundle.sh) on a machine without MPI: unpacks the carried Open
# MPI to /tmp/ompi once and points Open MPI, PMIx and the loader at it.
# Its folder: OT_MPI_BUNDLE, else the sourced file's own (bash), else ./.mpi.
_ompi_dir=${OT_MPI_BUNDLE:-$(cd "$(dirname "${BASH_SOURCE:-$0}")" 2>/dev/null && pwd)}
[ -f "$_ompi_dir/ompi.tar.xz" ] || _ompi_dir=$PWD/.mpi
[ -x /tmp/ompi/usr/bin/orterun ] || { mkdir -p /tmp && tar -C /tmp -xJf "$_ompi_dir/ompi.tar.xz"; }
_ml=/tmp/ompi/usr/lib/x86_64-linux-gnu
export OPAL_PREFIX=/tmp/ompi/usr
export PATH=/tmp/ompi/usr/bin:$PATH
export LD_LIBRARY_PATH=$_ml:$_ml/openmpi/lib:$_ml/pmix2/lib:/tmp/ompi/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PMIX_MCA_mca_base_component_path=$_ml/pmix2/lib/pmix
export PMIX_INSTALL_PREFIX=$_ml/pmix2
# Debian's /etc/openmpi/openmpi-mca-params.conf, which is not below the prefix
export OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_mtl='^ofi' OMPI_MCA_btl='^uct,openib,ofi' \
       OMPI_MCA_pml='^ucx' OMPI_MCA_osc='^ucx,pt2pt'
# In a container without ptrace rights the shared-memory transport's single-copy mode (CMA) fails
# ("process_vm_readv: Operation not permitted"): copy through the shared segment instead.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mpirun() { orterun "$@"; }
echo "ompi-env: Open MPI from /tmp/ompi ($(orterun --version 2>/dev/null | head -1))"
