#!/usr/bin/env bash
# Builds allreduce_bench against every MPI found on this machine and runs MPI_Allreduce itself
# (`raw`) and mpiddp (`auto`) under each, one MPI after the other in the same session, then
# prints per MPI the raw/auto table and, per size, auto against the fastest raw of all MPIs
# (bench/compare_mpis.py). The table in docs/collectives.md comes from this script.
#
#   bash bench/compare_mpis.sh [--mpis openmpi,mpich,impi] [--runs N] [-R N] [-e SIZE] [--out DIR]
#
# MPIs: Open MPI (mpicc, mpirun), MPICH (mpicc.mpich, mpiexec.mpich; Debian's mpich and
# libmpich-dev), Intel MPI (PyPI impi-devel in the virtual environment IMPI_VENV, default
# DIR/impi-venv; created with `pip install impi-devel` when --install-impi is given). One
# that is not present is skipped with a note. Each MPI gets its own build folder DIR/<mpi>
# (default DIR: build-mpis, gitignored), Release, CUDA off, only allreduce_bench.
# Workload: np 2, f32 sum, 8 B .. 64 MB (factor 4), in and out of place, buffers from
# ddp_alloc (-M shared) and from malloc (-M host), best of -R timed loops; --runs repeats the
# whole sequence (the summary shows the worst run). As root, Open MPI needs
# OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build-mpis
MPIS=openmpi,mpich,impi
RUNS=1
REPS=3
MAXB=64M
NP=2
INSTALL_IMPI=0
while [ $# -gt 0 ]; do
  case "$1" in
    --mpis) MPIS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    -R) REPS=$2; shift 2 ;;
    -e) MAXB=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --install-impi) INSTALL_IMPI=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "compare_mpis.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
IMPI_VENV=${IMPI_VENV:-$OUT/impi-venv}

# ---- the one place that knows each MPI's compiler, launcher and environment --------------
# mpi_env MPI: exports what the MPI needs (compiler wrapper, launcher, library paths).
mpi_env() {
  case "$1" in
    openmpi) MPICC=mpicc; MPIEXEC=$(command -v mpirun || true) ;;
    mpich) MPICC=mpicc.mpich; MPIEXEC=$(command -v mpiexec.mpich || true) ;;
    impi)
      export I_MPI_ROOT=$IMPI_VENV
      export PATH=$I_MPI_ROOT/bin:$I_MPI_ROOT/bin/libfabric:$PATH
      export LD_LIBRARY_PATH=$I_MPI_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      export FI_PROVIDER_PATH=$I_MPI_ROOT/lib
      MPICC=$I_MPI_ROOT/bin/mpicc
      MPIEXEC=$I_MPI_ROOT/bin/mpiexec ;;
  esac
}
# launch MPI NP PROGRAM ARGS...: Open MPI's mpirun, or Hydra's syntax (MPICH, Intel MPI).
launch() {
  local mpi=$1 np=$2
  shift 2
  case "$mpi" in
    openmpi) "$MPIEXEC" --bind-to none -np "$np" "$@" ;;
    *) "$MPIEXEC" -n "$np" "$@" ;;
  esac
}
# present MPI: 0 if its compiler and launcher exist (Intel MPI: installs it with --install-impi).
present() {
  case "$1" in
    impi)
      if [ ! -x "$IMPI_VENV/bin/mpicc" ] && [ "$INSTALL_IMPI" = 1 ]; then
        echo "+ python3 -m venv $IMPI_VENV && pip install impi-devel" >&2
        python3 -m venv "$IMPI_VENV" && "$IMPI_VENV/bin/pip" install -q impi-devel >&2
      fi ;;
  esac
  ( mpi_env "$1"; command -v "$MPICC" >/dev/null && [ -n "$MPIEXEC" ] && [ -x "$MPIEXEC" ] )
}

built=()
for mpi in ${MPIS//,/ }; do
  case "$mpi" in openmpi|mpich|impi) ;; *) echo "compare_mpis.sh: unknown MPI $mpi" >&2; exit 2 ;; esac
  if ! present "$mpi"; then
    echo "# $mpi: not found, skipped$([ "$mpi" = impi ] && echo " (IMPI_VENV=$IMPI_VENV; --install-impi creates it)")"
    continue
  fi
  (
    mpi_env "$mpi"
    echo "+ [$mpi] configure and build allreduce_bench in $OUT/$mpi" >&2
    cmake -S . -B "$OUT/$mpi" -DCMAKE_BUILD_TYPE=Release -DDDP_CUDA=OFF -DDDP_WERROR=OFF \
      -DMPI_C_COMPILER="$(command -v "$MPICC")" -DMPIEXEC_EXECUTABLE="$MPIEXEC" > "$OUT/$mpi.cmake.log"
    cmake --build "$OUT/$mpi" -j"$(nproc)" --target allreduce_bench > "$OUT/$mpi.build.log"
  ) || { echo "# $mpi: build failed, see $OUT/$mpi.*.log"; continue; }
  built+=("$mpi")
done
[ ${#built[@]} -gt 0 ] || { echo "compare_mpis.sh: no MPI could be built" >&2; exit 1; }

echo "# $(date -u '+%F %T') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); MPIs: ${built[*]}"
rc=0
for run in $(seq "$RUNS"); do
  for mem in shared host; do
    for mpi in "${built[@]}"; do
      (
        mpi_env "$mpi"
        echo "+ [$mpi] run $run: allreduce_bench -b 8 -e $MAXB -f 4 -A raw,auto -M $mem -R $REPS" >&2
        launch "$mpi" $NP "$OUT/$mpi/apps/allreduce_bench" -b 8 -e "$MAXB" -f 4 -A raw,auto -M "$mem" \
          -R "$REPS" -J "$OUT/run$run.$mpi.$mem.json" > "$OUT/run$run.$mpi.$mem.txt"
      ) || { echo "# $mpi -M $mem run $run: allreduce_bench failed (see $OUT/run$run.$mpi.$mem.txt)"; rc=1; }
    done
  done
done
python3 bench/compare_mpis.py "$OUT" "$RUNS" "${built[@]}" || rc=1
exit $rc
