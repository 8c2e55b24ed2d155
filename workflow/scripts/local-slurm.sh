#!/usr/bin/env bash
# A private Slurm cluster (munged + slurmctld + slurmd) for running the
# workflow with the Snakemake Slurm executor on a single machine: one node
# (the default), or two to four nodes, each in its own network namespace.
#
# Usage: local-slurm.sh start [--nodes N] [--cpus-per-node C] [--accounting]
#        local-slurm.sh stop|status|env
#        local-slurm.sh exec CMD [ARG...]      (multi-node mode: run CMD on the
#                                               controller host, e.g. srun)
#
# The one-node mode is described first, the multi-node mode ("Several nodes")
# below it.
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
# Job status: no accounting (no slurmdbd) unless started with --accounting
# (below).  Completed jobs stay visible to squeue for MinJobAge=600 s, which
# is what the Snakemake profile's `slurm-status-command: squeue` relies on.
#
# Several nodes (start --nodes N, 2 <= N <= 4): every node is a network
# namespace hvslurm-n<i> whose eth0 (198.18.4.<i>/24) is one end of a veth
# pair; the other end (hvslurm-v<i>) is a port of the Linux bridge hvslurmbr in
# the root namespace, which carries 198.18.4.254/24 (the controller host
# hvslurm-ctl).  198.18.4.0/24 lies in the benchmarking range and is not used by
# any other testbed (bridge 198.18.0, vm 198.18.1, bridge-gbe 198.18.2,
# bridge-10g 198.18.3); there is no default route in the nodes and no
# forwarding, so traffic stays on the bridge.  Only one multi-node cluster can
# exist per machine (the names are fixed); the bridge's alias names the state
# directory that owns it.
#   - Each slurmd runs as `slurmd -N hvslurm-n<i>`, entered with
#     `nsenter --net=/run/netns/hvslurm-n<i>` (not `ip netns exec`, which
#     remounts /sys), inside its own UTS and mount namespace: the host name is
#     hvslurm-n<i>, and <state>/hosts is bind-mounted on /etc/hosts so that the
#     node names resolve to the bridge addresses (srun and slurmstepd bind to
#     the address their host name resolves to).  The root namespace's
#     /etc/hosts and host name are not touched.
#   - slurmctld runs in the root network namespace, in a UTS/mount namespace of
#     its own as host hvslurm-ctl, and binds 198.18.4.254 only
#     (NoCtldInAddrAny); each slurmd binds its node's address (NoInAddrAny).
#   - munged stays in the root namespace (Unix socket; the nodes share the
#     file system).
#   - Per-node spool, pid and log files: spool/<node>, run/slurmd-<node>.pid,
#     log/slurmd-<node>.log (%n in slurm.conf).
#   - ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, no cgroups.
#   - CPUs: each node has --cpus-per-node CPUs (default 1), at most the
#     machine's CPU count.  With the default the nodes together have exactly
#     the machine's CPUs (2 here); a larger value oversubscribes the machine
#     (each node's CPUs are then the same physical cores) and `start` says so.
#     Memory: the machine's memory divided among the nodes.
#   - srun must run where its host name resolves to a cluster address: inside
#     a batch job (it then runs on a node), or with `local-slurm.sh exec srun
#     ...` (the controller host's UTS/mount namespace).  A plain srun in the
#     root namespace binds to 127.0.0.1, which the nodes cannot reach.
#   - `stop` also kills every process left in the node namespaces and deletes
#     the namespaces (which removes the veth pairs) and the bridge.
#
# Accounting (start --nodes N --accounting, N >= 2): job accounting like a
# site's, so that sacct works (the Snakemake Slurm executor's default job
# status command).  MariaDB and slurmdbd run from the state directory:
#   - mariadbd (Debian mariadb-server) with its own data directory db/
#     (created by mariadb-install-db on first start, kept like spool/ctld),
#     --skip-networking: it listens on no TCP port at all, only on its Unix
#     socket run/mysqld.sock; log/mysqld.log.  The system's /var/lib/mysql and
#     any MariaDB service of the machine are not used.
#   - slurmdbd in a network namespace of its own, hvslurm-db (198.18.4.253 on
#     the bridge, host name hvslurm-db), so its port (port base + 2) is
#     reachable from the bridge only; it reaches the database through the Unix
#     socket as the database's root user (socket authentication: no password
#     exists or is stored).  slurmdbd.conf (mode 600) is generated beside
#     slurm.conf; log/slurmdbd.log, run/slurmdbd.pid.
#   - slurm.conf then has AccountingStorageType=accounting_storage/slurmdbd;
#     the cluster is registered in the database before slurmctld starts.
#   `stop` stops slurmctld first (it hands its last records to slurmdbd), then
#   slurmdbd and mariadbd, and deletes hvslurm-db with the other namespaces.
#
# Other environment variables:
#   HPCVIRT_SLURM_START_TIMEOUT  seconds to wait for the nodes to become idle (30)
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

