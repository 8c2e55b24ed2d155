"""The command line of the local Slurm clusters (``workflow/scripts/local-slurm.sh``,
which runs ``python3 -m hpcvirt.slurmcli <script> <command> [ARG...]``): argument
checks, ``status``, ``env`` and ``exec``; the clusters are :mod:`hpcvirt.slurmcluster`'s."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from pathlib import Path

from .slurmcluster import Cluster, StartFailed
from .slurmstate import (ACCT_DB_NS, BRIDGE, CTL_ADDR, CTL_HOST, DB_ADDR, MAX_NODES, NET_LEN, Refused, call, log,
                         node, node_addr)


def status(c: Cluster) -> int:
    """What runs of the cluster; 0 if all of it, else 3."""
    rc, n = 0, c.nodes()
    out = [f"state directory: {c.d}", f"SLURM_CONF:      {c.conf}"]

    def line(what: str, pid: int | None, running: str, stopped: str = "stopped", present: bool | None = None):
        nonlocal rc
        text = f"running (pid {pid}, {running})" if pid else stopped
        out.append(f"{what + ':':<10} {text}")
        rc = rc if (pid if present is None else present) else 3
    line("munged", c.up("munged"), f"socket {c.munge_socket}")
    line("slurmctld", c.up("slurmctld"), f"{CTL_ADDR if n >= 2 else '127.0.0.1'}:{c.ctld_port}")
    if n < 2:
        line("slurmd", c.up("slurmd"), f"127.0.0.1:{c.ctld_port + 1}, node {c.node_name}")
    for i in range(1, n + 1) if n >= 2 else ():
        line("slurmd", c.slurmd_up(i), f"{node_addr(i)}:{c.ctld_port + 1}, node {node(i)}", f"stopped (node {node(i)})")
        present = Path(f"/run/netns/{node(i)}").exists()
        line("netns", None, "", f"{node(i)} {'present' if present else 'absent'}", present=present)
    if n >= 2:
        ours = c.bridge_owner() == str(c.d)
        line("bridge", None, "", f"{BRIDGE} {f'present ({CTL_ADDR}/{NET_LEN})' if ours else 'absent'}", present=ours)
    if n >= 2 and c.acct_file.exists():
        line("mariadbd", c.up("mariadbd"), f"socket {c.mysql_socket}, no TCP")
        line("slurmdbd", c.up("slurmdbd"), f"{DB_ADDR}:{c.ctld_port + 2}, namespace {ACCT_DB_NS}")
    e = c.etc_conf
    out.append(f"{e}: " + ("symlink to this cluster" if c.link_is_ours() else
                           "exists, not ours" if e.exists() or e.is_symlink() else "absent"))
    ctld = c.up("slurmctld")
    if ctld:
        out.append(f"node state: {c.node_states() if n >= 2 else c.node_state()}")
    print("\n".join(out), flush=True)
    if ctld:
        call(["squeue", "-h", "-o", "  job %i %j %T"], 10, capture_output=False)
    return rc


# ---------------------------------------------------------------- command line
USAGE = ("usage: local-slurm.sh start [--nodes N] [--cpus-per-node C] [--accounting] | stop | status | env | "
         "exec CMD [ARG...]")


def usage(error: str | None = None) -> int:
    if error:
        log(f"ERROR: {error}")
    print(USAGE, file=sys.stderr)
    return 2


def start(c: Cluster, args: list[str], script: str) -> int:
    nodes, cpus, cpus_given, acct = 1, 1, False, False
    while args:
        a = args.pop(0)
        if a == "--accounting":
            acct = True
        elif a.split("=", 1)[0] in ("--nodes", "--cpus-per-node"):
            name, _, value = a.partition("=")
            if not _:
                if not args:
                    return usage(f"{name} needs a value")
                value = args.pop(0)
            if not value.isdigit() or not value.isascii():
                return usage(f"{name} must be a positive integer, got '{value}'")
            if name == "--nodes":
                nodes = int(value)
            else:
                cpus, cpus_given = int(value), True
        else:
            return usage(f"unknown argument to start: '{a}'")
    if not 1 <= nodes <= MAX_NODES:
        return usage(f"--nodes must be 1..{MAX_NODES}, got {nodes}")
    if cpus < 1:
        return usage("--cpus-per-node must be at least 1")
    if nodes == 1 and cpus_given:
        return usage(f"--cpus-per-node is for --nodes 2..{MAX_NODES} (one node has all CPUs)")
    if nodes == 1 and acct:
        return usage(f"--accounting is for --nodes 2..{MAX_NODES} (slurmdbd listens in a namespace on the nodes' bridge)")
    if not (c.start_one() if nodes == 1 else c.start_many(nodes, cpus, acct)):
        return 0        # already running
    log(f'use: eval "$({script} env)"' + ("" if nodes == 1 else "; srun from 'local-slurm.sh exec srun ...' or "
                                                                "inside a batch job"))
    return 0


def main(argv: list[str]) -> int:
    """``argv``: the script's path, then its command line."""
    script, cmd, args = argv[0], (argv[1:2] or [""])[0], argv[2:]
    if cmd not in ("start", "stop", "status", "env", "exec"):
        return usage()
    if cmd in ("stop", "status", "env") and args:
        return usage(f"{cmd} takes no arguments")
    c = Cluster()
    try:
        if cmd == "start":
            return start(c, args, script)
        if cmd == "exec":
            # CMD as the controller host (root network namespace, host name hvslurm-ctl), where srun reaches the nodes
            if not args:
                raise Refused("exec needs a command, e.g.: local-slurm.sh exec srun -N 2 -n 2 hostname")
            if c.nodes() < 2 or not c.hosts.is_file() or c.hosts.stat().st_size == 0:
                raise Refused("exec is for the multi-node cluster (start --nodes N); with one node run the command "
                              "directly")
            argv = c.as_host(CTL_HOST, args)
            os.execvp(argv[0], argv)
        if cmd == "env":
            print(f"export SLURM_CONF={shlex.quote(str(c.conf))}")
            return 0
        if cmd == "status":
            return status(c)
        c.stop()
        return 0
    except Refused as e:
        log(f"ERROR: {e}")
        return 1
    except StartFailed:
        log("stopping the daemons of this cluster again")
        with open(os.devnull, "w") as null, contextlib.redirect_stderr(null), contextlib.redirect_stdout(null), \
                contextlib.suppress(Exception):     # the start's failure is what is reported
            c.stop()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
