#!/usr/bin/env bash
# Kills one rank of a running training job from outside with SIGKILL (as the OOM killer or a
# failed node would) and checks that the whole job ends, with a non-zero exit, within MAX_S.
#   robust_kill_train.sh MAX_S STARTED_ERE [SIGNAL [WANT_ERE]] -- mpirun ... ddp_train ...
# STARTED_ERE: a line of the job's output that shows training has begun; the victim is the
# last of mpirun's child processes (the ranks on this node), signalled 1 s after that line.
# SIGNAL: KILL (default) or STOP (a hung rank: only the watchdog can end the job); WANT_ERE: a
# line the output must contain (the watchdog's report).
set -u
max_s=$1 started=$2
shift 2
sig=KILL want=""
if [ "${1:-}" != "--" ] && [ $# -gt 0 ]; then sig=$1; shift; fi
if [ "${1:-}" != "--" ] && [ $# -gt 0 ]; then want=$1; shift; fi
[ "${1:-}" = "--" ] && shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1 &
mp=$!
fail=0
# Wait (at most 90 s) for training to start.
for _ in $(seq 1 900); do
  grep -Eq -- "$started" "$out" && break
  kill -0 "$mp" 2>/dev/null || break
  sleep 0.1
done
if ! grep -Eq -- "$started" "$out"; then
  cat "$out"
  echo "FAIL: training did not start (no line matches: $started)"
  kill -TERM "$mp" 2>/dev/null
  exit 1
fi
sleep 1
ranks=$(pgrep -P "$mp" | sort -n)
victim=$(echo "$ranks" | tail -n 1)
nr=$(echo "$ranks" | grep -c .)
if [ -z "$victim" ] || [ "$nr" -lt 2 ]; then
  cat "$out"
  echo "FAIL: found $nr rank processes under mpirun (pid $mp)"
  kill -TERM "$mp" 2>/dev/null
  exit 1
fi
echo "robust_kill_train.sh: $nr ranks ($(echo $ranks)); SIG$sig to pid $victim"
t0=$(date +%s.%N)
kill -"$sig" "$victim"
# The job must end by itself; after max_s + 30 s it is stopped here and the test fails.
cap=$((${max_s%.*} + 30))
ended=0
for _ in $(seq 1 $((cap * 10))); do
  if ! kill -0 "$mp" 2>/dev/null; then ended=1; break; fi
  sleep 0.1
done
if [ $ended -eq 0 ]; then
  kill -CONT "$victim" 2>/dev/null
  kill -TERM "$mp" 2>/dev/null; sleep 2; kill -KILL "$mp" 2>/dev/null
fi
wait "$mp"
rc=$?
t1=$(date +%s.%N)
elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
cat "$out"
echo "robust_kill_train.sh: the job ended with status $rc, $elapsed s after the SIG$sig (limit $max_s s)"
if [ -n "$want" ] && ! grep -Eq -- "$want" "$out"; then echo "FAIL: no line matches: $want"; fail=1; fi
[ $ended -eq 1 ] || { echo "FAIL: the job was still running $cap s after the kill"; fail=1; }
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0"; fail=1; }
awk -v e="$elapsed" -v m="$max_s" 'BEGIN { exit !(e > m) }' && { echo "FAIL: took more than $max_s s"; fail=1; }
[ $fail -eq 0 ] && echo "robust_kill_train.sh: PASS"
exit $fail