# several nodes (see the header); fixed names: one such cluster per machine
MAX_NODES=4
NET_PREFIX="198.18.4"
NET_LEN=24
CTL_ADDR="${NET_PREFIX}.254"
CTL_HOST="hvslurm-ctl"
BRIDGE="hvslurmbr"
NODES_FILE="${D}/nodes"
HOSTS_FILE="${D}/hosts"
# accounting (start --accounting, several nodes only)
ACCT_FILE="${D}/accounting"          # present while the cluster was started with accounting
DBD_CONF="${D}/slurmdbd.conf"        # slurmdbd reads slurmdbd.conf beside SLURM_CONF
DBD_PID="${D}/run/slurmdbd.pid"
DBD_PORT=$((PORT_BASE + 2))
DB_NS="hvslurm-db"                   # netns and host name of slurmdbd
DB_VETH="hvslurm-vdb"
DB_ADDR="${NET_PREFIX}.253"
DB_DIR="${D}/db"                     # MariaDB's data directory
MYSQL_PID="${D}/run/mysqld.pid"
MYSQL_SOCKET="${D}/run/mysqld.sock"
# the InnoDB settings Slurm's accounting documentation recommends (slurmdbd logs an error otherwise);
# the buffer pool is reserved, not used: a small database touches little of it
MYSQL_INNODB=(--innodb-buffer-pool-size=1024M --innodb-log-file-size=64M --innodb-lock-wait-timeout=900)
mn_node() { echo "hvslurm-n$1"; }   # Slurm node name = host name = netns name
mn_veth() { echo "hvslurm-v$1"; }   # root-namespace end of node $1's veth pair
mn_addr() { echo "${NET_PREFIX}.$1"; }
mn_pidfile() { echo "${D}/run/slurmd-$(mn_node "$1").pid"; }
mn_log() { echo "${LOG_DIR}/slurmd-$(mn_node "$1").log"; }

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

# true while process $1 runs: it exists and is not a zombie (a daemon's parent
# is init, which may reap it only a while after it exited)
alive() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    [[ "${stat:0:1}" != Z ]]
}

