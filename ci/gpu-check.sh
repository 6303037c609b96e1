#!/usr/bin/env bash
# GPU check: on a machine with an NVIDIA GPU, builds mpiddp with CUDA (and NCCL when found),
# runs the `gpu` and `emulate` tests, benchmarks device buffers for every transport (np=1, and
# np=2 sharing the one GPU for the MPI paths), runs ddp_bench / ddp_train on the GPU where
# those apps support it, and writes every table and log to an output folder. Budget: < 8 min.
#
#   ci/gpu-check.sh [OUT_DIR]                    # default OUT_DIR: $OUT or build-gpucheck/gpu-check-out
#   GPUCHECK_MPI_DEBS=DIR ci/gpu-check.sh [OUT_DIR]   # use Open MPI unpacked from carried .debs
#                                                # (GPUCHECK_FORCE_CARRIED_MPI=1: even if one exists)
#   ci/gpu-check.sh --fetch-mpi-debs DIR         # run on a Debian build machine: downloads
#                                                # Open MPI's .debs and their libraries to DIR
#
# The GPU machines have the CUDA toolkit, cuBLAS and NCCL but probably no MPI and no package
# registry. If `mpirun` is missing, carry the .debs made by --fetch-mpi-debs and point
# GPUCHECK_MPI_DEBS at them: they are unpacked with `dpkg -x` and PATH, LD_LIBRARY_PATH and
# OPAL_PREFIX are set (Debian's Open MPI is relocatable through OPAL_PREFIX).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# ---- build-machine side: fetch Open MPI .debs -------------------------------------------
if [ "${1:-}" = "--fetch-mpi-debs" ]; then
  dir=${2:?usage: ci/gpu-check.sh --fetch-mpi-debs DIR}
  mkdir -p "$dir" && cd "$dir" || exit 1
  # Open MPI's and OpenBLAS's run-time closure, plus headers/wrappers (the build needs mpicc,
  # mpi.h, zlib.h and cblas.h); the base system (libc, libstdc++, PAM, ...) is assumed there.
  runtime=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
           --no-replaces --no-enhances openmpi-bin libopenmpi3 openmpi-common libopenblas0-pthread 2>/dev/null |
         grep -E '^[a-z0-9]' | sort -u |
         grep -vE '^(libc6|libgcc-s1|libstdc\+\+6|gcc-12-base|c?debconf|dpkg|adduser|passwd|tar|install-info|libpam.*|libselinux1|libsemanage.*|libsepol2|libaudit.*|libdebian-installer4|libnewt0.52|libslang2|libtextwrap1|readline-common|libreadline8|libtinfo6|libcrypt1|libdb5.3|libacl1|libbz2-1.0|liblzma5|libzstd1|libmd0|libbsd0|libx11.*|libxau6|libxcb1|libxdmcp6|libssl3|libudev1|libuuid1|libpcre2-8-0|libcap-ng0|libicu72|libxml2|zlib1g)$')
  deps="$runtime libopenmpi-dev zlib1g-dev libopenblas-dev libopenblas-pthread-dev"
  echo "downloading: $deps"
  apt-get download $deps
  ls -1 *.deb | wc -l
  exit 0
fi

OUT_DIR=${1:-${OUT:-$ROOT/build-gpucheck/gpu-check-out}}
mkdir -p "$OUT_DIR"
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT_DIR/summary.txt"; }
BUDGET_S=${GPUCHECK_BUDGET_S:-470} # the whole run stays under 8 minutes
step() { # step NAME TIMEOUT_S CMD... : runs CMD, output to OUT_DIR/NAME.txt, records the status
  local name=$1 to=$2; shift 2
  local left=$(( BUDGET_S - ($(date +%s) - T0) ))
  if [ "$left" -lt 10 ]; then log "$name: skipped (time budget of ${BUDGET_S}s used up)"; return 124; fi
  [ "$to" -gt "$left" ] && to=$left
  timeout "$to" "$@" > "$OUT_DIR/$name.txt" 2>&1
  local rc=$?
  log "$name: rc=$rc ($*)"
  return $rc
}

# ---- probe -------------------------------------------------------------------------------
{
  echo "== date"; date -u
  echo "== nvidia-smi"; nvidia-smi 2>&1 | head -20
  echo "== nvcc"; (command -v nvcc || ls /usr/local/cuda/bin/nvcc) 2>&1; nvcc --version 2>&1 | tail -2
  echo "== cmake"; cmake --version 2>&1 | head -1
  echo "== mpirun"; command -v mpirun 2>&1; mpirun --version 2>&1 | head -2
  echo "== ldconfig mpi"; ldconfig -p 2>/dev/null | grep -i mpi | head
  echo "== nccl"; ldconfig -p 2>/dev/null | grep -i nccl | head; ls /usr/local/cuda/lib*/libnccl* 2>/dev/null
  echo "== cpus"; nproc
} > "$OUT_DIR/probe.txt" 2>&1
log "probe written to probe.txt"

