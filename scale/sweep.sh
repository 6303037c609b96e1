#!/usr/bin/env bash
# Sweeps allreduce algorithms on simulated clusters and appends one JSON object per
# (platform, ranks, algorithm, size) to OUT.jsonl (sim_allreduce's lines plus "platform",
# "factors" and, for SMPI's own algorithms, "algo": "smpi:NAME"):
#   scale/sweep.sh [-b BUILD] [-o OUT.jsonl] [-P platforms] [-n ranks] [-s sizes]
#                  [-L library algos] [-S smpi algos] [-f ideal|smpi] [-r reps]
# Lists are comma-separated; platforms are names under scale/platforms/ without .xml.
# Defaults: fattree_128x8_100g, 16,64,256,512 ranks, 4 KB-256 MB, ring,rhd,hier,auto and SMPI's
# rab_rdb,ompi,mpich,lr,smp_rsag, ideal network factors, 1 repetition (the simulation is
# deterministic). Each smpirun runs under flock on $SWEEP_LOCK when that is set (a CPU lock
# shared with other jobs on the machine).
# Tables and plots: scale/report.py OUT.jsonl (docs/scale.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build-smpi
out=scale-sweep.jsonl
platforms=fattree_128x8_100g
ranks=16,64,256,512
sizes=4096,65536,1048576,16777216,67108864,268435456
lib=ring,rhd,hier,auto
smpi=rab_rdb,ompi,mpich,lr,smp_rsag
factors=ideal
reps=1
while getopts "b:o:P:n:s:L:S:f:r:" opt; do
  case $opt in
    b) build=$OPTARG ;; o) out=$OPTARG ;; P) platforms=$OPTARG ;; n) ranks=$OPTARG ;;
    s) sizes=$OPTARG ;; L) lib=$OPTARG ;; S) smpi=$OPTARG ;; f) factors=$OPTARG ;;
    r) reps=$OPTARG ;;
    *) sed -n 2,12p "$0" >&2; exit 2 ;;
  esac
done
driver=$build/scale/sim_allreduce
[ -x "$driver" ] || { echo "sweep.sh: $driver missing (build with CC=smpicc, see docs/scale.md)" >&2; exit 2; }
lock=()
[ -n "${SWEEP_LOCK:-}" ] && lock=(flock "$SWEEP_LOCK")
# One simulation: prints the driver's JSON lines tagged with the platform and factors.
one() { # platform ranks label [--cfg=...] -a ALGOS
  local p=$1 n=$2 label=$3
  shift 3
  local t0=$SECONDS
  # Buffers carry no data here: big mallocs (the library's scratch) are shared between the
  # simulated ranks, so 256 ranks x 64 MB fit in memory.
  "${lock[@]}" "$here/run.sh" -p "$here/platforms/$p.xml" -n "$n" -f "$factors" \
    --cfg=smpi/auto-shared-malloc-thresh:65536 "$@" \
    -s "$sizes" -r "$reps" |
    sed -n "s/^{\(.*\)}\$/{\"platform\":\"$p\",\"factors\":\"$factors\",\1}/p" |
    sed "s/\"algo\":\"smpi\"/\"algo\":\"smpi:$label\"/" >>"$out"
  echo "sweep.sh: $p $n ranks $label: $((SECONDS - t0)) s" >&2
}
for p in ${platforms//,/ }; do
  for n in ${ranks//,/ }; do
    [ -n "$lib" ] && one "$p" "$n" lib "$driver" -a "$lib"
    for a in ${smpi//,/ }; do
      one "$p" "$n" "$a" "--cfg=smpi/allreduce:$a" "$driver" -a smpi
    done
  done
done
