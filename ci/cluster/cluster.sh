#!/usr/bin/env bash
# An emulated cluster on one Linux machine: each host is a network namespace with its own UTS
# (hostname h1..hN), IPC and mount namespaces (private /dev/shm and /tmp, an /etc/hosts naming
# every host), all joined by one bridge in a private /24. Open MPI reaches the hosts through an
# ssh replacement (ci/cluster/rsh), so mpirun, its daemons and the ranks run as on N machines.
#
#   cluster.sh with N [--limit S] [--share PATH]... -- CMD...   up N, run CMD (MPIDDP_CLUSTER
#                                    set), down; then check that netns, links and routes are as
#                                    found (rc 1 if not)
#   cluster.sh up N [--share PATH]...  prints the cluster folder: export MPIDDP_CLUSTER=<it>
#                                    --share: a folder under /tmp or /dev/shm (a build folder)
#                                    that every host sees at the same path, bound over its
#                                    private /tmp or /dev/shm (folders elsewhere are seen anyway)
#   cluster.sh down [DIR]            removes everything `up` made; the blackhole route last
#   cluster.sh exec HOST CMD...      runs CMD on HOST (h1.., or its address), environment kept
#   cluster.sh mpirun ob1|ucx HOSTS NP [NAME=VALUE...] PROG [ARGS...]   mpirun on h1 (or
#                                    $MPIDDP_CLUSTER_HEAD) with the cluster's flags; HOSTS like
#                                    h1:2,h2:2; NAME=VALUE for every rank, and every rank gets
#                                    DDP_WORLD_SIZE=NP (ddp_init fails on another world size)
#                                    and this shell's OPENBLAS_CORETYPE when set (a rank started
#                                    on another host gets a fresh environment and would pick
#                                    its own kernel: other bits than the head host's ranks)
#   cluster.sh hydra HOSTS NP [NAME=VALUE...] PROG [ARGS...]   the same with MPICH's Hydra
#                                    (MPIDDP_CLUSTER_MPIEXEC, default mpiexec.mpich) over UCX
#   cluster.sh shape HOST rate R [burst BYTES] | delay MS loss PCT | off   shape HOST's link
#                                    both ways (rate: tc tbf; delay (fractional ms: 0.025) and
#                                    loss: a spliced-in wire, ci/cluster/wire.c)
#   cluster.sh link HOST up|down     the cable of HOST (its bridge port)
#   cluster.sh pids HOST             the processes on HOST (not its namespace holder)
#   cluster.sh addr HOST             HOST's address
#
# Safety: before anything else `up` adds a blackhole route for the subnet in the root
# namespace (packets for it can never follow the default route off the machine) and `down`
# removes it last; the bridge has no address, not even IPv6 link-local, in the root namespace;
# hosts have no default route and no IPv6. Everything networked runs inside a host.
# Needs root, iproute2 (ip, tc), util-linux (unshare, nsenter); exit 77 (skip) without them.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=${MPIDDP_CLUSTER_ROOT:-/run/ddp-cluster} # state of running clusters: one folder each
POOL=10.213                                # each cluster takes one free 10.213.X.0/24

# ---- the Open MPI launch across the hosts: every cluster-specific flag lives here ---------
# plm_rsh_agent: our ssh; no tree spawn (a daemon on h2 would have to start h3's);
# --bind-to none: every host sees the same cores, default binding would pile ranks on core 0;
# yield when idle: more ranks than cores; TCP (BTL and out-of-band) only on the bridge subnet.
ompi_flags() { # PML
  local net="$SUBNET.0/24"
  OMPI=(mpirun --mca plm_rsh_agent "$HERE/rsh" --mca plm_rsh_no_tree_spawn 1
    --bind-to none --mca mpi_yield_when_idle 1
    --mca oob_tcp_if_include "$net" --mca btl_tcp_if_include "$net")
  case $1 in
    ob1) OMPI+=(--mca pml ob1 --mca btl tcp,vader,self) ;;
    # UCX over TCP between hosts and shared memory inside one; Debian's Open MPI only takes
    # Mellanox devices unless told otherwise.
    ucx) OMPI+=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca btl self,vader
                -x UCX_TLS=tcp,sm,self -x UCX_NET_DEVICES=np0 -x UCX_WARN_UNUSED_ENV_VARS=n) ;;
    *) die "pml '$1' is neither ob1 nor ucx" ;;
  esac
}
# MPICH (ch4:ucx, Debian's): Hydra starts its proxies through the same ssh replacement; UCX
# runs TCP on the bridge between hosts and shared memory inside one; no binding.
hydra_flags() {
  HYDRA=("${MPIDDP_CLUSTER_MPIEXEC:-mpiexec.mpich}" -launcher ssh -launcher-exec "$HERE/rsh"
    -iface np0 -bind-to none -genv UCX_TLS tcp,sm,self -genv UCX_NET_DEVICES np0
    -genv UCX_WARN_UNUSED_ENV_VARS n)
}

