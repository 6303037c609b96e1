#!/usr/bin/env bash
# Fuzzing pass: clang + libFuzzer + ASan/UBSan build of the library and the fuzz
# targets in build-fuzz/, then each target for DDP_FUZZ_SECONDS (default 30) from the committed
# corpus (ctest label `fuzz`, two at a time). Any crash, leak, hang or OOM fails the script;
# reproducers are left in build-fuzz/tests/fuzz_<target>_work/.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
secs=${DDP_FUZZ_SECONDS:-30}
command -v clang >/dev/null || { echo "ci/fuzz.sh: clang not found (apt-get install clang)"; exit 1; }

# Only the library and the fuzz targets are built here (no apps, no other tests).
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDDP_FUZZ=ON -DDDP_FUZZ_SECONDS="$secs" -DDDP_SANITIZE=address,undefined -DDDP_CUDA=OFF \
  -DDDP_WERROR=OFF >/dev/null
targets=$(ctest --test-dir build-fuzz -N -L '^fuzz$' | sed -n 's/^ *Test *#[0-9]*: \(fuzz_[a-z0-9]*\)$/\1/p')
[ -n "$targets" ] || { echo "ci/fuzz.sh: no fuzz targets registered"; exit 1; }
echo "ci/fuzz.sh: targets: $targets (${secs} s each)"
# shellcheck disable=SC2086
cmake --build build-fuzz -j "$jobs" --target $targets
ctest --test-dir build-fuzz -L '^fuzz$' -j "$jobs" --output-on-failure
