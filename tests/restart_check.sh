#!/usr/bin/env bash
# Restarts of ddp_train (issue 17), run by ctest (tests/restart.cmake, label restart).
#   restart_check.sh MODE NP LAUNCH DDP_RUN DDP_TRAIN SCRATCH     (LAUNCH: tools/mpilaunch)
# Exactness modes: a --deterministic run interrupted and resumed by apps/ddp_run (--resume
# auto from --checkpoint-dir) must end with the final parameter CRC and the per-epoch metrics
# (epoch, global step, train loss, test accuracy) of the uninterrupted run, bit for bit.
#   kill     a random rank SIGKILLed at a random step, twice (RESTART_SEED picks; printed)
#   usr1     SIGUSR1 to one rank only (the ranks must agree on the step: exit 75, no hang),
#            then SIGUSR1+SIGTERM to one rank (a second signal ends it at once: ddp_run
#            restarts), then SIGUSR1 to ddp_run (forwarded by mpirun: exit 75), then finish
#   corrupt  the newest checkpoint damaged before the resume: ddp_run's attempt falls back to
#            the previous one, saying so
# Bad input (the last good checkpoint is never replaced or removed):
#   badinput --checkpoint-dir under a regular file; a checkpoint of another model, of another
#            world size that cannot split its global batch (issue 28); --resume auto without a folder
#   fs       (own mount namespace; 77 when mounting is not permitted) a read-only folder;
#            a disk that fills up during a checkpoint write (10 MiB tmpfs)
# SLURM (inside ci/slurm/with_slurm.sh, which sets SLURM_CONF):
#   slurm    apps/slurm/train_requeue.sbatch stopped by `scancel --signal=USR1 --batch` mid-run:
#            exit 75, scontrol requeue, the same job id runs again, resumes and finishes with
#            the uninterrupted run's CRC and metrics; Restarts=1 and the job completion records
#            (sacct -c: jobcomp/filetxt, there is no slurmdbd) are shown
set -uo pipefail
mode=$1 np=$2 train=$5 scratch=$6
launch=$(realpath "$3") run=$(realpath "$4") train=$(realpath "$train")
rm -rf "$scratch"
mkdir -p "$scratch"
cd "$scratch" || exit 1
fail=0
say() { echo "restart_check[$mode np=$np]: $*"; }
bad() {
  echo "restart_check[$mode np=$np]: FAIL: $*" >&2
  fail=1
}
finish() {
  [ $fail -eq 0 ] && say PASS || say FAIL
  exit $fail
}

# Small and fast: 4 epochs of 25 steps, one global batch of 24 at np = 2 and 3, 6 lanes.
cfg=(--epochs 4 --batch $((24 / np)) --deterministic 6 --limit-steps 25 --limit-test 300 --no-progress)
ck=(--checkpoint-dir ck --checkpoint-every 6)
# Every process the launchers start carries this tag in its environment: how ranks are found.
export RESTART_CHECK_TAG="restart_check.$$.$RANDOM"

reference() {
  "$launch" -n "$np" "$train" "${cfg[@]}" --metrics ref.csv >ref.out 2>&1 || bad "reference run: $? $(tail -3 ref.out)"
  crc_ref=$(grep 'final parameters' ref.out)
  say "uninterrupted: $crc_ref"
}

# The final CRC of the last attempt in $1 and every metrics line of $2 against the reference
# (a line repeated by a resumed attempt must repeat the same values).
same_as_reference() {
  local crc
  crc=$(grep 'final parameters' "$1" | tail -n 1)
  [ -n "$crc" ] && [ "$crc" = "$crc_ref" ] || bad "final parameters differ: '$crc' vs '$crc_ref'"
  awk -F, 'NR == FNR { if (FNR > 1) ref[$1] = $1 "," $2 "," $3 "," $4; next }
      FNR > 1 { got = $1 "," $2 "," $3 "," $4; seen[$1] = 1
                if (got != ref[$1]) { printf "  metrics differ: %s vs %s\n", got, ref[$1]; bad = 1 } }
      END { for (e in ref) if (!seen[e]) { printf "  epoch %s missing\n", e; bad = 1 }
            exit bad }' ref.csv "$2" || bad "per-epoch metrics differ from the uninterrupted run"
  [ $fail -eq 0 ] && say "resumed run: $crc; metrics $(cut -d, -f1-4 "$2" | tail -n +2 | tr '\n' ' ')"
}

