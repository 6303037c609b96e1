#!/usr/bin/env bash
# The apps' OpenBLAS kernel check (apps/kit/app_blas.c), through ddp_info under the MPI
# launcher: on a CPU with AVX2/AVX-512 no rank may run OpenBLAS's generic kernel unless the user
# asked for it (the apps re-execute themselves before MPI_Init with OPENBLAS_CORETYPE set), a
# user's OPENBLAS_CORETYPE wins, and every rank reports its kernel and a positive sgemm rate.
# Usage: app_blas.sh DDP_INFO LAUNCHER [LAUNCHER FLAGS...]   (tools/mpilaunch, from ddp_testing.cmake)
set -uo pipefail
info=$1
shift
launch=("$@")
unset OPENBLAS_CORETYPE # case 1 is the user who set nothing
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "app_blas: FAIL: $*"; fail=1; }

# run NAME NP [ddp_info args]: output in $tmp/NAME.out, exit status checked.
run() {
  local name=$1 np=$2
  shift 2
  if ! "${launch[@]}" -np "$np" "$info" --gemm-seconds 0.2 "$@" >"$tmp/$name.out" 2>&1; then
    bad "$name: ddp_info failed"; cat "$tmp/$name.out"; return 1
  fi
  grep -q "^# world size *: $np\$" "$tmp/$name.out" || { bad "$name: world size is not $np"; return 1; }
  local rows
  rows=$(awk '/^ +[0-9]+ / && NF >= 8' "$tmp/$name.out" | wc -l)
  [ "$rows" -eq "$np" ] || { bad "$name: $rows rank rows, expected $np"; return 1; }
  return 0
}

# Each rank's row: kernel and GF/s are the last two columns.
kernels() { awk '/^ +[0-9]+ / && NF >= 8 { print $(NF-1) }' "$tmp/$1.out" | sort -u; }
rates_ok() { awk '/^ +[0-9]+ / && NF >= 8 { if (!($NF > 0)) bad = 1 } END { exit bad }' "$tmp/$1.out"; }

# 1. No setting: the kernel must suit the CPU.
if run auto 2; then
  line=$(grep '^# BLAS' "$tmp/auto.out")
  echo "auto: $line"
  grep '^# CPU' "$tmp/auto.out"
  case "$line" in *"(generic:"*) bad "a generic kernel runs on a CPU that supports a faster one: $line" ;; esac
  k=$(kernels auto)
  [ "$(echo "$k" | wc -l)" -eq 1 ] || bad "ranks report different kernels: $k"
  case "$line" in *"kernel $k"*) ;; *) bad "rank rows say kernel '$k', the BLAS line says: $line" ;; esac
  rates_ok auto || bad "a rank reported no sgemm rate"
  case "$line" in
    *"auto: the library chose"*) echo "app_blas: the re-exec path was taken on this CPU" ;;
    *) echo "app_blas: OpenBLAS chose a suitable kernel by itself here (the re-exec path was not needed)" ;;
  esac
fi

# 2. The user's OPENBLAS_CORETYPE wins, even naming the generic kernel.
if OPENBLAS_CORETYPE=Prescott run user 2; then
  line=$(grep '^# BLAS' "$tmp/user.out")
  echo "user: $line"
  case "$line" in *"kernel Prescott (OPENBLAS_CORETYPE=Prescott, the user's choice)"*) ;; *) bad "OPENBLAS_CORETYPE=Prescott not honoured: $line" ;; esac
  [ "$(kernels user)" = Prescott ] || bad "rank rows say kernel '$(kernels user)' under OPENBLAS_CORETYPE=Prescott"
  rates_ok user || bad "a rank reported no sgemm rate"
fi

[ $fail -eq 0 ] && echo "app_blas: PASS"
exit $fail
