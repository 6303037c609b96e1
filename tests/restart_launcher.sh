#!/usr/bin/env bash
# apps/ddp_run against a stand-in training command whose attempts follow a plan (killed by
# SIGKILL, failing, stopping on SIGUSR1 with the resume status, finishing): the restarts, the
# appended `--resume auto`, the log lines, the budget, the back-off and signal forwarding.
#   restart_launcher.sh SOURCE_DIR SCRATCH
set -u
src=$1
work=$2
run=$src/apps/ddp_run
rm -rf "$work"
mkdir -p "$work"
fails=0
fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}

# The stand-in: attempt k (counted in $state/n) does what word k of $state/plan says.
fake=$work/fake_train.sh
cat >"$fake" <<'FAKE'
#!/usr/bin/env bash
state=$1
shift
n=$(($(cat "$state/n" 2>/dev/null || echo 0) + 1))
echo "$n" >"$state/n"
echo "$*" >>"$state/args"
read -r -a plan <"$state/plan"
case ${plan[n - 1]:-ok} in
  kill) kill -KILL $$ ;;
  fail) exit 3 ;;
  ok) exit 0 ;;
  wait)
    trap 'echo "stopping at a step (USR1)" >>"$state/args"; exit 75' USR1
    trap 'echo "stopping at a step (TERM)" >>"$state/args"; exit 75' TERM
    touch "$state/started"
    for _ in $(seq 600); do sleep 0.1; done
    exit 4 ;;
esac
FAKE
chmod +x "$fake"

case_dir() { # name plan -> fresh state folder
  local d=$work/$1
  mkdir -p "$d/ck"
  echo "$2" >"$d/plan"
  echo "$d"
}

# 1. Killed, failed, finished: two restarts, exit 0, --resume auto on every attempt, log lines.
d=$(case_dir kill_fail_ok "kill fail ok")
echo "ckpt-000000000120.ddp" >"$d/ck/LATEST"
"$run" --max-restarts 3 --backoff 0 -- "$fake" "$d" --checkpoint-dir "$d/ck" 2>"$d/log"
st=$?
cat "$d/log"
[ "$st" = 0 ] || fail "kill/fail/ok ended with $st, expected 0"
[ "$(cat "$d/n")" = 3 ] || fail "kill/fail/ok ran $(cat "$d/n") attempts, expected 3"
[ "$(grep -c -- '--resume auto$' "$d/args")" = 3 ] || fail "--resume auto not appended to every attempt"
grep -q "attempt 1 ended with signal SIGKILL (status 137); restart 1 of 3 in 0 s, resuming from $d/ck/ckpt-000000000120.ddp" "$d/log" ||
  fail "no log line for the SIGKILL restart naming the checkpoint"
grep -q "attempt 2 ended with exit status 3; restart 2 of 3" "$d/log" || fail "no log line for the failed attempt"
grep -q "attempt 3 finished (restarts used: 2 of 3)" "$d/log" || fail "no final log line"

# 2. Budget spent: the last failure's status comes back.
d=$(case_dir budget "fail kill kill ok")
"$run" --max-restarts 2 --backoff 0 -- "$fake" "$d" 2>"$d/log"
st=$?
[ "$st" = 137 ] || fail "budget spent: exit $st, expected 137 (the last attempt's SIGKILL)"
[ "$(cat "$d/n")" = 3 ] || fail "budget 2 ran $(cat "$d/n") attempts, expected 3"
grep -q "restart budget spent (2 of 2): giving up" "$d/log" || fail "no 'budget spent' line"
grep -q "resuming from the newest checkpoint the program finds" "$d/log" || fail "resume point without --checkpoint-dir"

# 3. --resume given by the caller is kept as is; --no-resume-arg appends nothing.
d=$(case_dir keep_resume "ok")
"$run" -- "$fake" "$d" --resume none 2>/dev/null
grep -q -- '--resume none$' "$d/args" || fail "the caller's --resume was changed: $(cat "$d/args")"
d=$(case_dir no_arg "ok")
"$run" --no-resume-arg -- "$fake" "$d" 2>/dev/null
grep -q -- '--resume' "$d/args" && fail "--no-resume-arg still appended --resume"

# 4. SIGUSR1 to ddp_run reaches the command, which stops with the resume status: exit 75, no restart.
d=$(case_dir usr1 "wait ok")
"$run" --backoff 0 -- "$fake" "$d" --checkpoint-dir "$d/ck" 2>"$d/log" &
pid=$!
for _ in $(seq 100); do [ -e "$d/started" ] && break; sleep 0.1; done
kill -USR1 "$pid"
wait "$pid"
st=$?
cat "$d/log"
[ "$st" = 75 ] || fail "SIGUSR1: ddp_run exited $st, expected 75"
grep -q "stopping at a step" "$d/args" || fail "SIGUSR1 was not passed to the command"
[ "$(cat "$d/n")" = 1 ] || fail "SIGUSR1: the command ran $(cat "$d/n") times, expected once"
grep -q "stopped on request with a checkpoint (exit status 75); resume from no checkpoint in $d/ck yet" "$d/log" ||
  fail "no log line for the stop on request"

# 4b. SIGTERM to ddp_run reaches the command as SIGUSR1 (mpirun forwards USR1, not TERM).
d=$(case_dir term "wait ok")
"$run" --backoff 0 -- "$fake" "$d" 2>"$d/log" &
pid=$!
for _ in $(seq 100); do [ -e "$d/started" ] && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid"
st=$?
[ "$st" = 75 ] || fail "SIGTERM: ddp_run exited $st, expected 75"
grep -q "stopping at a step (USR1)" "$d/args" || fail "SIGTERM was not passed on as SIGUSR1: $(cat "$d/args")"

# 5. Back-off doubles (1 s then 2 s before restarts 1 and 2).
d=$(case_dir backoff "fail fail ok")
t0=$(date +%s)
"$run" --backoff 1 --backoff-max 5 -- "$fake" "$d" 2>"$d/log"
t1=$(date +%s)
grep -q "restart 1 of 3 in 1 s" "$d/log" && grep -q "restart 2 of 3 in 2 s" "$d/log" || fail "back-off not 1 s then 2 s"
[ $((t1 - t0)) -ge 3 ] || fail "back-off took $((t1 - t0)) s, expected >= 3"

# 6. Bad input: a clear message and status 2.
"$run" --max-restarts x -- true 2>"$work/bad.log"
st=$?
[ "$st" = 2 ] && grep -q "max-restarts needs a count" "$work/bad.log" || fail "bad --max-restarts: status $st"
"$run" 2>"$work/bad.log"
st=$?
[ "$st" = 2 ] && grep -q "no command given" "$work/bad.log" || fail "no command: status $st"

if [ "$fails" -gt 0 ]; then
  echo "restart_launcher: $fails failure(s)"
  exit 1
fi
rm -rf "$work"
echo "restart_launcher: PASS"
