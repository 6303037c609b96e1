#!/usr/bin/env bash
# Allreduce over shaped links (not a test): on the emulated cluster (ci/cluster/cluster.sh, 4
# hosts), every host's cable shaped to a rate (tc tbf on both ends) and a latency (a wire
# spliced into the cable, ci/cluster/wire.c: half the host-to-host latency each way, so any two
# hosts are LAT apart), then allreduce_bench -A raw,ring,rhd,hier,auto, f32 sum in place, host
# memory, for each MPI and layout, in one session. Before each link's runs bench/link_probe.py
# measures what the link carries (TCP, every host sending and receiving at once) and its
# latency; the summary (bench/cluster_bench.py) puts the alpha-beta model's prediction beside
# every figure (the model of docs/scale.md, with that alpha and B) and writes JSON.
#
#   bash bench/cluster_bench.sh [--build DIR] [--mpich-build DIR] [--out DIR]
#        [--mpis ob1,ucx,mpich] [--links 1gbit:50us,...] [--layouts 2x2,4x2]
#        [--sizes "-b 64K -e 64M -f 4"] [-R N] [-t SEC] [--limit SEC]
#
# --build: the build with Debian's Open MPI (default build/); --mpich-build: one built with
# Debian's MPICH (mpicc.mpich; default build-mpis/mpich, as bench/compare_mpis.sh makes it).
# MPIs: ob1 (Open MPI, ob1 + TCP BTL), ucx (Open MPI, pml ucx over tcp), mpich (Hydra, ch4:ucx
# over tcp). Links: RATE:LATENCY, RATE as tc's (1gbit), LATENCY host to host one way (50us,
# 0.5ms); RATE alone: no wire; `unshaped`: neither. Layouts: HOSTSxRANKS (at most 4 hosts).
# --limit: seconds one allreduce_bench run may take (default 600), then it is stopped. Needs
# root (exit 77 otherwise, as cluster.sh). Run it on an otherwise idle machine or under the
# CPU lock: the ranks of all hosts share this machine's cores.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$src/build mbuild=$src/build-mpis/mpich out="" mpis=ob1,ucx,mpich
links=1gbit:50us,1gbit:500us,10gbit:50us,10gbit:500us layouts=2x2,4x2
sizes="-b 64K -e 64M -f 4" reps=2 budget=0.5 limit=600 inside=0 args="$*"
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --mpich-build) mbuild=$(cd "$2" && pwd); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --mpis) mpis=$2; shift 2 ;;
    --links) links=$2; shift 2 ;;
    --layouts) layouts=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    -R) reps=$2; shift 2 ;;
    -t) budget=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --inside) inside=1; args=$2; shift 2 ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "cluster_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
out=${out:-$build/cluster-bench}
mkdir -p "$out" && out=$(cd "$out" && pwd)
# Every host must see the builds and the output (a folder in /tmp is private to each host).
if [ $inside -eq 0 ]; then
  share=(--share "$src" --share "$build" --share "$out")
  [ -d "$mbuild" ] && share+=(--share "$mbuild")
  exec bash "$src/ci/cluster/cluster.sh" with 4 "${share[@]}" -- bash "$0" --inside "$args" \
    --build "$build" --mpich-build "$mbuild" --out "$out" --mpis "$mpis" --links "$links" \
    --layouts "$layouts" --sizes "$sizes" -R "$reps" -t "$budget" --limit "$limit"
fi

cl=$src/ci/cluster/cluster.sh
probe=$src/bench/link_probe.py
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
hosts=(h1 h2 h3 h4)
fail=0
# us: a latency like 50us, 0.5ms or 1s in microseconds.
us() { awk -v l="$1" 'BEGIN { n = l + 0; u = l; sub(/^[0-9.]+/, "", u)
  m = u == "us" ? 1 : u == "ms" ? 1e3 : u == "s" ? 1e6 : -1; if (m < 0) exit 1; printf "%g", n * m }'; }

