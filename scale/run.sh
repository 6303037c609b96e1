#!/usr/bin/env bash
# Runs one program on a simulated cluster with SMPI:
#   scale/run.sh [-p PLATFORM.xml] [-n RANKS] [-k RANKS_PER_NODE] [-f ideal|smpi] [--cfg=...] PROGRAM ARGS...
# Defaults: the 128 x 8-core fat tree at 100 Gb/s, 64 ranks, 8 per node (consecutive ranks
# share a node). Local computation is not charged (--cfg=smpi/simulate-computation:no): the
# simulated time is the network's, for the library's algorithms and SMPI's own alike.
# -f: network factors. `ideal` (default): every message costs latency + bytes / bandwidth of
#     its route (the alpha-beta model of docs/scale.md). `smpi`: SMPI's default calibration
#     (latency multiplied by 2-11.6 depending on size, 11.6 from 64 KB; bandwidth by 0.34-0.94).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
platform=$here/platforms/fattree_128x8_100g.xml
ranks=64
per_node=8
factors=ideal
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    -p) platform=$2; shift 2 ;;
    -n) ranks=$2; shift 2 ;;
    -k) per_node=$2; shift 2 ;;
    -f) factors=$2; shift 2 ;;
    --cfg=*) extra+=("$1"); shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: scale/run.sh [-p platform] [-n ranks] [-k per-node] [-f ideal|smpi] [--cfg=...] PROGRAM [ARGS]" >&2; exit 2; }
case $factors in
  ideal) extra+=(--cfg=smpi/lat-factor:0:1 --cfg=smpi/bw-factor:0:1) ;;
  smpi) ;;
  *) echo "scale/run.sh: -f $factors: expected ideal or smpi" >&2; exit 2 ;;
esac
hosts=$(mktemp)
trap 'rm -f "$hosts"' EXIT
nodes=$(((ranks + per_node - 1) / per_node))
for ((h = 0; h < nodes; h++)); do
  for ((c = 0; c < per_node; c++)); do echo "node-$h"; done
done >"$hosts"
# Shared-malloc blocks of 1 MB keep the mapping count under the kernel's limit at 1024 ranks.
smpirun -np "$ranks" -platform "$platform" -hostfile "$hosts" \
  --cfg=smpi/privatization:no --cfg=smpi/simulate-computation:no \
  --cfg=smpi/shared-malloc-blocksize:1048576 \
  --log=root.thres:warning "${extra[@]}" "$@"
