#!/usr/bin/env bash
# CPU dry run of ci/gpu-check.sh (ctest label gpucheck): what the one short GPU run depends on,
# checked here on every CI run. Usage: gpucheck_dry.sh SOURCE_DIR SCRATCH_DIR
#  1. the carry folder: gpucarry/ when ci/gpu-prepare.sh made one, else a fixture made the same
#     way from the packages installed here (gpu-prepare.sh --offline: no network);
#  2. the dry run, in a private mount namespace where this machine's own Open MPI, PMIx, UCX and
#     OpenBLAS trees and ssh are hidden (when run as root with unshare), so the build can only
#     work with the MPI unpacked from the carry folder, as on the bare GPU machine: carry, unpack, mpi (mpicc, mpi.h, ldd, 2 ranks),
#     configure must pass, the GPU steps must be reported as skipped, $OUT must hold exactly
#     summary.txt and gpucheck.tgz, the archive the logs;
#  3. three broken carry folders must fail, naming what is missing: a .deb gone (MANIFEST
#     mismatch), a Fashion-MNIST file gone, and a package dropped from the closure with a
#     matching MANIFEST (the mpi step's ldd check finds the library missing).
set -uo pipefail
src=$1 scratch=$2
fail=0
say() { echo "gpucheck_dry: $*"; }
bad() { echo "gpucheck_dry: FAIL: $*" >&2; fail=1; }
rm -rf "$scratch/runs" && mkdir -p "$scratch/runs"

# ---- 1. the carry folder -------------------------------------------------------------------
carry=$src/gpucarry
if [ -f "$carry/MANIFEST" ]; then
  say "carry folder: $carry (made by ci/gpu-prepare.sh)"
else
  carry=$scratch/carry
  say "no gpucarry/ in the source tree: fixture $carry from the installed packages"
  bash "$src/ci/gpu-prepare.sh" --offline "$carry" >"$scratch/prepare.log" 2>&1 ||
    { cat "$scratch/prepare.log"; bad "gpu-prepare.sh --offline failed"; exit 1; }
  grep '^gpu-prepare: .*MiB' "$scratch/prepare.log"
fi

# dry NAME CARRY: runs the dry run; its exit status. Hidden: this machine's MPI stack.
HIDE_DIRS="/usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/ucx
  /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/include/x86_64-linux-gnu/openblas-pthread
  /usr/share/openmpi /usr/share/pmix /etc/openmpi /usr/lib/x86_64-linux-gnu/hwloc"
hidden=0
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then hidden=1; fi
dry() {
  local name=$1 c=$2 d=$scratch/runs/$1
  mkdir -p "$d/out"
  local env=(env GPUCHECK_DRY_RUN=1 GPUCHECK_CARRY="$c" GPUCHECK_SCRATCH="$d/s" OUT="$d/out"
             GPUCHECK_BUDGET_S=300 DDP_REQUIRE_GPU=0)
  if [ $hidden = 1 ]; then
    unshare -m bash -c 'e=$(mktemp -d); for x in $HIDE; do [ -d "$x" ] && mount --bind "$e" "$x"; done
      s=$(command -v ssh) && mount --bind /dev/null "$(readlink -f "$s")"; exec "$@"' \
      _ "${env[@]}" HIDE="$HIDE_DIRS" bash "$src/ci/gpu-check.sh" >"$d/stdout" 2>&1
  else
    "${env[@]}" bash "$src/ci/gpu-check.sh" >"$d/stdout" 2>&1
  fi
}
# The unshare wrapper needs HIDE in its own environment.
export HIDE="$HIDE_DIRS"
[ $hidden = 1 ] && say "system MPI and ssh hidden in a private mount namespace" ||
  say "not root or no unshare: the system MPI stays visible (weaker check)"

# ---- 2. the dry run ------------------------------------------------------------------------
t0=$(date +%s)
dry ok "$carry"
rc=$?
sum=$scratch/runs/ok/out/summary.txt
say "dry run: exit $rc in $(($(date +%s) - t0)) s"
[ -f "$sum" ] && cat "$sum"
[ $rc -eq 0 ] || bad "dry run exited with $rc"
files=$(ls -A "$scratch/runs/ok/out" | sort | tr '\n' ' ')
[ "$files" = "gpucheck.tgz summary.txt " ] || bad "\$OUT holds '$files', expected exactly gpucheck.tgz and summary.txt"
for s in carry unpack mpi wheels configure; do
  grep -qE "^$s +pass " "$sum" || bad "step $s did not pass: $(grep "^$s " "$sum")"
done
for s in gpu build ddp_info ctest_gpu bench_np1 bench_np2 train_f32 train_bf16; do
  grep -qE "^$s +skip " "$sum" || bad "step $s not reported as skipped: $(grep "^$s " "$sum")"
done
grep -q '^result: PASS' "$sum" || bad "summary result: $(grep '^result' "$sum")"
tar -tzf "$scratch/runs/ok/out/gpucheck.tgz" >"$scratch/tgz.list" 2>/dev/null || bad "gpucheck.tgz unreadable"
for f in logs/summary.txt logs/carry.log logs/unpack.log logs/mpi.log logs/configure.log; do
  grep -qx "$f" "$scratch/tgz.list" || bad "gpucheck.tgz lacks $f"
done
grep -q "rank 1 of 2: sum 1" "$scratch/runs/ok/s/logs/mpi.log" 2>/dev/null || bad "the carried mpirun did not run 2 ranks"

# ---- 3. broken carry folders fail, naming what is missing ------------------------------------
broken() { # broken NAME EDIT-COMMAND EXPECTED-STEP EXPECTED-TEXT
  local name=$1 edit=$2 stepname=$3 text=$4 c=$scratch/runs/carry-$1
  rm -rf "$c" && cp -al "$carry" "$c" 2>/dev/null || cp -a "$carry" "$c"
  (cd "$c" && eval "$edit")
  dry "$name" "$c"
  local r=$? s=$scratch/runs/$name/out/summary.txt
  if [ $r -eq 0 ]; then bad "$name: the dry run passed"; return; fi
  grep -qE "^$stepname +FAIL .*$text" "$s" ||
    bad "$name: expected step $stepname to fail naming '$text': $(grep -E 'FAIL' "$s" | head -2)"
  [ -f "$scratch/runs/$name/out/gpucheck.tgz" ] || bad "$name: no gpucheck.tgz after a failure"
  say "$name: exit $r, $(grep -E "^$stepname " "$s" | tr -s ' ' | cut -c1-150)"
}
broken no-deb 'rm -f debs/libpmix2_*.deb' carry "libpmix2_.*FAILED"
broken no-fmnist 'rm -f fmnist/t10k-labels-idx1-ubyte.gz' carry "t10k-labels-idx1-ubyte.gz.*FAILED"
# (MANIFEST is a hard link into the real carry folder: replaced, not rewritten in place)
broken closure 'rm -f debs/libpmix2_*.deb MANIFEST && find debs fmnist -type f | sort | xargs sha256sum > MANIFEST' \
  mpi "libpmix.so.2"

[ $fail -eq 0 ] && rm -rf "$scratch/runs" # kept for a look after a failure
[ $fail -eq 0 ] && say PASS || say FAIL
exit $fail
