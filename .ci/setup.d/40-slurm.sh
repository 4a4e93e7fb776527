#!/usr/bin/env bash
# A one-node Slurm cluster on this machine for the sweep tests (tests/test_sweep_slurm.py):
# munge, slurmctld and slurmd from Debian's slurm-wlm, the controller and the node on 127.0.0.1,
# one default partition "debug". Idempotent (a running cluster is left alone) and quiet; fails
# loudly. RGYM_SLURM_CONF overrides where the configuration goes (default /etc/slurm/slurm.conf);
# an existing slurm.conf that this script did not write is never replaced.
set -euo pipefail
conf="${RGYM_SLURM_CONF:-/etc/slurm/slurm.conf}"
marker="# rgym one-node test cluster (.ci/setup.d/40-slurm.sh)"

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

# munge: a key, then the daemon as user munge
if [ ! -s /etc/munge/munge.key ]; then
    install -d -o munge -g munge -m 700 /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
fi
install -d -o munge -g munge -m 755 /run/munge
install -d -o munge -g munge -m 700 /var/lib/munge /var/log/munge
if ! munge -n >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 1 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
    munge -n >/dev/null 2>&1 || { echo "40-slurm.sh: munged did not start" >&2; exit 1; }
fi

host="$(hostname -s)"
cpus="$(nproc)"
mem_mb="$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)"
if [ ! -e "$conf" ] || head -n 1 "$conf" | grep -qF "$marker"; then
    install -d "$(dirname "$conf")" /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
    cat > "$conf.tmp" <<CONF
$marker
ClusterName=rgym
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=300
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
    if ! cmp -s "$conf.tmp" "$conf" 2>/dev/null; then
        mv "$conf.tmp" "$conf"
        changed=1
    else
        rm -f "$conf.tmp"
    fi
fi

running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if [ "${changed:-0}" = 1 ] && running /run/slurmctld.pid; then
    scontrol reconfigure >/dev/null 2>&1 || true
fi
running /run/slurmctld.pid || slurmctld -f "$conf"
running /run/slurmd.pid || slurmd -f "$conf"

for _ in $(seq 1 100); do
    state="$(sinfo -h -N -o '%t' 2>/dev/null | head -n 1 || true)"
    case "$state" in
        idle|mix|alloc) exit 0 ;;
        down*|drain*) scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 0.2
done
echo "40-slurm.sh: the Slurm node did not become ready (sinfo: ${state:-no answer}); see /var/log/slurm/" >&2
exit 1
