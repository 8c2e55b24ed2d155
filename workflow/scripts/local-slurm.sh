#!/usr/bin/env bash
# A private one-node Slurm cluster (munged + slurmctld + slurmd) for running
# the workflow with the Snakemake Slurm executor on a single machine.
#
# Usage: local-slurm.sh start|stop|status|env
#
# All state lives under ${HPCVIRT_WORKDIR:-<project>/.hpcvirt}/slurm/:
#   slurm.conf, plugstack.conf   generated configuration
#   munge/                       munge key (generated, never committed), socket, pid
#   spool/ctld, spool/d          StateSaveLocation, SlurmdSpoolDir
#   run/                         pid files of slurmctld and slurmd
#   log/                         munged.log, slurmctld.log, slurmd.log
#
# Network: nothing listens beyond loopback.
#   - SlurmctldHost=localhost(127.0.0.1) with CommunicationParameters=
#     NoCtldInAddrAny: slurmctld binds 127.0.0.1:<base> instead of 0.0.0.0.
#   - NodeAddr=127.0.0.1 with NoInAddrAny: slurmd binds 127.0.0.1:<base+1>;
#     srun binds its ports (SrunPortRange=<base+16>-<base+63>) to the address
#     the host name resolves to, so `start` refuses to run unless the short
#     host name resolves to a loopback address (it does with the usual
#     "127.0.x.1 <hostname>" line in /etc/hosts).
#   - munged talks over a Unix socket only.
#   The port base is derived from the state directory path (20000-32159,
#   below the kernel's ephemeral range) or set with HPCVIRT_SLURM_PORT_BASE.
#
# Jobs started by the Snakemake Slurm executor lose SLURM_CONF (the executor
# removes all SLURM_* variables), so srun inside a job only finds
# /etc/slurm/slurm.conf.  `start` therefore installs the symlink
# /etc/slurm/slurm.conf -> <state>/slurm.conf, but only when that path does
# not exist or already is such a symlink; `stop` removes it again.
# HPCVIRT_SLURM_ETC_LINK=0 skips the symlink (srun inside executor jobs then
# needs another way to find the configuration).
#
# Job status: no accounting (no slurmdbd).  Completed jobs stay visible to
# squeue for MinJobAge=600 s, which is what the Snakemake profile's
# `slurm-status-command: squeue` relies on.
#
# Other environment variables:
#   HPCVIRT_SLURM_START_TIMEOUT  seconds to wait for the node to become idle (30)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROJECT_ROOT="$(cd "${SCRIPT_DIR}/../.." && pwd)"
WORKDIR="${HPCVIRT_WORKDIR:-${PROJECT_ROOT}/.hpcvirt}"
mkdir -p "${WORKDIR}"
WORKDIR="$(cd "${WORKDIR}" && pwd)"
D="${WORKDIR}/slurm"
CONF="${D}/slurm.conf"
MUNGE_DIR="${D}/munge"
MUNGE_KEY="${MUNGE_DIR}/munge.key"
MUNGE_SOCKET="${MUNGE_DIR}/munge.socket.2"
MUNGE_PID="${MUNGE_DIR}/munged.pid"
CTLD_PID="${D}/run/slurmctld.pid"
SLURMD_PID="${D}/run/slurmd.pid"
LOG_DIR="${D}/log"
ETC_CONF="/etc/slurm/slurm.conf"
ETC_LINK="${HPCVIRT_SLURM_ETC_LINK:-1}"
START_TIMEOUT="${HPCVIRT_SLURM_START_TIMEOUT:-30}"
NODE_NAME="$(hostname -s)"
PARTITION="local"

if [[ -n "${HPCVIRT_SLURM_PORT_BASE:-}" ]]; then
    PORT_BASE="${HPCVIRT_SLURM_PORT_BASE}"
else
    PORT_BASE=$((20000 + ($(printf '%s' "${D}" | cksum | cut -d' ' -f1) % 190) * 64))
fi
CTLD_PORT="${PORT_BASE}"
SLURMD_PORT=$((PORT_BASE + 1))
SRUN_PORTS="$((PORT_BASE + 16))-$((PORT_BASE + 63))"

# Clients started by this script use our configuration.
export SLURM_CONF="${CONF}"

log() { printf 'local-slurm: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || die "'$c' not found (Debian packages: slurm-wlm munge)"
    done
}

# pid from a pid file if that process is alive and runs the expected program
pid_of() {
    local pidfile="$1" prog="$2" pid
    [[ -s "${pidfile}" ]] || return 1
    pid="$(tr -dc '0-9' <"${pidfile}")"
    [[ -n "${pid}" && -d "/proc/${pid}" ]] || return 1
    [[ "$(cat "/proc/${pid}/comm" 2>/dev/null)" == "${prog}" ]] || return 1
    echo "${pid}"
}

