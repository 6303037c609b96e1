# Shared by ci/gpu-prepare.sh (run on a Debian 12 build machine) and ci/gpu-check.sh (run on
# the GPU machine, or as a CPU dry run): the carry folder's layout, unpacking its Debian
# packages into a private prefix, the environment that makes that prefix's Open MPI work, and
# the check that every shared library a carried program needs is carried too. Sourced, not run.

# The carry folder: debs/*.deb, fmnist/*.gz and MANIFEST (sha256sum of every file in it).
GPU_FMNIST_FILES="train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz"
# What a bare CUDA image is assumed to provide: the C and C++ runtimes (nvcc and PyTorch need
# them). Every other library a carried program needs must come from the carried packages.
GPU_BASE_SONAMES="linux-vdso.so.1 ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libutil.so.1 libresolv.so.2 libgcc_s.so.1 libstdc++.so.6"
GPU_MULTIARCH=x86_64-linux-gnu

# gpu_unpack DEBDIR PREFIX: dpkg -x every package into PREFIX, then make the links that
# update-alternatives would have made on an installed system (mpicc, mpirun, libopenblas.so).
gpu_unpack() {
  local debs=$1 prefix=$2 f t l lib so
  mkdir -p "$prefix" || return 1
  for f in "$debs"/*.deb; do
    [ -e "$f" ] || { echo "gpu_unpack: no .deb files in $debs" >&2; return 1; }
    dpkg -x "$f" "$prefix" || { echo "gpu_unpack: dpkg -x $f failed" >&2; return 1; }
  done
  for t in mpicc mpirun mpiexec mpicxx; do
    if [ -e "$prefix/usr/bin/$t.openmpi" ]; then ln -sfn "$t.openmpi" "$prefix/usr/bin/$t"; fi
  done
  lib=$prefix/usr/lib/$GPU_MULTIARCH
  for l in libopenblas.so libopenblas.so.0 libblas.so.3 libcblas.so.3 liblapack.so.3; do
    if [ -e "$lib/openblas-pthread/$l" ]; then ln -sfn "openblas-pthread/$l" "$lib/$l"; fi
  done
  if [ -e "$lib/openmpi/include" ]; then
    ln -sfn "../../lib/$GPU_MULTIARCH/openmpi/include" "$prefix/usr/include/$GPU_MULTIARCH/mpi"
  fi
  # Absolute links of the packages (zlib1g-dev's libz.so -> /lib/...) point into the prefix.
  find "$prefix" -type l -lname '/*' | while read -r l; do
    t=$(readlink "$l")
    case "$t" in "$prefix"/*) continue ;; esac
    if [ -e "$prefix$t" ]; then ln -sfn "$prefix$t" "$l"; fi
  done
  # Libraries that alternatives expose under their soname (libpsm_infinipath.so.1 lives in
  # /usr/lib/libpsm1 as .so.1.16): a link by soname in the multiarch folder.
  if command -v readelf >/dev/null 2>&1; then
    find "$prefix" -type f -name '*.so.*' | while read -r f; do
      so=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
      if [ -n "$so" ] && [ ! -e "$(dirname "$f")/$so" ] && [ ! -e "$lib/$so" ]; then
        ln -s "$f" "$lib/$so"
      fi
    done
  fi
  return 0
}

# gpu_libpath PREFIX: the library folders of the unpacked tree, ':'-separated.
gpu_libpath() {
  local lib=$1/usr/lib/$GPU_MULTIARCH
  echo "$lib:$lib/openmpi/lib:$lib/openblas-pthread:$lib/ucx:$1/lib/$GPU_MULTIARCH"
}

# gpu_mpi_env PREFIX: exports what Debian's Open MPI needs to run from PREFIX instead of /usr:
# OPAL_PREFIX relocates Open MPI (its components, help files, wrapper data), PMIx gets its own
# prefix and component folder, UCX its module folder, and the remote launcher is `false`:
# Open MPI refuses to start even one local rank when its agent (ssh) is missing.
gpu_mpi_env() {
  local p=$1
  export PATH=$p/usr/bin:$PATH
  export LD_LIBRARY_PATH=$(gpu_libpath "$p")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OPAL_PREFIX=$p/usr
  export PMIX_INSTALL_PREFIX=$p/usr
  export PMIX_MCA_mca_base_component_path=$p/usr/lib/$GPU_MULTIARCH/pmix2/lib/pmix
  export UCX_MODULE_DIR=$p/usr/lib/$GPU_MULTIARCH/ucx
  export CMAKE_PREFIX_PATH=$p/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_plm_rsh_agent=false # one node: never used, but it must exist (no ssh there)
}

# gpu_elf_files ROOT: every ELF file (programs, libraries, plugins) under ROOT.
gpu_elf_files() {
  find "$1" -type f \( -perm -u+x -o -name '*.so' -o -name '*.so.*' \) -print 2>/dev/null |
    while read -r f; do
      [ "$(head -c 4 "$f" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ] && echo "$f"
    done
}

# gpu_missing_sonames ROOT: the shared libraries (one soname a line) that ELF files under ROOT
# need and neither ROOT nor a bare CUDA image (GPU_BASE_SONAMES) provides. Reads the NEEDED
# entries with readelf, so it answers the same on any machine, whatever is installed there.
gpu_missing_sonames() {
  local root=$1
  local provided needed
  provided=$(find "$root" \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u)
  needed=$(gpu_elf_files "$root" | while read -r f; do
             readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
           done | sort -u)
  comm -23 <(printf '%s\n' "$needed") \
           <(printf '%s\n' $provided $GPU_BASE_SONAMES | sort -u) | grep -v '^$'
}
