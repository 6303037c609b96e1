#!/usr/bin/env bash
# End-to-end checks of ddp_train, run by ctest (tests/train.cmake).
#   train_check.sh MODE LAUNCH DDP_TRAIN SCRATCH     (LAUNCH: tools/mpilaunch)
# MODE: equiv    np = 1, 2, 4 with the same global batch give the same per-epoch loss (1e-4)
#       resume   an interrupted run resumed from its checkpoint logs the very same losses
#       corrupt  corrupt / truncated / mismatched checkpoints are refused, nothing overwritten
#       determ   --deterministic 4: np = 1, 2, 4 give bitwise the same losses and parameters
#       amp      --amp bf16/fp16 close to f32; fp16 loss-scale backoff; resume keeps the scale
#       device   --device cuda (DDP_DEVICE_EMULATE=1) logs the same losses as the host run
#       accuracy np = 2, one full epoch reaches >= 84% test accuracy
set -uo pipefail
mode=$1 train=$3 scratch=$4
launch=("$(realpath "$2")") # the script changes folder
mkdir -p "$scratch"
cd "$scratch" || exit 1
fail=0
say() { echo "train_check[$mode]: $*"; }
bad() { echo "train_check[$mode]: FAIL: $*" >&2; fail=1; }
quick=(--limit-steps 12 --limit-test 500 --no-progress)

case $mode in
equiv)
  for np in 1 2 4; do
    rm -f "equiv$np.csv"
    "${launch[@]}" -n $np "$train" --epochs 2 --batch $((128 / np)) "${quick[@]}" \
      --metrics "equiv$np.csv" >"equiv$np.out" 2>&1 || bad "np=$np exited with $?: $(tail -3 "equiv$np.out")"
  done
  for np in 2 4; do
    # columns: epoch,global_step,train_loss,test_acc,...
    if ! awk -F, -v np=$np 'NR == FNR { if (FNR > 1) ref[$1] = $3; next }
        FNR > 1 { n++; d = $3 - ref[$1]; if (d < 0) d = -d; r = d / ref[$1];
                  printf "  epoch %d: np=1 %.9g np=%d %.9g rel %.2e\n", $1, ref[$1], np, $3, r;
                  if (!(r <= 1e-4)) bad = 1 }
        END { exit (bad || n != 2) }' equiv1.csv "equiv$np.csv"; then
      bad "np=$np loss curve differs from np=1 by more than 1e-4 relative"
    fi
  done
  ;;
determ)
  # --deterministic 4: np = 1, 2, 4 with the same global batch follow the very same trajectory:
  # identical per-epoch losses and accuracies and the same CRC32 of the final parameters.
  for np in 1 2 4; do
    rm -f "det$np.csv"
    "${launch[@]}" -n $np "$train" --epochs 2 --batch $((128 / np)) --deterministic 4 "${quick[@]}" \
      --metrics "det$np.csv" >"det$np.out" 2>&1 || bad "np=$np exited with $?: $(tail -3 "det$np.out")"
    grep -q "deterministic, 4 lanes ($((4 / np)) per rank)" "det$np.out" || bad "np=$np: mode line missing"
  done
  for np in 2 4; do
    cmp -s <(cut -d, -f1-4 det1.csv) <(cut -d, -f1-4 "det$np.csv") ||
      bad "np=$np metrics differ from np=1: $(diff <(cut -d, -f1-4 det1.csv) <(cut -d, -f1-4 "det$np.csv") | head -4)"
    a=$(grep 'final parameters' det1.out) b=$(grep 'final parameters' "det$np.out")
    [ -n "$a" ] && [ "$a" = "$b" ] || bad "np=$np final parameters differ: '$a' vs '$b'"
  done
  say "np=1,2,4 identical: $(grep 'final parameters' det1.out)"
  ;;