munged_up() { pid_of "${MUNGE_PID}" munged >/dev/null; }
ctld_up() { pid_of "${CTLD_PID}" slurmctld >/dev/null; }
slurmd_up() { pid_of "${SLURMD_PID}" slurmd >/dev/null; }

node_state() {
    timeout 10 sinfo -h -N -n "${NODE_NAME}" -o '%t' 2>/dev/null | head -n1 || true
}

show_log_tail() {
    local name="$1" file="$2"
    log "${name} did not come up; last lines of ${file}:"
    if [[ -f "${file}" ]]; then
        tail -n 25 "${file}" | sed 's/^/    /' >&2
    else
        log "    (no log file)"
    fi
}

# fail_start DAEMON LOGFILE: report, stop what this start brought up, exit 1
fail_start() {
    show_log_tail "$1" "$2"
    log "stopping the daemons of this cluster again"
    do_stop >/dev/null 2>&1 || true
    exit 1
}

link_target_is_ours() {
    [[ -L "${ETC_CONF}" && "$(readlink "${ETC_CONF}")" == "${CONF}" ]]
}

check_etc_link() {
    [[ "${ETC_LINK}" == "1" ]] || return 0
    if [[ -e "${ETC_CONF}" || -L "${ETC_CONF}" ]] && ! link_target_is_ours; then
        if [[ -L "${ETC_CONF}" ]]; then
            die "${ETC_CONF} is a symlink to $(readlink "${ETC_CONF}"), not to ${CONF}.
  Another local cluster (other HPCVIRT_WORKDIR?) seems to be installed: stop it with its
  own 'local-slurm.sh stop', or remove the symlink, or set HPCVIRT_SLURM_ETC_LINK=0."
        fi
        die "${ETC_CONF} exists and is not managed by this script; refusing to replace it.
  Jobs submitted by the Snakemake Slurm executor only find ${ETC_CONF} (SLURM_CONF is
  removed inside jobs). Use the site's Slurm instead, or move that file away, or set
  HPCVIRT_SLURM_ETC_LINK=0 (srun inside executor jobs will then not find this cluster)."
    fi
}

install_etc_link() {
    [[ "${ETC_LINK}" == "1" ]] || return 0
    check_etc_link
    if ! link_target_is_ours; then
        mkdir -p "$(dirname "${ETC_CONF}")"
        ln -s "${CONF}" "${ETC_CONF}" || die "cannot create symlink ${ETC_CONF}"
        log "installed symlink ${ETC_CONF} -> ${CONF}"
    fi
}

remove_etc_link() {
    if link_target_is_ours; then
        rm -f "${ETC_CONF}"
        log "removed symlink ${ETC_CONF}"
    fi
}

check_loopback_hostname() {
    local addr
    addr="$(getent ahostsv4 "${NODE_NAME}" 2>/dev/null | awk 'NR==1{print $1}')"
    if [[ "${addr}" != 127.* ]]; then
        die "host name '${NODE_NAME}' resolves to '${addr:-nothing}', not to a loopback address.
  srun/slurmd bind to that address; add '127.0.1.1 ${NODE_NAME}' to /etc/hosts."
    fi
}

write_conf() {
    local hw cpus mem defmem
    hw="$(slurmd -C | head -n1)"
    [[ "${hw}" == NodeName=* ]] || die "unexpected 'slurmd -C' output: ${hw}"
    # keep the hardware description, replace the name
    hw="${hw#NodeName=* }"
    cpus="$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"${hw}")"
    mem="$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"${hw}")"
    defmem=$((mem / cpus))
    mkdir -p "${D}"
    : >"${D}/plugstack.conf"
    cat >"${CONF}.tmp" <<EOF
# Generated by workflow/scripts/local-slurm.sh -- do not edit, regenerated on start.
ClusterName=hpcvirt
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${CTLD_PORT}
SlurmdPort=${SLURMD_PORT}
SrunPortRange=${SRUN_PORTS}
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${MUNGE_SOCKET}
StateSaveLocation=${D}/spool/ctld
SlurmdSpoolDir=${D}/spool/d
SlurmctldPidFile=${CTLD_PID}
SlurmdPidFile=${SLURMD_PID}
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${LOG_DIR}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=${D}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=${defmem}
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
SwitchType=switch/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# squeue-based job status needs finished jobs to stay visible for a while
MinJobAge=600
KillWait=5
InactiveLimit=0
SchedulerType=sched/backfill
NodeName=${NODE_NAME} NodeAddr=127.0.0.1 ${hw} State=UNKNOWN
PartitionName=${PARTITION} Nodes=${NODE_NAME} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    mv "${CONF}.tmp" "${CONF}"
}

