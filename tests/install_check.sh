#!/usr/bin/env bash
# Installs the build into a temporary prefix, checks the installed headers (exactly the
# expected names, each compiling on its own) and builds a ten-line program against it both
# ways (pkg-config with mpicc, and CMake's find_package(mpiddp)), then runs each under
# the launcher (tools/mpilaunch) with 2 ranks, both built with the MPI compiler of the build.
# Usage: install_check.sh BUILD_DIR LAUNCH [MPICC]
set -euo pipefail
build=$1 launch=$2 mpicc=${3:-mpicc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libmpiddp.so' | head -1)")
test -f "$libdir/libmpiddp.a" || { echo "static library not installed"; exit 1; }
test -f "$prefix/include/mpiddp/ddp.h" || { echo "ddp.h not installed"; exit 1; }
# The installed headers are exactly these, and each compiles on its own under its installed
# name (ddp_runtime.h: the communicator header's former name, kept for existing code).
headers="ddp.h ddp_collectives.h ddp_comm.h ddp_config.h ddp_device.h ddp_reducer.h ddp_runtime.h
ddp_sampler.h ddp_types.h"
got=$(cd "$prefix/include/mpiddp" && ls | LC_ALL=C sort | tr '\n' ' ')
want=$(tr -s ' \n' '\n' <<<"$headers" | LC_ALL=C sort | tr '\n' ' ')
[ "$got" = "$want" ] || { echo "install_check: installed headers '$got', expected '$want'"; exit 1; }
for h in $headers; do
  printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$tmp/h.c"
  "$mpicc" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include/mpiddp" "$tmp/h.c" ||
    { echo "install_check: installed $h does not compile on its own"; exit 1; }
done

cat > "$tmp/hello.c" <<'C'
#include <stdio.h>
#include <ddp.h>
int main(int argc, char **argv) {
  ddp_comm_t *comm = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_WORLD, &comm) != DDP_OK) return 1;
  ddp_comm_info_t info;
  ddp_comm_info(comm, &info);
  printf("hello from rank %d of %d (mpiddp %s)\n", info.rank, info.size, ddp_version());
  return ddp_finalize(&comm) == DDP_OK ? 0 : 1;
}
C

# 1. pkg-config + mpicc
export PKG_CONFIG_PATH=$libdir/pkgconfig
"$mpicc" -o "$tmp/hello_pc" "$tmp/hello.c" $(pkg-config --cflags --libs mpiddp)
# 2. CMake package
mkdir -p "$tmp/proj"
cp "$tmp/hello.c" "$tmp/proj/"
cat > "$tmp/proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(hello C)
find_package(mpiddp REQUIRED)
add_executable(hello_cmake hello.c)
target_link_libraries(hello_cmake PRIVATE mpiddp::mpiddp)
CM
cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$prefix" -DMPI_C_COMPILER="$mpicc" >/dev/null
cmake --build "$tmp/proj/build" >/dev/null

export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for exe in "$tmp/hello_pc" "$tmp/proj/build/hello_cmake"; do
  out=$("$launch" -n 2 -e LD_LIBRARY_PATH "$exe")
  echo "$out"
  n=$(grep -c "^hello from rank [01] of 2" <<<"$out")
  [ "$n" -eq 2 ] || { echo "install_check: $exe printed $n of 2 hello lines"; exit 1; }
done
echo "install_check: PASS (pkg-config and find_package)"
