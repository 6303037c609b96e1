#!/usr/bin/env bash
# Scenarios on the emulated cluster (ctest label `cluster`, tests/cluster.cmake). Runs inside
# `ci/cluster/cluster.sh with N --`, which brings the hosts up, removes them afterwards and
# checks the root namespace is as it found it. Every MPI program starts through
# `cluster.sh mpirun`, i.e. on a host, with the cluster's launch flags.
#   cluster_check.sh MODE SOURCE_DIR BUILD_DIR SCRATCH
# MODE: info          ddp_info across 2 hosts x 2: nodes by real hostname; DDP_RANKS_PER_NODE
#                     subdivides inside a host, never across
#       coll-ob1|ucx  topology, auto's choice, every algorithm and collective on exact data,
#                     across 2x2 and 3x1 hosts, with ob1+TCP or UCX (hosts: 3)
#       train         ddp_train across 2x2 hosts = np 4 on one host: the same losses and
#                     accuracy, with --deterministic the same parameter CRC (also over UCX)
#       hostdeath-ob1|ucx  every process of h2 killed mid-training: the job ends non-zero
#                     within 30 s and the output names h2
#       linkdown      h2's link goes down mid-training: the watchdog names ranks of h2 and
#                     the job ends within 2 x DDP_TIMEOUT_S (mpirun on a head host h3)
#       badlink       2% loss and 1 ms delay on h2's link: the same deterministic CRC
#       slurm         slurmctld + one slurmd per host; sbatch --nodes=2 of both CPU scripts
#       elastic       ddp_run --elastic 2:4 over a hostfile: 2x2 ranks train, h2 dies (taken
#                     out of the hostfile, every process killed), the job goes on at 2 ranks on
#                     h1 from the last checkpoint, h2 comes back, the job grows back to 4 at a
#                     step boundary and ends with the CRC of the uninterrupted 4-rank run
set -uo pipefail
mode=$1 src=$2 build=$3 scratch=$4
cl=$src/ci/cluster/cluster.sh
: "${MPIDDP_CLUSTER:?run me through ci/cluster/cluster.sh with N --}"
mkdir -p "$scratch" || exit 1
# Every host must see the build folder at its own path (cluster.sh with --share binds one that
# lies in /tmp or /dev/shm, which every host has of its own); if not, nothing here can run.
for d in "$build" "$src" "$scratch"; do
  (cd / && "$cl" exec h1 test -d "$d") 2>/dev/null || {
    echo "cluster_check[$mode]: $d is not visible on the emulated hosts (private /tmp or /dev/shm; cluster.sh with --share binds it): skipping"
    exit 77
  }
done
cd "$scratch" || exit 1
fail=0
say() { echo "cluster_check[$mode]: $*"; }
bad() { echo "cluster_check[$mode]: FAIL: $*" >&2; fail=1; }
train=$build/apps/ddp_train
quick=(--epochs 2 --batch 32 --limit-steps 12 --limit-test 500 --no-progress)
long=(--epochs 1000 --limit-steps 20 --limit-test 50 --no-progress)
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# mpirun through the cluster: PML HOSTS NP [NAME=VALUE...] PROG [ARGS...] > OUT; a failure is
# reported. Every launch flag is in ci/cluster/cluster.sh (ompi_flags, cmd_mpirun).
run() {
  local out=$1
  shift
  "$cl" mpirun "$@" >"$out" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || bad "$* exited $rc: $(tail -5 "$out")"
  return $rc
}

# The per-rank rows of ddp_info: rank host node local/size.
info_rows() { awk '$1 ~ /^[0-9]+$/ && NF >= 6 { print $1, $2, $3, $4 }' "$1"; }

# Starts training (background), waits for the first epoch line; sets job and out.
start_training() {
  out=$1
  shift
  "$cl" mpirun "$@" >"$out" 2>&1 &
  job=$!
  for _ in $(seq 1 600); do
    grep -Eq '^ +1 ' "$out" && return 0
    kill -0 $job 2>/dev/null || break
    sleep 0.1
  done
  bad "training did not start: $(tail -5 "$out")"
  return 1
}

