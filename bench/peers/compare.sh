#!/usr/bin/env bash
# One command for the PyTorch comparison: runs each PyTorch peer (bench/peers/*.py, Debian's
# python3-torch under /usr/bin/python3) and the matching mpiddp program one after the other in
# the same session, on the same machine, then prints them side by side with ratios
# (bench/peers/compare.py). Every PyTorch figure in README.md and docs/ comes from this script.
#
#   bash bench/peers/compare.sh [--only allreduce|ddp|fmnist] [--epochs N] [--steps N] [-R N] [--out DIR]
#
#   allreduce  allreduce_bench -A raw,mpi,auto -M shared and -M host vs torch.distributed gloo,
#              f32 sum, 8 B .. 64 MB, np 2, best of R            (torch_allreduce.py)
#   ddp        ddp_bench at np 1 and 2 vs PyTorch DDP on W-DDP   (torch_ddp_mlp.py), and
#              PyTorch DDP with gloo vs with the mpiddp comm hook (torch_ddp_hook.py, the
#              python/ package over $BUILD/libmpiddp.so, launched by tools/mpilaunch)
#   fmnist     ddp_train --epochs N at np 2 vs PyTorch DDP, same recipe and data order
#              (torch_fmnist.py)
# Environment: BUILD (default build), PYTHON (default /usr/bin/python3), MPIEXEC (default
# mpirun) and MPIEXEC_FLAGS (default --bind-to none); as root, Open MPI also needs
# OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1. Outputs go to --out (out/peers).
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=out/peers
ONLY=all
EPOCHS=10
STEPS=30
REPS=3
NP=2

# The one place that knows how to start an MPI job: launch NP PROGRAM ARGS...
launch() {
  local np=$1
  shift
  # shellcheck disable=SC2086
  ${MPIEXEC:-mpirun} ${MPIEXEC_FLAGS---bind-to none} -np "$np" "$@"
}

while [ $# -gt 0 ]; do
  case "$1" in
    --only) ONLY=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    -R) REPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$ONLY" in all|allreduce|ddp|fmnist) ;; *) echo "compare.sh: --only $ONLY?" >&2; exit 2 ;; esac
"$PYTHON" -c 'import torch' 2>/dev/null || {
  echo "compare.sh: $PYTHON cannot import torch (apt-get install python3-torch)" >&2; exit 2; }
for p in allreduce_bench ddp_bench ddp_train; do
  [ -x "$BUILD/apps/$p" ] || { echo "compare.sh: $BUILD/apps/$p missing: build first" >&2; exit 2; }
done
mkdir -p "$OUT"
want() { [ "$ONLY" = all ] || [ "$ONLY" = "$1" ]; }
run() { echo "+ $*" >&2; "$@"; }

echo "# $(date -u '+%F %T') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $("$PYTHON" -c 'import torch; print("torch", torch.__version__)')"
if want allreduce; then
  for mem in shared host; do
    run launch $NP "$BUILD/apps/allreduce_bench" -b 8 -e 64M -f 4 -A raw,mpi,auto -M $mem -R "$REPS" \
      -J "$OUT/allreduce_$mem.json" > "$OUT/allreduce_$mem.txt"
  done
  run "$PYTHON" bench/peers/torch_allreduce.py --np $NP -b 8 -e 64M -f 4 -R "$REPS" \
    -J "$OUT/torch_allreduce.json" > "$OUT/torch_allreduce.txt"
fi
if want ddp; then
  for np in 1 $NP; do
    run launch "$np" "$BUILD/apps/ddp_bench" --steps "$STEPS" -J "$OUT/ddp_bench_np$np.json" \
      > "$OUT/ddp_bench_np$np.txt"
  done
  # PyTorch (Debian's torch calls OpenBLAS) gets the GEMM kernel ddp_bench chose, unless set.
  kern=$(sed -n 's/^# BLAS: .*kernel \([A-Za-z0-9]*\).*/\1/p' "$OUT/ddp_bench_np1.txt" | head -n 1)
  [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -n "$kern" ] && export OPENBLAS_CORETYPE=$kern
  echo "# PyTorch peers with OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}"
  run "$PYTHON" bench/peers/torch_ddp_mlp.py --np $NP --steps "$STEPS" -J "$OUT/torch_ddp_mlp.json" \
    > "$OUT/torch_ddp_mlp.txt"
  PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} MPIDDP_LIBRARY=$BUILD/libmpiddp.so \
    run "$PYTHON" bench/peers/torch_ddp_hook.py --np $NP --steps "$STEPS" \
    -J "$OUT/torch_ddp_hook.json" > "$OUT/torch_ddp_hook.txt"
fi
if want fmnist; then
  run launch $NP "$BUILD/apps/ddp_train" --epochs "$EPOCHS" --metrics "$OUT/ddp_train.csv" \
    > "$OUT/ddp_train.txt"
  run "$PYTHON" bench/peers/torch_fmnist.py --np $NP --epochs "$EPOCHS" --metrics "$OUT/torch_fmnist.csv" \
    > "$OUT/torch_fmnist.txt"
fi
"$PYTHON" bench/peers/compare.py "$OUT"
