#!/usr/bin/env bash
# Installs what mpiddp needs to build and test on Debian 12. Idempotent; run as root.
set -euo pipefail

# mpich + libmpich-dev: the second MPI CI builds against (beside Open MPI, which keeps the
# mpicc/mpirun alternatives); python3-torch: the live comparison with PyTorch's sampler
# (sampler_vs_torch) and the PyTorch peers; python3-mpi4py for the peers' MPI side.
# libsimgrid-dev + simgrid: smpicc/smpirun for the simulated clusters (ctest -L scale, scale/).
# fortunes: gpt_train's text corpus (/usr/share/games/fortunes, 2.6 MB; ctest -L gpt).
pkgs=(build-essential cmake pkg-config python3
      openmpi-bin libopenmpi-dev libopenblas-dev zlib1g-dev
      mpich libmpich-dev python3-torch python3-mpi4py
      dataset-fashion-mnist slurm-wlm munge gnuplot-nox
      clang libclang-rt-14-dev procps time libsimgrid-dev simgrid fortunes)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "ci/setup.sh: all packages present (${#pkgs[@]} checked)"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "ci/setup.sh: missing packages: ${missing[*]}; run as root to install them" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# The slurm/munge package scripts may try to start services; our tests run their own daemons.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "ci/setup.sh: installed ${missing[*]}"
