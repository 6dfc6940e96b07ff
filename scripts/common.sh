# Shared by run-main.sh and run-tests.sh: install what is missing (Debian 12, apt-get), build.
set -euo pipefail

COLLX_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${COLLX_BUILD_DIR:-$COLLX_ROOT/build}"

# Debian packages the build, the tests and the apps use.
COLLX_PACKAGES=(
  build-essential cmake pkg-config
  openmpi-bin libopenmpi-dev libucx-dev
  libgtest-dev libcli11-dev nlohmann-json3-dev
  libopenblas-dev zlib1g-dev    # collx-train: GEMM (cblas), gzipped data sets
  dataset-fashion-mnist         # collx-train's data (the main job)
  iproute2 iputils-ping munge slurmctld slurmd slurm-client  # tests -L cluster: scripts/emulated-cluster
  python3-torch libtorch-dev python3-pybind11  # the torch.distributed backend (collx_torch)
)

collx_install_packages() {
  local missing=()
  for pkg in "${COLLX_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  echo "collx: installing ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

collx_build() {
  cmake -S "$COLLX_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$BUILD_DIR" -j "$(nproc)"
}

# Open MPI refuses root unless told; CI and fresh machines run as root.
collx_mpi_env() {
  if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  # Debian's Open MPI 4.1.4 computes int8/uint8 MPI_SUM with saturating AVX adds: the `mpi`
  # reference rows need its plain C reduction.
  export OMPI_MCA_op='^avx'
}