die() { echo "cluster: $*" >&2; exit 1; }
say() { echo "cluster: $*" >&2; }

need_tools() {
  local t
  if [ "$(id -u)" -ne 0 ]; then say "needs root (network namespaces); skipping"; exit 77; fi
  for t in ip tc unshare nsenter; do
    command -v "$t" >/dev/null 2>&1 || { say "$t not installed; skipping"; exit 77; }
  done
}

load() { # DIR
  DIR=${1:-${MPIDDP_CLUSTER:-}}
  [ -n "$DIR" ] && [ -f "$DIR/env" ] || die "no cluster (MPIDDP_CLUSTER='${MPIDDP_CLUSTER:-}')"
  # shellcheck disable=SC1091
  . "$DIR/env" # SUBNET PREFIX N CREATED_NETNS_DIR
}

# Host index of a name (h3) or an address (10.213.X.3).
host_index() {
  local h=${1#*@} i
  case $h in
    h[0-9]*) i=${h#h} ;;
    "$SUBNET".*) i=${h##*.} ;;
    *) i="" ;;
  esac
  [[ $i =~ ^[0-9]+$ ]] && [ "$i" -ge 1 ] && [ "$i" -le "$N" ] || die "unknown host '$1' (hosts h1..h$N)"
  echo "$i"
}

# Root-namespace state a test must leave as it found it.
snapshot() {
  echo "## ip netns list"; ip netns list 2>/dev/null | sort
  echo "## ip link (names)"; ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | sort
  echo "## ip route (all tables)"; ip route show table all | sort
  echo "## ip -6 route (all tables)"; ip -6 route show table all | sort
}

