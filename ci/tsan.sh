#!/usr/bin/env bash
# ThreadSanitizer pass: a -DDDP_SANITIZE=thread build in build-tsan/ running the
# tests that exercise threads: the collectives' progress engine (non-blocking requests
# completed on the engine thread while the caller posts more), the reducer (buckets handed to
# the progress thread during backward), the guard, the device emulation (a thread per stream,
# events as counters) with the staged transport and device buckets, the loader's prefetch
# thread, and a short ddp_train on host and emulated-device buckets. Suppressions
# (tests/tsan.supp) cover Open MPI's own libraries only; any report in mpiddp code fails.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
# The engine (coll_api: 64 non-blocking collectives in flight; soak_short: 1,000 random
# non-blocking collectives), the reducer, the guard's fingerprints, the device emulation
# (device_emu, device_coll, reducer_device), the loader (sampler_loader: prefetch depths 1, 2,
# 5 against depth 0) and ddp_train (train_device_emulated: 24 steps on host buckets, then on
# emulated-device buckets).
tests='^(coll_api_np[23]|soak_short_np3|reducer_exact_np2|reducer_mismatch_np2|guard_unit_np2|robust_mismatch_np2|device_emu_np1|device_coll_np[23]|reducer_device_np2|sampler_loader_np2|train_device_emulated_np2)$'
want=13
targets="coll_api soak reducer_exact reducer_mismatch guard_unit robust_coll device_emu device_coll reducer_device sampler_loader ddp_train"

cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDP_SANITIZE=thread -DDDP_CUDA=OFF \
  -DDDP_WERROR=ON >/dev/null
# A test that is renamed, dropped or not configured here (ddp_train needs OpenBLAS and
# Fashion-MNIST) must not silently shrink the pass.
n=$(ctest --test-dir build-tsan -N -R "$tests" | grep -c "Test *#" || true)
if [ "$n" -ne "$want" ]; then
  echo "ci/tsan.sh: the pattern matches $n tests, expected $want:" >&2
  ctest --test-dir build-tsan -N -R "$tests" >&2
  exit 1
fi
echo "ci/tsan.sh: building $targets"
# shellcheck disable=SC2086
cmake --build build-tsan -j "$jobs" --target $targets

# Read by every rank (the launcher passes the environment to local ranks). halt_on_error: the
# first report ends that rank with exitcode 66, so the test fails.
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp:halt_on_error=1:exitcode=66:second_deadlock_stack=1:history_size=4"
export OMPI_MCA_mca_base_component_disable_dlclose=1
export OMPI_MCA_btl=self,vader # one node: no TCP BTL threads
ctest --test-dir build-tsan -R "$tests" -j "$jobs" --output-on-failure --timeout 300
