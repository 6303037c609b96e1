#!/usr/bin/env bash
# apps/ddp_run --elastic without MPI (ctest elastic_launcher, labels quick and elastic, ~3 s):
# a stand-in job over a hostfile loses h2 (exit 1: restarted on h1 alone), gets it back (asked
# to stop with SIGUSR1, exit 75: restarted on both, not counted as a restart) and finishes;
# the log has one line per change; mpirun and srun lines get their rank count and hosts
# rewritten; fewer than MIN ranks gives up after --wait.
#   elastic_launcher.sh DDP_RUN SCRATCH
set -uo pipefail
run=$(realpath "$1") scratch=$2
mkdir -p "$scratch" && cd "$scratch" || exit 1
rm -rf ck bin ./*.log ./*.out attempts
mkdir -p ck bin
fail=0
say() { echo "elastic_launcher: $*"; }
bad() { echo "elastic_launcher: FAIL: $*" >&2; fail=1; }

# The job: attempt 1 writes checkpoint 15, loses h2 and fails; attempt 2 brings h2 back 1 s
# later and stops on SIGUSR1 with checkpoint 17 (exit 75); attempt 3 finishes.
cat >job.sh <<'EOF'
#!/usr/bin/env bash
n=$(($(cat attempts 2>/dev/null || echo 0) + 1))
echo $n >attempts
echo "job: attempt $n: np $1 hosts $2 args ${*:3}"
case $n in
1) echo ckpt-000000000015.ddp >ck/LATEST; printf 'h1 slots=2\n' >hosts; exit 1 ;;
2) trap 'echo ckpt-000000000017.ddp >ck/LATEST; exit 75' USR1
   sleep 1; printf 'h1 slots=2\nh2:2\n' >hosts
   for _ in $(seq 1 100); do sleep 0.1; done; exit 9 ;;
*) exit 0 ;;
esac
EOF
chmod +x job.sh
printf 'h1 slots=2\nh2:2\n' >hosts
timeout 60 bash "$run" --elastic 2:4 --hostfile hosts --poll 1 --backoff 0 -- \
  ./job.sh {np} {hosts} --checkpoint-dir ck >job.out 2>job.log
rc=$?
cat job.log
[ $rc -eq 0 ] || bad "ddp_run exited $rc"
[ "$(grep -c '^job: attempt' job.out)" -eq 3 ] || bad "not 3 attempts: $(cat job.out)"
grep -q '^job: attempt 2: np 2 hosts h1:2 args --checkpoint-dir ck --resume auto$' job.out ||
  bad "attempt 2 not on h1:2: $(grep 'attempt 2' job.out)"
grep -q '^job: attempt 3: np 4 hosts h1:2,h2:2 ' job.out || bad "attempt 3 not on both hosts"
for line in 'elastic: world 4 (hosts h1:2,h2:2; --elastic 2:4), starting from' \
  'elastic: world 4 -> 2 (hosts h1:2,h2:2 -> h1:2) at step 15, checkpoint ck/ckpt-000000000015.ddp' \
  'elastic: hosts h1:2,h2:2 alive (4 ranks): asking the job of 2 ranks to stop' \
  'elastic: world 2 -> 4 (hosts h1:2 -> h1:2,h2:2) at step 17, checkpoint ck/ckpt-000000000017.ddp' \
  'attempt 3 finished (restarts used: 1 of 3)'; do
  grep -qF "$line" job.log || bad "log lacks '$line'"
done

# Rewriting: mpirun's -np/--host and srun's -N/-n/-w, the program's own arguments untouched.
printf '#!/bin/sh\necho "$(basename "$0") $*"\n' >bin/mpirun
cp bin/mpirun bin/srun
chmod +x bin/mpirun bin/srun
printf 'h1 slots=2\nh2:2\nh3\n' >hosts
PATH=$PWD/bin:$PATH bash "$run" --elastic 1:4 --hostfile hosts --no-resume-arg -- \
  mpirun --oversubscribe -np 8 --host x:8 -x A=1 /bin/echo -np 7 >mpi.out 2>/dev/null
[ "$(cat mpi.out)" = "mpirun -np 4 --host h1:2,h2:2 --oversubscribe -x A=1 /bin/echo -np 7" ] ||
  bad "mpirun rewritten as '$(cat mpi.out)'"
PATH=$PWD/bin:$PATH bash "$run" --elastic 1:5 --hostfile hosts --no-resume-arg -- \
  srun -N 2 --ntasks=4 --nodelist=a,b /bin/echo -n 3 >srun.out 2>/dev/null
[ "$(cat srun.out)" = "srun -N 3 -n 5 -w h1,h2,h3 /bin/echo -n 3" ] || bad "srun rewritten as '$(cat srun.out)'"

# Too few ranks: gives up after --wait, naming the numbers.
printf 'h1 slots=1\n' >hosts
bash "$run" --elastic 2:4 --hostfile hosts --poll 1 --wait 1 -- ./job.sh {np} {hosts} >few.out 2>few.log
rc=$?
[ $rc -ne 0 ] || bad "1 rank with MIN 2: exit 0"
grep -q 'elastic: 1 rank(s) on the alive hosts (h1:1), fewer than MIN 2 after 1 s: giving up' few.log ||
  bad "no give-up line: $(tail -1 few.log)"
[ $fail -eq 0 ] && say PASS || say FAIL
exit $fail