# The pid of rank $1 of the running job (tagged, running ddp_train).
rank_pid() {
  local e p
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}
    p=${p%/environ}
    [ "/proc/$p/exe" -ef "$train" ] 2>/dev/null || continue # (a test builtin: no process per pid)
    tr '\0' '\n' <"$e" 2>/dev/null | grep -qxF "RESTART_CHECK_TAG=$RESTART_CHECK_TAG" || continue
    tr '\0' '\n' <"$e" 2>/dev/null | grep -qxE "(OMPI_COMM_WORLD_RANK|PMI_RANK|SLURM_PROCID)=$1" && echo "$p"
  done | head -n 1
}

# at_step WANT STEP OUT PID RANK SIGNAL: in the attempt that printed the WANT-th "# resumed
# from" line to OUT (0: the first attempt), finds rank RANK as soon as that attempt logs its
# first step, sends it SIGNAL once it has logged global step >= STEP (steps.log) and prints
# its pid. PID: the launcher's (gone: a failure).
at_step() {
  local want=$1 step=$2 out=$3 pid=$4 rank=$5 sig=$6 last p=""
  for _ in $(seq 1 3000); do
    kill -0 "$pid" 2>/dev/null || { bad "the run ended before step $step"; return 1; }
    if [ "$(grep -c '^# resumed from' "$out")" -ge "$want" ]; then
      last=$(tail -n 1 steps.log 2>/dev/null | cut -d' ' -f1)
      if [ -n "$last" ]; then
        [ -n "$p" ] || p=$(rank_pid "$rank")
        [ -n "$p" ] || { bad "rank $rank not found"; return 1; }
        if [ "$last" -ge "$step" ]; then
          kill -"$sig" "$p"
          echo "$p"
          return 0
        fi
      fi
    fi
    sleep 0.01
  done
  bad "step $step not reached in 30 s"
  return 1
}

# wait_run PID: waits for the launcher PID and sets st to its exit status; a job still running
# 40 s later hangs (a rank waiting for one that has left): its ranks get SIGKILL, a failure.
wait_run() {
  local pid=$1 r
  for _ in $(seq 1 4000); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  if kill -0 "$pid" 2>/dev/null; then
    bad "the job hangs 40 s after the signal; SIGKILL to its ranks"
    for r in $(seq 0 $((np - 1))); do
      p=$(rank_pid "$r")
      [ -n "$p" ] && kill -KILL "$p"
    done
  fi
  wait "$pid"
  st=$?
}

# The global step the run had logged last.
logged() { tail -n 1 steps.log | cut -d' ' -f1; }

seed=${RESTART_SEED:-$(($(date +%s%N) % 1000000007))}
RANDOM=$seed

case $mode in
kill)
  say "seed $seed (RESTART_SEED=$seed reproduces the steps and ranks)"
  reference
  k1=$((8 + RANDOM % 25)) r1=$((RANDOM % np))
  k2=$((k1 + 25 + RANDOM % 15)) r2=$((RANDOM % np))
  "$run" --max-restarts 3 --backoff 0 -- "$launch" -n "$np" "$train" "${cfg[@]}" "${ck[@]}" \
    --metrics run.csv --log-steps steps.log >run.out 2>&1 &
  pid=$!
  p=$(at_step 0 $k1 run.out $pid $r1 KILL) && say "SIGKILL to rank $r1 (pid $p) at global step $(logged) (target $k1)" || bad "SIGKILL not sent"
  p=$(at_step 1 $k2 run.out $pid $r2 KILL) && say "SIGKILL to rank $r2 (pid $p) at global step $(logged) (target $k2)" || bad "SIGKILL not sent"
  wait_run $pid
  grep '^ddp_run:' run.out
  [ $st -eq 0 ] || bad "ddp_run exited $st"
  grep -q "restart 1 of 3 in 0 s, resuming from ck/ckpt-" run.out || bad "no log line of the first restart"
  grep -q "restart 2 of 3 in 0 s, resuming from ck/ckpt-" run.out || bad "no log line of the second restart"
  grep -q "attempt 3 finished (restarts used: 2 of 3)" run.out || bad "no final log line"
  grep '^# resumed from' run.out
  same_as_reference run.out run.csv
  ;;
