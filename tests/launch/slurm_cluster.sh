#!/usr/bin/env bash
# A private single-node Slurm on localhost for the srun tests (CTest fixture "slurm", see
# tests/CMakeLists.txt):
#   tests/launch/slurm_cluster.sh start DIR   writes DIR/slurm.conf, starts slurmctld and slurmd
#                                             with it, waits until the node is idle
#   tests/launch/slurm_cluster.sh stop DIR    stops both and removes DIR
# Clients use it with SLURM_CONF=DIR/slurm.conf; nothing under /etc is touched. It needs root
# (slurmd launches the tasks) and Debian's slurmctld, slurmd and slurm-client (tools/setup.sh);
# without them `start` says why and writes no slurm.conf, and the srun tests skip, saying so.
# Auth is auth/none (Slurm 22.05 has it), so no munge daemon is needed.
set -euo pipefail

cmd=${1:?usage: slurm_cluster.sh start|stop DIR}
dir=${2:?usage: slurm_cluster.sh start|stop DIR}
node=$(hostname -s)

skip() {
  echo "slurm_cluster: not started: $*"
  exit 0
}

stop_daemons() {
  for d in slurmd slurmctld; do
    if [ -s "$dir/$d.pid" ]; then kill "$(cat "$dir/$d.pid")" 2>/dev/null || true; fi
  done
  for _ in $(seq 50); do
    alive=0
    for d in slurmd slurmctld; do
      p=$(cat "$dir/$d.pid" 2>/dev/null || true)
      # A zombie (reaped late by PID 1 in containers) counts as stopped.
      if [ -n "$p" ] && [ -r "/proc/$p/stat" ] && ! grep -q '^[0-9]* (.*) Z ' "/proc/$p/stat"; then
        alive=1
      fi
    done
    [ "$alive" = 0 ] && return 0
    sleep 0.1  # why: the poll of a wait with a bound
  done
  for d in slurmd slurmctld; do
    if [ -s "$dir/$d.pid" ]; then kill -9 "$(cat "$dir/$d.pid")" 2>/dev/null || true; fi
  done
}

if [ "$cmd" = stop ]; then
  [ -d "$dir" ] || exit 0
  stop_daemons
  rm -rf "$dir"
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: slurm_cluster.sh start|stop DIR" >&2; exit 2; }

[ "$(id -u)" = 0 ] || skip "slurmd must run as root to launch tasks"
for tool in slurmctld slurmd srun sinfo; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (tools/setup.sh installs Slurm)"
done
ls /usr/lib/*/slurm-wlm/auth_none.so >/dev/null 2>&1 || skip "this Slurm has no auth/none plugin"

# A port below the kernel's ephemeral range (so no connection of another test takes it meanwhile)
# that nothing listens on now, from $1 up. slurmd forks before it binds: a busy port would leave
# the node 'unknown' instead of failing here.
unused_port() {
  local low
  low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  for ((port = $1; port < low; port++)); do
    if python3 -c 'import socket,sys; socket.socket().bind(("", int(sys.argv[1])))' "$port" \
      2>/dev/null; then
      echo "$port"
      return
    fi
  done
  echo "slurm_cluster: no free port in [$1, $low)" >&2
  exit 1
}
ctld_port=$(unused_port $((20000 + $$ % 5000)))
slurmd_port=$(unused_port $((ctld_port + 1)))

rm -rf "$dir"
mkdir -p "$dir/state" "$dir/spool" "$dir/log"
conf="$dir/slurm.conf.new"
cat >"$conf" <<CONF
# A single-node cluster for cprr's srun tests; written by tests/launch/slurm_cluster.sh.
ClusterName=cprrtest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
# More CPUs than the machine has, so worlds of 4 fit on 2 cores: slurmd takes the declared count.
SlurmdParameters=config_overrides
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
NodeName=$node NodeAddr=127.0.0.1 CPUs=64 State=UNKNOWN
PartitionName=cprrtest Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -i -f "$conf" || { tail -n 30 "$dir/log/slurmctld.log"; exit 1; }
slurmd -f "$conf" -N "$node" || { tail -n 30 "$dir/log/slurmd.log"; stop_daemons; exit 1; }
cp "$conf" "$SLURM_CONF.tmp"
state=""
for _ in $(seq 300); do
  state=$(SLURM_CONF="$conf" sinfo -h -n "$node" -o %T 2>/dev/null | head -n1 || true)
  case "$state" in idle | mixed | allocated) break ;; esac
  sleep 0.2  # why: the poll of a wait with a bound
done
case "$state" in
  idle | mixed | allocated) ;;
  *)
    echo "slurm_cluster: node $node is '$state', not idle"
    tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" || true
    stop_daemons
    exit 1
    ;;
esac
# Only a cluster that answers gets a slurm.conf where the tests look for it.
mv "$SLURM_CONF.tmp" "$SLURM_CONF"
echo "slurm_cluster: node $node idle; SLURM_CONF=$SLURM_CONF"
