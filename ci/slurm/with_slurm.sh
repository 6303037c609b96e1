#!/usr/bin/env bash
# Runs a command inside a private single-node SLURM: munged, slurmctld and slurmd are started
# as children of this script with their own key, config, sockets, ports and scratch folder,
# and stopped by pid when the command ends (TERM, then KILL after 10 s). The command sees
# SLURM_CONF (and MPIDDP_SLURM_SCRATCH); its exit status is this script's.
#   ci/slurm/with_slurm.sh [--scratch DIR] [--keep] -- COMMAND [ARGS...]
# Exit 77 (skip) when SLURM or munge is not installed.
set -uo pipefail

scratch="" keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --scratch) scratch=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: $0 [--scratch DIR] [--keep] -- COMMAND [ARGS...]" >&2
  exit 2
fi
for b in munged slurmctld slurmd sbatch sinfo; do
  if ! command -v "$b" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$b" ]; then
    echo "with_slurm: $b not installed (apt-get install slurm-wlm munge); skipping" >&2
    exit 77
  fi
done
export PATH="$PATH:/usr/sbin"

# A fresh folder of our own (under --scratch if given): the only thing removed at the end.
if [ -n "$scratch" ]; then mkdir -p "$scratch" || exit 1; fi
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
# run side by side.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done

mkdir -p "$scratch"/{munge,state,spool,log,run}
chmod 700 "$scratch/munge"
head -c 1024 /dev/urandom >"$scratch/munge/munge.key"
chmod 400 "$scratch/munge/munge.key"
sock="$scratch/munge/munge.socket"

munged -F --force --key-file="$scratch/munge/munge.key" --socket="$sock" \
  --pid-file="$scratch/munge/munged.pid" --log-file="$scratch/log/munged.log" \
  --seed-file="$scratch/munge/munge.seed" >"$scratch/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
if [ ! -S "$sock" ]; then
  log "munged did not start:"; cat "$scratch/log/munged.out" "$scratch/log/munged.log" >&2 2>/dev/null
  exit 1
fi

host=$(hostname -s)
# The node line comes from slurmd -C (CPUs, boards, sockets, cores, threads); RealMemory at
# 90% of what it reports, or slurmd drains the node for having less than configured.
node_line=$(slurmd -C | head -1)
mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node_line")
node_line=$(sed "s/RealMemory=[0-9]*/RealMemory=$((mem * 9 / 10))/; s/^NodeName=[^ ]*/NodeName=$host NodeAddr=127.0.0.1/" <<<"$node_line")
: >"$scratch/plugstack.conf"
conf="$scratch/slurm.conf"
cat >"$conf" <<CONF
ClusterName=ddp
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$scratch/state
SlurmdSpoolDir=$scratch/spool
SlurmctldPidFile=$scratch/run/slurmctld.pid
SlurmdPidFile=$scratch/run/slurmd.pid
SlurmctldLogFile=$scratch/log/slurmctld.log
SlurmdLogFile=$scratch/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
PlugStackConfig=$scratch/plugstack.conf
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=5
ReturnToService=2
SchedulerType=sched/backfill
$node_line State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$conf" MPIDDP_SLURM_SCRATCH="$scratch"

slurmctld -D -i -f "$conf" >"$scratch/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$conf" >"$scratch/log/slurmd.out" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 1 300); do
  state=$(sinfo -h -N -o %t 2>/dev/null | head -1)
  [ "$state" = idle ] && break
  sleep 0.1
done
if [ "$state" != idle ]; then
  log "node not idle after 30 s (state '${state:-none}'); logs:"
  tail -n 20 "$scratch"/log/*.log "$scratch"/log/*.out >&2 2>/dev/null
  exit 1
fi
log "private SLURM up in $scratch (ports $ctld_port/$slurmd_port, node $host idle)"

"$@"
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
  log "command failed ($rc); last lines of the daemon logs:"
  tail -n 15 "$scratch/log/slurmctld.log" "$scratch/log/slurmd.log" >&2 2>/dev/null
fi
exit $rc