# Waits at most $1 s for the job to end; sets ended (1/0), rc and elapsed (since $2).
await_end() {
  local cap=$1 t0=$2
  ended=0
  for _ in $(seq 1 $((cap * 10))); do
    kill -0 $job 2>/dev/null || { ended=1; break; }
    sleep 0.1
  done
  elapsed=$(since "$t0")
  [ $ended -eq 1 ] || kill -KILL $job 2>/dev/null
  wait $job
  rc=$?
}

# Losses and accuracy of two metrics files (epoch,global_step,train_loss,test_acc,...).
compare_metrics() { # A B LABEL
  awk -F, -v what="$3" 'NR == FNR { if (FNR > 1) { l[$1] = $3; a[$1] = $4 }; next }
    FNR > 1 { n++; d = $3 - l[$1]; if (d < 0) d = -d; r = d / l[$1]; da = $4 - a[$1]; if (da < 0) da = -da
      printf "  epoch %d: loss %.9g vs %.9g (rel %.1e), accuracy %s vs %s\n", $1, l[$1], $3, r, a[$1], $4
      if (!(r <= 1e-4) || !(da <= 0.4)) bad = 1 }
    END { exit (bad || n != 2) }' "$1" "$2" || bad "$3: losses differ by more than 1e-4 or accuracy by more than 0.4 points"
}

crc() { grep -m1 'final parameters: CRC32' "$1"; }

# ddp_train's header states the world size: every run here asks for 4 ranks.
four_ranks() { local f; for f in "$@"; do grep -q '^# ranks 4,' "$f" || bad "$f: not 4 ranks"; done; }

# Number of ddp_train processes on the given hosts.
ranks_on() {
  local h p
  for h in "$@"; do
    for p in $("$cl" pids "$h"); do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done
  done | grep -c ddp_train
}

case $mode in
info)
  run info.out ob1 h1:2,h2:2 4 "$build/apps/ddp_info"
  cat info.out
  grep -q '^# world size       : 4$' info.out || bad "world size is not 4"
  grep -q '^# nodes            : 2$' info.out || bad "not 2 nodes"
  [ "$(info_rows info.out | tr '\n' ';')" = "0 h1 0 0/2;1 h1 0 1/2;2 h2 1 0/2;3 h2 1 1/2;" ] ||
    bad "rows are not h1 h1 h2 h2 on nodes 0 0 1 1: $(info_rows info.out | tr '\n' ';')"
  run vnodes1.out ob1 h1:2,h2:2 4 DDP_RANKS_PER_NODE=1 "$build/apps/ddp_info"
  grep -q '^# nodes            : 4 (virtual' vnodes1.out || bad "DDP_RANKS_PER_NODE=1: not 4 virtual nodes"
  [ "$(info_rows vnodes1.out | tr '\n' ';')" = "0 h1 0 0/1;1 h1 1 0/1;2 h2 2 0/1;3 h2 3 0/1;" ] ||
    bad "DDP_RANKS_PER_NODE=1 rows: $(info_rows vnodes1.out | tr '\n' ';')"
  # 3 ranks per host in virtual nodes of 2: {0,1} {2} on h1, {3,4} {5} on h2.
  run vnodes2.out ob1 h1:3,h2:3 6 DDP_RANKS_PER_NODE=2 "$build/apps/ddp_info"
  info_rows vnodes2.out
  [ "$(info_rows vnodes2.out | tr '\n' ';')" = "0 h1 0 0/2;1 h1 0 1/2;2 h1 1 0/1;3 h2 2 0/2;4 h2 2 1/2;5 h2 3 0/1;" ] ||
    bad "DDP_RANKS_PER_NODE=2 over 3+3 ranks: a virtual node spans hosts or is misnumbered"
  ;;
