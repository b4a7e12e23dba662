#!/usr/bin/env bash
# A single-node SLURM cluster on this host, from Debian's packages (munge, slurmctld,
# slurmd, slurm-client), for the SLURM tests and for trying profiles/slurm by hand.
#
#   scripts/slurm-cluster.sh up       # install if missing, start, wait for the node: idle
#   scripts/slurm-cluster.sh status   # daemons, node and queue; exit 1 when not up
#   scripts/slurm-cluster.sh down     # cancel every job, stop the daemons, remove the run dir
#   eval "$(scripts/slurm-cluster.sh env)"   # SLURM_CONF and PATH for sbatch, srun, snakemake
#
# Everything lives in one run directory ($COMMSCHED_SLURM_DIR, default
# /tmp/commsched-slurm): slurm.conf, munge key and socket, state, spool, logs and the pid of
# every daemon this script started; `down` stops exactly those pids. Nothing under /etc is
# written and no system service is started, so a site's own SLURM or munge is untouched.
# The configuration is cgroup-free (proctrack/linuxproc, task/none, no accounting): it
# runs in containers without a cgroup hierarchy. The node gets this host's CPUs and
# memory (`slurmd -C`) and one GRES gpu whose device file is /dev/null: a placeholder, so
# that `--gpus`/`--gres=gpu` requests are scheduled by SLURM on a host without a GPU (the
# job sees CUDA_VISIBLE_DEVICES=0 and no GPU).
# Partitions: cpu (default) and gpu, both on this node, as profiles/slurm/partitions.yaml
# describes them. Needs root (slurmd launches jobs; apt-get installs).
# The configuration is found through SLURM_CONF. Snakemake's SLURM jobstep drops every
# SLURM_* variable except the job's identity before its nested `srun`, so `env` also puts
# $RUN/bin first on PATH, where an `srun` sets SLURM_CONF and runs the real one (a site's
# /etc/slurm/slurm.conf needs neither).
set -euo pipefail

RUN=${COMMSCHED_SLURM_DIR:-/tmp/commsched-slurm}
PORT=${COMMSCHED_SLURM_PORT:-6817}          # slurmctld; slurmd listens on PORT + 1
WAIT_S=${COMMSCHED_SLURM_WAIT_S:-60}        # bound on every wait of this script
CONF=$RUN/slurm.conf
NODE=$(hostname -s)
PACKAGES=(munge slurmctld slurmd slurm-client)

die() { echo "slurm-cluster: $*" >&2; exit 2; }

# pid of daemon $1 if this run directory started it and it is still that program.
alive() {
  local pidfile=$RUN/$1.pid pid
  [ -f "$pidfile" ] || return 1
  pid=$(<"$pidfile")
  # pid reuse: the process must still be the program we started (its command line names RUN)
  local cmdline
  cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
  [[ $cmdline == *"$RUN"* ]] || return 1
  echo "$pid"
}

