#!/usr/bin/env bash
# Runs one program on a simulated cluster with SMPI:
#   scale/run.sh [-p PLATFORM.xml] [-n RANKS] [-k RANKS_PER_NODE] [-- smpirun --cfg options] PROGRAM ARGS...
# Defaults: the 128 x 8-core fat tree at 100 Gb/s, 64 ranks, 8 per node (consecutive ranks
# share a node). Local computation is not charged (--cfg=smpi/simulate-computation:no): the
# simulated time is the network's, for the library's algorithms and SMPI's own alike.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
platform=$here/platforms/fattree_128x8_100g.xml
ranks=64
per_node=8
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    -p) platform=$2; shift 2 ;;
    -n) ranks=$2; shift 2 ;;
    -k) per_node=$2; shift 2 ;;
    --cfg=*) extra+=("$1"); shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: scale/run.sh [-p platform] [-n ranks] [-k per-node] [--cfg=...] PROGRAM [ARGS]" >&2; exit 2; }
hosts=$(mktemp)
trap 'rm -f "$hosts"' EXIT
nodes=$(((ranks + per_node - 1) / per_node))
for ((h = 0; h < nodes; h++)); do
  for ((c = 0; c < per_node; c++)); do echo "node-$h"; done
done >"$hosts"
# Large rank counts: shared-malloc blocks of 1 MB keep the mapping count under the kernel's limit.
exec smpirun -np "$ranks" -platform "$platform" -hostfile "$hosts" \
  --cfg=smpi/privatization:no --cfg=smpi/simulate-computation:no \
--log=root.thres:warning "${extra[@]}" "$@"
