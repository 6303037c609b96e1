#!/usr/bin/env bash
# Cluster benchmark (not a test), the short form: bench/cluster_bench.sh with links unshaped and
# at 10 Gbit/s (no added latency), 2 hosts x 2 ranks and 4 hosts x 1, one Open MPI pml.
#   ci/cluster/bench.sh [--build DIR] [--out DIR] [--pml ob1|ucx] [--sizes "-b 16 -e 64M -f 4"]
#                       [--reps N]
# Shaped links with latency, MPICH, the model beside every figure: bench/cluster_bench.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pml=ob1 opts=()
while [ $# -gt 0 ]; do
  case $1 in
    --build | --out) opts+=("$1" "$2"); shift 2 ;;
    --pml) pml=$2; shift 2 ;;
    --sizes) opts+=(--sizes "$2"); shift 2 ;;
    --reps) opts+=(-R "$2"); shift 2 ;;
    *) echo "bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
exec bash "$here/../../bench/cluster_bench.sh" --mpis "$pml" --links unshaped,10gbit --layouts 2x2,4x1 \
  --sizes "-b 16 -e 64M -f 4" "${opts[@]}"
