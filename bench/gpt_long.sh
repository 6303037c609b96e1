#!/usr/bin/env bash
# Issue 27 item 5: a long gpt_train run at NP ranks (default 30 minutes at np=2, the default
# model), killed once on the way (SIGKILL to one rank, at --kill-at of the time) and resumed
# with --resume auto from its --checkpoint-dir; then the final validation loss, the check that
# the resumed run repeats the killed run's steps after its checkpoint bit for bit (the same
# loss curve as an uninterrupted run: same parameters, optimizer state, data order and
# schedule), and the loss curve plot (tools/plot/plot.sh gpt).
#
#   bash bench/gpt_long.sh [--minutes M] [--np N] [--kill-at F] [--out DIR] [--build DIR]
#                          [--ckpt-every K] [-- gpt_train options]
#
# --minutes sets the step count: a short calibration run measures ms/step, and the run gets
# the steps that fill M minutes (the cosine schedule needs its length up front). Defaults: 30,
# 2, 0.4, out/gpt_long, build, a checkpoint and a validation (64 windows, ~1.3 steps' time)
# every 1/20 of the steps; the kill waits for a step half way between two checkpoints. Needs gpt_train's --checkpoint-dir and --resume auto (exits 2 naming
# them when the binary has none). Writes OUT/run1.txt (killed), OUT/run2.txt (resumed),
# OUT/curve.txt (the two joined), OUT/loss.png, OUT/summary.json.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
minutes=30 np=2 kill_at=0.4 out=out/gpt_long build=build ck_every= extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --kill-at) kill_at=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --ckpt-every) ck_every=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "gpt_long.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
train=$build/apps/gpt_train
[ -x "$train" ] || { echo "gpt_long: $train missing: build first" >&2; exit 2; }
if ! "$train" --help 2>&1 | grep -q -- '--resume'; then
  echo "gpt_long: $train has no --checkpoint-dir / --resume auto (issue 27's restart part): nothing to resume" >&2
  exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
ck=$out/ckpt
rm -rf "$ck" "$out"/run*.txt "$out"/steps*.log
launch=(tools/mpilaunch -n "$np")

# 1. calibration: ms/step of the steady state (the last of 3 log lines of 6 steps)
"${launch[@]}" "$train" "${extra[@]}" --steps 6 --log-every 2 --val-every 0 >"$out/calib.txt" 2>&1 ||
  { tail -5 "$out/calib.txt"; echo "gpt_long: the calibration run failed" >&2; exit 1; }
ms=$(awk '$1 ~ /^[0-9]+$/ && NF >= 5 { v = $5 } END { print v }' "$out/calib.txt")
steps=$(awk -v m="$minutes" -v ms="$ms" 'BEGIN { s = int(m * 60000 / ms); print s < 20 ? 20 : s }')
ck_every=${ck_every:-$(( steps / 20 > 1 ? steps / 20 : 1 ))}
log_every=$(( steps / 60 > 1 ? steps / 60 : 1 ))
val_every=$(( 3 * log_every )) # on a printed line (gpt_train prints a validation on those only)
kill_s=$(awk -v m="$minutes" -v f="$kill_at" 'BEGIN { printf "%d", m * 60 * f }')
echo "# gpt_long: $ms ms/step calibrated: $steps steps (~$minutes min), checkpoint every $ck_every, validation every $val_every; SIGKILL to one rank after ${kill_s} s"
args=("${extra[@]}" --steps "$steps" --log-every "$log_every" --val-every "$val_every" --val-windows 64
      --checkpoint-dir "$ck" --checkpoint-every "$ck_every")

# 2. the run, killed: SIGKILL to one rank process after kill_s seconds, once the last logged step
# is half way between two checkpoints (so the resumed run has steps to redo, and to compare)
t0=$(date +%s)
"${launch[@]}" "$train" "${args[@]}" --log-steps "$out/steps1.log" >"$out/run1.txt" 2>&1 &
job=$!
sleep "$kill_s"
half=$(( ck_every / 2 )) # 0 with a checkpoint every step: nothing to redo, kill at once
while kill -0 "$job" 2>/dev/null; do
  last=$(tail -n 1 "$out/steps1.log" 2>/dev/null | cut -d' ' -f1)
  [ -n "$last" ] && [ $(( last % ck_every )) = "$half" ] && break
  sleep 0.1
done
victim=$(pgrep -f -- "--checkpoint-dir $ck" | while read -r p; do
  [ "$(cat /proc/"$p"/comm 2>/dev/null)" = gpt_train ] && echo "$p"; done | tail -1)
if [ -z "$victim" ]; then
  wait "$job"
  echo "gpt_long: no gpt_train rank to kill after ${kill_s} s (finished or failed: $(tail -2 "$out/run1.txt"))" >&2
  exit 1
fi
kill -KILL "$victim"
wait "$job"
rc1=$?
echo "# run 1: SIGKILL to rank process $victim after $(( $(date +%s) - t0 )) s; the job exited $rc1"
[ "$rc1" != 0 ] || { echo "gpt_long: the killed job exited 0" >&2; exit 1; }

# 3. resumed from the newest checkpoint that validates
"${launch[@]}" "$train" "${args[@]}" --resume auto --log-steps "$out/steps2.log" >"$out/run2.txt" 2>&1 ||
  { tail -5 "$out/run2.txt"; echo "gpt_long: the resumed run failed" >&2; exit 1; }
echo "# run 2 (resumed): $(grep -i -m1 'resum' "$out/run2.txt")"
echo "# total $(( $(date +%s) - t0 )) s"

# 4. the curve, the overlap check, the final validation loss, the plot
first2=$(awk 'NR == 1 { print $1 }' "$out/steps2.log")
awk -v f="$first2" '$1 ~ /^[0-9]+$/ && NF >= 5 && $1 < f' "$out/run1.txt" >"$out/curve.txt"
awk '$1 ~ /^[0-9]+$/ && NF >= 5' "$out/run2.txt" >>"$out/curve.txt"
# steps the killed run did after its checkpoint, done again by the resumed run: identical lines
overlap=$(awk -v f="$first2" '$1 >= f' "$out/steps1.log" | wc -l)
same=$(awk -v f="$first2" '$1 >= f' "$out/steps1.log" | grep -c -x -F -f "$out/steps2.log" || true)
final=$(awk '$1 ~ /^[0-9]+$/ && NF >= 5 && $3 != "-" { v = $3 } END { print v }' "$out/run2.txt")
echo "# resumed at step $first2; steps redone after the checkpoint: $overlap, identical to the killed run's: $same"
echo "# final validation loss: $final"
bash tools/plot/plot.sh gpt "$out/loss.png" "$out/curve.txt=gpt_train np=$np (killed, resumed at $first2)" || true
python3 - "$out" "$np" "$steps" "$ms" "$first2" "$overlap" "$same" "$final" "$minutes" <<'PY'
import json, sys
out, np_, steps, ms, first2, overlap, same, final, minutes = sys.argv[1:]
json.dump({"np": int(np_), "steps": int(steps), "calibrated_ms_step": float(ms), "minutes": float(minutes),
           "resumed_at_step": int(first2), "steps_redone": int(overlap), "steps_redone_identical": int(same),
           "final_val_loss": float(final) if final else None}, open(f"{out}/summary.json", "w"), indent=1)
PY
[ "$overlap" -gt 0 ] || echo "gpt_long: no step to compare (killed right after a checkpoint)" >&2
[ "$same" = "$overlap" ] || { echo "gpt_long: the resumed run differs from the killed one" >&2; exit 1; }
