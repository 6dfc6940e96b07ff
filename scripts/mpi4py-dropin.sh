#!/usr/bin/env bash
# An independent test suite through the drop-in: mpi4py's own unit tests (mpi4py 3.1.6 from
# PyPI, built against the MPI library here), run with the MPI library alone and with
# libcollx_mpi preloaded at each rank count, test by test compared. A test whose outcome differs
# (ok, skipped, FAIL, ERROR) between the two, on any rank, is a finding; so is a run that does
# not end (timeout) or ends with another status.
#
# mpi4py asks for MPI_THREAD_MULTIPLE by default, where the drop-in passes every call to the
# MPI library (docs/RELIABILITY.md): the suite runs with --thread-level=serialized, so that the
# drop-in's own algorithms take the calls. test_spawn is left out: it needs free slots for
# MPI_Comm_spawn and fails or hangs under Open MPI alone on an oversubscribed machine.
#
#   scripts/mpi4py-dropin.sh OUTDIR [NPS="2 3"] [extra runtests.py arguments]
#
# MPI4PY_VENV: a virtualenv that has mpi4py 3.1.6 already (made in OUTDIR/venv otherwise; needs
# PyPI). Writes OUTDIR/table.md; exits 1 where an outcome differs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env

out="${1:?usage: mpi4py-dropin.sh OUTDIR [NPS] [runtests.py arguments]}"
nps="${2:-2 3}"
shift $(($# > 1 ? 2 : 1))
version=3.1.6
library="$BUILD_DIR/dropin/libcollx_mpi.so"
[ -f "$library" ] || { echo "mpi4py-dropin: build first ($library)" >&2; exit 1; }
library="$(realpath "$library")"  # the suite runs from its own folder
mkdir -p "$out"
out="$(cd "$out" && pwd)"
venv="${MPI4PY_VENV:-$out/venv}"
# The MPI library mpi4py was built against, as the name its MPI_Get_library_version starts with.
library_name() {
  "$venv/bin/python" -c "from mpi4py import MPI; print(MPI.Get_library_version().split()[0])" \
    2>/dev/null || true
}
expected=MPICH
[ "$COLLX_MPI" = openmpi ] && expected=Open
if ! "$venv/bin/python" -c "import mpi4py, sys; sys.exit(mpi4py.__version__ != '$version')" 2>/dev/null ||
  [ "$(library_name)" != "$expected" ]; then
  python3 -m venv --clear "$venv"
  # mpi4py 3.1's setup.py needs setuptools' distutils from before version 70. No cached wheel:
  # pip would take one built against the other MPI.
  "$venv/bin/pip" install -q "setuptools<70" wheel numpy
  MPICC="$(command -v "mpicc.$COLLX_MPI" || command -v mpicc)" "$venv/bin/pip" install -q \
    --no-cache-dir --no-build-isolation --no-binary mpi4py "mpi4py==$version"
fi
[ "$(library_name)" = "$expected" ] || {
  echo "mpi4py-dropin: mpi4py in $venv is not built against $COLLX_MPI" >&2
  exit 2
}
suite="$out/mpi4py-$version"
if [ ! -f "$suite/test/runtests.py" ]; then
  "$venv/bin/pip" download -q --no-binary :all: --no-deps "mpi4py==$version" -d "$out"
  tar xzf "$out/mpi4py-$version.tar.gz" -C "$out"
fi

# Each test's outcome on every rank: "rank test outcome", sorted.
outcomes() {
  for f in "$1"/rank.*; do
    { grep -hE '^test\S+ \(.*\) \.\.\. ' "$f" || true; } |
      sed -E "s/ \.\.\. (ok|skipped|FAIL|ERROR|expected failure|unexpected success).*/ \1/; s/^/${f##*/} /"
  done | sort
}

differs=0
{
  echo "mpi4py $version's test suite through libcollx_mpi: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$COLLX_ROOT" log --oneline -1 | cut -c1-7)"
  echo "machine: $(lscpu | grep -E '^CPU\(s\)|Model name' | sed 's/  */ /g' | tr '\n' ' ')"
  "$COLLX_MPIEXEC" --version 2>&1 | sed -n 1p
  echo
  echo "| ranks | side | status | tests | skipped | failures + errors | wall s | intercepted / passed through (rank 0) |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$out/table.md"
for np in $nps; do
  for side in native dropin; do
    log="$out/${side}_np$np"
    rm -rf "$log"
    mkdir -p "$log"
    pre=()
    [ "$side" = dropin ] && pre=(env LD_PRELOAD="$library" COLLX_PMPI_STATS=1)
    start=$(date +%s)
    status=0
    (cd "$suite" && timeout -k 20 900 "$COLLX_MPIEXEC" -n "$np" "${COLLX_MPIEXEC_FLAGS[@]}" \
      "${pre[@]}" sh -c 'exec "$@" >"$0/rank.${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" 2>&1' \
      "$log" "$venv/bin/python" test/runtests.py -v --thread-level=serialized -e test_spawn "$@") ||
      status=$?
    wall=$(($(date +%s) - start))
    # (Where a pattern is missing, as the drop-in's line in a native run, the field stays empty.)
    summary="$(grep -hE '^Ran [0-9]+ tests' "$log/rank.0" | awk '{print $2}' || true)"
    skipped="$(grep -hoE 'skipped=[0-9]+' "$log/rank.0" | tail -1 | cut -d= -f2 || true)"
    bad="$(outcomes "$log" | awk '$NF == "FAIL" || $NF == "ERROR"' | wc -l)"
    stats="$(grep -hoE 'intercepted [0-9]+, passed through [0-9]+' "$log/rank.0" |
      sed 's/intercepted //; s/, passed through / \/ /' || true)"
    echo "| $np | $side | $status | ${summary:-?} | ${skipped:-0} | $bad | $wall | ${stats:--} |" >>"$out/table.md"
    if [ "$side" = dropin ] && [ -z "$stats" ]; then
      echo "mpi4py-dropin: the drop-in did not report its calls at $np ranks ($log/rank.0)" >&2
      differs=1
    fi
    outcomes "$log" >"$log/outcomes.txt"
  done
  if ! diff "$out/native_np$np/outcomes.txt" "$out/dropin_np$np/outcomes.txt" >"$out/diff_np$np.txt"; then
    differs=1
  fi
done
{
  echo
  if [ "$differs" = 0 ]; then
    echo "Every test's outcome on every rank is the same with the drop-in as without it."
  else
    echo "Outcomes differ: $(cat "$out"/diff_np*.txt | grep -c '^[<>]') lines in $out/diff_np*.txt."
  fi
} >>"$out/table.md"
cat "$out/table.md"
exit "$differs"
