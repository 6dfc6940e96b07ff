# Source from the repository root on a bare GPU machine (CUDA driver and toolkit, no MPI, no
# packages), such as the lent device machine, before scripts/gpu-check.sh:
#   source scripts/gpu-bare-machine.sh && scripts/gpu-check.sh OUT_DIR
# Needs, carried from the build machine: the Release build with CUDA (build/, or a copy without
# object files in .gpu/build) and the staged Open MPI runtime in .mpi-runtime/
# (../shared/mpi-runtime/stage-mpi.sh .mpi-runtime, plus OpenBLAS's packages for collx-train:
# apt-get download libopenblas0-pthread libgfortran5 libquadmath0 there).
# The build's tests name their programs by absolute path (the build machine's /work/main/build)
# and MPI as /usr/bin/mpiexec.openmpi: both are linked here.
_root=$PWD
[ "$_root" = /work/main ] || { mkdir -p /work && ln -sfn "$_root" /work/main; }
[ -e /work/main/build ] || ln -sfn "$_root/.gpu/build" /work/main/build
source .mpi-runtime/mpi-env.sh
_orterun=$(command -v orterun)
ln -sf "$_orterun" /usr/bin/mpiexec.openmpi
ln -sf "$_orterun" /usr/local/bin/mpirun
_cublas=$(dirname "$(find /usr/local/cuda*/ /opt /usr/lib -name 'libcublas.so.13*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=/tmp/mpiroot/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/local/cuda/lib64:$_cublas:$LD_LIBRARY_PATH
# One node: shared memory only, Open MPI's own point-to-point (its UCX component stays off).
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 PMIX_MCA_pcompress_base_silence_warning=1
unset _root _orterun _cublas
