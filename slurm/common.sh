# shellcheck shell=bash source-path=SCRIPTDIR
# Shared by the slurm/*.sbatch job scripts (sourced, after they have found the checkout and set
# COLLX_ROOT): the build directory, the MPI environment, the rank count, the launcher and the
# results directory of the job.
#
# Environment (all optional):
#   COLLX_BUILD_DIR   the build directory (default: $COLLX_ROOT/build)
#   COLLX_LAUNCHER    auto (default): srun --mpi=pmix when `srun --mpi=list` offers pmix, else
#                     mpirun; or srun, or mpirun
#   COLLX_NP          ranks (default: the allocation's tasks; 2 outside Slurm)
#   COLLX_RESULTS_DIR where the job writes (default: $SLURM_SUBMIT_DIR/results/$SLURM_JOB_ID)
set -euo pipefail

# scripts/common.sh: the MPI (COLLX_MPI=openmpi or mpich), BUILD_DIR (COLLX_BUILD_DIR, else
# build/ or build-mpich/) and collx_mpi_env (COLLX_MPIEXEC, the launcher of that MPI; for Open
# MPI its variables for root and OMPI_MCA_op=^avx for exact mpi reference rows).
# shellcheck source=../scripts/common.sh
source "$COLLX_ROOT/scripts/common.sh"

COLLX_JOB_NAME="${COLLX_JOB_NAME:-collx}"

collx_die() {
  echo "$COLLX_JOB_NAME: error: $*" >&2
  exit 1
}

collx_note() {
  echo "$COLLX_JOB_NAME: $*"
}

# Prints a command, shell-quoted, then runs it.
collx_run() {
  local quoted
  printf -v quoted '%q ' "$@"
  echo "+ ${quoted% }"
  "$@"
}

# collx_need_exe PATH: the build must hold PATH.
collx_need_exe() {
  [ -d "$BUILD_DIR" ] ||
    collx_die "no build directory $BUILD_DIR; build first (cmake -S $COLLX_ROOT -B $BUILD_DIR" \
      "-DCMAKE_BUILD_TYPE=Release && cmake --build $BUILD_DIR -j) or set COLLX_BUILD_DIR"
  [ -x "$1" ] ||
    collx_die "$1 is missing: build it (cmake --build $BUILD_DIR -j) or set COLLX_BUILD_DIR"
}

# The allocation's task count: SLURM_NTASKS (sbatch -n / --ntasks-per-node), else one task per
# node as srun does without -n; COLLX_NP overrides; 2 outside Slurm.
collx_allocation_tasks() {
  if [ -n "${SLURM_JOB_ID:-}" ]; then
    echo "${SLURM_NTASKS:-${SLURM_NPROCS:-${SLURM_JOB_NUM_NODES:-1}}}"
  else
    echo 2
  fi
}

# Whether srun offers the pmix plugin (the list is read whole: no SIGPIPE under pipefail).
collx_srun_has_pmix() {
  local list
  command -v srun >/dev/null || return 1
  list="$(srun --mpi=list 2>&1)" || return 1
  grep -qw pmix <<<"$list"
}

# Chooses LAUNCHER (srun or mpirun) once; collx_launch NP COMMAND... starts COMMAND on NP ranks.
collx_choose_launcher() {
  collx_pick_launcher
  collx_note "launcher: $LAUNCHER$([ "$LAUNCHER" = srun ] && echo " --mpi=pmix")"
}

collx_pick_launcher() {
  local want="${COLLX_LAUNCHER:-auto}"
  case "$want" in
    auto)
      if [ -n "${SLURM_JOB_ID:-}" ] && collx_srun_has_pmix; then
        LAUNCHER=srun
      else
        LAUNCHER=mpirun
      fi
      ;;
    srun)
      [ -n "${SLURM_JOB_ID:-}" ] || collx_die "COLLX_LAUNCHER=srun needs a Slurm allocation"
      collx_srun_has_pmix ||
        collx_die "COLLX_LAUNCHER=srun but srun offers no pmix plugin (srun --mpi=list)"
      LAUNCHER=srun
      ;;
    mpirun) LAUNCHER=mpirun ;;
    *) collx_die "COLLX_LAUNCHER=$want: use auto, srun or mpirun" ;;
  esac
  if [ "$LAUNCHER" = mpirun ]; then
    command -v "$COLLX_MPIEXEC" >/dev/null ||
      collx_die "$COLLX_MPIEXEC is not on PATH (load your MPI module, or set COLLX_MPI)"
  fi
}

collx_launch() {
  local np="$1"
  shift
  if [ "$LAUNCHER" = srun ]; then
    # One job step; a rank that fails takes the others down instead of leaving them waiting.
    collx_run srun --mpi=pmix --ntasks="$np" --kill-on-bad-exit=1 "$@"
  else
    # Inside an allocation the mpiexec of Open MPI and MPICH (hydra) takes its hosts and slots
    # from Slurm.
    collx_run "$COLLX_MPIEXEC" -n "$np" "$@"
  fi
}

# collx_init NAME: the common start of every job script.
collx_init() {
  COLLX_JOB_NAME="$1"
  collx_mpi_env
  NTASKS="${COLLX_NP:-$(collx_allocation_tasks)}"
  [[ "$NTASKS" =~ ^[1-9][0-9]*$ ]] || collx_die "rank count \"$NTASKS\" is not a positive number"
  if [ -n "${COLLX_RESULTS_DIR:-}" ]; then
    RESULTS_DIR="$COLLX_RESULTS_DIR"
  elif [ -n "${SLURM_JOB_ID:-}" ]; then
    RESULTS_DIR="${SLURM_SUBMIT_DIR:-$PWD}/results/$SLURM_JOB_ID"
  else
    RESULTS_DIR="$PWD/results/local-$(date +%Y%m%d-%H%M%S)"
  fi
  mkdir -p "$RESULTS_DIR"
  collx_note "job ${SLURM_JOB_ID:-(not under Slurm)} on ${SLURM_JOB_NODELIST:-$(hostname)}" \
    "(${SLURM_JOB_NUM_NODES:-1} node(s), $NTASKS ranks)"
  collx_note "checkout $COLLX_ROOT, build $BUILD_DIR"
  collx_note "results in $RESULTS_DIR"
}
