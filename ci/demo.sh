#!/usr/bin/env bash
# The README's main command: set up, build, and train the MLP on Fashion-MNIST under
# mpirun -np 2 through tools/mpilaunch (per-epoch table: train loss, test accuracy, samples/s, time).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

bash ci/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"

echo
echo "=== tools/mpilaunch -n 2 build/apps/ddp_train --epochs 3 ==="
# Fashion-MNIST from Debian's dataset-fashion-mnist (installed by ci/setup.sh); about 85%+
# test accuracy after 3 epochs. tools/mpilaunch runs the MPI's launcher (mpirun here) with the
# flags it needs (oversubscription; as root, Open MPI's permission variables).
tools/mpilaunch -n 2 build/apps/ddp_train --epochs 3