install_packages() {
  local missing=()
  for cmd in munged slurmctld slurmd sbatch; do
    command -v "$cmd" >/dev/null 2>&1 || { missing=("${PACKAGES[@]}"); break; }
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "needs root to install ${missing[*]}"
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install ${missing[*]} by hand"
  echo "slurm-cluster: installing ${missing[*]} (apt-get)" >&2
  apt-get update -qq
  # policy-rc.d (where present) keeps the packages' own services from starting
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

write_conf() {
  local node_line mem
  # `slurmd -C`: this host's CPUs, sockets, cores, threads and memory as slurmd sees them
  node_line=$(slurmd -C | head -1)
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node_line")
  # keep 10% (at least 512 MB) for the daemons and the OS
  mem=$(( mem - (mem / 10 > 512 ? mem / 10 : 512) ))
  node_line=$(sed -e "s/^NodeName=[^ ]*/NodeName=$NODE/" -e "s/RealMemory=[0-9]*/RealMemory=$mem/" \
    <<<"$node_line")
  # slurmd drops a GPU without a device file; /dev/null stands in for one
  echo "NodeName=$NODE Name=gpu File=/dev/null" >"$RUN/gres.conf"
  cat >"$CONF" <<EOF
# Written by scripts/slurm-cluster.sh: a single-node, cgroup-free cluster.
ClusterName=commsched
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$RUN/munge/munge.socket
StateSaveLocation=$RUN/ctld
SlurmdSpoolDir=$RUN/spool
SlurmctldPidFile=$RUN/ctld/slurmctld.pidfile
SlurmdPidFile=$RUN/spool/slurmd.pidfile
SlurmctldLogFile=$RUN/log/slurmctld.log
SlurmdLogFile=$RUN/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MailProg=/bin/true
# squeue answers for finished jobs this long (the Snakemake executor polls with squeue)
MinJobAge=600
KillWait=5
SlurmdTimeout=60
InactiveLimit=0
GresTypes=gpu
$node_line Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$NODE Default=NO MaxTime=INFINITE State=UP
EOF
}

# Start "$@" detached (own session, output to log/<name>.out), record its pid, and wait
# (bounded) until the child has exec'd the program: before that its command line is this
# script's, which alive() would take for a dead daemon (seen under load).
start() {
  local name=$1 pid t=0; shift
  setsid "$@" >"$RUN/log/$name.out" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$RUN/$name.pid"
  while [ -e "/proc/$pid" ] && ! alive "$name" >/dev/null && (( t++ < WAIT_S * 10 )); do
    sleep 0.1
  done
}

node_state() { sinfo -h -n "$NODE" -o %T 2>/dev/null | head -1; }

cmd_env() { echo "export SLURM_CONF=$CONF PATH=$RUN/bin:\$PATH"; }

cmd_up() {
  [ "$(id -u)" -eq 0 ] || die "needs root (slurmd launches jobs as their users)"
  if alive slurmctld >/dev/null && alive slurmd >/dev/null && alive munged >/dev/null; then
    export SLURM_CONF=$CONF
    [ "$(node_state)" = idle ] || [ "$(node_state)" = mixed ] || [ "$(node_state)" = allocated ] \
      || die "already started in $RUN but node $NODE is '$(node_state)'; run down first"
    cmd_env; return 0
  fi
  [ -e "$RUN" ] && cmd_down >/dev/null
  install_packages
  # any failure from here on: show the daemons' last log lines, stop what was started
  trap 'tail -n 5 "$RUN"/log/* >&2 2>/dev/null; cmd_down >/dev/null 2>&1' EXIT
  mkdir -p "$RUN"/{munge,ctld,spool,log}
  chmod 755 "$RUN" "$RUN/munge"
  head -c 1024 /dev/urandom >"$RUN/munge/munge.key"
  chmod 400 "$RUN/munge/munge.key"
  write_conf
  mkdir -p "$RUN/bin"
  printf '#!/bin/sh\nSLURM_CONF=%s exec %s "$@"\n' "$CONF" "$(command -v srun)" >"$RUN/bin/srun"
  chmod 755 "$RUN/bin/srun"
  export SLURM_CONF=$CONF
  start munged munged -F --force --key-file="$RUN/munge/munge.key" \
    --socket="$RUN/munge/munge.socket" --pid-file="$RUN/munge/munged.pidfile" \
    --log-file="$RUN/log/munged.log" --seed-file="$RUN/munge/munged.seed"
  local t=0
  until [ -S "$RUN/munge/munge.socket" ]; do
    alive munged >/dev/null || die "munged exited: $(tail -3 "$RUN/log/munged.out" "$RUN/log/munged.log" 2>/dev/null)"
    (( t++ < WAIT_S * 10 )) || die "munged socket not there after ${WAIT_S}s"
    sleep 0.1
  done
  start slurmctld slurmctld -D -i -f "$CONF"
  start slurmd slurmd -D -f "$CONF" -N "$NODE"
  t=0
  until [ "$(node_state)" = idle ]; do
    for d in slurmctld slurmd; do
      alive $d >/dev/null || die "$d exited"
    done
    (( t++ < WAIT_S * 2 )) || die "node $NODE is '$(node_state)', not idle, after ${WAIT_S}s"
    sleep 0.5
  done
  trap - EXIT
  cmd_env
}

cmd_status() {
  local ok=0 pid
  for d in munged slurmctld slurmd; do
    if pid=$(alive $d); then echo "$d: running (pid $pid)"; else echo "$d: not running"; ok=1; fi
  done
  if [ $ok -eq 0 ]; then
    export SLURM_CONF=$CONF
    echo "node $NODE: $(node_state)"
    squeue -h -o '%i %j %T %M' | sed 's/^/job /'
  fi
  return $ok
}

cmd_down() {
  local pid t
  if alive slurmctld >/dev/null; then
    export SLURM_CONF=$CONF
    # every job of this private cluster is ours: cancel them and wait for the queue to drain
    local jobs
    jobs=$(squeue -h -o %A 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      t=0
      while [ -n "$(squeue -h -o %A 2>/dev/null)" ] && (( t++ < WAIT_S * 2 )); do sleep 0.5; done
    fi
  fi
  for d in slurmd slurmctld munged; do
    pid=$(alive $d) || continue
    kill -TERM "$pid" 2>/dev/null || true
    t=0
    while [ -d "/proc/$pid" ] && (( t++ < WAIT_S * 10 )); do sleep 0.1; done
    [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$RUN"
  echo "slurm-cluster: down ($RUN removed)"
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) echo "usage: $0 up|down|status|env   (run dir: \$COMMSCHED_SLURM_DIR, default /tmp/commsched-slurm)" >&2; exit 2 ;;
esac