# GPUCHECK_FORCE_CARRIED_MPI=1 uses the carried Open MPI even where one is installed (to test it).
if ! command -v mpirun > /dev/null 2>&1 || [ "${GPUCHECK_FORCE_CARRIED_MPI:-0}" = 1 ]; then
  if [ -n "${GPUCHECK_MPI_DEBS:-}" ] && ls "$GPUCHECK_MPI_DEBS"/*.deb > /dev/null 2>&1; then
    MPI_ROOT=$OUT_DIR/mpi-root
    mkdir -p "$MPI_ROOT"
    for f in "$GPUCHECK_MPI_DEBS"/*.deb; do dpkg -x "$f" "$MPI_ROOT"; done
    multi=$(ls -d "$MPI_ROOT"/usr/lib/*-linux-gnu | head -1)
    # dpkg -x does not run update-alternatives: point the generic names at Open MPI's.
    for t in mpirun mpiexec mpicc; do
      [ -e "$MPI_ROOT/usr/bin/$t" ] || ln -sf "$t.openmpi" "$MPI_ROOT/usr/bin/$t"
    done
    for l in libopenblas.so libopenblas.so.0 libblas.so.3 libcblas.so.3; do
      [ -e "$multi/openblas-pthread/$l" ] && ln -sf "openblas-pthread/$l" "$multi/$l"
    done
    export PATH=$MPI_ROOT/usr/bin:$PATH
    export LD_LIBRARY_PATH=$multi:$multi/openmpi/lib:$multi/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export OPAL_PREFIX=$MPI_ROOT/usr
    export CMAKE_PREFIX_PATH=$MPI_ROOT/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
    # One node only: no remote launcher is needed, but Open MPI wants one to exist.
    command -v ssh > /dev/null 2>&1 || export OMPI_MCA_plm_rsh_agent=false
    log "Open MPI unpacked from $GPUCHECK_MPI_DEBS into $MPI_ROOT (OPAL_PREFIX=$OPAL_PREFIX)"
    mpirun --version 2>&1 | head -1 | tee -a "$OUT_DIR/summary.txt"
  else
    log "no mpirun and no GPUCHECK_MPI_DEBS: cannot build (see --fetch-mpi-debs)"
    exit 2
  fi
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Every MPI job starts through the one launcher place (Open MPI, Hydra or srun; mpiexec on PATH
# unless MPILAUNCH_MPIEXEC names another).
LAUNCH=$ROOT/tools/mpilaunch

# ---- build -------------------------------------------------------------------------------
BUILD=$ROOT/build-gpucheck
JOBS=$(nproc 2>/dev/null || echo 4)
step configure 180 cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDDP_CUDA=ON \
  -DDDP_NCCL=AUTO -DCMAKE_CUDA_ARCHITECTURES=90 || { log "configure failed"; exit 3; }
grep -E "mpiddp" "$OUT_DIR/configure.txt" | tee -a "$OUT_DIR/summary.txt"
step build 300 cmake --build "$BUILD" -j "$JOBS" || { log "build failed"; tail -30 "$OUT_DIR/build.txt"; exit 4; }

# ---- tests -------------------------------------------------------------------------------
step ctest-gpu 150 ctest --test-dir "$BUILD" -L gpu --output-on-failure
step ctest-emulate 120 ctest --test-dir "$BUILD" -L emulate --output-on-failure
step ddp_info 30 "$LAUNCH" -n 1 "$BUILD/apps/ddp_info"

# ---- benchmarks ----------------------------------------------------------------------------
B=$BUILD/tests/gpu_bench
step gpu_bench_np1 150 "$LAUNCH" -n 1 "$B" -b 8 -e 1073741824 -f 4 -n 10 -A staged,mpi,nccl \
  -o "$OUT_DIR/gpu_bench_np1.json"
step gpu_bench_np1_bf16 90 "$LAUNCH" -n 1 "$B" -b 1024 -e 268435456 -f 16 -n 5 -d bf16 \
  -A staged,mpi,nccl -o "$OUT_DIR/gpu_bench_np1_bf16.json"
# Two ranks on the one GPU: the MPI paths (NCCL refuses two ranks on one device).
step gpu_bench_np2 150 "$LAUNCH" -n 2 "$B" -b 8 -e 268435456 -f 4 \
  -n 5 -A staged,mpi -o "$OUT_DIR/gpu_bench_np2.json"
A=$BUILD/apps/allreduce_bench
if [ -x "$A" ]; then
  step allreduce_bench_cuda_np1 90 "$LAUNCH" -n 1 "$A" -b 8 -e 1G -f 8 -M cuda -A staged,mpi,nccl \
    -t 0.5 -J "$OUT_DIR/allreduce_bench_cuda_np1.json"
  step allreduce_bench_cuda_np2 90 "$LAUNCH" -n 2 "$A" -b 8 -e 256M -f 8 -M cuda \
    -A staged,mpi -t 0.5 -J "$OUT_DIR/allreduce_bench_cuda_np2.json"
fi
# The apps' --device flags belong to their own work: run them where the build has them.
if [ -x "$BUILD/apps/ddp_bench" ]; then
  step ddp_bench_cuda 90 "$LAUNCH" -n 1 "$BUILD/apps/ddp_bench" --device cuda --steps 20 \
    -J "$OUT_DIR/ddp_bench_cuda.json"
  step ddp_bench_host 90 "$LAUNCH" -n 1 "$BUILD/apps/ddp_bench" --steps 20 -J "$OUT_DIR/ddp_bench_host.json"
fi
if [ -x "$BUILD/apps/ddp_train" ]; then
  for amp in "" "--amp fp16" "--amp bf16"; do
    name=ddp_train_cuda${amp:+_${amp##* }}
    # shellcheck disable=SC2086
    step "$name" 90 "$LAUNCH" -n 1 "$BUILD/apps/ddp_train" --device cuda $amp --epochs 1 \
      --limit-steps 200 --limit-test 2000 --metrics "$OUT_DIR/$name.csv"
  done
fi
log "done in $(( $(date +%s) - T0 ))s; tables in $OUT_DIR"
