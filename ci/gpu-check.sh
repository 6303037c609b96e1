#!/usr/bin/env bash
# GPU check: the one script the GPU machine runs (docs/gpu.md). That machine starts bare (nvcc,
# CMake, ninja, PyTorch with the nvidia-nccl / nvidia-cublas wheels; no MPI, no network), so it
# first unpacks the carry folder made by ci/gpu-prepare.sh into a private prefix and checks the
# MPI found there, then builds for sm_90 only and runs the GPU tests, the GPU benchmark and
# ddp_train --device cuda on the carried Fashion-MNIST. Target: at most 5 minutes on 16 cores.
#
#   bash ci/gpu-check.sh                 on the GPU machine (results in $OUT)
#   GPUCHECK_CARRY=DIR                   the carry folder (default gpucarry/ in the repository)
#   DDP_REQUIRE_GPU=1                    no GPU, or a test skipped for want of one, is a failure
#   GPUCHECK_DRY_RUN=1                   CPU dry run (ctest label gpucheck): carry, unpack, MPI
#                                        checks and configure only; GPU steps are skipped
#   GPUCHECK_SCRATCH=DIR                 logs, prefix and build (default: a new /tmp folder)
#   GPUCHECK_BUDGET_S=S                  the whole run's budget (default 420)
#
# Every step runs under `timeout -k 10`, logs to the scratch folder and is recorded with its
# status and duration; the script exits with the worst step status. Whatever happens, the
# EXIT trap leaves exactly two files in $OUT: summary.txt (every step, key figures; rewritten
# after each step, so even a killed run leaves one) and gpucheck.tgz (logs, JSON, metrics).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
. ci/gpu-common.sh
export GPU_MULTIARCH GPU_BASE_SONAMES GPU_FMNIST_FILES # the steps run in child shells