resume)
  common=(--epochs 2 --batch 32 "${quick[@]}")
  rm -f full.log part.log resumed.log ck.bin
  "${launch[@]}" -n 2 "$train" "${common[@]}" --log-steps full.log >full.out 2>&1 || bad "full run: $?"
  # Interrupted at step 17 (checkpoints at 5, 10, 15), resumed from step 15 (epoch 2, step 3).
  "${launch[@]}" -n 2 "$train" "${common[@]}" --checkpoint ck.bin --checkpoint-every 5 \
    --stop-after 17 --log-steps part.log >part.out 2>&1 || bad "interrupted run: $?"
  "${launch[@]}" -n 2 "$train" "${common[@]}" --resume ck.bin --log-steps resumed.log \
    >resumed.out 2>&1 || bad "resumed run: $?"
  grep -q "resumed from ck.bin at epoch 2 step 3 (global step 15)" resumed.out ||
    bad "resume position not reported: $(grep resumed resumed.out)"
  n_full=$(wc -l <full.log)
  [ "$n_full" -eq 24 ] || bad "full run logged $n_full steps, expected 24"
  # Every step after the checkpoint: same step number, loss and lr, bit for bit (%.9g).
  if ! diff <(awk '$1 > 15' full.log) resumed.log >resume.diff; then
    bad "resumed losses differ from the uninterrupted run: $(head -4 resume.diff)"
  fi
  [ "$(wc -l <resumed.log)" -eq 9 ] || bad "resumed run logged $(wc -l <resumed.log) steps, expected 9"
  # The steps before the interruption match too (same seed, same data order).
  diff <(head -17 full.log) part.log >/dev/null || bad "interrupted run's first 17 steps differ"
  # The epoch-2 line (loss over the whole epoch, accuracy) is identical.
  a=$(grep -E '^ +2 ' full.out | awk '{print $2, $3}')
  b=$(grep -E '^ +2 ' resumed.out | awk '{print $2, $3}')
  [ -n "$a" ] && [ "$a" = "$b" ] || bad "epoch 2 line differs: full '$a' resumed '$b'"
  say "steps 16..24 identical after resume; epoch 2: $b"
  ;;
corrupt)
  common=(--epochs 1 --batch 32 "${quick[@]}")
  rm -f good.bin
  "${launch[@]}" -n 2 "$train" "${common[@]}" --checkpoint good.bin >good.out 2>&1 || bad "writer: $?"
  [ -s good.bin ] || bad "no checkpoint written"
  size=$(stat -c %s good.bin)
  cp good.bin flip.bin
  printf '\x55' | dd of=flip.bin bs=1 seek=$((size / 2)) conv=notrunc status=none
  head -c $((size - 100)) good.bin >trunc.bin
  printf 'not a checkpoint at all' >junk.bin
  # name | file | extra flags | message
  cases=(
    "flipped|flip.bin||CRC32"
    "truncated|trunc.bin||truncated"
    "junk|junk.bin||bad magic"
    "missing|nosuch.bin||cannot open"
    "other batch|good.bin|--batch 16|resume with the same -np and --batch"
    "other model|good.bin|--model cnn|model 'mlp'"
  )
  for c in "${cases[@]}"; do
    IFS='|' read -r name file extra msg <<<"$c"
    echo sentinel >target.bin
    before=$(sha256sum target.bin good.bin)
    args=(--epochs 1 --batch 32 "${quick[@]}")
    # shellcheck disable=SC2206
    [ -n "$extra" ] && args+=($extra)
    "${launch[@]}" -n 2 "$train" "${args[@]}" --resume "$file" --checkpoint target.bin \
      --metrics target.csv >case.out 2>&1
    rc=$?
    [ $rc -ne 0 ] || bad "$name: exit status 0"
    grep -q "cannot resume from $file: .*$msg" case.out || bad "$name: message lacks '$msg': $(grep -m1 resume case.out)"
    [ "$(sha256sum target.bin good.bin)" = "$before" ] || bad "$name: a file was overwritten"
    grep -qE '^ +1 ' case.out && bad "$name: training ran"
    say "$name: refused (exit $rc): $(grep -m1 'cannot resume' case.out)"
  done
  # Bad flags: non-zero exit, one message (rank 0 only), before any data is read.
  for args in "--epochs x" "--model vgg" "--hook fp8" "--checkpoint-every 5" "--deterministic 3" "--bogus"; do
    # shellcheck disable=SC2086
    "${launch[@]}" -n 2 "$train" $args >args.out 2>&1
    rc=$?
    n=$(grep -c '^ddp_train: ' args.out)
    [ $rc -ne 0 ] && [ "$n" -eq 1 ] || bad "'$args': exit $rc, $n message(s): $(grep -m2 '^ddp_train' args.out)"
  done
  ;;
