#!/usr/bin/env bash
# Fills ONE git-ignored folder with everything the GPU check needs that a bare GPU machine
# (nvcc, CMake, ninja, PyTorch; no MPI, no Debian packages, no network) lacks, then prints the
# `carry` list and the command to give the device tool (docs/gpu.md).
#
#   ci/gpu-prepare.sh [--offline] [DIR]      DIR default: gpucarry/ at the repository root
#
# Contents (at most 60 MiB):
#   debs/    Debian 12's Open MPI (programs, headers, wrappers), OpenBLAS and zlib (+ headers),
#            and every package whose shared libraries those need, found by reading the NEEDED
#            entries of every carried program and library (readelf) until nothing is missing
#            except what a bare CUDA image has (ci/gpu-common.sh: glibc, libgcc_s, libstdc++);
#   fmnist/  the four Fashion-MNIST .gz files (from Debian's dataset-fashion-mnist);
#   MANIFEST sha256 of every file: ci/gpu-check.sh refuses a carry folder that does not match.
# Packages come from the Debian archive (`apt-get download`); with --offline they are rebuilt
# from the packages installed on this machine (dpkg-deb, no network: used by the CI dry run).
# Re-running reuses what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. ci/gpu-common.sh

offline=0
if [ "${1:-}" = "--offline" ]; then offline=1; shift; fi
DIR=${1:-$ROOT/gpucarry}
LIMIT_MIB=60
# Roots: the MPI runtime and tools, its development files (mpicc, mpi.h), and what the build
# and the apps link (OpenBLAS with cblas.h, zlib with zlib.h).
ROOTS="openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libopenblas0-pthread
       libopenblas-pthread-dev zlib1g zlib1g-dev"
FMNIST_SRC=${FMNIST_SRC:-/usr/share/datasets/fashion-mnist}

mkdir -p "$DIR/debs" "$DIR/fmnist"
DIR=$(cd "$DIR" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# repack PKG: a .deb of the installed package PKG, built from its files on this machine.
repack() {
  local pkg=$1 tree=$work/repack/$1 ver arch
  ver=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null) ||
    { echo "gpu-prepare: --offline needs $pkg installed here" >&2; return 1; }
  arch=$(dpkg-query -W -f='${Architecture}' "$pkg")
  rm -rf "$tree" && mkdir -p "$tree/DEBIAN"
  # Files and links (not folders: on a merged-/usr system /lib is a link to usr/lib).
  dpkg-query -L "$pkg" | while read -r f; do
    if [ -L "$f" ] && [ -d "$f" ]; then continue; fi
    if [ -L "$f" ] || [ -f "$f" ]; then printf '%s\n' "${f#/}"; fi
  done | tar -C / --no-recursion -cf - -T - | tar -C "$tree" -xf -
  dpkg-query -s "$pkg" | grep -vE '^(Status|Conffiles|Config-Version):|^ /' > "$tree/DEBIAN/control"
  dpkg-deb --root-owner-group -Zgzip -z1 -b "$tree" \
    "$DIR/debs/${pkg}_${ver//:/%3a}_${arch}.deb" >/dev/null
  rm -rf "$tree"
}

# owner_of SONAME: the package of the file the loader opens for SONAME here (followed through
# alternatives links; /lib and /usr/lib both tried, as merged-/usr registers either).
owner_of() {
  local path real
  path=$(ldconfig -p | awk -v so="$1" '$1 == so && /x86-64/ && !p { p = $NF } END { print p }')
  [ -n "$path" ] || return 0
  real=$(readlink -f "$path")
  dpkg -S "$(basename "$real")" 2>/dev/null |
    awk -v b="/$(basename "$real")" 'substr($NF, length($NF) - length(b) + 1) == b && !p { p = $1 }
                                     END { sub(/:.*/, "", p); print p }'
}

have_pkg() { compgen -G "$DIR/debs/${1}_*.deb" >/dev/null; }

fetch() { # fetch PKG...: the .debs not yet in the folder
  local p need=()
  for p in "$@"; do have_pkg "$p" || need+=("$p"); done
  [ ${#need[@]} -gt 0 ] || return 0
  echo "gpu-prepare: fetching ${need[*]}"
  if [ $offline = 1 ]; then
    for p in "${need[@]}"; do repack "$p"; done
  else
    (cd "$DIR/debs" && apt-get download -q "${need[@]}")
  fi
}

# Dependency closure by shared-library needs: unpack, list missing sonames, map each to the
# package that ships it on this machine (dpkg -S), fetch, repeat.
pkgs=$(echo $ROOTS)
for round in 1 2 3 4 5 6 7 8; do
  fetch $pkgs
  # Only the packages named so far (an earlier run's extras must be found again, or dropped).
  rm -rf "$work/root" "$work/sel" && mkdir -p "$work/sel"
  for p in $pkgs; do ln -s "$DIR"/debs/"${p}"_*.deb "$work/sel/"; done
  gpu_unpack "$work/sel" "$work/root" >/dev/null
  missing=$(gpu_missing_sonames "$work/root" || true)
  [ -n "$missing" ] || break
  add=""
  for so in $missing; do
    owner=$(owner_of "$so")
    [ -n "$owner" ] || { echo "gpu-prepare: no installed package ships $so (needed by a carried file)" >&2; exit 1; }
    add="$add $owner"
  done
  add=$(printf '%s\n' $add | sort -u | tr '\n' ' ')
  echo "gpu-prepare: round $round: missing $(echo $missing) -> $add"
  pkgs="$pkgs $add"
  [ "$round" -lt 8 ] || { echo "gpu-prepare: the closure did not settle after 8 rounds" >&2; exit 1; }
done
# Drop packages of earlier runs that the closure no longer names (stale versions included).
for f in "$DIR"/debs/*.deb; do
  p=$(basename "$f" | cut -d_ -f1)
  case " $pkgs " in *" $p "*) ;; *) echo "gpu-prepare: removing $(basename "$f") (not needed)"; rm -f "$f" ;; esac
done

for f in $GPU_FMNIST_FILES; do
  [ -s "$DIR/fmnist/$f" ] && continue
  [ -s "$FMNIST_SRC/$f" ] || { echo "gpu-prepare: $FMNIST_SRC/$f missing (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
  cp "$FMNIST_SRC/$f" "$DIR/fmnist/$f"
done

(cd "$DIR" && find debs fmnist -type f | sort | xargs sha256sum > MANIFEST)
bytes=$(du -sb "$DIR" | cut -f1)
mib=$(( (bytes + 1048575) / 1048576 ))
ndebs=$(ls "$DIR"/debs/*.deb | wc -l)
echo "gpu-prepare: $DIR: $ndebs packages + 4 Fashion-MNIST files, $bytes bytes ($mib MiB, limit $LIMIT_MIB MiB)"
# The limit is the carry's; an --offline fixture (gzip -1 packages, for the dry run) is bigger.
if [ "$mib" -gt "$LIMIT_MIB" ] && [ $offline = 0 ]; then
  echo "gpu-prepare: over the $LIMIT_MIB MiB limit" >&2
  exit 1
fi
rel=${DIR#"$ROOT"/}
cat <<EOF

Device tool call (the repository travels; the carry folder is git-ignored, so name it):
  run  carry=["$rel"]  command="GPUCHECK_CARRY=$rel DDP_REQUIRE_GPU=1 bash ci/gpu-check.sh"  timeout_s=480
Results: \$OUT/summary.txt and \$OUT/gpucheck.tgz (logs, JSON).
EOF
