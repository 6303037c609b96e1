#!/usr/bin/env bash
# ctest `scale` checks (tests/scale.cmake): the library's allreduce algorithms on a simulated
# cluster (SimGrid SMPI, scale/ and docs/scale.md).
#   scale_check.sh build SRC DIR   configures and builds SRC with smpicc into DIR (the
#                                  simulation driver scale/sim_allreduce only)
#   scale_check.sh run SRC DIR     64 simulated ranks (8 nodes of 8 on the 100 Gb/s fat tree):
#                                  every algorithm's result checked exactly at one size with
#                                  private buffers (hier also pipelined), then `auto` against SMPI's rab_rdb, ompi,
#                                  mpich, lr and smp_rsag at 4 KB, 256 KB and 16 MB: fails if
#                                  auto is more than 1.1x the best of them
# Exits 77 (ctest: skipped) where smpicc is missing.
set -euo pipefail
mode=$1 src=$2 dir=$3
command -v smpicc >/dev/null && command -v smpirun >/dev/null || {
  echo "SKIP: smpicc/smpirun not found (Debian: apt-get install libsimgrid-dev simgrid)"
  exit 77
}
driver=$dir/scale/sim_allreduce
case $mode in
build)
  CC=smpicc cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DDDP_WERROR=ON -DDDP_CUDA=OFF >"$dir.log" 2>&1 ||
    { cat "$dir.log"; exit 1; }
  cmake --build "$dir" -j 2 --target sim_allreduce
  ;;
run)
  [ -x "$driver" ] || { echo "FAIL: $driver missing (the scale_build test builds it)"; exit 1; }
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  run=("$src/scale/run.sh" -n 64)
  t0=$SECONDS
  # Private buffers and an exact check: ring, rhd, hier (its point-to-point node path), auto and
  # mpi (SMPI's default MPI_Allreduce) at an odd size.
  "${run[@]}" "$driver" -a ring,rhd,hier,auto,mpi -s 1000012 -r 1 -c | tee "$out/all.jsonl"
  # hier's pipelined path (docs/scale.md), forced with 64 KB chunks: 8 chunks of 1 MB, checked.
  DDP_HIER_PIPELINE=64K "${run[@]}" "$driver" -a hier -s 1000012 -r 1 -c |
    sed 's/"algo":"hier"/"algo":"hier-pipelined"/' | tee -a "$out/all.jsonl"
  sizes=4096,262144,16777216
  "${run[@]}" --cfg=smpi/auto-shared-malloc-thresh:65536 "$driver" -a auto -s $sizes -r 1 >>"$out/all.jsonl"
  for a in rab_rdb ompi mpich lr smp_rsag; do
    "${run[@]}" "--cfg=smpi/allreduce:$a" "$driver" -a smpi -s $sizes -r 1 |
      sed "s/\"algo\":\"smpi\"/\"algo\":\"smpi:$a\"/" >>"$out/all.jsonl"
  done
  python3 "$src/scale/report.py" check "$out/all.jsonl" 1.1
  echo "scale check: $((SECONDS - t0)) s"
  ;;
*)
  echo "usage: $0 build|run SRC DIR" >&2
  exit 2
  ;;
esac
