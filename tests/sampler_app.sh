#!/bin/bash
# apps/ddp_sampler against the committed PyTorch fixtures (no torch needed): every STEP-th
# "full" line of tests/fixtures/sampler_torch.txt must equal the app's output, and bad
# arguments must give a non-zero exit and a message.
#   sampler_app.sh <ddp_sampler> <sampler_torch.txt> [STEP]
set -u
app=$1
fixtures=$2
step=${3:-60}
fail=0
checked=0
n=0
while read -r tag size replicas rank shuffle drop_last seed epoch length hash kind rest; do
  [ "$tag" = S ] && [ "$kind" = full ] || continue
  n=$((n + 1))
  [ $((n % step)) -eq 0 ] || continue
  args=(--size "$size" --replicas "$replicas" --rank "$rank" --seed "$seed" --epoch "$epoch")
  [ "$shuffle" = 1 ] && args+=(--shuffle)
  [ "$drop_last" = 1 ] && args+=(--drop-last)
  got=$("$app" "${args[@]}")
  rc=$?
  if [ $rc -ne 0 ] || [ "$got" != "${rest:-}" ]; then
    echo "FAIL: ddp_sampler ${args[*]} (rc $rc)"
    echo "  ours : ${got:0:200}"
    echo "  torch: ${rest:0:200}"
    fail=$((fail + 1))
  fi
  checked=$((checked + 1))
done < "$fixtures"
if [ $checked -lt 100 ]; then
  echo "FAIL: only $checked fixture lines compared"
  fail=$((fail + 1))
fi

# --all-ranks: one line per rank, equal to the single-rank runs
all=$("$app" --size 101 --replicas 4 --all-ranks --shuffle --seed 4294967303 --epoch 5)
for r in 0 1 2 3; do
  one=$("$app" --size 101 --replicas 4 --rank $r --shuffle --seed 4294967303 --epoch 5)
  line=$(sed -n "$((r + 1))p" <<< "$all")
  [ "$one" = "$line" ] || { echo "FAIL: --all-ranks line $r differs"; fail=$((fail + 1)); }
done
# --batch-size: the rank's list cut into lines of B (the last one shorter)
whole=$("$app" --size 1000 --replicas 3 --rank 2 --shuffle --seed 9)
batched=$("$app" --size 1000 --replicas 3 --rank 2 --shuffle --seed 9 --batch-size 64)
[ "$(tr '\n' ' ' <<< "$batched" | sed 's/ $//')" = "$whole" ] &&
  [ "$(wc -l <<< "$batched")" -eq 6 ] &&
  [ "$(tail -1 <<< "$batched" | wc -w)" -eq $((334 - 5 * 64)) ] ||
  { echo "FAIL: --batch-size 64 lines do not split the list"; fail=$((fail + 1)); }
dropped=$("$app" --size 1000 --replicas 3 --rank 2 --shuffle --seed 9 --batch-size 64 \
  --drop-last-batch | wc -l)
[ "$dropped" -eq 5 ] || { echo "FAIL: --drop-last-batch gave $dropped lines"; fail=$((fail + 1)); }

# bad arguments: exit code and message
expect_fail() {
  local want=$1 needle=$2
  shift 2
  local err rc
  err=$("$app" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -ne "$want" ] || ! grep -q -- "$needle" <<< "$err"; then
    echo "FAIL: ddp_sampler $* -> rc $rc (want $want), message '$err' lacks '$needle'"
    fail=$((fail + 1))
  fi
}
expect_fail 2 "--size is required" --replicas 2
expect_fail 2 "'-3' is not an integer" --size -3
expect_fail 2 "'12x' is not an integer" --size 12x
expect_fail 2 "not an integer" --size 18446744073709551616
expect_fail 2 "--rank 4 must be below --replicas 4" --size 10 --replicas 4 --rank 4
expect_fail 2 "--replicas 0" --size 10 --replicas 0
expect_fail 2 "unknown" --size 10 --shufle
expect_fail 2 "needs a value" --size
expect_fail 2 "needs --batch-size" --size 10 --drop-last-batch
expect_fail 1 "exceeds 2^64-1" --size 10 --shuffle --seed 18446744073709551615 --epoch 1
expect_fail 1 "dataset_size" --size 4611686018427387905

echo "sampler_app: $checked fixture lines compared, $fail failures -> $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
[ $fail -eq 0 ]