ensure_munge_key() {
    mkdir -p "${MUNGE_DIR}"
    chmod 700 "${MUNGE_DIR}"
    if [[ ! -s "${MUNGE_KEY}" ]]; then
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile="${MUNGE_KEY}" >/dev/null
        else
            dd if=/dev/urandom of="${MUNGE_KEY}" bs=1 count=1024 status=none
        fi
        log "generated munge key ${MUNGE_KEY}"
    fi
    chmod 600 "${MUNGE_KEY}"
}

start_munged() {
    munged_up && return 0
    rm -f "${MUNGE_SOCKET}" "${MUNGE_SOCKET}.lock" "${MUNGE_PID}"
    # --force: the state directory may sit below group-writable directories
    munged --force \
        --socket="${MUNGE_SOCKET}" \
        --key-file="${MUNGE_KEY}" \
        --pid-file="${MUNGE_PID}" \
        --log-file="${LOG_DIR}/munged.log" \
        --seed-file="${MUNGE_DIR}/munged.seed" \
        >>"${LOG_DIR}/munged.log" 2>&1 || fail_start munged "${LOG_DIR}/munged.log"
    local i
    for ((i = 0; i < 50; i++)); do
        if munged_up && munge -n -S "${MUNGE_SOCKET}" 2>/dev/null | unmunge -S "${MUNGE_SOCKET}" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.1
    done
    fail_start munged "${LOG_DIR}/munged.log"
}

start_slurmctld() {
    ctld_up && return 0
    slurmctld -f "${CONF}" >>"${LOG_DIR}/slurmctld.log" 2>&1 || fail_start slurmctld "${LOG_DIR}/slurmctld.log"
    local i
    for ((i = 0; i < START_TIMEOUT * 5; i++)); do
        if ctld_up && timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; then
            return 0
        fi
        # daemonized slurmctld exits shortly after a fatal error (e.g. port in use)
        if ((i > 10)) && ! ctld_up; then
            break
        fi
        sleep 0.2
    done
    fail_start slurmctld "${LOG_DIR}/slurmctld.log"
}

start_slurmd() {
    slurmd_up && return 0
    slurmd -f "${CONF}" -N "${NODE_NAME}" >>"${LOG_DIR}/slurmd.log" 2>&1 || fail_start slurmd "${LOG_DIR}/slurmd.log"
}

wait_node_idle() {
    local i st=""
    for ((i = 0; i < START_TIMEOUT * 5; i++)); do
        st="$(node_state)"
        case "${st}" in
        idle | mix | alloc | mixed | allocated) return 0 ;;
        esac
        if ((i > 10)) && ! slurmd_up; then
            break
        fi
        sleep 0.2
    done
    log "node ${NODE_NAME} not idle after ${START_TIMEOUT} s (state: '${st:-unknown}')"
    fail_start slurmd "${LOG_DIR}/slurmd.log"
}

do_start() {
    need munged munge unmunge slurmctld slurmd sinfo scontrol squeue scancel
    check_loopback_hostname
    check_etc_link
    mkdir -p "${D}/run" "${D}/spool/ctld" "${D}/spool/d" "${LOG_DIR}"
    if munged_up && ctld_up && slurmd_up && [[ -f "${CONF}" ]]; then
        case "$(node_state)" in
        idle | mix | alloc | mixed | allocated)
            install_etc_link
            log "already running (node ${NODE_NAME}, SLURM_CONF=${CONF})"
            return 0
            ;;
        esac
    fi
    # (re)write the configuration only while no Slurm daemon of ours runs
    if ! ctld_up && ! slurmd_up; then
        write_conf
    fi
    ensure_munge_key
    start_munged
    start_slurmctld
    start_slurmd
    wait_node_idle
    install_etc_link
    log "up: node ${NODE_NAME} idle in partition '${PARTITION}', slurmctld 127.0.0.1:${CTLD_PORT}, slurmd 127.0.0.1:${SLURMD_PORT}"
    log "use: eval \"\$(${BASH_SOURCE[0]} env)\""
}

