#!/usr/bin/env bash
# A single-host Slurm cluster in one folder, for trying --executor slurm and for the
# tests (docs/cluster.md). Run as root; no systemd: every daemon is started here, by
# hand, and stopped by the pid recorded in DIR/pids.
#
#   scripts/slurm-local.sh start DIR [--nodes N]   munged, slurmctld and N slurmd "nodes"
#                                                  (n1..nN, all on 127.0.0.1); waits until
#                                                  every node is idle, then prints the
#                                                  lines to eval: export SLURM_CONF=...
#   scripts/slurm-local.sh stop DIR                cancels its jobs, stops every daemon it
#                                                  started and waits until they are gone
#   scripts/slurm-local.sh status DIR              each daemon, alive or not, and sinfo
#
# SLURM_LOCAL_TIMEOUT (seconds, default 60) bounds every wait. Several slurmd on one host
# need Slurm built with --enable-multiple-slurmd, as Debian's is (start checks it).
set -u
exec </dev/null # srun and friends read stdin; a closed fd 0 would swallow output

die() {
    echo "slurm-local.sh: $*" >&2
    exit 1
}

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

TIMEOUT=${SLURM_LOCAL_TIMEOUT:-60}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# freeport VAR: a TCP port no socket uses (listening, connected or closing) and not
# handed out yet (in PORTS), below the kernel's ephemeral range: a port in that range
# can be taken between this check and the daemon's bind by the local end of any
# outgoing connection (a slurmd once failed to start so, on 37264).
PORTS=""
freeport() {
    local p lo=20000 hi eph
    eph=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    hi=$((${eph:-32768} - 1))
    [ "$hi" -gt 40000 ] && hi=40000
    [ "$hi" -le "$lo" ] && { lo=10000; hi=19999; }
    for p in $(shuf -i "$lo-$hi" -n 200); do
        [[ " $PORTS " == *" $p "* ]] && continue
        ss -Htan "sport = :$p" | grep -q . && continue
        PORTS="$PORTS $p"
        printf -v "$1" %s "$p"
        return 0
    done
    die "no free TCP port found between $lo and $hi"
}

alive() { kill -0 "$1" 2>/dev/null; }

# waitpid PID SECONDS: 0 once PID is gone, 1 if it still runs after SECONDS
waitpid() {
    local end=$(($(now_ms) + $2 * 1000))
    while alive "$1"; do
        [ "$(now_ms)" -gt "$end" ] && return 1
        sleep 0.1
    done
    return 0
}

