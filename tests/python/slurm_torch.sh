#!/usr/bin/env bash
# mpiddp.torch.init_process_group under SLURM: python/examples/torch.sbatch runs the comm-hook
# test (tests/python/test_hook.py: init_process_group, then DDP with gloo and with the hooks,
# gradients compared) on the private SLURM of ci/slurm/with_slurm.sh, once with srun (PMIx)
# and once with mpirun inside the allocation; each job must pass and report NTASKS ranks.
#   ci/slurm/with_slurm.sh -- tests/python/slurm_torch.sh SOURCE_DIR PYTHON [NTASKS]
set -uo pipefail
src=$1 py=$2 ntasks=${3:-2}
: "${SLURM_CONF:?run me through ci/slurm/with_slurm.sh}"
: "${MPIDDP_LIBRARY:?the test sets MPIDDP_LIBRARY and PYTHONPATH}"
out_dir=${MPIDDP_SLURM_SCRATCH:-$(mktemp -d)}/torch_jobs
mkdir -p "$out_dir"
export MPIDDP_PYTHON=$py
fail=0
for launcher in srun mpirun; do
  out="$out_dir/$launcher.out"
  MPIDDP_LAUNCHER=$launcher sbatch --wait --nodes=1 --ntasks="$ntasks" --ntasks-per-node="$ntasks" --time=00:05:00 \
    --chdir="$src/tests/python" --output="$out" "$src/python/examples/torch.sbatch" \
    "$src/tests/python/test_hook.py" "$ntasks" >"$out_dir/sbatch.log" 2>&1
  rc=$?
  echo "=== torch.sbatch with $launcher: sbatch --wait returned $rc"
  sed 's/^/    /' "$out" 2>/dev/null
  if [ $rc -ne 0 ]; then
    echo "FAIL: $launcher: sbatch --wait returned $rc: $(cat "$out_dir/sbatch.log")" >&2
    fail=1
    continue
  fi
  grep -q "launcher $launcher" "$out" || { echo "FAIL: $launcher: job header missing" >&2; fail=1; }
  grep -q "python_hook: PASS (0 failures over $ntasks ranks)" "$out" ||
    { echo "FAIL: $launcher: no 'python_hook: PASS' over $ntasks ranks" >&2; fail=1; }
done
[ $fail -eq 0 ] && echo "slurm_torch: PASS" || echo "slurm_torch: FAIL"
exit $fail
