#!/usr/bin/env bash
# Submits each CPU batch script of apps/slurm/ to the private SLURM started by
# ci/slurm/with_slurm.sh (which sets SLURM_CONF) with `sbatch --wait`, and checks the job's
# exit status and output: the rank count ddp_train reports and its final accuracy line.
#   ci/slurm/with_slurm.sh -- tests/slurm_check.sh SOURCE_DIR BUILD_DIR [NTASKS [NODES]]
# NODES > 1 (emulated hosts, with_slurm.sh --cluster): NTASKS spread evenly, and the slurmd of
# every node but the batch node must have launched tasks of the job.
set -uo pipefail
src=$1 build=$2 ntasks=${3:-2} nodes=${4:-1}
: "${SLURM_CONF:?run me through ci/slurm/with_slurm.sh}"
out_dir=${MPIDDP_SLURM_SCRATCH:-$(mktemp -d)}/jobs
mkdir -p "$out_dir"
fail=0
export MPIDDP_BUILD=$build
quick=(--epochs 1 --limit-steps 40 --limit-test 1000 --no-progress)
for script in train.sbatch train_srun.sbatch; do
  out="$out_dir/${script%.sbatch}.out"
  t0=$(date +%s.%N)
  # Command-line options override the scripts' cluster-sized #SBATCH lines.
  sbatch --wait --nodes=$nodes --ntasks=$ntasks --ntasks-per-node=$((ntasks / nodes)) --time=00:05:00 \
    --chdir="$src" --output="$out" "$src/apps/slurm/$script" "${quick[@]}" >"$out_dir/sbatch.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  job=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' "$out_dir/sbatch.log")
  echo "=== $script: job ${job:-?}, sbatch --wait returned $rc after $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s"
  cat "$out" 2>/dev/null | sed 's/^/    /'
  if [ $rc -ne 0 ]; then
    echo "FAIL: $script: sbatch --wait returned $rc: $(cat "$out_dir/sbatch.log")" >&2
    fail=1
    continue
  fi
  grep -q "^# ranks $ntasks, " "$out" || { echo "FAIL: $script: no '# ranks $ntasks' line" >&2; fail=1; }
  grep -q "tasks on $nodes node" "$out" || { echo "FAIL: $script: job header missing" >&2; fail=1; }
  # The batch script runs on the first node; the others must have started tasks of the job.
  for n in $(sinfo -h -N -o %N | sort -u | tail -n +2); do
    [ "$nodes" -gt 1 ] || break
    grep -q "launch task StepId=$job\\." "${SLURM_CONF%/*}/log/slurmd.$n.log" ||
      { echo "FAIL: $script: no task of job $job was launched on $n" >&2; fail=1; }
  done
  acc=$(awk '/^final: test accuracy/ { sub("%", "", $4); print $4 }' "$out")
  if [ -z "$acc" ] || ! awk -v a="$acc" 'BEGIN { exit !(a >= 50 && a <= 100) }'; then
    echo "FAIL: $script: final accuracy line missing or implausible ('${acc}')" >&2
    fail=1
  fi
done
# A job that fails must make sbatch --wait fail too (otherwise the checks above prove little).
sbatch --wait --nodes=1 --ntasks=1 --output="$out_dir/fail.out" --chdir="$src" \
  "$src/apps/slurm/train.sbatch" --model nosuch >/dev/null 2>&1
rc=$?
echo "=== failing job (--model nosuch): sbatch --wait returned $rc"
[ $rc -ne 0 ] || { echo "FAIL: a failing job returned 0" >&2; fail=1; }
[ $fail -eq 0 ] && echo "slurm_check: PASS" || echo "slurm_check: FAIL"
exit $fail