usr1)
  say "seed $seed (RESTART_SEED=$seed reproduces the steps and ranks)"
  reference
  k1=$((8 + RANDOM % 18)) r1=$((RANDOM % np))
  # 1. SIGUSR1 to one rank only: every rank stops after the same step, one checkpoint, 75.
  "$run" --max-restarts 0 -- "$launch" -n "$np" "$train" "${cfg[@]}" "${ck[@]}" --metrics run.csv \
    --log-steps steps.log >run1.out 2>&1 &
  pid=$!
  p=$(at_step 0 $k1 run1.out $pid $r1 USR1) && say "SIGUSR1 to rank $r1 only (pid $p) at step $(logged) (target $k1)" || bad "SIGUSR1 not sent"
  wait_run $pid
  grep -E '^ddp_run:|^# stopped' run1.out
  [ $st -eq 75 ] || bad "stop on SIGUSR1 to one rank: ddp_run exited $st, expected 75"
  s1=$(sed -n 's/^# stopped on SIGUSR1 after global step \([0-9]*\) .*checkpoint written.*/\1/p' run1.out)
  [ -n "$s1" ] || bad "no '# stopped on SIGUSR1 ... checkpoint written' line"
  [ "$(cat ck/LATEST 2>/dev/null)" = "$(printf 'ckpt-%012d.ddp' "${s1:-0}")" ] ||
    bad "LATEST is '$(cat ck/LATEST 2>/dev/null)', not the stopping step ${s1:-?}"
  # 2. Two signals to one rank before it can stop (stopped, so both arrive together): it ends
  #    at once with 128 + signal, and ddp_run restarts the job; then SIGUSR1 to ddp_run.
  k2=$((${s1:-0} + 8 + RANDOM % 10)) r2=$((RANDOM % np))
  k3=$((k2 + 20 + RANDOM % 10))
  "$run" --max-restarts 1 --backoff 0 -- "$launch" -n "$np" "$train" "${cfg[@]}" "${ck[@]}" \
    --metrics run.csv --log-steps steps.log >run2.out 2>&1 &
  pid=$!
  if p=$(at_step 1 $k2 run2.out $pid $r2 STOP); then
    kill -USR1 "$p"
    kill -TERM "$p"
    t0=$(date +%s%N)
    kill -CONT "$p"
    say "SIGSTOP, SIGUSR1, SIGTERM, SIGCONT to rank $r2 (pid $p) at step $(logged) (target $k2)"
    for _ in $(seq 1 500); do grep -q "attempt 1 ended" run2.out && break; sleep 0.02; done
    ms=$((($(date +%s%N) - t0) / 1000000))
    grep -q "attempt 1 ended with signal SIG\(USR1\|TERM\) (status 1[34][38]); restart 1 of 1" run2.out ||
      bad "the doubly signalled job did not end with 138/143 and a restart: $(grep '^ddp_run:' run2.out | tail -1)"
    say "the job ended ${ms} ms after the second signal"
    [ $ms -lt 10000 ] || bad "a second signal took ${ms} ms to end the job"
  else
    bad "SIGSTOP not sent"
  fi
  # (rank 0 stands in for "the attempt has started"; the signal goes to ddp_run itself)
  at_step 2 $k3 run2.out $pid 0 0 >/dev/null && kill -USR1 $pid && say "SIGUSR1 to ddp_run at step $(logged) (target $k3)" ||
    bad "SIGUSR1 to ddp_run not sent"
  wait_run $pid
  grep -E '^ddp_run:|^# stopped|^# resumed' run2.out
  [ $st -eq 75 ] || bad "SIGUSR1 to ddp_run: it exited $st, expected 75"
  grep -q "^# stopped on SIGUSR1 after global step .*checkpoint written" run2.out || bad "no stop line"
  # 3. The requeued job: resumes and finishes.
  "$run" --max-restarts 0 -- "$launch" -n "$np" "$train" "${cfg[@]}" "${ck[@]}" --metrics run.csv \
    --log-steps steps.log >run3.out 2>&1
  st=$?
  grep -E '^ddp_run:|^# resumed' run3.out
  [ $st -eq 0 ] || bad "the last attempt exited $st"
  same_as_reference run3.out run.csv
  ;;