coll-ob1 | coll-ucx)
  pml=${mode#coll-}
  for layout in "h1:2,h2:2 4 2" "h1:1,h2:1,h3:1 3 3"; do
    read -r hosts np nh <<<"$layout"
    t0=$(now)
    # The PML asked for is the one in use (a fallback would make this test prove nothing).
    run "topo_$np.out" "$pml" "$hosts" "$np" OMPI_MCA_pml_base_verbose=10 \
      "$build/tests/cluster_topo" "$np" "$nh" 8=rhd 64K=rhd 1M=hier 16M=hier
    grep 'cluster_topo' "topo_$np.out"
    grep -q "select: component $pml selected" "topo_$np.out" || bad "$hosts: pml $pml was not selected"
    run "allreduce_$np.out" "$pml" "$hosts" "$np" "$build/tests/coll_allreduce" all quick mixed
    grep -E 'runs as|not applicable|PASS|FAIL' "allreduce_$np.out"
    run "api_$np.out" "$pml" "$hosts" "$np" "$build/tests/coll_api"
    grep -E 'PASS|FAIL' "api_$np.out"
    say "$pml on $hosts: $(since "$t0") s"
  done
  ;;
train)
  run one.out ob1 h1:4 4 "$train" "${quick[@]}" --metrics one.csv
  run two.out ob1 h1:2,h2:2 4 "$train" "${quick[@]}" --metrics two.csv
  four_ranks one.out two.out
  compare_metrics one.csv two.csv "np 4 on h1 vs 2x2 hosts"
  for v in one:ob1:h1:4 two:ob1:h1:2,h2:2 ucx:ucx:h1:2,h2:2; do
    IFS=: read -r tag pml hosts <<<"$v"
    run "det_$tag.out" "$pml" "$hosts" 4 "$train" "${quick[@]}" --deterministic 4 --metrics "det_$tag.csv"
    say "--deterministic 4, $pml on $hosts: $(crc "det_$tag.out")"
  done
  four_ranks det_one.out det_two.out det_ucx.out
  for tag in two ucx; do
    [ -n "$(crc det_one.out)" ] && [ "$(crc det_one.out)" = "$(crc "det_$tag.out")" ] ||
      bad "deterministic CRC of $tag differs from one host: '$(crc det_one.out)' vs '$(crc "det_$tag.out")'"
    cmp -s <(cut -d, -f1-4 det_one.csv) <(cut -d, -f1-4 "det_$tag.csv") || bad "deterministic metrics of $tag differ"
  done
  ;;
