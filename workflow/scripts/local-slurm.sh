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
# This is the command line only: the clusters are the Python modules
# hpcvirt.slurmcli (arguments, status, env, exec), hpcvirt.slurmcluster (the
# daemons) and hpcvirt.slurmstate (state directory, configuration files and,
# with several nodes, the network built with hpcvirt.netns, the namespace code
# of the testbeds), taken from this clone's workflow/lib; they need Python 3.11
# (python3, or HPCVIRT_PYTHON) and nothing outside its standard library.
#
# All state lives under ${HPCVIRT_WORKDIR:-<project>/.hpcvirt}/slurm/:
#   slurm.conf, plugstack.conf   generated configuration
#   munge/                       munge key (generated, never committed), socket, pid
#   spool/, run/, log/           Slurm's spool, the daemons' pid files and logs
#   nodes, hosts                 several nodes: their number, their /etc/hosts
#   db/, slurmdbd.conf           accounting: MariaDB's data, slurmdbd's configuration
#
# Network: nothing listens beyond loopback or the cluster's own namespaces.
#   - One node: slurmctld binds 127.0.0.1:<base>, slurmd 127.0.0.1:<base+1>
#     (NoCtldInAddrAny, NoInAddrAny); srun binds its ports (<base+16>-<base+63>)
#     to the address the host name resolves to, so `start` refuses to run
#     unless the short host name resolves to a loopback address (it does with
#     the usual "127.0.x.1 <hostname>" line in /etc/hosts).  munged talks over
#     a Unix socket only.  The port base is derived from the state directory
#     path (20000-32159, below the kernel's ephemeral range) or set with
#     HPCVIRT_SLURM_PORT_BASE.
#   - Several nodes (start --nodes N, 2 <= N <= 4): node i is the network
#     namespace hvslurm-n<i> (eth0 198.18.4.<i>/24), a veth pair away from the
#     bridge hvslurmbr in the root namespace (198.18.4.254, the controller host
#     hvslurm-ctl, where slurmctld binds); no route out, no forwarding.  Each
#     slurmd runs in its node's namespace under the node's host name, with
#     <state>/hosts bind-mounted on /etc/hosts in a mount namespace of its own;
#     the machine's /etc/hosts and host name are not touched.  One such cluster
#     per machine (the names are fixed; the bridge's alias names the state
#     directory that owns it).  Each node has --cpus-per-node CPUs (default 1,
#     at most the machine's; more than the machine has in all oversubscribes
#     it, and `start` says so) and its share of the memory.  srun must run
#     where its host name resolves to a cluster address: inside a batch job, or
#     with `local-slurm.sh exec srun ...`.
#   - Accounting (start --nodes N --accounting, N >= 2), so that sacct works:
#     MariaDB (Debian mariadb-server) from <state>/db with --skip-networking
#     (its Unix socket only), slurmdbd in a namespace of its own, hvslurm-db
#     (198.18.4.253, port <base+2>), socket authentication, no password stored.
#
# Jobs started by the Snakemake Slurm executor lose SLURM_CONF (the executor
# removes all SLURM_* variables), so srun inside a job only finds
# /etc/slurm/slurm.conf.  `start` therefore installs the symlink
# /etc/slurm/slurm.conf -> <state>/slurm.conf, but only when that path does
# not exist or already is such a symlink; `stop` removes it again.
# HPCVIRT_SLURM_ETC_LINK=0 skips the symlink.  Completed jobs stay visible to
# squeue for MinJobAge=600 s (the Slurm profile's `slurm-status-command: squeue`).
#
# `start` is idempotent; when a daemon does not come up it names it, prints the
# end of its log and stops what it started.  `stop` cancels the jobs, stops the
# daemons (slurmctld before slurmdbd), kills leftover job processes and what
# still runs in the namespaces, and deletes the namespaces and the bridge.
#
# Other environment variables:
#   HPCVIRT_SLURM_START_TIMEOUT  seconds to wait for the nodes to become idle (30)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIB="$(cd "${SCRIPT_DIR}/../lib" && pwd)"
PYTHON="${HPCVIRT_PYTHON:-python3}"
command -v "${PYTHON}" >/dev/null 2>&1 || {
    echo "local-slurm: ERROR: '${PYTHON}' not found (Debian package python3)" >&2
    exit 1
}
# this clone's library first (-P: not the working directory's)
export PYTHONPATH="${LIB}${PYTHONPATH:+:${PYTHONPATH}}"
exec "${PYTHON}" -P -m hpcvirt.slurmcli "${BASH_SOURCE[0]}" "$@"