corrupt)
  reference
  "$launch" -n "$np" "$train" "${cfg[@]}" "${ck[@]}" --metrics run.csv --stop-after 40 >run1.out 2>&1 ||
    bad "first run: $?"
  newest=$(cat ck/LATEST)
  [ "$newest" = ckpt-000000000036.ddp ] || bad "LATEST is '$newest', expected ckpt-000000000036.ddp"
  size=$(stat -c %s "ck/$newest")
  printf '\x55' | dd of="ck/$newest" bs=1 seek=$((size / 2)) conv=notrunc status=none
  say "flipped byte $((size / 2)) of ck/$newest"
  "$run" --max-restarts 0 -- "$launch" -n "$np" "$train" "${cfg[@]}" "${ck[@]}" --metrics run.csv \
    >run2.out 2>&1
  st=$?
  grep -E '^ddp_run:|^ddp_train:|^# resumed' run2.out
  [ $st -eq 0 ] || bad "the resumed run exited $st"
  grep -q "ddp_train: --resume auto: ck/$newest is damaged (checkpoint corrupt: CRC32 .*); falling back to the previous checkpoint" run2.out ||
    bad "no message about the damaged checkpoint and the fallback"
  grep -q "^# resumed from ck/ckpt-000000000030.ddp at epoch 2 step 5 (global step 30)" run2.out ||
    bad "did not resume from the previous checkpoint (step 30)"
  same_as_reference run2.out run.csv
  ;;
