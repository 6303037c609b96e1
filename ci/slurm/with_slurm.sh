#!/usr/bin/env bash
# Runs a command inside a private single-node SLURM: munged, slurmctld and slurmd are started
# as children of this script with their own key, config, sockets, ports and scratch folder,
# and stopped by pid when the command ends (TERM, then KILL after 10 s). The command sees
# SLURM_CONF (and MPIDDP_SLURM_SCRATCH); its exit status is this script's. There is no
# slurmdbd (accounting storage off); finished jobs are logged by jobcomp/filetxt to
# log/jobcomp.txt, which `sacct -c` reads.
#   ci/slurm/with_slurm.sh [--scratch DIR] [--keep] [--cluster] -- COMMAND [ARGS...]
# --cluster: across the emulated hosts of ci/cluster/cluster.sh (MPIDDP_CLUSTER): slurmctld
# and munged on h1, one slurmd per host (node name = its hostname), COMMAND runs on h1.
# Exit 77 (skip) when SLURM or munge is not installed.
set -uo pipefail

scratch="" keep=0 cluster=0
while [ $# -gt 0 ]; do
  case $1 in
    --scratch) scratch=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --cluster) cluster=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: $0 [--scratch DIR] [--keep] [--cluster] -- COMMAND [ARGS...]" >&2
  exit 2
fi
for b in munged slurmctld slurmd sbatch sinfo; do
  if ! command -v "$b" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$b" ]; then
    echo "with_slurm: $b not installed (apt-get install slurm-wlm munge); skipping" >&2
    exit 77
  fi
done
export PATH="$PATH:/usr/sbin"
# Where each daemon runs: here, or on an emulated host (h1 = the controller and submit host).
# on_exec: the same for a daemon started with &, so that its recorded pid is the daemon's.
hosts=(local)
on() { "${@:2}"; }
on_exec() { exec "${@:2}"; }
if [ $cluster -eq 1 ]; then
  : "${MPIDDP_CLUSTER:?--cluster needs a cluster: run me through ci/cluster/cluster.sh with N}"
  cl="$(cd "$(dirname "$0")/../cluster" && pwd)/cluster.sh"
  hosts=()
  for ((i = 1; i <= $(sed -n 's/^N=//p' "$MPIDDP_CLUSTER/env"); i++)); do hosts+=("h$i"); done
  on() { "$cl" exec "$@"; }
  on_exec() { exec "$cl" exec "$@"; }
fi

# A fresh folder of our own (under --scratch if given): the only thing removed at the end.
if [ -n "$scratch" ]; then mkdir -p "$scratch" || exit 1; fi
# (Emulated hosts have private /tmp folders: by default their scratch is the cluster's folder.)
[ $cluster -eq 1 ] && scratch=${scratch:-$MPIDDP_CLUSTER}
scratch=$(mktemp -d "${scratch:-/tmp}/ddp-slurm.XXXXXX") || exit 1
scratch=$(cd "$scratch" && pwd)
log() { echo "with_slurm: $*" >&2; }