hostdeath-ob1 | hostdeath-ucx)
  pml=${mode#hostdeath-}
  if start_training job.out "$pml" h1:2,h2:2 4 "$train" "${long[@]}"; then
    four_ranks job.out
    sleep 1
    victims=$("$cl" pids h2 | tr '\n' ' ')
    say "killing every process of h2 (SIGKILL):"
    # shellcheck disable=SC2086
    ps -o pid=,args= -p $victims | cut -c1-100
    t0=$(now)
    # shellcheck disable=SC2086
    kill -KILL $victims
    await_end 60 "$t0"
    cat job.out
    say "the job ended with status $rc, $elapsed s after h2 died (limit 30 s)"
    [ $ended -eq 1 ] || bad "the job was still running 60 s after h2 died"
    [ $rc -ne 0 ] || bad "the job exited 0"
    awk -v e="$elapsed" 'BEGIN { exit !(e > 30) }' && bad "took $elapsed s (> 30 s)"
    grep -w h2 job.out >/dev/null || bad "the output does not name h2"
    say "lines naming h2: $(grep -w h2 job.out | tr -s ' ' | tr '\n' '|')"
  fi
  ;;
linkdown)
  # mpirun runs on a head host h3. Open MPI's mpirun waits for every daemon to confirm the
  # abort, and h2's daemon is behind the dead link: mpirun ends only when its TCP gives the
  # unanswered message up (net.ipv4.tcp_retries2: the kernel's 15 is about 15 minutes; 2 on
  # the head: about 3 s). The compute hosts keep the default, so MPI's own connections
  # outlast DDP_TIMEOUT_S and the watchdog is what ends the ranks.
  timeout_s=6
  "$cl" exec h3 sysctl -qw net.ipv4.tcp_retries2=2 || bad "sysctl on h3"
  if MPIDDP_CLUSTER_HEAD=h3 start_training job.out ob1 h1:2,h2:2 4 DDP_TIMEOUT_S=$timeout_s \
      "$train" "${long[@]}"; then
    four_ranks job.out
    sleep 1
    t0=$(now)
    "$cl" link h2 down
    say "h2's link is down"
    ranks_gone=""
    for _ in $(seq 1 $(((2 * timeout_s + 30) * 5))); do
      [ -z "$ranks_gone" ] && [ "$(ranks_on h1 h2)" -eq 0 ] && ranks_gone=$(since "$t0")
      kill -0 $job 2>/dev/null || break
      sleep 0.2
    done
    await_end 1 "$t0"
    cat job.out
    say "every rank had ended ${ranks_gone:-never} s after the link went down; mpirun ended with status $rc after $elapsed s (limit $((2 * timeout_s)) s)"
    [ -n "$ranks_gone" ] || bad "ranks still running after $elapsed s"
    [ $ended -eq 1 ] || bad "mpirun was still running $((2 * timeout_s + 30)) s after the link went down"
    [ $rc -ne 0 ] || bad "the job exited 0"
    awk -v e="$elapsed" -v m=$((2 * timeout_s)) 'BEGIN { exit !(e > m) }' && bad "took $elapsed s (> 2 x DDP_TIMEOUT_S)"
    # Ranks 0 and 1 (h1) report; the peers they name must be ranks of h2 (2, 3), world ranks.
    # (The collective may be a reducer bucket or, tag/bucket -1, ddp_train's step-boundary
    # ddp_allreduce of the loss and the stop flag.)
    re="^h1:[0-9]+:[01] mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=$timeout_s\\) waiting for collective #[0-9]+ allreduce \\(algo [a-z]+, [0-9]+ bytes, tag/bucket -?[0-9]+\\); peers that had not answered: "
    grep -Eq "$re" job.out || bad "no watchdog report from a rank of h1"
    grep -E "$re" job.out | grep -Ev "${re}(2|3|2,3)( \\(stall inspector: .*)?$" && bad "a report names peers that are not ranks of h2"
  fi
  "$cl" link h2 up
  ;;
badlink)
  run ref.out ob1 h1:4 4 "$train" "${quick[@]}" --deterministic 4 --metrics ref.csv
  t0=$(now)
  run fast.out ob1 h1:2,h2:2 4 "$train" "${quick[@]}" --deterministic 4
  say "2x2 hosts, clean links: $(since "$t0") s, $(crc fast.out)"
  "$cl" shape h2 delay 1 loss 2
  t0=$(now)
  run bad.out ob1 h1:2,h2:2 4 "$train" "${quick[@]}" --deterministic 4 --metrics bad.csv
  say "2x2 hosts, h2 with 2% loss + 1 ms: $(since "$t0") s, $(crc bad.out)"
  four_ranks ref.out fast.out bad.out
  "$cl" shape h2 off 2>wire.log
  cat wire.log
  # The wire must have dropped frames both ways, or this test proves nothing.
  [ "$(grep -c 'frames forwarded, [1-9][0-9]* dropped' wire.log)" -eq 2 ] || bad "the wire did not drop frames both ways"
  [ -n "$(crc ref.out)" ] && [ "$(crc ref.out)" = "$(crc bad.out)" ] ||
    bad "CRC over the bad link differs from one host: '$(crc ref.out)' vs '$(crc bad.out)'"
  cmp -s <(cut -d, -f1-4 ref.csv) <(cut -d, -f1-4 bad.csv) || bad "metrics over the bad link differ"
  ;;