CARRY=${GPUCHECK_CARRY:-gpucarry}
case "$CARRY" in /*) ;; *) CARRY=$ROOT/$CARRY ;; esac
SCRATCH=${GPUCHECK_SCRATCH:-$(mktemp -d /tmp/gpucheck.XXXXXX)}
mkdir -p "$SCRATCH" && SCRATCH=$(cd "$SCRATCH" && pwd)
OUTDIR=${OUT:-$SCRATCH/out}
PREFIX=$SCRATCH/prefix BUILD=$SCRATCH/build LOGS=$SCRATCH/logs FMNIST=$CARRY/fmnist
DRY=${GPUCHECK_DRY_RUN:-0}
REQUIRE=${DDP_REQUIRE_GPU:-0}
BUDGET_S=${GPUCHECK_BUDGET_S:-420}
JOBS=$(nproc 2>/dev/null || echo 4)
rm -rf "$LOGS" && mkdir -p "$LOGS" "$OUTDIR"
export ROOT PREFIX BUILD LOGS FMNIST JOBS

# ---- MPI: the one place that launches it (Open MPI from the private prefix, as root) -------
# Jobs start through tools/mpilaunch (the project's one launcher place), told to use this mpirun.
MPIEXEC=$PREFIX/usr/bin/mpirun
launch() { # launch NP PROGRAM ARGS...
  local np=$1
  shift
  MPILAUNCH_MPIEXEC=$MPIEXEC MPILAUNCH_KIND=openmpi "$ROOT/tools/mpilaunch" -n "$np" -- "$@"
}
export MPIEXEC
export -f launch

# ---- steps ------------------------------------------------------------------------------
T0=$(date +%s)
WORST=0
STEPS=()   # "name|status|seconds|note"
FIGURES=() # key figures for the summary
DEVICE="none"

write_summary() {
  local now total f
  now=$(date +%s)
  total=$((now - T0))
  {
    echo "mpiddp GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), host $(hostname)"
    echo "mode: $([ "$DRY" = 1 ] && echo 'CPU dry run' || echo 'GPU run'), DDP_REQUIRE_GPU=$REQUIRE, $JOBS cores, carry $CARRY"
    echo "device: $DEVICE"
    echo "result: $([ "$WORST" = 0 ] && echo PASS || echo "FAIL (worst step status $WORST)") after ${total} s (budget ${BUDGET_S} s)"
    echo
    printf '%-16s %-8s %7s  %s\n' step status seconds note
    for f in "${STEPS[@]}"; do
      IFS='|' read -r n st sec note <<<"$f"
      printf '%-16s %-8s %7s  %s\n' "$n" "$st" "$sec" "$note"
    done
    echo
    echo "key figures:"
    [ ${#FIGURES[@]} -gt 0 ] || echo "  (none)"
    for f in "${FIGURES[@]}"; do echo "  $f"; done
    echo
    echo "logs, JSON and metrics: gpucheck.tgz"
  } >"$OUTDIR/summary.txt.tmp" && mv -f "$OUTDIR/summary.txt.tmp" "$OUTDIR/summary.txt"
}

record() { # record NAME STATUS SECONDS NOTE [RC]
  STEPS+=("$1|$2|$3|${4//|//}")
  if [ -n "${5:-}" ] && [ "$5" -gt "$WORST" ]; then WORST=$5; fi
  write_summary
}

skip() { # skip NAME REASON: not run; a failure only when it is for want of a GPU under REQUIRE
  record "$1" skip 0 "$2"
}

# step NAME TIMEOUT CMD ARGS...: runs CMD (a program or an exported function) under timeout,
# output to $LOGS/NAME.log. Returns its status; 124 is a timeout.
step() {
  local name=$1 to=$2 t rc left st note
  shift 2
  left=$((BUDGET_S - ($(date +%s) - T0)))
  if [ "$left" -lt 20 ]; then
    record "$name" FAIL 0 "not run: the ${BUDGET_S} s budget is used up" 1
    return 1
  fi
  [ "$to" -gt "$left" ] && to=$((left - 10))
  t=$(date +%s)
  timeout -k 10 "$to" bash -c '"$@"' _ "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  local last
  last=$(grep -v '^[[:space:]]*$' "$LOGS/$name.log" | tail -1 | cut -c1-160)
  [ -n "${STEP_GREP:-}" ] && last=$(grep -m1 -E "$STEP_GREP" "$LOGS/$name.log" | sed 's/^-- //' | cut -c1-160)
  case $rc in
    0) st=pass note=${STEP_NOTE:-$last} ;;
    124 | 137) st=TIMEOUT note="killed after ${to} s${STEP_NOTE:+; $STEP_NOTE}" rc=124 ;;
    *) note=$(grep -m1 -E 'CMake Error|error:|FAIL|missing libraries|refuse' "$LOGS/$name.log" | cut -c1-160)
       [ -n "$note" ] || note=$(grep -m1 -iE 'error|fail|not found|missing' "$LOGS/$name.log" | cut -c1-160)
       st=FAIL note="exit $rc: ${note:-$last}" ;;
  esac
  record "$name" "$st" "$(($(date +%s) - t))" "$note" "$rc"
  STEP_NOTE="" STEP_GREP=""
  return $rc
}

finish() {
  local rc=$?
  [ "$WORST" = 0 ] && [ "$rc" != 0 ] && WORST=$rc
  write_summary
  [ -f "$BUILD/Testing/Temporary/LastTest.log" ] && cp "$BUILD/Testing/Temporary/LastTest.log" "$LOGS/ctest-LastTest.log"
  cp "$OUTDIR/summary.txt" "$LOGS/summary.txt" 2>/dev/null
  tar -czf "$OUTDIR/gpucheck.tgz" -C "$SCRATCH" logs 2>/dev/null
  exit "$WORST"
}
trap finish EXIT
trap 'exit 143' TERM INT
write_summary

# The rest depends on the carry folder and the MPI in it: without them, stop here.
need() { [ "$1" = 0 ] || { skip rest "not run: step $2 failed"; exit; }; }

# ---- 1. carry folder: every file present and intact ---------------------------------------
check_carry() {
  local f n
  [ -d "$CARRY" ] || { echo "carry folder $CARRY missing (ci/gpu-prepare.sh makes it)"; return 1; }
  [ -f "$CARRY/MANIFEST" ] || { echo "$CARRY/MANIFEST missing"; return 1; }
  (cd "$CARRY" && sha256sum --quiet -c MANIFEST) || { echo "carry folder does not match its MANIFEST"; return 1; }
  for f in $GPU_FMNIST_FILES; do
    grep -q " fmnist/$f\$" "$CARRY/MANIFEST" && [ -s "$CARRY/fmnist/$f" ] || { echo "fmnist/$f not carried"; return 1; }
  done
  n=$(grep -c ' debs/.*\.deb$' "$CARRY/MANIFEST")
  [ "$n" -gt 0 ] || { echo "no .deb files carried"; return 1; }
  echo "$n packages, $(du -sm "$CARRY" | cut -f1) MiB, MANIFEST matches"
}
export CARRY
export -f check_carry
step carry 60 check_carry
need $? carry

# ---- 2. unpack into the private prefix -----------------------------------------------------
export -f gpu_unpack
STEP_NOTE="$(ls "$CARRY"/debs/*.deb | wc -l) packages into $PREFIX"
step unpack 120 gpu_unpack "$CARRY/debs" "$PREFIX"
need $? unpack
gpu_mpi_env "$PREFIX"

# ---- 3. the MPI there: mpicc, mpi.h, no missing library, two ranks run ----------------------
check_mpi() {
  local missing hello=$LOGS/hello
  echo "== mpicc"; mpicc --showme || return 1
  echo "== mpi.h"; ls "$PREFIX"/usr/lib/$GPU_MULTIARCH/openmpi/include/mpi.h || return 1
  echo "== ldd over the unpacked tree"
  missing=$(gpu_elf_files "$PREFIX" | xargs -r ldd 2>/dev/null | grep "not found" | sort -u)
  if [ -n "$missing" ]; then
    echo "missing libraries: $(echo "$missing" | awk '{ print $1 }' | sort -u | tr '\n' ' ')"
    echo "$missing"
    return 1
  fi
  echo "none missing"
  if command -v readelf >/dev/null; then
    echo "== NEEDED closure (readelf)"
    missing=$(gpu_missing_sonames "$PREFIX")
    if [ -n "$missing" ]; then echo "needed but not carried: $missing"; return 1; fi
    echo "complete"
  fi
  echo "== hello"
  printf '%s\n' '#include <mpi.h>' '#include <stdio.h>' \
    'int main(int c, char **v) { int r, n, s = 0; MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r);' \
    '  MPI_Comm_size(MPI_COMM_WORLD, &n); MPI_Allreduce(&r, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);' \
    '  printf("rank %d of %d: sum %d\n", r, n, s); MPI_Finalize(); return s != n * (n - 1) / 2; }' >"$hello.c"
  mpicc -o "$hello" "$hello.c" || return 1
  launch 2 "$hello" || return 1
  echo "$(mpirun --version 2>/dev/null | head -1): mpicc, mpi.h, every library found, 2 ranks ran"
}
export -f check_mpi gpu_elf_files gpu_missing_sonames
step mpi 90 check_mpi
need $? mpi

# ---- 4. NCCL and cuBLAS from the pip wheels, nvcc -------------------------------------------
export PATH=/usr/local/cuda/bin:$PATH
CMAKE_EXTRA=()
wheel_dir() { python3 -c "import $1 as m; print(list(m.__path__)[0])" 2>/dev/null; }
find_wheels() {
  local d note=""
  if d=$(wheel_dir nvidia.nccl) && [ -f "$d/include/nccl.h" ] && [ -e "$d/lib/libnccl.so.2" ]; then
    CMAKE_EXTRA+=(-DNCCL_INCLUDE_DIR="$d/include" -DNCCL_LIBRARY="$d/lib/libnccl.so.2")
    export LD_LIBRARY_PATH=$d/lib:$LD_LIBRARY_PATH
    note="NCCL wheel $d"
  else
    note="no nvidia-nccl wheel (CMake searches the CUDA toolkit)"
  fi
  if d=$(wheel_dir nvidia.cublas) && [ -d "$d/lib" ]; then
    CMAKE_EXTRA+=(-DDDP_CUBLAS_ROOT="$d")
    export LD_LIBRARY_PATH=$d/lib:$LD_LIBRARY_PATH
    note="$note; cuBLAS wheel $d"
  fi
  note="$note; nvcc: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo none)"
  echo "$note"
}
t=$(date +%s)
note=$(find_wheels 2>&1 | tail -1)
find_wheels >/dev/null 2>&1 # again in this shell: CMAKE_EXTRA and LD_LIBRARY_PATH
record wheels pass $(($(date +%s) - t)) "$note"

# ---- 5. the GPU ---------------------------------------------------------------------------
GPUS=0
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi >"$LOGS/nvidia-smi.log" 2>&1
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  DEVICE=$(nvidia-smi -L 2>/dev/null | head -1)
fi
if [ "$GPUS" = 0 ] && ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  GPUS=$(ls -d /dev/nvidia[0-9]* | wc -l) # a container without nvidia-smi: the device files
  DEVICE="$GPUS device file(s) /dev/nvidia[0-9]* (no nvidia-smi)"
fi
[ "$GPUS" -gt 0 ] || DEVICE="none (no nvidia-smi or no GPU listed)"
if [ "$GPUS" -gt 0 ]; then record gpu pass 0 "$GPUS GPU(s): $DEVICE"
elif [ "$REQUIRE" = 1 ]; then record gpu FAIL 0 "no GPU, and DDP_REQUIRE_GPU=1" 1
else skip gpu "no GPU: the GPU steps below are skipped"; fi

# ---- 6. configure and build (sm_90 only) ----------------------------------------------------
GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
STEP_GREP='mpiddp [0-9]'
step configure 150 cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DDDP_CUDA=AUTO -DDDP_NCCL=AUTO -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DMPI_C_COMPILER="$PREFIX/usr/bin/mpicc" -DMPIEXEC_EXECUTABLE="$MPIEXEC" "${CMAKE_EXTRA[@]}"
need $? configure
if ! grep -q "^MPI_C_COMPILER:.*=$PREFIX/" "$BUILD/CMakeCache.txt" ||
  ! grep -q "^MPIEXEC_EXECUTABLE:.*=$MPIEXEC\$" "$BUILD/CMakeCache.txt"; then
  record configure FAIL 0 "the build did not take the carried MPI (CMakeCache.txt)" 1
  need 1 configure
fi
FIGURES+=("configure: $(grep -E '^-- mpiddp: (CUDA|NCCL|MPI [0-9])' "$LOGS/configure.log" | sed 's/^-- mpiddp: //' | tr '\n' ';' | sed 's/;$//; s/;/; /g')")
HAVE_CUDA=$(grep -c ': CUDA=1 ' "$LOGS/configure.log")
if [ "$GPUS" -gt 0 ] && [ "$HAVE_CUDA" = 0 ]; then
  record cuda FAIL 0 "a GPU but the build has no CUDA (see configure.log)" 1
fi

TARGETS=(ddp_info gpu_device gpu_coll gpu_bench ddp_train)
if [ "$DRY" = 1 ]; then
  skip build "dry run"
else
  STEP_NOTE="targets ${TARGETS[*]}, $JOBS jobs"
  step build 240 cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"
  need $? build
fi

# ---- 7. on the GPU ----------------------------------------------------------------------
gpu_ok() { # gpu_ok NAME: 0 when the GPU steps can run, else records why not
  if [ "$DRY" = 1 ]; then skip "$1" "dry run: not built"; return 1; fi
  if [ "$GPUS" = 0 ]; then skip "$1" "no GPU"; return 1; fi
  return 0
}
B=$BUILD/tests/gpu_bench
if gpu_ok ddp_info; then
  step ddp_info 60 launch 1 "$BUILD/apps/ddp_info"
  grep -qE ' [0-9]+ of [0-9]+' "$LOGS/ddp_info.log" ||
    record ddp_info FAIL 0 "the library bound no GPU: $(grep -m1 'gpu\|none' "$LOGS/ddp_info.log")" 1
fi
if gpu_ok ctest_gpu; then
  # gpu_bench_np1 is left to the benchmark steps below (the same program, more sizes).
  export TRAIN_GPU_DATA=$FMNIST
  step ctest_gpu 240 ctest --test-dir "$BUILD" -L gpu -E '^gpu_bench_np1$' --output-on-failure --timeout 200
  skipped=$(grep -c '\*\*\*Skipped' "$LOGS/ctest_gpu.log")
  FIGURES+=("ctest -L gpu: $(grep -m1 'tests passed' "$LOGS/ctest_gpu.log")")
  if [ "$skipped" -gt 0 ] && [ "$REQUIRE" = 1 ]; then
    record ctest_gpu FAIL 0 "$skipped GPU test(s) skipped under DDP_REQUIRE_GPU=1" 1
  fi
fi
if gpu_ok bench_np1; then
  step bench_np1 120 launch 1 "$B" -b 8 -e 1073741824 -f 8 -n 10 -A staged,mpi,nccl -o "$LOGS/gpu_bench_np1.json"
  while read -r l; do FIGURES+=("np=1 $l"); done < <(grep -E '^#   (reduction|staged)' "$LOGS/bench_np1.log")
  while read -r l; do FIGURES+=("np=1 copy GB/s (bytes d2d h2d d2h): $l"); done < \
    <(awk '/copy and kernel rates/ { on = 1; next } on && /^ +[0-9]/ { print $1, $2, $3, $4 } /^# allreduce/ { on = 0 }' "$LOGS/bench_np1.log" | tail -2)
fi
if gpu_ok bench_np2; then
  step bench_np2 120 launch 2 "$B" -b 8 -e 268435456 -f 8 -n 5 -A staged,mpi,nccl -o "$LOGS/gpu_bench_np2.json"
  while read -r l; do FIGURES+=("np=2 $l"); done < <(grep -E '^# transport .* skipped|^#   staged' "$LOGS/bench_np2.log")
  FIGURES+=("np=2 allreduce at 256 MB: $(grep -E '^ +268435456 ' "$LOGS/bench_np2.log" | tr -s ' ')")
fi
for amp in f32 bf16; do
  if gpu_ok "train_$amp"; then
    flags=()
    [ "$amp" = bf16 ] && flags=(--amp bf16)
    step "train_$amp" 150 launch 2 "$BUILD/apps/ddp_train" --device cuda "${flags[@]}" --data "$FMNIST" \
      --epochs 1 --no-progress --metrics "$LOGS/train_$amp.csv"
    FIGURES+=("ddp_train np=2 --device cuda $amp: $(grep -m1 '^final:' "$LOGS/train_$amp.log"); $(awk '$1 == "1" && NF == 5 { print $4 " samples/s" }' "$LOGS/train_$amp.log"); $(grep -m1 'model arithmetic' "$LOGS/train_$amp.log" | sed 's/^# //')")
  fi
done
