#!/usr/bin/env bash
# The README's main command: set up, build, and run the main job under mpirun -np 2.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

bash ci/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"

# Open MPI refuses to start as root unless asked; CI and containers run as root.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
echo
echo "=== mpirun -np 2 build/apps/ddp_info ==="
mpirun --oversubscribe -np 2 build/apps/ddp_info
