#!/usr/bin/env bash
# Runs one job (a failure scenario, or a run that must succeed) and checks how it ended: exit
# status, wall time and the messages printed (each --want must match; each --once must match
# exactly one line).
#   robust_run.sh --expect fail|ok --max-s S [--want ERE]... [--once ERE]... [--not ERE]...
#                 [--file PATH ERE]... -- cmd...
# --file: PATH is removed before the run and must exist afterwards with a line matching ERE
# (the timeline the watchdog flushes before it ends the job).
set -u
expect=fail max_s=30
wants=() onces=() nots=() files=() fres=()
while [ $# -gt 0 ]; do
  case "$1" in
    --expect) expect=$2; shift 2 ;;
    --max-s) max_s=$2; shift 2 ;;
    --want) wants+=("$2"); shift 2 ;;
    --once) onces+=("$2"); shift 2 ;;
    --not) nots+=("$2"); shift 2 ;;
    --file) files+=("$2"); fres+=("$3"); shift 3 ;;
    --) shift; break ;;
    *) echo "robust_run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "robust_run.sh: no command after --" >&2; exit 2; }

for f in "${files[@]+"${files[@]}"}"; do rm -f "$f"; done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
t0=$(date +%s.%N)
# A hard cap well past max_s, so a hang is reported as a failure of this script, not of ctest.
cap=$((${max_s%.*} + 30))
timeout -k 5 "$cap" "$@" >"$out" 2>&1
rc=$?
t1=$(date +%s.%N)
elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
cat "$out"
echo "robust_run.sh: exit status $rc after $elapsed s (expect $expect within $max_s s)"

fail=0
if [ "$expect" = fail ] && [ "$rc" -eq 0 ]; then echo "FAIL: the job exited 0"; fail=1; fi
if [ "$expect" = ok ] && [ "$rc" -ne 0 ]; then echo "FAIL: the job exited $rc"; fail=1; fi
# 137 is also how mpirun reports a rank killed by SIGKILL: the clock tells a hang apart.
if awk -v e="$elapsed" -v c="$cap" 'BEGIN { exit !(e >= c) }'; then
  echo "FAIL: the job hung (killed by timeout after $cap s)"; fail=1
fi
if awk -v e="$elapsed" -v m="$max_s" 'BEGIN { exit !(e > m) }'; then
  echo "FAIL: took $elapsed s, more than $max_s s"; fail=1
fi
for re in "${wants[@]+"${wants[@]}"}"; do
  grep -Eq -- "$re" "$out" || { echo "FAIL: no line matches: $re"; fail=1; }
done
for re in "${onces[@]+"${onces[@]}"}"; do
  n=$(grep -Ec -- "$re" "$out")
  [ "$n" -eq 1 ] || { echo "FAIL: $n lines match (want exactly 1): $re"; fail=1; }
done
for re in "${nots[@]+"${nots[@]}"}"; do
  if grep -Eq -- "$re" "$out"; then echo "FAIL: a line matches: $re"; fail=1; fi
done
for i in "${!files[@]}"; do
  if [ ! -f "${files[$i]}" ]; then echo "FAIL: ${files[$i]} was not written"; fail=1
  elif ! grep -Eq -- "${fres[$i]}" "${files[$i]}"; then echo "FAIL: ${files[$i]} lacks: ${fres[$i]}"; fail=1
  else echo "robust_run.sh: ${files[$i]} has: ${fres[$i]}"; fi
done
[ $fail -eq 0 ] && echo "robust_run.sh: PASS"
exit $fail