elastic)
  # 400 steps of global batch 32 (4 lanes: 2 and 4 ranks give the same bits), a checkpoint
  # every 10; the events wait for checkpoints (h2 dies after step 20, returns after the 2-rank
  # job's first one), which leaves the 2-rank job over 300 steps to be asked to grow (--poll 1).
  args=(--epochs 1 --batch 8 --limit-steps 400 --limit-test 50 --no-progress --deterministic 4)
  t0=$(now)
  run ref.out ob1 h1:2,h2:2 4 "$train" "${args[@]}"
  say "uninterrupted 4 ranks: $(since "$t0") s, $(crc ref.out)"
  latest() { local f; f=$(head -n 1 ck/LATEST 2>/dev/null) || { echo 0; return; }; f=${f#ckpt-}; echo $((10#${f%.ddp})); }
  wait_for() { # SECONDS CONDITION...: polls the condition every 0.1 s
    local cap=$1
    shift
    for _ in $(seq 1 $((cap * 10))); do "$@" && return 0; kill -0 $job 2>/dev/null || return 1; sleep 0.1; done
    return 1
  }
  past() { [ "$(latest)" -ge "$1" ]; }
  logged() { grep -q "$1" run.log; }
  rm -rf ck && mkdir ck
  printf 'h1 slots=2\nh2 slots=2\n' >hosts
  t0=$(now)
  bash "$src/apps/ddp_run" --elastic 2:4 --hostfile hosts --poll 1 --backoff 1 -- \
    "$cl" mpirun ob1 {hosts} {np} "$train" "${args[@]}" --checkpoint-dir ck --checkpoint-every 10 \
    >run.out 2>run.log &
  job=$!
  if wait_for 60 past 20; then
    printf 'h1 slots=2\n' >hosts # the health check takes h2 out, then h2 dies
    victims=$("$cl" pids h2 | tr '\n' ' ')
    # shellcheck disable=SC2086
    kill -KILL $victims
    say "h2 killed after checkpoint $(latest) ($(since "$t0") s)"
    if wait_for 60 logged 'elastic: world 4 -> 2' && s2=$(latest) && wait_for 60 past $((s2 + 10)); then
      printf 'h1 slots=2\nh2 slots=2\n' >hosts
      say "h2 back after checkpoint $(latest) of the 2-rank job ($(since "$t0") s)"
    else
      bad "the job did not go on at 2 ranks: $(tail -3 run.log)"
    fi
  else
    bad "no checkpoint at step 20: $(tail -3 run.log) $(tail -3 run.out)"
  fi
  await_end 90 "$t0"
  grep -E '^ddp_run: .*(elastic|ended|finished)' run.log
  say "ddp_run ended with status $rc after $elapsed s"
  [ $rc -eq 0 ] || bad "ddp_run exited $rc"
  grep -q 'elastic: world 4 -> 2 (hosts h1:2,h2:2 -> h1:2) at step [0-9]*, checkpoint ck/ckpt-' run.log ||
    bad "no shrink line"
  grep -q 'elastic: world 2 -> 4 (hosts h1:2 -> h1:2,h2:2) at step [0-9]*, checkpoint ck/ckpt-' run.log ||
    bad "no grow line"
  grep -q 'continues on 2 ranks x batch 8 x accum 2 (global batch 32, kept)' run.out || bad "no 2-rank elastic resume"
  grep -q 'continues on 4 ranks x batch 8 x accum 1 (global batch 32, kept)' run.out || bad "no 4-rank elastic resume"
  [ "$(grep '^# ranks ' run.out | tail -1 | cut -d, -f1)" = "# ranks 4" ] || bad "the last attempt did not run 4 ranks"
  final=$(grep 'final parameters: CRC32' run.out | tail -1)
  say "elastic 4 -> 2 -> 4: $final"
  [ -n "$(crc ref.out)" ] && [ "$final" = "$(crc ref.out)" ] || bad "final CRC '$final', uninterrupted '$(crc ref.out)'"
  ;;
slurm)
  bash "$src/ci/slurm/with_slurm.sh" --cluster -- bash "$src/tests/slurm_check.sh" "$src" "$build" 4 2
  rc=$?
  [ $rc -eq 77 ] && exit 77
  [ $rc -eq 0 ] || bad "slurm_check across the hosts failed ($rc)"
  ;;
*)
  echo "cluster_check: unknown mode $mode" >&2
  exit 2
  ;;
esac
[ $fail -eq 0 ] && say PASS || say FAIL
exit $fail
