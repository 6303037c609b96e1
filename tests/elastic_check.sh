#!/usr/bin/env bash
# Elastic resume of ddp_train (issue 28, ctest label `elastic`, tests/elastic.cmake): a
# checkpoint written by N ranks resumed on N' ranks ends with the very parameters of the
# uninterrupted run at the original size (--deterministic 12, global batch 12), for
# N -> N' = 2 -> 1, 2 -> 3, 4 -> 2, each with --zero 0 and 1; a global batch N' cannot split
# is refused (exit 3) with the numbers (what --elastic-batch would take instead: elastic_unit).
#   elastic_check.sh LAUNCH DDP_TRAIN SCRATCH     (LAUNCH: tools/mpilaunch)
set -uo pipefail
train=$2 scratch=$3
launch=("$(realpath "$1")")
mkdir -p "$scratch" && cd "$scratch" || exit 1
rm -f ./*.out ./*.bin
fail=0
say() { echo "elastic_check: $*"; }
bad() { echo "elastic_check: FAIL: $*" >&2; fail=1; }
# 8 steps of global batch 12 (12 lanes: np 1, 2, 3, 4 all divide them); checkpoint at step 4.
common=(--epochs 1 --limit-steps 8 --limit-test 100 --no-progress --deterministic 12)
crc() { grep -m1 'final parameters: CRC32' "$1"; }
job() { # NP OUT ARGS...
  local np=$1 out=$2
  shift 2
  "${launch[@]}" -n "$np" "$train" "${common[@]}" --batch $((12 / np)) "$@" >"$out" 2>&1
}

for np in 2 4; do
  job $np "ref$np.out" || bad "uninterrupted np=$np: exit $?: $(tail -3 "ref$np.out")"
  say "uninterrupted np=$np: $(crc "ref$np.out")"
done
for zero in 0 1; do
  for from in 2 4; do
    job $from "w${from}z$zero.out" --zero $zero --checkpoint "ck${from}z$zero.bin" \
      --checkpoint-every 4 --stop-after 5 || bad "writer np=$from --zero $zero: exit $?"
  done
  for pair in 2:1 2:3 4:2; do
    from=${pair%:*} to=${pair#*:}
    out=r${from}to${to}z$zero.out
    # --batch: this run's own (the model's batch); the plan keeps the file's global batch.
    "${launch[@]}" -n "$to" "$train" "${common[@]}" --batch $((12 / from)) --zero $zero \
      --resume "ck${from}z$zero.bin" >"$out" 2>&1 || bad "$from -> $to --zero $zero: exit $?: $(tail -3 "$out")"
    grep -q "elastic: checkpoint of $from ranks .* continues on $to ranks .*(global batch 12, kept)" "$out" ||
      bad "$from -> $to --zero $zero: no elastic line: $(grep -m1 elastic "$out")"
    [ -n "$(crc "ref$from.out")" ] && [ "$(crc "$out")" = "$(crc "ref$from.out")" ] ||
      bad "$from -> $to --zero $zero: '$(crc "$out")', uninterrupted np=$from '$(crc "ref$from.out")'"
    say "$from -> $to ranks, --zero $zero: $(crc "$out") ($(grep -m1 -o 'continues on .*' "$out"))"
  done
done
[ "$(crc ref2.out)" = "$(crc ref4.out)" ] || bad "np=2 and np=4 differ (--deterministic)"

# 12 over 5 ranks (the reducer: 12 lanes do not divide over 5): refused before training,
# exit 3, the numbers named.
"${launch[@]}" -n 5 "$train" --epochs 1 --limit-steps 8 --no-progress --batch 6 \
  --resume ck2z0.bin >refuse.out 2>&1
rc=$?
[ $rc -eq 3 ] || bad "12 over 5 ranks: exit $rc, expected 3"
grep -q "global batch 12 (2 ranks x batch 6 x accum 1) cannot be kept on 5 ranks: 12 is not a multiple of 5" refuse.out ||
  bad "refusal message: $(grep -m1 'cannot' refuse.out)"
say "5 ranks: refused: $(grep -m1 -o 'cannot be kept.*' refuse.out)"
[ $fail -eq 0 ] && say PASS || say FAIL
exit $fail
