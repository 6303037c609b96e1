#!/usr/bin/env bash
# The README's test command: set up, build (Release, -Werror), run every ctest test; then an
# ASan+UBSan build running the `quick` tests; then the fuzz and ThreadSanitizer passes.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

bash ci/setup.sh

step() { printf '\n=== %s (%s) ===\n' "$1" "$(date +%H:%M:%S)"; }

step "Release build (-Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDDP_WERROR=ON
cmake --build build -j "$jobs"

step "all tests (build/)"
ctest --test-dir build --output-on-failure

step "ASan+UBSan build, quick tests (build-asan/)"
# CUDA is left out here: the sanitizers check the host code, and nvcc would double the build.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDP_WERROR=ON \
  -DDDP_SANITIZE=address,undefined -DDDP_CUDA=OFF
cmake --build build-asan -j "$jobs"
ctest --test-dir build-asan -L quick --output-on-failure

if [ -f ci/fuzz.sh ]; then
  step "fuzzing (build-fuzz/)"
  bash ci/fuzz.sh
fi
if [ -f ci/tsan.sh ]; then
  step "ThreadSanitizer (build-tsan/)"
  bash ci/tsan.sh
fi
step "done"