amp)
  # --amp (CPU emulation): bf16 and fp16 train like f32 (epoch-2 loss within 5%); fp16 started
  # at a loss scale of 1e12 overflows, skips steps and backs off, and a run interrupted in the
  # middle of that and resumed logs the very same losses (the scale is in the checkpoint).
  common=(--epochs 2 --batch 32 "${quick[@]}")
  rm -f amp_*.csv ampf.log ampp.log ampr.log ampck.bin
  for a in none bf16 fp16; do
    "${launch[@]}" -n 2 "$train" "${common[@]}" --amp $a --metrics amp_$a.csv >amp_$a.out 2>&1 ||
      bad "--amp $a: exit $?: $(tail -3 amp_$a.out)"
  done
  for a in bf16 fp16; do
    awk -F, 'NR == FNR { if ($1 == 2) ref = $3; next }
             $1 == 2 { r = ($3 - ref) / ref; if (r < 0) r = -r; printf "  epoch 2 loss %.6f vs f32 %.6f (%.2g)\n", $3, ref, r;
                       found = 1; if (!(r < 0.05)) exit 1 } END { if (!found) exit 1 }' amp_none.csv amp_$a.csv ||
      bad "--amp $a: epoch-2 loss not within 5% of f32"
  done
  grep -q "0 step(s) skipped" amp_fp16.out || bad "fp16 at the default scale skipped steps: $(grep 'amp fp16' amp_fp16.out)"
  big=(--amp fp16 --loss-scale 1e12)
  "${launch[@]}" -n 2 "$train" "${common[@]}" "${big[@]}" --log-steps ampf.log >ampf.out 2>&1 || bad "fp16 1e12: $?"
  skipped=$(sed -n 's/^# amp fp16: \([0-9]*\) step.*/\1/p' ampf.out)
  [ "${skipped:-0}" -ge 10 ] || bad "fp16 at scale 1e12 skipped ${skipped:-no} steps, expected >= 10"
  "${launch[@]}" -n 2 "$train" "${common[@]}" "${big[@]}" --checkpoint ampck.bin --checkpoint-every 6 \
    --stop-after 7 --log-steps ampp.log >ampp.out 2>&1 || bad "fp16 interrupted: $?"
  "${launch[@]}" -n 2 "$train" "${common[@]}" "${big[@]}" --resume ampck.bin --log-steps ampr.log \
    >ampr.out 2>&1 || bad "fp16 resumed: $?"
  diff <(awk '$1 > 6' ampf.log) ampr.log >/dev/null || bad "fp16 resumed losses differ: $(diff <(awk '$1 > 6' ampf.log) ampr.log | head -3)"
  say "fp16 from scale 1e12: $skipped steps skipped; resume from step 6 identical"
  ;;
device)
  # --device cuda under the host emulation: parameters and buckets in "device" memory, the
  # exchange through the device transports; the losses must equal the host run's bit for bit
  # (np=2: a + b is exact in either order). Two buckets, so both views are exercised.
  common=(--epochs 2 --batch 32 --bucket-cap-mb 0.5 "${quick[@]}")
  rm -f host.log dev.log
  "${launch[@]}" -n 2 "$train" "${common[@]}" --log-steps host.log >host.out 2>&1 || bad "host run: $?"
  "${launch[@]}" -n 2 -e DDP_DEVICE_EMULATE=1 "$train" "${common[@]}" --device cuda \
    --log-steps dev.log >dev.out 2>&1 || bad "device run: $? $(tail -3 dev.out)"
  grep -q "buckets on emulated" dev.out || bad "device run did not use the emulated device: $(grep 'grad sync' dev.out)"
  grep -q "2 bucket(s)" dev.out || bad "expected 2 buckets: $(grep 'grad sync' dev.out)"
  [ "$(wc -l <host.log)" -eq 24 ] || bad "host run logged $(wc -l <host.log) steps"
  cmp -s host.log dev.log || bad "device losses differ from host: $(diff host.log dev.log | head -3)"
  say "24 steps identical on host and emulated-device buckets"
  ;;
accuracy)
  "${launch[@]}" -n 2 "$train" --epochs 1 --no-progress >acc.out 2>&1 || bad "run: $?"
  cat acc.out
  acc=$(awk '/^final: test accuracy/ { sub("%", "", $4); print $4 }' acc.out)
  awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 84.0) }' || bad "test accuracy ${acc:-none}% < 84%"
  ;;
*)
  echo "usage: $0 equiv|determ|resume|corrupt|amp|device|accuracy LAUNCH DDP_TRAIN SCRATCH" >&2
  exit 2
  ;;
esac
[ $fail -eq 0 ] && say PASS || say FAIL
exit $fail