# probe_link: bandwidth (MB/s, the slowest of a ring of streams, every host sending to the next
# and receiving from the previous at once) and one-way latency (us, h1 <-> h2).
probe_link() {
  local i n=${#hosts[@]} port=5301 pids=() f
  for ((i = 0; i < n; i++)); do
    "$cl" exec "${hosts[i]}" python3 "$probe" sink "$("$cl" addr "${hosts[i]}")" $port >"$out/.sink$i" &
    pids+=($!)
  done
  sleep 0.3
  for ((i = 0; i < n; i++)); do
    "$cl" exec "${hosts[i]}" python3 "$probe" source "$("$cl" addr "${hosts[(i + 1) % n]}")" $port 2 &
    pids+=($!)
  done
  wait "${pids[@]}"
  bw=$(cat "$out"/.sink* | sort -g | head -1)
  rm -f "$out"/.sink*
  "$cl" exec h2 python3 "$probe" echo "$("$cl" addr h2)" 5302 &
  f=$!
  sleep 0.3
  lat=$("$cl" exec h1 python3 "$probe" ping "$("$cl" addr h2)" 5302 400)
  wait $f
}

: >"$out/links.txt"
for link in ${links//,/ }; do
  # RATE:LATENCY, RATE alone (tbf, no wire) or `unshaped`
  rate=${link%%:*} latency=0us
  [[ $link == *:* ]] && latency=${link#*:}
  lat_us=$(us "$latency") || { echo "cluster_bench: latency '$latency' is not like 50us" >&2; exit 2; }
  half_ms=$(awk -v u="$lat_us" 'BEGIN { printf "%g", u / 2000 }')
  for h in "${hosts[@]}"; do
    # Latency first: the wire moves the bridge port into its own namespace, where tbf then
    # goes. Burst 128 KB: two 64 KB frames, and at most 1 ms of line rate after an idle gap.
    if [ "$lat_us" != 0 ]; then "$cl" shape "$h" delay "$half_ms" loss 0 2>/dev/null || exit 1; fi
    if [ "$rate" != unshaped ]; then "$cl" shape "$h" rate "$rate" burst 131072 2>/dev/null || exit 1; fi
  done
  probe_link
  echo "$rate $latency $lat_us $bw $lat" >>"$out/links.txt"
  echo "=== link $rate, $latency host to host: TCP carries $bw MB/s per host each way (all at once), one-way latency $lat us"
  for layout in ${layouts//,/ }; do
    nh=${layout%x*} rph=${layout#*x}
    np=$((nh * rph)) hl=""
    for ((i = 1; i <= nh; i++)); do hl+="${hl:+,}h$i:$rph"; done
    for mpi in ${mpis//,/ }; do
      json=$out/${mpi}_${layout}_${rate}_${latency}.json
      echo "=== $layout ($hl), $mpi, $rate $latency"
      log=$out/${mpi}_${layout}_${rate}_${latency}.txt
      rm -f "$json"
      # shellcheck disable=SC2086
      case $mpi in
        ob1 | ucx) "$cl" mpirun "$mpi" "$hl" "$np" "$build/apps/allreduce_bench" $sizes \
          -A raw,ring,rhd,hier,auto -P in -R "$reps" -t "$budget" -w 1 -J "$json" >"$log" 2>&1 &
          ;;
        mpich) "$cl" hydra "$hl" "$np" "$mbuild/apps/allreduce_bench" $sizes \
          -A raw,ring,rhd,hier,auto -P in -R "$reps" -t "$budget" -w 1 -J "$json" >"$log" 2>&1 &
          ;;
        *) echo "cluster_bench: unknown MPI $mpi" >&2; exit 2 ;;
      esac
      # MPICH 4.0.2 (ch4:ucx over tcp) does not always return from MPI_Finalize across the
      # hosts (one rank in ucp_worker_progress, the others in PMI): once rank 0 has written
      # the JSON (after every result was checked) the job gets 20 s to end, then is stopped.
      job=$! t0=$SECONDS
      while kill -0 $job 2>/dev/null && ! { [ -s "$json" ] && tail -c 3 "$json" | grep -q ']'; } &&
        [ $((SECONDS - t0)) -lt "$limit" ]; do sleep 0.5; done
      for _ in $(seq 40); do [ -s "$json" ] || break; kill -0 $job 2>/dev/null || break; sleep 0.5; done
      if kill -0 $job 2>/dev/null; then
        if [ -s "$json" ]; then
          echo "# $mpi: the results are written but MPI_Finalize has not returned after 20 s: job stopped"
        else
          echo "# $mpi $layout: still running after --limit $limit s: stopped, no results"
          fail=1
        fi
        kill -TERM $job 2>/dev/null
        for h in "${hosts[@]}"; do # what the job left on the hosts (not the holders)
          "$cl" pids "$h" | xargs -r ps -o pid=,comm= -p 2>/dev/null |
            awk '$2 ~ /^(allreduce_bench|hydra_pmi_proxy|mpiexec.mpich)$/ { print $1 }' | xargs -r kill -KILL 2>/dev/null
        done
        wait $job
      elif ! wait $job; then
        fail=1
        echo "# FAILED: $(tail -3 "$log")"
      fi
      [ -s "$json" ] || { fail=1; echo "# no results from $mpi $layout"; }
      grep -E '^# (Open MPI|MPICH|algorithm: auto)' "$log" | head -2
    done
  done
  for h in "${hosts[@]}"; do "$cl" shape "$h" off 2>/dev/null; done
done
CLUSTER_CMD="bash bench/cluster_bench.sh $args" python3 "$src/bench/cluster_bench.py" "$out" || fail=1
exit $fail