badinput)
  # A good folder first: checkpoints of steps 6 and 12.
  "$launch" -n "$np" "$train" "${cfg[@]}" "${ck[@]}" --stop-after 12 >good.out 2>&1 || bad "writer: $?"
  before=$(cd ck && ls && sha256sum ./*)
  : >afile
  # name | ranks | flags | exit status | message
  cases=(
    "folder under a file|$np|--checkpoint-dir afile/ck --resume auto|2|cannot create checkpoint directory afile/ck: Not a directory"
    "folder is a file|$np|--checkpoint-dir afile|2|checkpoint directory afile exists and is not a directory"
    "other model|$np|--checkpoint-dir ck --resume auto --model cnn|3|cannot resume from ck/ckpt-000000000012.ddp: checkpoint is for model 'mlp'"
    "other world size, global batch unsplittable|5|--checkpoint-dir ck --resume auto --deterministic 10|3|cannot resume from ck/ckpt-000000000012.ddp: the checkpoint's global batch 24 ($np ranks x batch $((24 / np)) x accum 1) cannot be kept on 5 ranks"
    "auto without a folder|$np|--resume auto|2|--resume auto needs --checkpoint-dir"
    "both kinds|$np|--checkpoint x --checkpoint-dir ck|2|exclude each other"
  )
  for c in "${cases[@]}"; do
    IFS='|' read -r name n extra want msg <<<"$c"
    # shellcheck disable=SC2206
    args=("${cfg[@]}" $extra)
    "$launch" -n "$n" "$train" "${args[@]}" >case.out 2>&1
    rc=$?
    [ $rc -eq "$want" ] || bad "$name: exit status $rc, expected $want"
    grep -qF -- "$msg" case.out || bad "$name: no message '$msg': $(grep -m2 'ddp_train' case.out)"
    grep -qE '^ +1 ' case.out && bad "$name: training ran"
    [ "$(cd ck && ls && sha256sum ./*)" = "$before" ] || bad "$name: the checkpoint folder changed"
    say "$name: exit $rc: $(grep -m1 -F -- "$msg" case.out)"
  done
  ;;
fs)
  # Both cases run in a mount namespace of their own: its mounts vanish with it.
  if ! unshare --mount --propagation private true 2>/dev/null; then
    echo "restart_check[fs]: SKIP: cannot create a mount namespace here (unshare --mount needs CAP_SYS_ADMIN)"
    exit 77
  fi
  export -f say bad
  export mode np launch train
  unshare --mount --propagation private -- bash -c '
    set -uo pipefail
    fail=0
    bad() { echo "restart_check[fs np=$np]: FAIL: $*" >&2; fail=1; }
    cfg=("$@")
    mkdir -p ro full
    if ! mount -t tmpfs -o size=16m tmpfs ro 2>mount.err || ! mount -t tmpfs -o size=10m tmpfs full 2>>mount.err; then
      echo "restart_check[fs]: SKIP: mount -t tmpfs is not permitted: $(cat mount.err)"
      exit 77
    fi
    # 1. A read-only folder holding a good checkpoint: refused at start, nothing changed.
    "$launch" -n "$np" "$train" "${cfg[@]}" --checkpoint-dir ro/ck --checkpoint-every 6 --stop-after 6 >w.out 2>&1 || bad "writer: $?"
    mount -o remount,ro ro || bad "cannot remount read-only"
    before=$(cd ro/ck && ls && sha256sum ./*)
    "$launch" -n "$np" "$train" "${cfg[@]}" --checkpoint-dir ro/ck --resume auto >ro.out 2>&1
    rc=$?
    [ $rc -eq 2 ] || bad "read-only folder: exit status $rc, expected 2"
    grep -q "checkpoint directory ro/ck is not writable: Read-only file system" ro.out || bad "read-only: no clear message: $(grep -m1 ddp_train ro.out)"
    grep -qE "^ +1 " ro.out && bad "read-only: training ran"
    [ "$(cd ro/ck && ls && sha256sum ./*)" = "$before" ] || bad "read-only: the folder changed"
    say "read-only folder: exit $rc: $(grep -m1 "not writable" ro.out)"
    # 2. A 10 MiB disk: checkpoints (4.3 MB each) of steps 5 and 10 fit, 15 and 20 do not.
    "$launch" -n "$np" "$train" "${cfg[@]}" --checkpoint-dir full/ck --checkpoint-every 5 --keep 2 --stop-after 22 >full.out 2>&1
    rc=$?
    [ $rc -eq 0 ] || bad "full disk: exit status $rc (training should go on)"
    grep "checkpoint not written" full.out
    n=$(grep -c "ddp_train: checkpoint not written: writing full/ck/ckpt-0000000000[12][05].ddp.tmp.[0-9]*: No space left on device" full.out)
    [ "$n" -eq 2 ] || bad "full disk: $n clear messages, expected 2 (steps 15, 20)"
    [ "$(cat full/ck/LATEST)" = ckpt-000000000010.ddp ] || bad "full disk: LATEST is $(cat full/ck/LATEST)"
    [ "$(cd full/ck && ls | tr "\n" " ")" = "LATEST ckpt-000000000005.ddp ckpt-000000000010.ddp " ] ||
      bad "full disk: the folder holds $(ls full/ck | tr "\n" " ")"
    "$launch" -n "$np" "$train" "${cfg[@]}" --checkpoint-dir full/ck --resume auto --stop-after 11 >res.out 2>&1 ||
      bad "resume after the full disk: $?"
    grep -q "^# resumed from full/ck/ckpt-000000000010.ddp" res.out || bad "no resume from the last good checkpoint: $(grep -m1 resumed res.out)"
    say "full disk: the last good checkpoint (step 10) kept and resumed: $(grep -m1 "^# resumed" res.out)"
    umount full ro
    exit $fail' restart_check "${cfg[@]}"
  st=$?
  [ $st -eq 77 ] && exit 77
  [ $st -eq 0 ] || fail=1
  ;;
slurm)
  : "${SLURM_CONF:?run me through ci/slurm/with_slurm.sh}"
  src=$(cd "$(dirname "$0")/.." && pwd)
  build=$(cd "$(dirname "$train")/.." && pwd)
  cfg=(--epochs 6 --batch $((24 / np)) --deterministic 6 --limit-steps 40 --limit-test 300 --no-progress)
  reference
  k=$((30 + RANDOM % 60))
  sbatch --parsable --nodes=1 --ntasks="$np" --ntasks-per-node="$np" --time=00:05:00 --chdir="$src" --output="$PWD/job.out" \
    --export="ALL,MPIDDP_BUILD=$build,MPIDDP_RUN_FLAGS=--max-restarts 0,MPIDDP_LAUNCHER=${MPIDDP_LAUNCHER:-mpirun}" \
    "$src/apps/slurm/train_requeue.sbatch" "${cfg[@]}" --checkpoint-dir "$PWD/ck" --checkpoint-every 10 \
    --metrics "$PWD/run.csv" --log-steps "$PWD/steps.log" >sbatch.out 2>&1 || { bad "sbatch: $(cat sbatch.out)"; finish; }
  job=$(head -n 1 sbatch.out | cut -d';' -f1)
  say "job $job submitted (launcher ${MPIDDP_LAUNCHER:-mpirun}); SIGUSR1 to its batch shell at step $k"
  for _ in $(seq 1 6000); do
    last=$(tail -n 1 steps.log 2>/dev/null | cut -d' ' -f1)
    [ -n "$last" ] && [ "$last" -ge "$k" ] && break
    scontrol show job "$job" 2>/dev/null | grep -q "JobState=\(PENDING\|RUNNING\|CONFIGURING\)" ||
      { bad "job $job is not running: $(scontrol show job "$job" 2>&1 | grep -o 'JobState=[^ ]*')"; break; }
    sleep 0.01
  done
  scancel --signal=USR1 --batch "$job" || bad "scancel --signal=USR1 --batch failed"
  say "scancel --signal=USR1 --batch $job at step $(logged)"
  # Follow the job until it completes (MinJobAge keeps the record 5 s after that). SLURM
  # holds a requeued batch job for the credential lifetime (EligibleTime), because the node
  # refuses the job id's revoked credential until then ("Job credential revoked"); with_slurm.sh
  # sets it to 15 s (AuthInfo cred_expire; SLURM's default is 120 s). Moving StartTime to now
  # instead raced with that revocation and failed the job now and then.
  states="" info="" seen=0
  for _ in $(seq 1 900); do
    info=$(scontrol show job "$job" 2>/dev/null) || break
    st=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info")
    case " $states " in *" $st "*) ;; *) states="$states $st" ;; esac
    if [ "$st" = PENDING ] && [ $seen -eq 0 ] && grep -q "Restarts=1 " <<<"$info"; then
      say "requeued: $(grep -oE "(Reason|Restarts|SubmitTime|EligibleTime)=[^ ]*" <<<"$info" | tr '\n' ' ')"
      seen=1
    fi
    [ "$st" = COMPLETED ] || [ "$st" = FAILED ] || [ "$st" = CANCELLED ] && break
    sleep 0.2
  done
  say "job $job states seen:$states"
  grep -oE "(JobState|Restarts|ExitCode|RunTime)=[^ ]*" <<<"$info" | tr '\n' ' '
  echo
  grep -q "JobState=COMPLETED" <<<"$info" || bad "the job did not complete"
  grep -q "Restarts=1 " <<<"$info" || bad "the job was not requeued exactly once"
  echo "--- sacct -c (jobcomp/filetxt; accounting storage is off in the private SLURM):"
  sacct -c -j "$job" -o JobID,JobName,State,ExitCode,Start,End 2>&1 || true
  echo "--- job output (both runs, --open-mode=append):"
  grep -E '^# job|^ddp_run:|^# stopped|^# resumed|^# final|^final' job.out
  grep -q "stopped on SIGUSR1 after global step" job.out || bad "the first run did not stop on SIGUSR1"
  grep -q "scontrol requeue $job" job.out || bad "the batch script did not requeue"
  grep -q "^# job $job (run 2)" job.out || bad "no second run of the job"
  grep -q "^# resumed from $PWD/ck/ckpt-" job.out || bad "the second run did not resume"
  same_as_reference job.out run.csv
  ;;
*)
  echo "usage: $0 kill|usr1|corrupt|badinput|fs|slurm NP LAUNCH DDP_RUN DDP_TRAIN SCRATCH" >&2
  exit 2
  ;;
esac
finish
