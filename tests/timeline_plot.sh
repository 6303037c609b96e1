#!/usr/bin/env bash
# tools/plot/timeline.py and plot.sh timeline on a real trace: ddp_bench (small MLP, 2 ranks)
# under DDP_TIMELINE, once merged and once per rank. The summary must cover both ranks and every
# step (warm-up + measured) with step, GEMM and backward times; a per-rank file must find
# its siblings (NAME.<rank>.json) and nothing else: two copies of a merged trace (t1.json,
# t2.json) are two runs, not ranks of one; the excerpt lists both ranks, GEMM phases, bucket
# launches and the shm reduction work; the plot is a PNG.
# Usage: timeline_plot.sh SOURCE_DIR DDP_BENCH SCRATCH LAUNCHER [LAUNCHER FLAGS...]
set -uo pipefail
src=$1 bench=$2 dir=$3
shift 3
launch=("$@")
mkdir -p "$dir" && cd "$dir" || exit 1
rm -f ./*.json ./*.png ./*.out
fail=0
bad() { echo "timeline_plot: FAIL: $*"; fail=1; }
tl=(python3 "$src/tools/plot/timeline.py")
steps=3 warmup=1
args=(--layers 64,128,128,10 --steps $steps --warmup $warmup)

for mode in merged:t.json perrank:r.%r.json; do
  if ! DDP_TIMELINE=${mode#*:} OPENBLAS_NUM_THREADS=1 "${launch[@]}" -np 2 "$bench" "${args[@]}" >"${mode%%:*}.out" 2>&1; then
    bad "ddp_bench (${mode%%:*}) failed"; tail -5 "${mode%%:*}.out"
  fi
done
grep -q '^ddp  *2 ' merged.out || bad "ddp_bench did not run at np=2: $(grep '^ddp' merged.out)"

# summary FILE EXPECT_RANKS EXPECT_STEPS: rank rows with a positive step, GEMM and reduction time.
summary() {
  local out
  out=$("${tl[@]}" summary "$1" 2>&1) || { bad "summary $1 failed: $out"; return; }
  echo "$out" | head -4
  grep -q "medians over $3 steps per rank" <<<"$out" || bad "$1: not $3 steps per rank: $(head -1 <<<"$out")"
  local rows
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 17 && $5 > 0 && $6 > 0 && $7 > 0' <<<"$out" | wc -l)
  [ "$rows" -eq "$2" ] || bad "$1: $rows rank rows with step, GEMM and backward time, expected $2"
}
summary t.json 2 $((steps + warmup))
summary r.0.json 2 $((steps + warmup))
cp t.json t1.json && cp t.json t2.json
summary t1.json 2 $((steps + warmup))

ex=$("${tl[@]}" excerpt t.json 2>&1) || bad "excerpt failed: $ex"
for r in 0 1; do grep -q "^rank $r: step" <<<"$ex" || bad "excerpt has no rank $r"; done
grep -q "bucket launch" <<<"$ex" || bad "excerpt shows no bucket launch"
grep -q "dW 0" <<<"$ex" || bad "excerpt shows no GEMM phase"
grep -q "reduce+push slice" <<<"$ex" || bad "excerpt shows no shm reduction work"

if command -v gnuplot >/dev/null; then
  bash "$src/tools/plot/plot.sh" timeline t.json step.png || bad "plot.sh timeline failed"
  if [ "$(head -c 4 step.png 2>/dev/null | od -An -tx1 | tr -d ' ')" != "89504e47" ] || [ "$(stat -c %s step.png)" -lt 10000 ]; then
    bad "step.png missing, not a PNG or nearly empty"
  fi
else
  echo "gnuplot not installed: plot not checked"
fi
[ $fail -eq 0 ] && echo "timeline_plot: PASS"
exit $fail
