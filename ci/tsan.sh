#!/usr/bin/env bash
# ThreadSanitizer pass (issue 8): a -DDDP_SANITIZE=thread build in build-tsan/ running the
# tests that exercise threads: the collectives' progress engine (non-blocking requests
# completed on the engine thread while the caller posts more), the reducer (buckets handed to
# the progress thread during backward) and the guard. Suppressions (tests/tsan.supp) cover
# Open MPI's own libraries only; any report in mpiddp code fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
# Tests run here: the engine (coll_api: 64 non-blocking collectives in flight; soak_short:
# 1,000 random non-blocking collectives), the reducer, the guard's fingerprints.
tests='^(coll_api_np[23]|soak_short_np3|reducer_exact_np2|reducer_mismatch_np2|guard_unit_np2|robust_mismatch_np2)$'

cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDP_SANITIZE=thread -DDDP_CUDA=OFF \
  -DDDP_WERROR=ON >/dev/null
# Build only the programs of the selected tests.
exes=$(ctest --test-dir build-tsan -N -V -R "$tests" | sed -n 's|.*"-np" "[0-9]*" "\([^"]*\)".*|\1|p' \
  | xargs -r -n1 basename | sort -u)
[ -n "$exes" ] || { echo "ci/tsan.sh: no tests matched $tests"; exit 1; }
echo "ci/tsan.sh: building $(echo $exes)"
# shellcheck disable=SC2086
cmake --build build-tsan -j "$jobs" --target $exes

# Read by every rank (mpirun passes the environment to local ranks). halt_on_error: the first
# report ends that rank with exitcode 66, so the test fails.
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp:halt_on_error=1:exitcode=66:second_deadlock_stack=1:history_size=4"
export OMPI_MCA_mca_base_component_disable_dlclose=1
export OMPI_MCA_btl=self,vader # one node: no TCP BTL threads
ctest --test-dir build-tsan -R "$tests" -j "$jobs" --output-on-failure --timeout 240
