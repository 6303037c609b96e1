#!/usr/bin/env bash
# PNG plots with gnuplot (Debian gnuplot-nox):
#   tools/plot/plot.sh bench RESULTS.json OUT.png [TITLE]   busbw vs size, one line per algorithm
#   tools/plot/plot.sh train OUT.png RUN.csv[=LABEL] ...     ddp_train loss and accuracy curves
#   tools/plot/plot.sh gpt OUT.png RUN.txt[=LABEL] ...       gpt_train loss curves (train and
#                                                            validation) from its printed table
#   tools/plot/plot.sh timeline TRACE.json OUT.png [CONFIG] [STEP]
#                                                            one ddp_bench DDP step per rank
#                                                            (DDP_TIMELINE), see timeline.py
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not installed (apt-get install gnuplot-nox)" >&2; exit 2; }
case ${1:-} in
bench)
  [ $# -ge 3 ] || { echo "usage: $0 bench RESULTS.json OUT.png [TITLE]" >&2; exit 2; }
  dat=$(mktemp /tmp/busbw.XXXXXX.dat)
  trap 'rm -f "$dat"' EXIT
  algos=$(python3 "$here/bench2dat.py" "$2" "$dat")
  gnuplot -e "datafile='$dat'; algos='$algos'; out='$3'; ttl='${4:-allreduce bus bandwidth}'" "$here/busbw.gp"
  ;;
train)
  [ $# -ge 3 ] || { echo "usage: $0 train OUT.png RUN.csv[=LABEL] ..." >&2; exit 2; }
  out=$2
  shift 2
  files="" labels=""
  for a in "$@"; do
    f=${a%%=*}
    l=${a#*=}
    [ "$l" = "$a" ] && l=$(basename "$f" .csv)
    [ -r "$f" ] || { echo "plot.sh: cannot read $f" >&2; exit 2; }
    files+="${files:+ }$f"
    labels+="${labels:+ }\"${l//\"/}\""
  done
  gnuplot -e "files='$files'; labels='${labels//\'/}'; out='$out'" "$here/train.gp"
  ;;
gpt)
  [ $# -ge 3 ] || { echo "usage: $0 gpt OUT.png RUN.txt[=LABEL] ..." >&2; exit 2; }
  out=$2
  shift 2
  tmpd=$(mktemp -d /tmp/gptplot.XXXXXX)
  trap 'rm -rf "$tmpd"' EXIT
  files="" labels="" k=0
  for a in "$@"; do
    f=${a%%=*}
    l=${a#*=}
    [ "$l" = "$a" ] && l=$(basename "$f" .txt)
    [ -r "$f" ] || { echo "plot.sh: cannot read $f" >&2; exit 2; }
    k=$((k + 1))
    # gpt_train's rows: step train_loss val_loss ("-" when not computed) tokens/s ms/step
    awk '$1 ~ /^[0-9]+$/ && NF >= 5 { print $1, $2, ($3 == "-" ? "NaN" : $3) }' "$f" >"$tmpd/$k.dat"
    [ -s "$tmpd/$k.dat" ] || { echo "plot.sh: no gpt_train table rows in $f" >&2; exit 2; }
    files+="${files:+ }$tmpd/$k.dat"
    labels+="${labels:+ }\"${l//\"/}\""
  done
  gnuplot -e "files='$files'; labels='${labels//\'/}'; out='$out'" "$here/gpt.gp"
  ;;
timeline)
  [ $# -ge 3 ] || { echo "usage: $0 timeline TRACE.json OUT.png [CONFIG] [STEP]" >&2; exit 2; }
  dat=$(mktemp /tmp/timeline.XXXXXX.dat)
  trap 'rm -f "$dat"' EXIT
  info=$(python3 "$here/timeline.py" dat "$2" "$dat" "${4:-}" ${5:+"$5"})
  ttl=$(sed -n 1p <<<"$info") kinds=$(sed -n 2p <<<"$info") colours=$(sed -n 3p <<<"$info")
  ranks=$(sed -n 4p <<<"$info")
  gnuplot -e "datafile='$dat'; kinds='$kinds'; colours='$colours'; ranks=$ranks; out='$3'; ttl='$ttl'" \
    "$here/timeline.gp"
  out=$3
  ;;
*)
  echo "usage: $0 bench RESULTS.json OUT.png [TITLE] | train OUT.png RUN.csv[=LABEL] ... | gpt OUT.png RUN.txt[=LABEL] ... | timeline TRACE.json OUT.png [CONFIG] [STEP]" >&2
  exit 2
  ;;
esac
echo "plot.sh: wrote ${out:-$3}"
