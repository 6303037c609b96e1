#!/usr/bin/env bash
# ci/check-layers.sh passes on this tree and build, and fails, naming the culprit, on a copy of
# the sources with an upward #include planted (device.c including the collectives' header) and
# on a copy of the build's layer objects with an upward call planted (an object of the core
# layer calling the collectives' ddp__coll_comm_init), and on a copy of the sources with an
# algorithm file that includes mpi.h and names an MPI symbol; and on copies of the objects with a
# transport object calling the selection, and with two files of a layer calling each other.
# Usage: check_layers.sh SOURCE_DIR BUILD_DIR CC
set -euo pipefail
src=$1 build=$2 cc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check=ci/check-layers.sh

echo "1. the tree as it is"
bash "$src/$check" "$build"

expect_fail() { # what, expected message, check-layers arguments
  local what=$1 want=$2 out rc=0
  shift 2
  out=$(bash "$@" 2>&1) || rc=$?
  echo "$out"
  if [ "$rc" -eq 0 ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "check_layers: FAIL: $what was not refused with '$want'"
    exit 1
  fi
}

echo "2. an upward #include planted into a copy of the sources"
mkdir "$tmp/src"
cp -r "$src/CMakeLists.txt" "$src/ci" "$src/runtime" "$src/collectives" "$src/samplers" "$tmp/src/"
printf '#include "coll_internal.h"\n' >>"$tmp/src/runtime/device/device.c"
expect_fail "an upward include" \
  "runtime/device/device.c:$(wc -l <"$tmp/src/runtime/device/device.c"): layer device includes coll_internal.h of the higher layer collectives" \
  "$tmp/src/$check" "$build"
cp "$src/runtime/device/device.c" "$tmp/src/runtime/device/device.c"

echo "3. an upward call planted into a copy of the layer objects"
mkdir -p "$tmp/build/CMakeFiles"
cp -r "$build"/CMakeFiles/ddp_layer_*.dir "$tmp/build/CMakeFiles/"
printf 'void ddp__coll_comm_init(void *c);\nvoid ddp__planted(void) { ddp__coll_comm_init(0); }\n' \
  >"$tmp/planted.c"
"$cc" -c -o "$tmp/build/CMakeFiles/ddp_layer_core.dir/planted.c.o" "$tmp/planted.c"
cp "$tmp/planted.c" "$tmp/src/planted.c" # an object counts while its source is in the tree
expect_fail "an upward call" \
  "planted.c.o: layer core calls ddp__coll_comm_init of the higher layer collectives" \
  "$tmp/src/$check" "$tmp/build"
echo "4. MPI planted into a copy of an algorithm file"
alg=collectives/algorithms/allreduce_ring.c
printf '#include <mpi.h>\nstatic int planted(void) { return MPI_Barrier(MPI_COMM_WORLD); }\n' \
  >>"$tmp/src/$alg"
expect_fail "an algorithm including mpi.h" "$alg includes mpi.h" "$tmp/src/$check" "$build"
expect_fail "an algorithm naming MPI" "$alg names MPI symbols (MPI_Barrier MPI_COMM_WORLD)" \
  "$tmp/src/$check" "$build"
cp "$src/$alg" "$tmp/src/$alg"

echo "5. a transport calling the selection, planted into a copy of the layer objects"
xo=$tmp/build/CMakeFiles/ddp_layer_collectives.dir/collectives/transports
rm -f "$tmp/build/CMakeFiles/ddp_layer_core.dir/planted.c.o"
printf 'int ddp__select(void);\nint ddp__planted_xport(void) { return ddp__select(); }\n' >"$tmp/x.c"
"$cc" -c -o "$xo/planted.c.o" "$tmp/x.c"
cp "$tmp/x.c" "$tmp/src/collectives/transports/planted.c"
expect_fail "a transport calling the selection" \
  "collectives/transports/planted.c: a transport calls ddp__select of collectives/coll_select.c" \
  "$tmp/src/$check" "$tmp/build"
rm -f "$xo/planted.c.o" "$tmp/src/collectives/transports/planted.c"

echo "6. a call circle between two files of a layer, planted into a copy of the layer objects"
co=$tmp/build/CMakeFiles/ddp_layer_collectives.dir/collectives
printf 'void ddp__planted_b(void);\nvoid ddp__planted_a(void) { ddp__planted_b(); }\n' >"$tmp/a.c"
printf 'void ddp__planted_a(void);\nvoid ddp__planted_b(void) { ddp__planted_a(); }\n' >"$tmp/b.c"
"$cc" -c -o "$co/planted_a.c.o" "$tmp/a.c"
"$cc" -c -o "$co/planted_b.c.o" "$tmp/b.c"
cp "$tmp/a.c" "$tmp/src/collectives/planted_a.c"
cp "$tmp/b.c" "$tmp/src/collectives/planted_b.c"
expect_fail "a call circle" \
  "layer collectives: its files call each other in a circle (collectives/planted_a.c collectives/planted_b.c)" \
  "$tmp/src/$check" "$tmp/build"
echo "7. a stale object (its source gone) is not read"
rm "$tmp/src/collectives/planted_a.c" "$tmp/src/collectives/planted_b.c"
bash "$tmp/src/$check" "$tmp/build"
echo "check_layers: PASS (passes as it is; refuses a planted upward include and call, MPI in an algorithm, a transport calling the selection and a call circle inside a layer)"
