#!/usr/bin/env bash
# Kills one rank of a running training job from outside with SIGKILL (as the OOM killer or a
# failed node would) and checks that the whole job ends, with a non-zero exit, within MAX_S.
#   robust_kill_train.sh MAX_S STARTED_ERE [SIGNAL [WANT_ERE]] -- LAUNCHER ... ddp_train ...
# STARTED_ERE: a line of the job's output that shows training has begun; 1 s after that line
# the victim, the newest of the job's ranks, gets the signal. Ranks are found whatever started
# them (children of Open MPI's mpirun, below Hydra's hydra_pmi_proxy, or of slurmstepd under
# srun): processes that carry this run's tag in their environment (every launcher passes the
# environment on) and run one of the command's programs; their count must be the job's
# DDP_WORLD_SIZE.
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
export ROBUST_KILL_TAG="robust_kill_train.$$.$RANDOM"
progs=() # the command's programs, as /proc/PID/exe shows them
for a in "${@:2}"; do
  if [ -f "$a" ] && [ -x "$a" ]; then progs+=("$(realpath "$a")"); fi
done
find_ranks() {
  local e p exe q
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}
    p=${p%/environ}
    tr '\0' '\n' <"$e" 2>/dev/null | grep -qxF "ROBUST_KILL_TAG=$ROBUST_KILL_TAG" || continue
    exe=$(readlink "/proc/$p/exe" 2>/dev/null) || continue
    for q in "${progs[@]}"; do [ "$exe" = "$q" ] && echo "$p"; done
  done | sort -n
}
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
ranks=$(find_ranks)
victim=$(echo "$ranks" | tail -n 1)
nr=$(echo "$ranks" | grep -c .)
want_nr=$(tr '\0' '\n' <"/proc/$victim/environ" 2>/dev/null | sed -n 's/^DDP_WORLD_SIZE=//p')
if [ -z "$victim" ] || [ "$nr" -lt 2 ] || [ "$nr" != "$want_nr" ]; then
  cat "$out"
  echo "FAIL: found $nr rank processes of the job (launcher pid $mp) running ${progs[*]}, DDP_WORLD_SIZE=${want_nr:-unset}"
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