# ---- up / down -------------------------------------------------------------------------------
# private_path PATH: 0 if PATH lies in /tmp or /dev/shm, which every host has of its own.
private_path() { case $1 in /tmp | /tmp/* | /dev/shm | /dev/shm/*) return 0 ;; esac; return 1; }

cmd_up() {
  local n=$1 x="" claimed=0 try start i p share=()
  shift
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 32 ] || die "up: host count '$n' is not 1..32"
  while [ $# -gt 0 ]; do
    case $1 in
      --share)
        [ -d "${2:-}" ] || die "up: --share '${2:-}' is not a folder"
        p=$(cd "$2" && pwd -P)
        private_path "$p" && share+=("$p")
        shift 2 ;;
      *) die "up: unknown option $1" ;;
    esac
  done
  need_tools
  reap_stale
  mkdir -p "$ROOT" || die "cannot create $ROOT"
  # A free /24: nothing routed there but the default route, no cluster of ours on it. The
  # blackhole route is added first of all; `ip route add` fails if another cluster won the race.
  start=$(($$ % 200))
  for ((try = 0; try < 200; try++)); do
    x=$(((start + try) % 200 + 20))
    [ -e "$ROOT/c$x" ] && continue
    [ -z "$(ip route show match "$POOL.$x.0/24" | grep -v '^default')" ] || continue
    [ -z "$(ip -o addr show to "$POOL.$x.0/24")" ] || continue
    ip route add blackhole "$POOL.$x.0/24" 2>/dev/null || continue
    mkdir "$ROOT/c$x" 2>/dev/null && { claimed=1; break; }
    ip route del blackhole "$POOL.$x.0/24"
  done
  [ $claimed -eq 1 ] || die "up: no free subnet in $POOL.20-219.0/24"
  DIR=$ROOT/c$x SUBNET=$POOL.$x PREFIX=ddpc$x N=$n
  local created=0
  [ -d /run/netns ] || created=1
  printf 'SUBNET=%s\nPREFIX=%s\nN=%s\nCREATED_NETNS_DIR=%s\n' "$SUBNET" "$PREFIX" "$N" "$created" >"$DIR/env"
  printf '%s\n' "${share[@]}" >"$DIR/share" # one folder a line, seen by every host
  echo "${OWNER:-$PPID}" >"$DIR/owner"
  { echo "127.0.0.1 localhost"; for ((i = 1; i <= n; i++)); do echo "$SUBNET.$i h$i"; done; } >"$DIR/hosts"
  trap 'say "up failed: removing what was made"; cmd_down "$DIR" >/dev/null 2>&1' EXIT
  local br=${PREFIX}br
  ip link add name "$br" type bridge || die "up: bridge $br"
  ip link set dev "$br" addrgenmode none # no IPv6 link-local address in the root namespace
  ip link set dev "$br" up
  for ((i = 1; i <= n; i++)); do
    local ns=${PREFIX}h$i
    ip netns add "$ns" || die "up: netns $ns"
    ip link add "$ns" type veth peer name np0 netns "$ns" || die "up: veth for h$i"
    ip link set dev "$ns" addrgenmode none
    ip link set dev "$ns" master "$br" up
    nsenter --net="/run/netns/$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
      net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.np0.disable_ipv6=1 >/dev/null
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$SUBNET.$i/24" dev np0
    ip -n "$ns" link set np0 up
    # The host's other namespaces live as long as this holder process: private /dev/shm and
    # /tmp (nothing shared across hosts by accident), /etc/hosts, a sysfs showing its own
    # network devices (UCX reads them there) with the machine's cgroup mounts (slurmd).
    # Shared folders (--share) are bound aside before the private tmpfs hide them, then moved
    # back to their own path on top of it.
    setsid nsenter --net="/run/netns/$ns" unshare --uts --ipc --mount --propagation private -- \
      bash -c 'set -e
               k=0
               while read -r p; do
                 [ -n "$p" ] || continue
                 mkdir -p "$1/aside$k"; mount --bind "$p" "$1/aside$k"; k=$((k + 1))
               done <"$1/share"
               mount -t tmpfs -o mode=1777 ddp-shm /dev/shm
               mount -t tmpfs -o mode=1777 ddp-tmp /tmp
               k=0
               while read -r p; do
                 [ -n "$p" ] || continue
                 mkdir -p "$p"; mount --move "$1/aside$k" "$p"; k=$((k + 1))
               done <"$1/share"
               mount --bind "$1/hosts" /etc/hosts
               cg=0
               if mountpoint -q /sys/fs/cgroup; then mkdir /tmp/.cg; mount --rbind /sys/fs/cgroup /tmp/.cg; cg=1; fi
               umount -l /sys
               mount -t sysfs sysfs /sys
               if [ $cg = 1 ]; then mount --move /tmp/.cg /sys/fs/cgroup; rmdir /tmp/.cg; fi
               hostname "$2"
               exec -a "ddp-cluster-$2" sleep infinity' _ "$DIR" "h$i" \
      </dev/null >"$DIR/h$i.holder.log" 2>&1 &
    echo $! >"$DIR/h$i.holder"
  done
  for ((i = 1; i <= n; i++)); do # ready once the hostname (set last) is there
    local pid ok=0
    pid=$(cat "$DIR/h$i.holder")
    for _ in $(seq 1 100); do
      [ "$(nsenter -t "$pid" --uts hostname 2>/dev/null)" = "h$i" ] && { ok=1; break; }
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    [ $ok -eq 1 ] || die "up: host h$i did not start: $(cat "$DIR/h$i.holder.log")"
  done
  trap - EXIT
  say "up: h1..h$n on $br, $SUBNET.0/24 (blackholed in the root namespace), state in $DIR"
  echo "$DIR"
}

cmd_down() {
  load "${1:-}"
  local i pids p left ns l
  # Everything still running on a host is ours: TERM, then KILL after 3 s.
  pids=""
  for ((i = 1; i <= N; i++)); do
    for ns in "${PREFIX}h$i" "${PREFIX}w$i"; do
      [ -e "/run/netns/$ns" ] && pids+=" $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
    done
  done
  left=""
  for p in $pids; do
    [ "$p" = "$(cat "$DIR/h"*.holder 2>/dev/null | grep -x "$p")" ] && continue
    left+=" $p($(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | cut -c1-60))"
  done
  [ -n "$left" ] && say "down: ending processes left on the hosts:$left"
  for p in $pids; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 1 30); do
    left=0
    for p in $pids; do kill -0 "$p" 2>/dev/null && left=1; done
    [ $left -eq 0 ] && break
    sleep 0.1
  done
  for p in $pids; do kill -KILL "$p" 2>/dev/null; done
  for p in $pids; do while kill -0 "$p" 2>/dev/null; do sleep 0.05; done; done
  for ((i = 1; i <= N; i++)); do
    for ns in "${PREFIX}h$i" "${PREFIX}w$i"; do
      [ -e "/run/netns/$ns" ] && ip netns del "$ns"
    done
    for l in "${PREFIX}h$i" "${PREFIX}x$i"; do
      ip link show "$l" >/dev/null 2>&1 && ip link del "$l" 2>/dev/null
    done
  done
  ip link show "${PREFIX}br" >/dev/null 2>&1 && ip link del "${PREFIX}br"
  if [ "$CREATED_NETNS_DIR" = 1 ] && [ -d /run/netns ] && [ -z "$(ls -A /run/netns)" ]; then
    umount /run/netns 2>/dev/null
    rmdir /run/netns 2>/dev/null
  fi
  rm -rf "$DIR"
  rmdir "$ROOT" 2>/dev/null
  # Last: the route that kept the subnet from leaving the machine.
  ip route del blackhole "$SUBNET.0/24" 2>/dev/null
  say "down: $PREFIX removed"
}

# Clusters whose owner (the `with` or test process) is gone: left by a killed run.
reap_stale() {
  local d o
  for d in "$ROOT"/c*; do
    [ -f "$d/owner" ] || continue
    o=$(cat "$d/owner")
    # alive, and not a zombie nobody has reaped yet
    kill -0 "$o" 2>/dev/null && [ "$(awk '{ print $3 }' "/proc/$o/stat" 2>/dev/null)" != Z ] && continue
    say "removing stale cluster $d (owner pid $o is gone)"
    (cmd_down "$d")
  done
}

cmd_with() {
  local n=$1 limit=0 share=()
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --limit) limit=$2; shift 2 ;;
      --share) share+=(--share "$2"); shift 2 ;;
      --) shift; break ;;
      *) die "with: unknown option $1" ;;
    esac
  done
  [ $# -gt 0 ] || die "with: no command"
  need_tools
  local before after rc
  reap_stale # a leftover of a killed run is not this run's doing
  before=$(snapshot)
  export OWNER=$$
  MPIDDP_CLUSTER=$(cmd_up "$n" "${share[@]}") || exit 1
  export MPIDDP_CLUSTER
  trap 'cmd_down "$MPIDDP_CLUSTER"' EXIT
  trap 'exit 130' INT TERM
  # The command ends here (TERM, then KILL) before any outer timeout, so `down` always runs.
  if [ "$limit" -gt 0 ]; then timeout -k 5 "$limit" "$@"; else "$@"; fi
  rc=$?
  [ $rc -eq 124 ] && say "the command ran past --limit $limit s"
  trap - EXIT
  cmd_down "$MPIDDP_CLUSTER"
  after=$(snapshot)
  if [ "$before" != "$after" ]; then
    say "FAIL: the root namespace differs from before 'up':"
    diff <(echo "$before") <(echo "$after") >&2
    rc=1
  else
    say "root namespace as found: $(ip netns list | wc -l) netns, $(ip -o link show | wc -l) links, $(ip route show table all | wc -l) IPv4 and $(ip -6 route show table all | wc -l) IPv6 routes"
  fi
  exit $rc
}

# ---- using the hosts --------------------------------------------------------------------------
holder() { cat "$DIR/h$1.holder"; }

# shared_path PATH: 0 if PATH lies in a folder every host sees (up --share).
shared_path() {
  local p q
  [ -f "$DIR/share" ] || return 1
  p=$(cd "$1" 2>/dev/null && pwd -P) || p=$1
  while read -r q; do
    [ -n "$q" ] || continue
    case $p in "$q" | "$q"/*) return 0 ;; esac
  done <"$DIR/share"
  return 1
}

cmd_exec() {
  load
  local i
  i=$(host_index "$1")
  shift
  if private_path "$PWD" && ! shared_path "$PWD"; then
    die "exec: the working directory $PWD is in /tmp or /dev/shm, which every host has of its own (up --share makes a folder there common)"
  fi
  exec nsenter -t "$(holder "$i")" --net --uts --ipc --mount --wd="$PWD" -- "$@"
}

# Open MPI's agent calls: rsh [ssh options] HOST WORDS... ; like ssh, the words are joined and
# given to a shell on HOST, in a fresh environment (nothing leaks from mpirun's but PATH).
cmd_rsh() {
  load
  while [ $# -gt 0 ]; do
    case $1 in
      -o | -p | -l | -i | -F | -E | -J) shift 2 ;;
      -*) shift ;;
      *) break ;;
    esac
  done
  local i
  i=$(host_index "$1") || exit 255
  shift
  exec env -i PATH="$PATH" HOME="${HOME:-/root}" MPIDDP_CLUSTER="$DIR" \
    nsenter -t "$(holder "$i")" --net --uts --ipc --mount --wd=/ -- sh -c "$*"
}

cmd_mpirun() {
  load
  [ $# -ge 4 ] || die "mpirun: usage: mpirun ob1|ucx HOSTS NP [NAME=VALUE...] PROG [ARGS...]"
  local pml=$1 hosts=$2 np=$3
  shift 3
  ompi_flags "$pml"
  OMPI+=(-x "DDP_WORLD_SIZE=$np")
  [ -n "${OPENBLAS_CORETYPE+x}" ] && OMPI+=(-x "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE")
  while [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do OMPI+=(-x "$1"); shift; done
  cmd_exec "${MPIDDP_CLUSTER_HEAD:-h1}" "${OMPI[@]}" --host "$hosts" -np "$np" "$@"
}

cmd_hydra() {
  load
  [ $# -ge 3 ] || die "hydra: usage: hydra HOSTS NP [NAME=VALUE...] PROG [ARGS...]"
  local hosts=$1 np=$2
  shift 2
  hydra_flags
  HYDRA+=(-genv DDP_WORLD_SIZE "$np")
  [ -n "${OPENBLAS_CORETYPE+x}" ] && HYDRA+=(-genv OPENBLAS_CORETYPE "$OPENBLAS_CORETYPE")
  while [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do HYDRA+=(-genv "${1%%=*}" "${1#*=}"); shift; done
  cmd_exec "${MPIDDP_CLUSTER_HEAD:-h1}" "${HYDRA[@]}" -hosts "$hosts" -n "$np" "$@"
}

# The root-namespace end of HOST's cable (its bridge port) is ${PREFIX}h<i>; while a bad wire
# is spliced in (shape delay/loss) that end lives in the wire's namespace ${PREFIX}w<i>.
port_netns() { [ -e "/run/netns/${PREFIX}w$1" ] && echo "${PREFIX}w$1"; }
port_ip() { local w; w=$(port_netns "$1"); ip ${w:+-n "$w"} "${@:2}"; }

cmd_shape() {
  load
  local i
  i=$(host_index "$1")
  shift
  local ns=${PREFIX}h$i port=${PREFIX}h$i w=${PREFIX}w$i
  case ${1:-} in
    rate)
      # tbf on both ends: the host's egress (np0) and its bridge port's egress (into the host).
      # Burst: by default 5 ms at the rate, so the token bucket, not the timer tick, sets the
      # pace. A smaller `burst` (a benchmark's: a link that never runs faster than R, even after
      # an idle gap) also caps the host's GSO frames at burst/2, since tbf must never hold a
      # frame larger than its bucket (it would cut it into MTU-sized packets one by one).
      local r=${2:?shape: rate needs a value like 10gbit} bits burst
      bits=$(awk -v r="$r" 'BEGIN { n = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u)
        m = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : u == "bit" ? 1 : -1
        if (m < 0 || n <= 0) exit 1; printf "%d", n * m }') || die "shape: rate '$r' is not like 10gbit"
      burst=$((bits / 8 / 200 > 65536 ? bits / 8 / 200 : 65536))
      if [ "${3:-}" = burst ]; then
        [[ ${4:-} =~ ^[0-9]+$ ]] && [ "$4" -ge 8192 ] || die "shape: burst '${4:-}' is not a byte count >= 8192"
        burst=$4
        local gso=$((burst / 2 < 65536 ? burst / 2 : 65536))
        ip -n "$ns" link set dev np0 gso_max_size "$gso" || die "shape: gso_max_size in h$i"
      fi
      tc -n "$ns" qdisc replace dev np0 root tbf rate "$r" burst "$burst" latency 50ms || die "shape: tbf in h$i"
      local wn
      wn=$(port_netns "$i")
      tc ${wn:+-n "$wn"} qdisc replace dev "$port" root tbf rate "$r" burst "$burst" latency 50ms ||
        die "shape: tbf on h$i's bridge port"
      say "h$i: $r (tbf, burst $burst B) on both ends of its link"
      ;;
    delay)
      # No netem in every kernel (not in this project's CI VMs): a user-space wire is spliced
      # into the cable, in a namespace of its own: host np0 = port | wire | up = the new
      # bridge port ${PREFIX}x<i>. The wire is compiled on first use into the cluster folder.
      [ "${3:-}" = loss ] && [ $# -eq 4 ] || die "shape: usage: shape HOST delay MS loss PERCENT"
      [ -n "$(port_netns "$i")" ] && die "shape: h$i already has a wire"
      if [ ! -x "$DIR/wire" ]; then
        "${CC:-cc}" -O2 -o "$DIR/wire.tmp" "$HERE/wire.c" && mv "$DIR/wire.tmp" "$DIR/wire" ||
          die "shape: cannot compile $HERE/wire.c"
      fi
      ip netns add "$w" || die "shape: netns $w"
      nsenter --net="/run/netns/$w" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
        net.ipv6.conf.default.disable_ipv6=1 >/dev/null
      ip link set dev "$port" nomaster
      ip link set dev "$port" netns "$w"
      ip link add "${PREFIX}x$i" type veth peer name up netns "$w" || die "shape: veth for the wire"
      ip link set dev "${PREFIX}x$i" addrgenmode none
      ip link set dev "${PREFIX}x$i" master "${PREFIX}br" up
      ip -n "$w" link set dev "$port" up
      ip -n "$w" link set dev up up
      setsid nsenter --net="/run/netns/$w" "$DIR/wire" "$port" up "$2" "$4" "$i" \
        </dev/null >"$DIR/h$i.wire.log" 2>&1 &
      echo $! >"$DIR/h$i.wire"
      sleep 0.2
      kill -0 "$(cat "$DIR/h$i.wire")" 2>/dev/null || die "shape: the wire did not start: $(cat "$DIR/h$i.wire.log")"
      say "h$i: ${2} ms delay and ${4}% frame loss each way (wire)"
      ;;
    off)
      tc -n "$ns" qdisc del dev np0 root 2>/dev/null
      ip -n "$ns" link set dev np0 gso_max_size 65536 2>/dev/null
      if [ -n "$(port_netns "$i")" ]; then
        local pid
        pid=$(cat "$DIR/h$i.wire")
        kill -TERM "$pid" 2>/dev/null
        while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
        cat "$DIR/h$i.wire.log" >&2
        ip -n "$w" link set dev "$port" netns 1 # back to the root namespace (pid 1's)
        ip netns del "$w"
        ip link del "${PREFIX}x$i" 2>/dev/null
        ip link set dev "$port" master "${PREFIX}br" up
      else
        tc qdisc del dev "$port" root 2>/dev/null
      fi
      return 0
      ;;
    *) die "shape: usage: shape HOST rate R [burst BYTES] | delay MS loss PERCENT | off" ;;
  esac
}

cmd_link() {
  load
  local i
  i=$(host_index "$1")
  case ${2:-} in up | down) ;; *) die "link: want up or down" ;; esac
  port_ip "$i" link set dev "${PREFIX}h$i" "$2"
}

cmd_pids() {
  load
  local i p h
  i=$(host_index "$1")
  h=$(holder "$i")
  for p in $(ip netns pids "${PREFIX}h$i"); do [ "$p" != "$h" ] && echo "$p"; done
}

cmd_addr() {
  load
  echo "$SUBNET.$(host_index "$1")"
}

[ $# -gt 0 ] || { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
sub=$1
shift
case $sub in
  up) [ $# -ge 1 ] || die "usage: up N [--share PATH]..."; cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  with) cmd_with "$@" ;;
  exec) cmd_exec "$@" ;;
  rsh) cmd_rsh "$@" ;;
  mpirun) cmd_mpirun "$@" ;;
  hydra) cmd_hydra "$@" ;;
  shape) cmd_shape "$@" ;;
  link) cmd_link "$@" ;;
  pids) cmd_pids "$@" ;;
  addr) cmd_addr "$@" ;;
  *) die "unknown command '$sub' (up, down, with, exec, mpirun, hydra, shape, link, pids, addr)" ;;
esac
