# A real one-node Slurm for tests, started and stopped by the test that sources this file:
#   . tests/slurm/local_slurm.sh; slurm_start DIR || exit 77; ...; slurm_stop DIR
# slurm_start writes DIR/slurm.conf (this host as controller and only node, every state, spool,
# log and pid file under DIR), starts munged if it is not running, then slurmctld and slurmd,
# exports SLURM_CONF and waits for the node to be idle. It needs root and Debian's slurm-wlm and
# munge (scripts/setup.sh --slurm installs them); without them it prints why and returns 1.
# slurm_stop stops what slurm_start started, by its pid files.

slurm_start() {
  local dir=$1
  [ "$(id -u)" -eq 0 ] || { echo "a local Slurm needs root (slurmd runs jobs as root here)"; return 1; }
  for tool in slurmctld slurmd sbatch munged; do
    command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] ||
      { echo "$tool is not installed (scripts/setup.sh --slurm installs Slurm and munge)"; return 1; }
  done
  mkdir -p "$dir/state" "$dir/spool" "$dir/log"
  chmod 755 "$dir"
  # munge: one key for the host, made once; the daemon runs as the munge user.
  if [ ! -f /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    su -s /bin/sh munge -c /usr/sbin/munged || { echo "munged did not start"; return 1; }
    echo started >"$dir/munged.started"
  fi
  local host cpus memory
  host=$(hostname -s)
  cpus=$(nproc)
  memory=$(( $(free -m | awk '/^Mem:/ {print $2}') * 9 / 10 ))
  cat >"$dir/slurm.conf" <<CONF
ClusterName=lenet5-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(( 20000 + RANDOM % 20000 ))
SlurmdPort=$(( 40000 + RANDOM % 20000 ))
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
NodeName=$host CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$dir/slurm.conf
  /usr/sbin/slurmctld -f "$SLURM_CONF" || { echo "slurmctld did not start"; cat "$dir/log/slurmctld.log"; return 1; }
  /usr/sbin/slurmd -f "$SLURM_CONF" || { echo "slurmd did not start"; cat "$dir/log/slurmd.log"; return 1; }
  for _ in $(seq 100); do
    sinfo -h -o %T 2>/dev/null | grep -q idle && return 0
    sleep 0.2
  done
  echo "the Slurm node did not become idle within 20 s:"; sinfo; tail -5 "$dir/log/"*.log
  return 1
}

slurm_stop() {
  local dir=$1 pid
  for daemon in slurmd slurmctld; do
    [ -f "$dir/$daemon.pid" ] && pid=$(cat "$dir/$daemon.pid") && kill "$pid" 2>/dev/null
  done
  for daemon in slurmd slurmctld; do
    [ -f "$dir/$daemon.pid" ] || continue
    pid=$(cat "$dir/$daemon.pid")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  if [ -f "$dir/munged.started" ]; then
    pkill -u munge -x munged 2>/dev/null || true
  fi
}