pids=()
stop_all() {
  local i p
  # Stop in reverse order of start: slurmd, slurmctld, munged.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    p=${pids[i]}
    kill -TERM "$p" 2>/dev/null || continue
    for _ in $(seq 1 100); do
      kill -0 "$p" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$p" 2>/dev/null; then
      log "pid $p ignored TERM for 10 s, sending KILL"
      kill -KILL "$p" 2>/dev/null
    fi
    wait "$p" 2>/dev/null
  done
  pids=()
  if [ $keep -eq 0 ]; then rm -rf "$scratch"; else log "kept $scratch"; fi
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# Free TCP ports for slurmctld and slurmd, so several private clusters (and a system one) can
# run side by side. (Emulated hosts have network namespaces of their own: the usual ports.)
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
if [ $cluster -eq 1 ]; then
  ctld_port=6817 slurmd_port=6818
else
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
fi

mkdir -p "$scratch"/{munge,state,spool,log,run}
chmod 700 "$scratch/munge"
head -c 1024 /dev/urandom >"$scratch/munge/munge.key"
chmod 400 "$scratch/munge/munge.key"
sock="$scratch/munge/munge.socket"

on_exec "${hosts[0]}" munged -F --force --key-file="$scratch/munge/munge.key" --socket="$sock" \
  --pid-file="$scratch/munge/munged.pid" --log-file="$scratch/log/munged.log" \
  --seed-file="$scratch/munge/munge.seed" >"$scratch/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
if [ ! -S "$sock" ]; then
  log "munged did not start:"; cat "$scratch/log/munged.out" "$scratch/log/munged.log" >&2 2>/dev/null
  exit 1
fi

# The node lines come from slurmd -C (CPUs, boards, sockets, cores, threads); RealMemory at
# 90% of what it reports, or slurmd drains the node for having less than configured.
hw=$(slurmd -C | head -1 | sed 's/^NodeName=[^ ]* //')
mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
hw=$(sed "s/RealMemory=[0-9]*/RealMemory=$((mem * 9 / 10))/" <<<"$hw")
if [ $cluster -eq 1 ]; then
  host=h1 addr=$("$cl" addr h1)
  node_lines=$(for h in "${hosts[@]}"; do echo "NodeName=$h NodeAddr=$("$cl" addr "$h") $hw State=UNKNOWN"; done)
  nodes="h[1-${#hosts[@]}]"
else
  host=$(hostname -s) addr=127.0.0.1 nodes=$host
  node_lines="NodeName=$host NodeAddr=127.0.0.1 $hw State=UNKNOWN"
fi
: >"$scratch/plugstack.conf"
conf="$scratch/slurm.conf"
cat >"$conf" <<CONF
ClusterName=ddp
SlurmctldHost=$host($addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock,cred_expire=15
StateSaveLocation=$scratch/state
SlurmdSpoolDir=$scratch/spool/%n
SlurmctldPidFile=$scratch/run/slurmctld.pid
SlurmdPidFile=$scratch/run/slurmd.%n.pid
SlurmctldLogFile=$scratch/log/slurmctld.log
SlurmdLogFile=$scratch/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
PlugStackConfig=$scratch/plugstack.conf
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$scratch/log/jobcomp.txt
MinJobAge=5
ReturnToService=2
SchedulerType=sched/backfill
$node_lines
PartitionName=debug Nodes=$nodes Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$conf" MPIDDP_SLURM_SCRATCH="$scratch"

on_exec "${hosts[0]}" slurmctld -D -i -f "$conf" >"$scratch/log/slurmctld.out" 2>&1 &
pids+=($!)
for h in "${hosts[@]}"; do
  n=$h
  [ "$h" = local ] && n=$host
  mkdir -p "$scratch/spool/$n"
  on_exec "$h" slurmd -D -f "$conf" >"$scratch/log/slurmd.$n.out" 2>&1 &
  pids+=($!)
done
state=""
for _ in $(seq 1 300); do
  state=$(on "${hosts[0]}" sinfo -h -N -o %t 2>/dev/null | sort -u | tr '\n' ' ')
  [ "$state" = "idle " ] && break
  sleep 0.1
done
if [ "$state" != "idle " ]; then
  log "nodes not idle after 30 s (states '${state:-none}'); logs:"
  tail -n 20 "$scratch"/log/*.log "$scratch"/log/*.out >&2 2>/dev/null
  exit 1
fi
log "private SLURM up in $scratch (ports $ctld_port/$slurmd_port, nodes $nodes idle)"

on "${hosts[0]}" "$@"
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
  log "command failed ($rc); last lines of the daemon logs:"
  tail -n 15 "$scratch/log/slurmctld.log" "$scratch"/log/slurmd.*.log >&2 2>/dev/null
fi
exit $rc