show_logs() {
    local f
    for f in "$D"/log/*; do
        [ -s "$f" ] || continue
        echo "== $f" >&2
        tail -n 15 "$f" >&2
    done
}

need_tools() {
    [ "$(id -u)" = 0 ] || die "run it as root: slurmd starts jobs as any user and munged must own its key"
    local t
    for t in munged mungekey munge slurmctld slurmd sinfo scontrol squeue scancel ss; do
        command -v "$t" >/dev/null ||
            die "$t is not installed; scripts/setup.sh --test installs slurmctld, slurmd, slurm-client, munge and iproute2"
    done
}

start() {
    local nodes=1
    while [ $# -gt 0 ]; do
        case $1 in
        --nodes) nodes=${2:-}; shift 2 || usage ;;
        --nodes=*) nodes=${1#--nodes=}; shift ;;
        *) die "unknown option $1 (start DIR [--nodes N])" ;;
        esac
    done
    [[ "$nodes" =~ ^[1-9][0-9]?$ ]] || die "--nodes $nodes: give a number of nodes from 1 to 99"
    need_tools
    if [ -s "$D/pids" ]; then
        local name pid
        while read -r name pid; do
            alive "$pid" && die "$D has a running cluster ($name is pid $pid); stop it first: $0 stop $D"
        done <"$D/pids"
    fi
    mkdir -p "$D/munge" "$D/state" "$D/log" || die "cannot create $D"
    D=$(cd "$D" && pwd)
    chmod 700 "$D/munge"
    : >"$D/pids"

    # munge: a private key and socket; as root it needs --force, -F keeps it in the foreground
    rm -f "$D/munge/munge.key"
    mungekey -c -b 1024 -k "$D/munge/munge.key" >/dev/null 2>&1 ||
        { dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none && chmod 400 "$D/munge/munge.key"; } ||
        die "cannot make a munge key in $D/munge"
    setsid munged -F -f --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" \
        --pid-file="$D/munge/munged.pid" --seed-file="$D/munge/munged.seed" \
        --log-file="$D/log/munged.log" >"$D/log/munged.out" 2>&1 &
    echo "munged $!" >>"$D/pids"
    local end=$(($(now_ms) + TIMEOUT * 1000))
    until [ -S "$D/munge/munge.socket" ]; do
        [ "$(now_ms)" -gt "$end" ] && { show_logs; stop_all; die "munged did not open its socket in ${TIMEOUT}s"; }
        sleep 0.05
    done
    munge -S "$D/munge/munge.socket" -n | unmunge -S "$D/munge/munge.socket" >/dev/null ||
        { show_logs; stop_all; die "munged does not answer on $D/munge/munge.socket"; }

    local cport n name port nodelines="" names="" cpus
    cpus=$(nproc)
    freeport cport
    for n in $(seq 1 "$nodes"); do
        name=n$n
        freeport port
        names="$names $name"
        nodelines+="NodeName=$name NodeAddr=127.0.0.1 NodeHostname=localhost Port=$port CPUs=$cpus RealMemory=1000 State=UNKNOWN"$'\n'
        mkdir -p "$D/spool/$name" "$D/tmp/$name"
    done
    cat >"$D/slurm.conf" <<EOF
# written by scripts/slurm-local.sh: a single-host cluster in $D
ClusterName=cdigits-local
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$cport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
# daemons, srun and slurmstepd bind 127.0.0.1 instead of every address
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/spool/%n/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS=$D/tmp/%n
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$D/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
# finished jobs stay visible to scontrol show job for 10 minutes (there is no slurmdbd)
MinJobAge=600
InactiveLimit=0
KillWait=2
# clients give up on a dead controller after this long (default 120 s)
SlurmctldTimeout=10
MessageTimeout=10
$nodelines
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF=$D/slurm.conf
    setsid slurmctld -D -f "$SLURM_CONF" >"$D/log/slurmctld.out" 2>&1 &
    echo "slurmctld $!" >>"$D/pids"
    for name in $names; do
        setsid slurmd -D -N "$name" -f "$SLURM_CONF" >"$D/log/slurmd-$name.out" 2>&1 &
        echo "slurmd-$name $!" >>"$D/pids"
    done

    local idle pid
    end=$(($(now_ms) + TIMEOUT * 1000))
    while :; do
        while read -r name pid; do
            alive "$pid" || {
                show_logs
                stop_all
                [ "$nodes" -gt 1 ] && grep -qi "multiple" "$D"/log/slurmd-*.out 2>/dev/null &&
                    die "$name exited: this Slurm runs one slurmd per host only (built without --enable-multiple-slurmd); use --nodes 1"
                die "$name (pid $pid) exited while starting; its log is above"
            }
        done <"$D/pids"
        idle=$(timeout 5 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | grep -c .)
        [ "$idle" -eq "$nodes" ] && break
        [ "$(now_ms)" -gt "$end" ] && { show_logs; stop_all; die "$idle of $nodes node(s) idle after ${TIMEOUT}s"; }
        sleep 0.1
    done
    echo "slurm-local.sh: $nodes node(s) idle in $D" >&2
    echo "export SLURM_CONF=$D/slurm.conf"
}

# Stops what DIR/pids lists: its jobs first, then slurmctld and the slurmd, munged last.
stop_all() {
    [ -s "$D/pids" ] || return 0
    local name pid ctld="" jobs p
    export SLURM_CONF=$D/slurm.conf
    while read -r name pid; do [ "$name" = slurmctld ] && ctld=$pid; done <"$D/pids"
    if [ -n "$ctld" ] && alive "$ctld" && [ -f "$SLURM_CONF" ]; then
        jobs=$(timeout 10 squeue -h -o %i 2>/dev/null)
        if [ -n "$jobs" ]; then
            # shellcheck disable=SC2086
            timeout 10 scancel $jobs 2>/dev/null
            local end=$(($(now_ms) + TIMEOUT * 1000))
            while [ -n "$(timeout 10 squeue -h -o %i 2>/dev/null)" ] && [ "$(now_ms)" -lt "$end" ]; do sleep 0.1; done
        fi
        timeout 10 scontrol shutdown >/dev/null 2>&1
    fi
    # the slurm daemons were told to exit; munged gets SIGTERM; SIGKILL after the timeout
    while read -r name pid; do
        alive "$pid" || continue
        if [ "$name" = munged ] || ! waitpid "$pid" 10; then kill -TERM "$pid" 2>/dev/null; fi
        waitpid "$pid" "$TIMEOUT" || { echo "slurm-local.sh: $name (pid $pid) ignored SIGTERM; SIGKILL" >&2; kill -KILL "$pid"; }
        waitpid "$pid" 10 || echo "slurm-local.sh: $name (pid $pid) is still there after SIGKILL" >&2
    done < <(grep -v '^munged ' "$D/pids"; grep '^munged ' "$D/pids")
    # a slurmstepd left by a step that failed outlives slurmd; ours hold a file in DIR
    for p in $(pgrep -x slurmstepd); do
        ls -l "/proc/$p/fd" 2>/dev/null | grep -q " $D/" && { echo "slurm-local.sh: stray slurmstepd $p, SIGKILL" >&2; kill -KILL "$p"; }
    done
    : >"$D/pids"
}

status() {
    [ -s "$D/pids" ] || { echo "no cluster runs in $D"; return 1; }
    local name pid rc=0
    while read -r name pid; do
        if alive "$pid"; then echo "$name: running (pid $pid)"; else echo "$name: not running (pid $pid)"; rc=1; fi
    done <"$D/pids"
    SLURM_CONF=$D/slurm.conf timeout 10 sinfo -N 2>&1
    return $rc
}

[ $# -ge 2 ] || usage
cmd=$1 D=$2
shift 2
case $cmd in
start) start "$@" ;;
stop)
    [ -d "$D" ] || die "$D is not a folder"
    D=$(cd "$D" && pwd)
    stop_all
    ;;
status)
    [ -d "$D" ] || die "$D is not a folder"
    D=$(cd "$D" && pwd)
    status
    ;;
*) usage ;;
esac
