#!/usr/bin/env bash
# PNG plots of a sweep (scale/sweep.sh output) with gnuplot (Debian gnuplot-nox):
#   scale/plot.sh OUTDIR FILE.jsonl...
# busbw against size at 64, 256 and 1024 ranks (tools/plot/busbw.gp) and against ranks at
# 4 KB and 1 MB (scale/busbw_ranks.gp), on the 100 Gb/s fat tree.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not installed (apt-get install gnuplot-nox)" >&2; exit 2; }
[ $# -ge 2 ] || { echo "usage: $0 OUTDIR FILE.jsonl..." >&2; exit 2; }
outdir=$1
shift
mkdir -p "$outdir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat "$@" >"$tmp/all.jsonl"
plat=fattree_128x8_100g
for n in 64 256 1024; do
  algos=$(python3 "$here/report.py" dat "$tmp/all.jsonl" "$tmp/s$n.dat" size $plat $n)
  gnuplot -e "datafile='$tmp/s$n.dat'; algos='$algos'; out='$outdir/busbw_size_${n}ranks.png'; ttl='allreduce busbw, $n simulated ranks (fat tree 100 Gb/s, 8 per node)'" \
    "$here/../tools/plot/busbw.gp"
done
for b in 4096 1048576; do
  algos=$(python3 "$here/report.py" dat "$tmp/all.jsonl" "$tmp/r$b.dat" ranks $plat $b)
  gnuplot -e "datafile='$tmp/r$b.dat'; algos='$algos'; out='$outdir/busbw_ranks_${b}B.png'; ttl='allreduce busbw at $b bytes (fat tree 100 Gb/s, 8 per node)'" \
    "$here/busbw_ranks.gp"
done
echo "plot.sh: wrote $outdir/busbw_size_{64,256,1024}ranks.png $outdir/busbw_ranks_{4096,1048576}B.png"