# pid from a pid file if that process is alive and runs the expected program
pid_of() {
    local pidfile="$1" prog="$2" pid
    [[ -f "${pidfile}" && -s "${pidfile}" ]] || return 1
    pid="$(tr -dc '0-9' <"${pidfile}")"
    [[ -n "${pid}" ]] && alive "${pid}" || return 1
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
    if [[ "$(cluster_nodes)" -ge 2 ]] && { ctld_up || mn_any_slurmd_up; }; then
        die "a cluster with $(cluster_nodes) nodes is running from ${D}; stop it first"
    fi
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
        rm -f "${NODES_FILE}" "${HOSTS_FILE}"
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

# ------------------------------------------------------------ several nodes
# number of nodes of the cluster in this state directory (1 if none recorded)
cluster_nodes() {
    local n=1
    [[ -s "${NODES_FILE}" ]] && n="$(tr -dc '0-9' <"${NODES_FILE}")"
    echo "${n:-1}"
}

bridge_exists() { [[ -e "/sys/class/net/${BRIDGE}" ]]; }
bridge_owner() { cat "/sys/class/net/${BRIDGE}/ifalias" 2>/dev/null || true; }
bridge_is_ours() { bridge_exists && [[ "$(bridge_owner)" == "${D}" ]]; }
netns_exists() { [[ -e "/run/netns/$1" ]]; }

# run "$@" in a new UTS + mount namespace as host $1, with our hosts file on
# /etc/hosts (the caller chooses the network namespace)
as_host() {
    local host="$1"
    shift
    unshare --uts --mount --propagation private -- /bin/sh -c \
        'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"' \
        sh "${HOSTS_FILE}" "${host}" "$@"
}

# run "$@" on node $1: its network namespace, its host name
on_node() {
    local i="$1"
    shift
    nsenter --net="/run/netns/$(mn_node "${i}")" -- \
        "$(command -v unshare)" --uts --mount --propagation private -- /bin/sh -c \
        'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"' \
        sh "${HOSTS_FILE}" "$(mn_node "${i}")" "$@"
}

mn_slurmd_up() { pid_of "$(mn_pidfile "$1")" slurmd >/dev/null; }

mn_all_slurmd_up() {
    local i
    for ((i = 1; i <= $1; i++)); do
        mn_slurmd_up "${i}" || return 1
    done
}

mn_any_slurmd_up() {
    local f
    for f in "${D}"/run/slurmd-*.pid; do
        [[ -e "${f}" ]] || continue
        pid_of "${f}" slurmd >/dev/null && return 0
    done
    return 1
}

# refuse to touch network objects of another cluster
mn_check_free() {
    local i ns route owner
    if bridge_exists && ! bridge_is_ours; then
        owner="$(bridge_owner)"
        die "bridge ${BRIDGE} exists and belongs to ${owner:-no cluster of this script}.
  Only one multi-node cluster can run per machine: stop the other one with
  HPCVIRT_WORKDIR=$(dirname "${owner:-/?/slurm}") $(basename "$0") stop (or delete the bridge)."
    fi
    if ! bridge_exists; then
        for ns in $(for ((i = 1; i <= MAX_NODES; i++)); do mn_node "${i}"; done) "${DB_NS}"; do
            netns_exists "${ns}" &&
                die "network namespace ${ns} exists but bridge ${BRIDGE} does not (left over?);
  remove it with 'ip netns delete ${ns}' after checking that nothing uses it."
        done
        route="$(ip -4 route show "${NET_PREFIX}.0/${NET_LEN}" 2>/dev/null || true)"
        route+="$(ip -4 -o addr show to "${NET_PREFIX}.0/${NET_LEN}" 2>/dev/null || true)"
        [[ -z "${route}" ]] ||
            die "${NET_PREFIX}.0/${NET_LEN} is already in use in this network namespace:
  ${route}"
    fi
    return 0
}

write_hosts() {
    local n="$1" i
    {
        echo "# Generated by workflow/scripts/local-slurm.sh: /etc/hosts of the cluster's hosts"
        echo "127.0.0.1 localhost"
        echo "${CTL_ADDR} ${CTL_HOST}"
        for ((i = 1; i <= n; i++)); do
            echo "$(mn_addr "${i}") $(mn_node "${i}")"
        done
        echo "${DB_ADDR} ${DB_NS}"
    } >"${HOSTS_FILE}.tmp"
    mv "${HOSTS_FILE}.tmp" "${HOSTS_FILE}"
}

# the bridge in the root namespace, one namespace + veth pair per node (idempotent)
# mn_net_up N [ACCOUNTING]: with ACCOUNTING = 1 also slurmdbd's namespace.
# Called as `mn_net_up ... || fail_start`, where set -e does not apply: each
# step stops at its first failure itself.
mn_net_up() {
    local n="$1" i
    if ! bridge_exists; then
        ip link add "${BRIDGE}" type bridge &&
            ip link set dev "${BRIDGE}" alias "${D}" &&
            ip addr add "${CTL_ADDR}/${NET_LEN}" dev "${BRIDGE}" &&
            ip link set "${BRIDGE}" up || return 1
    fi
    for ((i = 1; i <= n; i++)); do
        mn_ns_up "$(mn_node "${i}")" "$(mn_veth "${i}")" "$(mn_addr "${i}")" || return 1
    done
    if [[ "${2:-0}" == 1 ]]; then
        mn_ns_up "${DB_NS}" "${DB_VETH}" "${DB_ADDR}" || return 1
    fi
}

# mn_ns_up NS VETH ADDR: namespace NS with eth0 = ADDR, the other end VETH a bridge port (idempotent)
mn_ns_up() {
    local ns="$1" veth="$2" addr="$3"
    if netns_exists "${ns}" && ip -n "${ns}" -4 -o addr show dev eth0 2>/dev/null | grep -q " ${addr}/"; then
        return 0
    fi
    if netns_exists "${ns}"; then ip netns delete "${ns}" || return 1; fi
    ip link del "${veth}" 2>/dev/null || true
    ip netns add "${ns}" &&
        ip -n "${ns}" link set lo up &&
        ip link add "${veth}" type veth peer name eth0 netns "${ns}" &&
        ip link set "${veth}" master "${BRIDGE}" up &&
        ip -n "${ns}" addr add "${addr}/${NET_LEN}" dev eth0 &&
        ip -n "${ns}" link set eth0 up
}

# kill what still runs in the node namespaces, delete them and the bridge
mn_net_down() {
    local i ns pids
    if bridge_exists && ! bridge_is_ours; then
        return 0   # another cluster's (or a leftover of one): not ours to remove
    fi
    if ! bridge_exists && [[ "$(cluster_nodes)" -lt 2 ]]; then
        return 0   # never created by this state directory
    fi
    for ns in $(for ((i = 1; i <= MAX_NODES; i++)); do mn_node "${i}"; done) "${DB_NS}"; do
        netns_exists "${ns}" || continue
        pids="$(ip netns pids "${ns}" 2>/dev/null | tr '\n' ' ')"
        if [[ -n "${pids// /}" ]]; then
            log "killing processes left in ${ns}: ${pids}"
            # shellcheck disable=SC2086
            kill -TERM ${pids} 2>/dev/null || true
            sleep 1
            # shellcheck disable=SC2086
            kill -KILL ${pids} 2>/dev/null || true
            sleep 0.2
        fi
        ip netns delete "${ns}" 2>/dev/null || log "could not delete network namespace ${ns}"
        log "deleted network namespace ${ns}"
    done
    for ((i = 1; i <= MAX_NODES; i++)); do
        ip link del "$(mn_veth "${i}")" 2>/dev/null || true
    done
    ip link del "${DB_VETH}" 2>/dev/null || true
    if bridge_exists; then
        ip link del "${BRIDGE}" && log "deleted bridge ${BRIDGE}"
    fi
    return 0
}

# the accounting lines of slurm.conf: $1 = 1 with slurmdbd
accounting_conf() {
    if [[ "$1" == 1 ]]; then
        echo "AccountingStorageType=accounting_storage/slurmdbd"
        echo "AccountingStorageHost=${DB_ADDR}"
        echo "AccountingStoragePort=${DBD_PORT}"
        # for slurmdbd connections this names the munge socket (AuthInfo serves slurmctld's only)
        echo "AccountingStoragePass=${MUNGE_SOCKET}"
    else
        echo "AccountingStorageType=accounting_storage/none"
    fi
}

write_conf_mn() {
    local n="$1" cpus="$2" acct="$3" mem i nodes
    mem="$(slurmd -C | head -n1 | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')"
    [[ -n "${mem}" ]] || die "unexpected 'slurmd -C' output"
    mem=$((mem / n))
    nodes="$(mn_node 1)"
    ((n > 1)) && nodes="hvslurm-n[1-${n}]"
    mkdir -p "${D}"
    : >"${D}/plugstack.conf"
    {
        cat <<EOC
# Generated by workflow/scripts/local-slurm.sh -- do not edit, regenerated on start.
# ${n} nodes, each a network namespace on bridge ${BRIDGE} (${NET_PREFIX}.0/${NET_LEN}).
ClusterName=hpcvirt
SlurmctldHost=${CTL_HOST}(${CTL_ADDR})
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
SlurmdSpoolDir=${D}/spool/%n
# per-node temporary directory: the pmix plugin puts its per-step directory
# there, and the nodes share /tmp
TmpFS=${D}/tmp/%n
SlurmctldPidFile=${CTLD_PID}
SlurmdPidFile=${D}/run/slurmd-%n.pid
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${LOG_DIR}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=${D}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((mem / cpus))
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
SwitchType=switch/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
$(accounting_conf "${acct}")
# squeue-based job status needs finished jobs to stay visible for a while
MinJobAge=600
KillWait=5
InactiveLimit=0
# a node whose slurmd is gone is marked DOWN within ~10-25 s; its jobs then
# end in NODE_FAIL (not requeued)
SlurmdTimeout=10
JobRequeue=0
SchedulerType=sched/backfill
EOC
        for ((i = 1; i <= n; i++)); do
            echo "NodeName=$(mn_node "${i}") NodeHostname=$(mn_node "${i}") NodeAddr=$(mn_addr "${i}") CPUs=${cpus} Boards=1 SocketsPerBoard=1 CoresPerSocket=${cpus} ThreadsPerCore=1 RealMemory=${mem} State=UNKNOWN"
        done
        echo "PartitionName=${PARTITION} Nodes=${nodes} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
    } >"${CONF}.tmp"
    mv "${CONF}.tmp" "${CONF}"
}

start_slurmctld_mn() {
    ctld_up && return 0
    as_host "${CTL_HOST}" slurmctld -f "${CONF}" >>"${LOG_DIR}/slurmctld.log" 2>&1 ||
        fail_start slurmctld "${LOG_DIR}/slurmctld.log"
    local i
    for ((i = 0; i < START_TIMEOUT * 5; i++)); do
        if ctld_up && timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; then
            return 0
        fi
        if ((i > 10)) && ! ctld_up; then
            break
        fi
        sleep 0.2
    done
    fail_start slurmctld "${LOG_DIR}/slurmctld.log"
}

start_slurmd_mn() {
    local i="$1"
    mn_slurmd_up "${i}" && return 0
    # slurmd makes its spool directory itself (and fails if it cannot)
    mkdir -p "${D}/tmp/$(mn_node "${i}")" 2>>"$(mn_log "${i}")" ||
        fail_start "slurmd of node $(mn_node "${i}")" "$(mn_log "${i}")"
    on_node "${i}" slurmd -f "${CONF}" -N "$(mn_node "${i}")" >>"$(mn_log "${i}")" 2>&1 ||
        fail_start "slurmd of node $(mn_node "${i}")" "$(mn_log "${i}")"
}

wait_nodes_idle() {
    local n="$1" i j st="" idle bad
    for ((i = 0; i < START_TIMEOUT * 5; i++)); do
        st="$(timeout 10 sinfo -h -N -o '%N=%t' 2>/dev/null | sort -u | tr '\n' ' ' || true)"
        idle="$(grep -oE '=(idle|mix|alloc|mixed|allocated)' <<<"${st}" | wc -l)"
        # idle, and every slurmd can be stopped again (its pid file names it)
        ((idle >= n)) && mn_all_slurmd_up "${n}" && return 0
        if ((i > 10)); then
            for ((j = 1; j <= n; j++)); do
                mn_slurmd_up "${j}" ||
                    fail_start "slurmd of node $(mn_node "${j}")" "$(mn_log "${j}")"
            done
        fi
        sleep 0.2
    done
    log "nodes not idle after ${START_TIMEOUT} s (states: ${st:-unknown})"
    for ((j = 1; j <= n; j++)); do
        bad="$(grep -oE "$(mn_node "${j}")=[a-z*~#!%$@^-]+" <<<"${st}" || true)"
        [[ "${bad}" =~ =(idle|mix|alloc) ]] && continue
        fail_start "slurmd of node $(mn_node "${j}")" "$(mn_log "${j}")"
    done
    fail_start slurmctld "${LOG_DIR}/slurmctld.log"
}

# ------------------------------------------------------------ accounting
acct_on() { [[ -e "${ACCT_FILE}" ]]; }
mysqld_up() { pid_of "${MYSQL_PID}" mariadbd >/dev/null; }
slurmdbd_up() { pid_of "${DBD_PID}" slurmdbd >/dev/null; }

# run "$@" as host hvslurm-db in its network namespace (like on_node)
on_db() {
    nsenter --net="/run/netns/${DB_NS}" -- \
        "$(command -v unshare)" --uts --mount --propagation private -- /bin/sh -c \
        'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"' \
        sh "${HOSTS_FILE}" "${DB_NS}" "$@"
}

db_sql() {
    timeout 30 mariadb --no-defaults --socket="${MYSQL_SOCKET}" -u root -N -B -e "$1"
}

# MariaDB from the state directory: no TCP port (--skip-networking), its Unix socket only
start_mysqld() {
    mysqld_up && return 0
    local log="${LOG_DIR}/mysqld.log" i
    # a Unix socket path is limited to 107 bytes
    ((${#MYSQL_SOCKET} < 100)) ||
        die "the state directory's path is too long for MariaDB's socket ${MYSQL_SOCKET}; set HPCVIRT_WORKDIR to a shorter path"
    if [[ ! -d "${DB_DIR}/mysql" ]]; then
        rm -rf "${DB_DIR}"
        mkdir -p "${DB_DIR}"
        log "creating the accounting database's data directory ${DB_DIR} (mariadb-install-db)"
        mariadb-install-db --no-defaults --datadir="${DB_DIR}" --user=root \
            --auth-root-authentication-method=socket --skip-test-db --skip-name-resolve \
            "${MYSQL_INNODB[@]}" >>"${log}" 2>&1 ||
            { rm -rf "${DB_DIR}"; fail_start "mariadb-install-db" "${log}"; }
    fi
    rm -f "${MYSQL_SOCKET}" "${MYSQL_PID}"
    setsid -f mariadbd --no-defaults --datadir="${DB_DIR}" --user=root --skip-networking \
        --socket="${MYSQL_SOCKET}" --pid-file="${MYSQL_PID}" --log-error="${log}" \
        "${MYSQL_INNODB[@]}" --skip-name-resolve \
        </dev/null >>"${log}" 2>&1 || fail_start mariadbd "${log}"
    for ((i = 0; i < START_TIMEOUT * 5; i++)); do
        if mysqld_up && [[ -S "${MYSQL_SOCKET}" ]] && db_sql 'SELECT 1' >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.2
    done
    fail_start mariadbd "${log}"
}

write_dbd_conf() {
    local tmp="${DBD_CONF}.tmp"
    (
        umask 077
        cat >"${tmp}" <<EOC
# Generated by workflow/scripts/local-slurm.sh -- do not edit, regenerated on start.
# slurmdbd in network namespace ${DB_NS} (${DB_ADDR} on bridge ${BRIDGE}); MariaDB over
# its Unix socket ${MYSQL_SOCKET} (MYSQL_UNIX_PORT), as the database's root user
# with socket authentication (no password).
AuthType=auth/munge
AuthInfo=socket=${MUNGE_SOCKET}
DbdHost=${DB_NS}
DbdAddr=${DB_ADDR}
DbdPort=${DBD_PORT}
SlurmUser=root
PidFile=${DBD_PID}
LogFile=${LOG_DIR}/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
EOC
    )
    mv "${tmp}" "${DBD_CONF}"
    chmod 600 "${DBD_CONF}"
}

start_slurmdbd() {
    local log="${LOG_DIR}/slurmdbd.log"
    if ! slurmdbd_up; then
        write_dbd_conf
        MYSQL_UNIX_PORT="${MYSQL_SOCKET}" on_db slurmdbd >>"${log}" 2>&1 || fail_start slurmdbd "${log}"
    fi
    # up when it answers (the first start creates the tables)
    local deadline=$((SECONDS + START_TIMEOUT)) err=""
    while ! err="$(timeout 5 sacctmgr -n -P list cluster format=cluster 2>&1 >/dev/null)"; do
        if ((SECONDS >= deadline)) || { ((SECONDS >= deadline - START_TIMEOUT + 5)) && ! slurmdbd_up; }; then
            log "sacctmgr could not reach slurmdbd: ${err}"
            fail_start slurmdbd "${log}"
        fi
        sleep 0.2
    done
    # the cluster must be known to the database before slurmctld registers
    if ! timeout 10 sacctmgr -n -P list cluster format=cluster | grep -qx hpcvirt; then
        timeout 10 sacctmgr -i add cluster hpcvirt >>"${log}" 2>&1 || fail_start "slurmdbd (sacctmgr add cluster)" "${log}"
    fi
}

do_start_mn() {
    local n="$1" cpus="$2" acct="$3" real_cpus i running
    need munged munge unmunge slurmctld slurmd sinfo scontrol squeue scancel ip nsenter unshare
    if [[ "${acct}" == 1 ]]; then
        command -v slurmdbd >/dev/null 2>&1 && command -v sacctmgr >/dev/null 2>&1 ||
            die "--accounting needs slurmdbd and sacctmgr (Debian packages slurmdbd slurm-client)"
        command -v mariadbd >/dev/null 2>&1 && command -v mariadb-install-db >/dev/null 2>&1 &&
            command -v mariadb >/dev/null 2>&1 ||
            die "--accounting needs mariadbd, mariadb-install-db and mariadb (Debian package mariadb-server)"
    fi
    real_cpus="$(slurmd -C | head -n1 | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p')"
    ((cpus <= real_cpus)) ||
        die "--cpus-per-node ${cpus} is more than this machine's ${real_cpus} CPUs"
    check_etc_link
    running="$(cluster_nodes)"
    if { ctld_up || slurmd_up || mn_any_slurmd_up; } && [[ "${running}" != "${n}" ]]; then
        die "a cluster with ${running} node(s) is running from ${D}; stop it first"
    fi
    if ctld_up || mn_any_slurmd_up; then
        if acct_on && [[ "${acct}" != 1 ]]; then
            die "the cluster running from ${D} was started with --accounting; stop it first or start with --accounting"
        elif ! acct_on && [[ "${acct}" == 1 ]]; then
            die "the cluster running from ${D} was started without --accounting; stop it first"
        fi
    fi
    mn_check_free
    mkdir -p "${D}/run" "${D}/spool/ctld" "${LOG_DIR}"
    if munged_up && ctld_up && mn_all_slurmd_up "${n}" && [[ -f "${CONF}" ]] &&
        { [[ "${acct}" != 1 ]] || { mysqld_up && slurmdbd_up; }; } &&
        [[ "$(timeout 10 sinfo -h -N -o '%t' 2>/dev/null | grep -cE '^(idle|mix|alloc)')" -ge "${n}" ]]; then
        install_etc_link
        log "already running (${n} nodes$([[ "${acct}" == 1 ]] && echo ", accounting"), SLURM_CONF=${CONF})"
        return 0
    fi
    if ! ctld_up && ! mn_any_slurmd_up; then
        write_conf_mn "${n}" "${cpus}" "${acct}"
        write_hosts "${n}"
        echo "${n}" >"${NODES_FILE}"
        if [[ "${acct}" == 1 ]]; then : >"${ACCT_FILE}"; else rm -f "${ACCT_FILE}"; fi
    fi
    if ((n * cpus > real_cpus)); then
        log "note: ${n} nodes x ${cpus} CPUs oversubscribe this machine's ${real_cpus} CPUs"
    fi
    ensure_munge_key
    start_munged
    mn_net_up "${n}" "${acct}" >>"${LOG_DIR}/network.log" 2>&1 || fail_start network "${LOG_DIR}/network.log"
    if [[ "${acct}" == 1 ]]; then
        start_mysqld
        start_slurmdbd
    fi
    start_slurmctld_mn
    for ((i = 1; i <= n; i++)); do
        start_slurmd_mn "${i}"
    done
    wait_nodes_idle "${n}"
    install_etc_link
    log "up: ${n} nodes hvslurm-n[1-${n}] (${NET_PREFIX}.1-${n}, ${cpus} CPU(s) each) idle in partition '${PARTITION}', slurmctld ${CTL_ADDR}:${CTLD_PORT} on bridge ${BRIDGE}"
    if [[ "${acct}" == 1 ]]; then
        log "accounting: slurmdbd ${DB_ADDR}:${DBD_PORT} (namespace ${DB_NS}), MariaDB on ${MYSQL_SOCKET} only, data in ${DB_DIR}"
    fi
    log "use: eval \"\$(${BASH_SOURCE[0]} env)\"; srun from '$(basename "$0") exec srun ...' or inside a batch job"
}

# exec CMD...: run CMD as the controller host (root network namespace, host
# name hvslurm-ctl resolving to the bridge address), where srun can be reached
do_exec() {
    (($#)) || die "exec needs a command, e.g.: $(basename "$0") exec srun -N 2 -n 2 hostname"
    [[ "$(cluster_nodes)" -ge 2 && -s "${HOSTS_FILE}" ]] ||
        die "exec is for the multi-node cluster (start --nodes N); with one node run the command directly"
    as_host "${CTL_HOST}" "$@"
}

# stop_pid PIDFILE PROG [SECONDS]: SIGTERM, wait up to SECONDS (10), then SIGKILL
stop_pid() {
    local pidfile="$1" prog="$2" wait_s="${3:-10}" pid i
    pid="$(pid_of "${pidfile}" "${prog}")" || { rm -f "${pidfile}"; return 0; }
    kill -TERM "${pid}" 2>/dev/null || true
    for ((i = 0; i < wait_s * 10; i++)); do
        alive "${pid}" || break
        sleep 0.1
    done
    if alive "${pid}"; then
        log "${prog} (pid ${pid}) ignored SIGTERM; sending SIGKILL"
        kill -KILL "${pid}" 2>/dev/null || true
    fi
    rm -f "${pidfile}"
    log "stopped ${prog} (pid ${pid})"
}

# slurmstepd processes of this cluster: slurmd starts them with its log file
# (slurmd.log, or slurmd-<node>.log with several nodes) open (and the log directory as cwd); the environment is not inherited.
our_stepds() {
    local p f
    for p in /proc/[0-9]*; do
        [[ "$(cat "${p}/comm" 2>/dev/null)" == slurmstepd ]] || continue
        for f in "${p}"/fd/*; do
            case "$(readlink "${f}" 2>/dev/null)" in
            "${LOG_DIR}/slurmd.log" | "${LOG_DIR}"/slurmd-*.log)
                echo "${p#/proc/}"
                break
                ;;
            esac
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
    local f
    for f in "${D}"/run/slurmd-*.pid; do
        [[ -e "${f}" ]] && stop_pid "${f}" slurmd
    done
    stop_pid "${CTLD_PID}" slurmctld
    stop_pid "${DBD_PID}" slurmdbd
    stop_pid "${MYSQL_PID}" mariadbd 60
    rm -f "${MYSQL_SOCKET}"
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
    mn_net_down
    stop_pid "${MUNGE_PID}" munged
    remove_etc_link
    rm -f "${ACCT_FILE}"
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
    local ctl_addr=127.0.0.1
    [[ "$(cluster_nodes)" -ge 2 ]] && ctl_addr="${CTL_ADDR}"
    if pid="$(pid_of "${CTLD_PID}" slurmctld)"; then
        printf 'slurmctld: running (pid %s, %s:%s)\n' "${pid}" "${ctl_addr}" "${CTLD_PORT}"
    else
        printf 'slurmctld: stopped\n'; rc=3
    fi
    local n i ns
    n="$(cluster_nodes)"
    if ((n < 2)); then
        if pid="$(pid_of "${SLURMD_PID}" slurmd)"; then
            printf 'slurmd:    running (pid %s, 127.0.0.1:%s, node %s)\n' "${pid}" "${SLURMD_PORT}" "${NODE_NAME}"
        else
            printf 'slurmd:    stopped\n'; rc=3
        fi
    else
        for ((i = 1; i <= n; i++)); do
            ns="$(mn_node "${i}")"
            if pid="$(pid_of "$(mn_pidfile "${i}")" slurmd)"; then
                printf 'slurmd:    running (pid %s, %s:%s, node %s)\n' "${pid}" "$(mn_addr "${i}")" "${SLURMD_PORT}" "${ns}"
            else
                printf 'slurmd:    stopped (node %s)\n' "${ns}"; rc=3
            fi
            if netns_exists "${ns}"; then
                printf 'netns:     %s present\n' "${ns}"
            else
                printf 'netns:     %s absent\n' "${ns}"; rc=3
            fi
        done
        if bridge_is_ours; then
            printf 'bridge:    %s present (%s/%s)\n' "${BRIDGE}" "${CTL_ADDR}" "${NET_LEN}"
        else
            printf 'bridge:    %s absent\n' "${BRIDGE}"; rc=3
        fi
        if acct_on; then
            if pid="$(pid_of "${MYSQL_PID}" mariadbd)"; then
                printf 'mariadbd:  running (pid %s, socket %s, no TCP)\n' "${pid}" "${MYSQL_SOCKET}"
            else
                printf 'mariadbd:  stopped\n'; rc=3
            fi
            if pid="$(pid_of "${DBD_PID}" slurmdbd)"; then
                printf 'slurmdbd:  running (pid %s, %s:%s, namespace %s)\n' "${pid}" "${DB_ADDR}" "${DBD_PORT}" "${DB_NS}"
            else
                printf 'slurmdbd:  stopped\n'; rc=3
            fi
        fi
    fi
    if link_target_is_ours; then
        printf '%s: symlink to this cluster\n' "${ETC_CONF}"
    elif [[ -e "${ETC_CONF}" || -L "${ETC_CONF}" ]]; then
        printf '%s: exists, not ours\n' "${ETC_CONF}"
    else
        printf '%s: absent\n' "${ETC_CONF}"
    fi
    if ctld_up; then
        if [[ "$(cluster_nodes)" -ge 2 ]]; then
            printf 'node state: %s\n' "$(timeout 10 sinfo -h -N -o '%N=%t' 2>/dev/null | sort -u | tr '\n' ' ')"
        else
            printf 'node state: %s\n' "$(node_state)"
        fi
        timeout 10 squeue -h -o '  job %i %j %T' 2>/dev/null || true
    fi
    return "${rc}"
}

do_env() {
    printf 'export SLURM_CONF=%q\n' "${CONF}"
}

usage() {
    echo "usage: $(basename "$0") start [--nodes N] [--cpus-per-node C] [--accounting] | stop | status | env | exec CMD [ARG...]" >&2
    exit 2
}

# start [--nodes N] [--cpus-per-node C] [--accounting]
parse_start() {
    local nodes=1 cpus=1 cpus_given=0 acct=0
    while (($#)); do
        case "$1" in
        --accounting) acct=1; shift ;;
        --nodes | --cpus-per-node)
            [[ $# -ge 2 ]] || { log "ERROR: $1 needs a value"; usage; }
            [[ "$2" =~ ^[0-9]+$ ]] || { log "ERROR: $1 must be a positive integer, got '$2'"; usage; }
            if [[ "$1" == --nodes ]]; then nodes="$((10#$2))"; else cpus="$((10#$2))"; cpus_given=1; fi
            shift 2
            ;;
        --nodes=* | --cpus-per-node=*) set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
        *) log "ERROR: unknown argument to start: '$1'"; usage ;;
        esac
    done
    ((nodes >= 1 && nodes <= MAX_NODES)) || { log "ERROR: --nodes must be 1..${MAX_NODES}, got ${nodes}"; usage; }
    ((cpus >= 1)) || { log "ERROR: --cpus-per-node must be at least 1"; usage; }
    if ((nodes == 1)); then
        ((cpus_given == 0)) || { log "ERROR: --cpus-per-node is for --nodes 2..${MAX_NODES} (one node has all CPUs)"; usage; }
        ((acct == 0)) || { log "ERROR: --accounting is for --nodes 2..${MAX_NODES} (slurmdbd listens in a namespace on the nodes' bridge)"; usage; }
        do_start
    else
        do_start_mn "${nodes}" "${cpus}" "${acct}"
    fi
}

cmd="${1:-}"
(($#)) && shift
case "${cmd}" in
start) parse_start "$@" ;;
stop | status | env) (($# == 0)) || { log "ERROR: ${cmd} takes no arguments"; usage; }; "do_${cmd}" ;;
exec) do_exec "$@" ;;
*) usage ;;
esac