# stop_pid PIDFILE PROG: SIGTERM, wait up to 10 s, then SIGKILL
stop_pid() {
    local pidfile="$1" prog="$2" pid i
    pid="$(pid_of "${pidfile}" "${prog}")" || { rm -f "${pidfile}"; return 0; }
    kill -TERM "${pid}" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        [[ -d "/proc/${pid}" ]] || break
        sleep 0.1
    done
    if [[ -d "/proc/${pid}" ]]; then
        log "${prog} (pid ${pid}) ignored SIGTERM; sending SIGKILL"
        kill -KILL "${pid}" 2>/dev/null || true
    fi
    rm -f "${pidfile}"
    log "stopped ${prog} (pid ${pid})"
}

# slurmstepd processes of this cluster: slurmd starts them with its log file
# open (and the log directory as cwd); the environment is not inherited.
our_stepds() {
    local p f
    for p in /proc/[0-9]*; do
        [[ "$(cat "${p}/comm" 2>/dev/null)" == slurmstepd ]] || continue
        for f in "${p}"/fd/*; do
            if [[ "$(readlink "${f}" 2>/dev/null)" == "${LOG_DIR}/slurmd.log" ]]; then
                echo "${p#/proc/}"
                break
            fi
        done
    done
}

# all descendants of the given pids (and the pids themselves)
with_descendants() {
    local -a todo=("$@") out=()
    local p c
    while ((${#todo[@]})); do
        p="${todo[0]}"
        todo=("${todo[@]:1}")
        out+=("${p}")
        for c in $(ps -o pid= --ppid "${p}" 2>/dev/null); do
            todo+=("${c}")
        done
    done
    echo "${out[@]}"
}

do_stop() {
    local i
    if ctld_up; then
        local -a jobs
        mapfile -t jobs < <(timeout 10 squeue -h -t PD,R,S,CG -o %i 2>/dev/null || true)
        if ((${#jobs[@]})); then
            log "cancelling remaining jobs: ${jobs[*]}"
            timeout 10 scancel "${jobs[@]}" 2>/dev/null || true
            for ((i = 0; i < 100; i++)); do
                [[ -z "$(timeout 10 squeue -h -t PD,R,S,CG -o %i 2>/dev/null)" ]] && break
                sleep 0.2
            done
        fi
    fi
    stop_pid "${SLURMD_PID}" slurmd
    stop_pid "${CTLD_PID}" slurmctld
    # leftover job processes: slurmstepd of this cluster and everything below it
    local -a stepds leftovers
    mapfile -t stepds < <(our_stepds)
    if ((${#stepds[@]})); then
        read -r -a leftovers <<<"$(with_descendants "${stepds[@]}")"
        log "killing leftover job processes: ${leftovers[*]}"
        kill -TERM "${leftovers[@]}" 2>/dev/null || true
        sleep 1
        kill -KILL "${leftovers[@]}" 2>/dev/null || true
    fi
    stop_pid "${MUNGE_PID}" munged
    remove_etc_link
    return 0
}

do_status() {
    local rc=0 pid
    printf 'state directory: %s\n' "${D}"
    printf 'SLURM_CONF:      %s\n' "${CONF}"
    if pid="$(pid_of "${MUNGE_PID}" munged)"; then
        printf 'munged:    running (pid %s, socket %s)\n' "${pid}" "${MUNGE_SOCKET}"
    else
        printf 'munged:    stopped\n'; rc=3
    fi
    if pid="$(pid_of "${CTLD_PID}" slurmctld)"; then
        printf 'slurmctld: running (pid %s, 127.0.0.1:%s)\n' "${pid}" "${CTLD_PORT}"
    else
        printf 'slurmctld: stopped\n'; rc=3
    fi
    if pid="$(pid_of "${SLURMD_PID}" slurmd)"; then
        printf 'slurmd:    running (pid %s, 127.0.0.1:%s, node %s)\n' "${pid}" "${SLURMD_PORT}" "${NODE_NAME}"
    else
        printf 'slurmd:    stopped\n'; rc=3
    fi
    if link_target_is_ours; then
        printf '%s: symlink to this cluster\n' "${ETC_CONF}"
    elif [[ -e "${ETC_CONF}" || -L "${ETC_CONF}" ]]; then
        printf '%s: exists, not ours\n' "${ETC_CONF}"
    else
        printf '%s: absent\n' "${ETC_CONF}"
    fi
    if ctld_up; then
        printf 'node state: %s\n' "$(node_state)"
        timeout 10 squeue -h -o '  job %i %j %T' 2>/dev/null || true
    fi
    return "${rc}"
}

do_env() {
    printf 'export SLURM_CONF=%q\n' "${CONF}"
}

case "${1:-}" in
start) do_start ;;
stop) do_stop ;;
status) do_status ;;
env) do_env ;;
*)
    echo "usage: $(basename "$0") start|stop|status|env" >&2
    exit 2
    ;;
esac
