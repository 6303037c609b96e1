#!/usr/bin/env bash
# End-to-end checks of ddp_train --zero (ZeRO-1/2 on the kit's optimizers), run by ctest
# (tests/zero.cmake).
#   zero_check.sh MODE NP LAUNCH DDP_TRAIN SCRATCH     (LAUNCH: tools/mpilaunch)
# MODE: determ   --deterministic 4 at NP ranks: --zero 1 and --zero 2 end with the same final
#                parameter CRC as --zero 0, for --optim sgd and adamw; the per-rank optimizer
#                state is 1/NP of --zero 0's
#       reducer  the reducer path (no --deterministic) at NP ranks: --zero 1 and 2 log the same
#                per-step losses as --zero 0 to 1e-5 and end within 1e-4 test accuracy
#       resume   --zero 1 --optim adamw interrupted with --checkpoint and resumed: the same
#                losses and final CRC as the uninterrupted run; the (gathered) checkpoint also
#                resumes with --zero 0 and --zero 2 under --deterministic to the same CRC, and a
#                --optim sgd run refuses it
set -uo pipefail
mode=$1 np=$2 train=$4 scratch=$5
launch=("$(realpath "$3")") # the script changes folder
mkdir -p "$scratch"
cd "$scratch" || exit 1
fail=0
say() { echo "zero_check[$mode np=$np]: $*"; }
bad() { echo "zero_check[$mode np=$np]: FAIL: $*" >&2; fail=1; }
quick=(--limit-test 200 --no-progress)
crc() { grep -m1 'final parameters: CRC32' "$1"; }
run() { # run OUT ARGS...: ddp_train at np ranks, OUT gets stdout + stderr
  local out=$1
  shift
  "${launch[@]}" -n "$np" "$train" "$@" >"$out" 2>&1 || bad "$out: exit $?: $(tail -3 "$out")"
}

case $mode in
determ)
  # The same global batch (128) at every NP: 4 lanes, 8 steps; --wd 0.01 so decay matters.
  common=(--epochs 1 --batch $((128 / np)) --deterministic 4 --limit-steps 8 "${quick[@]}")
  for opt in sgd adamw; do
    for z in 0 1 2; do
      run "d_${opt}_$z.out" "${common[@]}" --optim "$opt" --zero "$z"
    done
    ref=$(crc "d_${opt}_0.out")
    [ -n "$ref" ] || bad "$opt --zero 0: no CRC line"
    for z in 1 2; do
      grep -q "ZeRO-$z: optimizer state sharded over $np ranks" "d_${opt}_$z.out" || bad "$opt --zero $z: mode line missing"
      got=$(crc "d_${opt}_$z.out")
      [ "$got" = "$ref" ] || bad "$opt --zero $z: '$got' differs from --zero 0 '$ref'"
      say "$opt --zero $z: $got (--zero 0: $ref)"
    done
    # The state really is sharded: per-rank optimizer state shrinks by the rank count.
    s0=$(sed -n 's/^# optimizer .*: state \([0-9.]*\) MB.*/\1/p' "d_${opt}_0.out")
    s1=$(sed -n 's/^# optimizer .*: state \([0-9.]*\) MB.*/\1/p' "d_${opt}_1.out")
    awk -v a="${s0:-0}" -v b="${s1:-0}" -v n="$np" 'BEGIN { exit !(a > 0 && b <= a / n + 0.01) }' ||
      bad "$opt: optimizer state ${s1:-?} MB per rank with --zero 1, ${s0:-?} MB with --zero 0"
  done
  ;;
reducer)
  common=(--epochs 1 --batch 32 --limit-steps 12 --bucket-cap-mb 0.5 "${quick[@]}")
  for z in 0 1 2; do
    rm -f "r_$z.log"
    run "r_$z.out" "${common[@]}" --optim adamw --zero "$z" --log-steps "r_$z.log"
  done
  for z in 1 2; do
    [ "$(wc -l <"r_$z.log")" -eq 12 ] || bad "--zero $z logged $(wc -l <"r_$z.log") steps"
    awk 'NR == FNR { ref[$1] = $2; next }
         { d = $2 - ref[$1]; if (d < 0) d = -d; if (d > w) w = d; n++ }
         END { printf "  max |loss difference| %.3g over %d steps\n", w, n; exit !(n == 12 && w <= 1e-5) }' \
      r_0.log "r_$z.log" || bad "--zero $z losses differ from --zero 0 by more than 1e-5"
  done
  say "reducer path: --zero 0/1/2: $(crc r_0.out) / $(crc r_1.out) / $(crc r_2.out)"
  ;;
resume)
  common=(--epochs 2 --batch 32 --limit-steps 8 "${quick[@]}" --optim adamw --zero 1)
  rm -f full.log part.log resumed.log z.ck
  run full.out "${common[@]}" --log-steps full.log
  run part.out "${common[@]}" --checkpoint z.ck --checkpoint-every 5 --stop-after 11 --log-steps part.log
  run resumed.out "${common[@]}" --resume z.ck --log-steps resumed.log
  grep -q "resumed from z.ck at epoch 2 step 2 (global step 10)" resumed.out ||
    bad "resume position not reported: $(grep resumed resumed.out)"
  diff <(awk '$1 > 10' full.log) resumed.log >resume.diff || bad "resumed losses differ: $(head -4 resume.diff)"
  a=$(crc full.out) b=$(crc resumed.out)
  [ -n "$a" ] && [ "$a" = "$b" ] || bad "final CRC after resume '$b' differs from the uninterrupted '$a'"
  say "--zero 1 --optim adamw resumed at step 10: $b (uninterrupted: $a)"
  # The file holds the full (gathered) state: --deterministic runs checkpointed with --zero 1
  # resume with --zero 0, 1 and 2 to the uninterrupted run's CRC.
  det=(--epochs 2 --batch 32 --limit-steps 8 "${quick[@]}" --optim adamw --deterministic $np)
  rm -f d.ck
  run dfull.out "${det[@]}" --zero 0
  run dpart.out "${det[@]}" --zero 1 --checkpoint d.ck --checkpoint-every 5 --stop-after 6
  for z in 0 1 2; do
    run "dres_$z.out" "${det[@]}" --zero "$z" --resume d.ck
    a=$(crc dfull.out) b=$(crc "dres_$z.out")
    [ -n "$a" ] && [ "$a" = "$b" ] || bad "--zero 1 checkpoint resumed with --zero $z: '$b' vs uninterrupted '$a'"
  done
  say "--deterministic: --zero 1 checkpoint resumed with --zero 0/1/2: $(crc dres_0.out) / $(crc dres_1.out) / $(crc dres_2.out)"
  # An SGD run refuses AdamW state, naming the mismatch; nothing is trained.
  "${launch[@]}" -n "$np" "$train" "${det[@]}" --optim sgd --zero 1 --resume d.ck >refused.out 2>&1
  rc=$?
  [ $rc -eq 3 ] || bad "--optim sgd from an AdamW checkpoint: exit $rc, expected 3"
  grep -q "cannot resume from d.ck: .*--optim sgd" refused.out || bad "refusal message: $(grep -m1 resume refused.out)"
  ;;
*)
  echo "usage: $0 determ|reducer|resume NP LAUNCH DDP_TRAIN SCRATCH" >&2
  exit 2
  ;;
esac
[ $fail -eq 0 ] && say PASS || say FAIL
exit $fail
