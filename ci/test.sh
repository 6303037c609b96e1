#!/usr/bin/env bash
# The README's test command: set up, build (Release, -Werror), check that the library's layers
# only look down (ci/check-layers.sh), run every ctest test; the
# `quick` tests again over Open MPI's UCX pml; a build against MPICH (-Werror) running the
# `quick` tests through its Hydra launcher; an ASan+UBSan build running the `quick` tests;
# then the fuzz and ThreadSanitizer passes.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

bash ci/setup.sh

step() { printf '\n=== %s (%s) ===\n' "$1" "$(date +%H:%M:%S)"; }

step "Release build (-Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDDP_WERROR=ON
cmake --build build -j "$jobs"

step "layers look down (ci/check-layers.sh: includes, and calls in build/'s objects)"
bash ci/check-layers.sh build

step "all tests (build/)"
ctest --test-dir build --output-on-failure

step "quick tests over Open MPI's UCX pml (build/)"
# Debian's Open MPI only accepts Mellanox devices for pml ucx unless told otherwise; naming the
# pml makes MPI_Init fail rather than fall back to ob1, so a pass means UCX carried the tests.
# UCX_TLS=sm,self: shared memory only (one node; no TCP).
MPILAUNCH_ARGS="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any" UCX_TLS=sm,self \
  ctest --test-dir build -L quick --output-on-failure

step "MPICH build (-Werror), quick tests through Hydra (build-mpich/)"
# CMake picks mpiexec.mpich to go with mpicc.mpich (cmake/DDPLaunch.cmake). CUDA is left out:
# this pass checks the MPI side.
cmake -S . -B build-mpich -DCMAKE_BUILD_TYPE=Release -DDDP_WERROR=ON -DDDP_CUDA=OFF \
  -DMPI_C_COMPILER=mpicc.mpich
cmake --build build-mpich -j "$jobs"
bash ci/check-layers.sh build-mpich # the objects of a build without CUDA
ctest --test-dir build-mpich -L quick --output-on-failure
# the Python binding over MPICH's int MPI_Comm (init without mpi4py, hooks, device buffers)
ctest --test-dir build-mpich -L abi --output-on-failure

step "ASan+UBSan build, quick tests (build-asan/)"
# CUDA is left out here: the sanitizers check the host code, and nvcc would double the build.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDP_WERROR=ON \
  -DDDP_SANITIZE=address,undefined -DDDP_CUDA=OFF
cmake --build build-asan -j "$jobs"
ctest --test-dir build-asan -L quick --output-on-failure

step "fuzzing (build-fuzz/)"
bash ci/fuzz.sh
step "ThreadSanitizer (build-tsan/)"
bash ci/tsan.sh
step "done"
