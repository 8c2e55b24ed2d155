"""The project's own Slurm clusters on this machine: munged + slurmctld + slurmd,
one node or 2 to 4 (``workflow/scripts/local-slurm.sh`` is their command
line, :mod:`hpcvirt.slurmcli`; its header describes what a user sees).

Nothing listens beyond loopback or the cluster's own namespaces.  One node:
slurmctld and slurmd bind 127.0.0.1 (``NoCtldInAddrAny``, ``NoInAddrAny``).
Several nodes: node i is network namespace ``hvslurm-n<i>`` on the bridge
``hvslurmbr`` (:mod:`hpcvirt.slurmstate` builds them with :mod:`hpcvirt.netns`);
every daemon runs in a UTS + mount namespace of its own under its host name,
with <state>/hosts bind-mounted on /etc/hosts (``nsenter --net``, not ``ip
netns exec``, which remounts /sys): slurmctld as ``hvslurm-ctl`` in the root
network namespace, binding the bridge's address, each slurmd in its node's
namespace.  munged stays in the root namespace (a Unix socket; the nodes
share the file system).  With accounting, mariadbd runs from <state>/db
without networking (its Unix socket only) and slurmdbd in namespace
``hvslurm-db`` on the bridge.

A daemon that does not come up is named with the end of its log
(:class:`StartFailed`), and the command line then stops the cluster again.
A daemon counts as running while the process in its pid file is alive and
runs that program.  Imports nothing outside the standard library.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import netns
from .slurmstate import (ACCT_DB_NS, BRIDGE, CTL_ADDR, CTL_HOST, DB_ADDR, NET, PARTITION, Layout, Refused, call,
                         hardware, log, node)

UP = ("idle", "mix", "alloc", "mixed", "allocated")
AS_HOST = 'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"'
# the InnoDB settings Slurm's accounting documentation recommends (slurmdbd logs an error otherwise);
# the buffer pool is reserved, not used: a small database touches little of it
INNODB = ["--innodb-buffer-pool-size=1024M", "--innodb-log-file-size=64M", "--innodb-lock-wait-timeout=900"]


class StartFailed(Exception):
    """A daemon did not come up (its log was shown); the cluster is stopped again."""


def need(*tools: str, missing: str | None = None) -> None:
    for t in tools:
        if shutil.which(t) is None:
            raise Refused(missing or f"'{t}' not found (Debian packages: slurm-wlm munge)")


def ok(argv: list[str], timeout: float, **kw) -> bool:
    cp = call(argv, timeout, **kw)
    return cp is not None and cp.returncode == 0


def pid_of(pidfile: Path, prog: str) -> int | None:
    """The pid in ``pidfile`` if that process is alive and runs ``prog``."""
    try:
        pid = int("".join(c for c in pidfile.read_text() if c.isdigit()) or 0)
        return pid if pid and netns.alive(pid) and Path(f"/proc/{pid}/comm").read_text().strip() == prog else None
    except OSError:
        return None


class Cluster(Layout):
    """Start, stop and inspect the cluster of one state directory."""

    def __init__(self, workdir: str | None = None):
        super().__init__(workdir)
        self.etc_link = os.environ.get("HPCVIRT_SLURM_ETC_LINK", "1") == "1"
        self.timeout = int(os.environ.get("HPCVIRT_SLURM_START_TIMEOUT", "30"))
        os.environ["SLURM_CONF"] = str(self.conf)      # clients started from here use this cluster

    # ------------------------------------------------------------ processes
    def up(self, what: str) -> int | None:
        return pid_of(self.pids[what], what)

    def slurmd_up(self, i: int) -> int | None:
        return pid_of(self.slurmd_pid(i), "slurmd")

    def any_slurmd_up(self) -> bool:
        return any(pid_of(f, "slurmd") for f in self.run.glob("slurmd-*.pid"))

    def show_log_tail(self, name: str, logfile: Path) -> None:
        log(f"{name} did not come up; last lines of {logfile}:")
        if logfile.is_file():
            tail = logfile.read_text(errors="replace").splitlines()[-25:]
            print("".join(f"    {line}\n" for line in tail), end="", file=sys.stderr, flush=True)
        else:
            log("    (no log file)")

    def fail(self, name: str, logfile: Path):
        self.show_log_tail(name, logfile)
        raise StartFailed(name)

    def spawn(self, name: str, argv: list[str], logfile: Path, env: dict | None = None) -> None:
        """Start a daemon (it forks into the background) with its output appended to ``logfile``."""
        with open(logfile, "a") as fh:
            if not ok(argv, 120, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, env=env):
                self.fail(name, logfile)

    def as_host(self, host: str, argv: list[str], net: str | None = None) -> list[str]:
        """argv run as ``host`` (UTS + mount namespace, our hosts file), in network namespace ``net``."""
        wrap = ["unshare", "--uts", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", AS_HOST, "sh",
                str(self.hosts), host, *argv]
        if net:
            return ["nsenter", f"--net=/run/netns/{net}", "--", shutil.which("unshare") or "unshare", *wrap[1:]]
        return wrap

    def wait(self, ready, alive=None, seconds: float | None = None, step: float = 0.2) -> bool:
        """Poll ``ready()``; False after ``seconds`` or once ``alive()`` fails after the first 2 s."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < (seconds or self.timeout):
            if ready():
                return True
            if alive is not None and time.monotonic() - t0 > 2.2 and not alive():
                return False
            time.sleep(step)
        return False

    def node_states(self) -> str:
        cp = call(["sinfo", "-h", "-N", "-o", "%N=%t"], 10)
        return "".join(f"{s} " for s in sorted(set(cp.stdout.split()))) if cp and cp.returncode == 0 else ""

    def node_state(self) -> str:
        cp = call(["sinfo", "-h", "-N", "-n", self.node_name, "-o", "%t"], 10)
        return (cp.stdout.split() or [""])[0] if cp else ""

    # ------------------------------------------------------------ /etc/slurm/slurm.conf
    def link_is_ours(self) -> bool:
        return self.etc_conf.is_symlink() and os.readlink(self.etc_conf) == str(self.conf)

    def check_etc_link(self) -> None:
        if not self.etc_link or not (self.etc_conf.exists() or self.etc_conf.is_symlink()) or self.link_is_ours():
            return
        e, c = self.etc_conf, self.conf
        if e.is_symlink():
            raise Refused(f"""{e} is a symlink to {os.readlink(e)}, not to {c}.
  Another local cluster (other HPCVIRT_WORKDIR?) seems to be installed: stop it with its
  own 'local-slurm.sh stop', or remove the symlink, or set HPCVIRT_SLURM_ETC_LINK=0.""")
        raise Refused(f"""{e} exists and is not managed by this script; refusing to replace it.
  Jobs submitted by the Snakemake Slurm executor only find {e} (SLURM_CONF is
  removed inside jobs). Use the site's Slurm instead, or move that file away, or set
  HPCVIRT_SLURM_ETC_LINK=0 (srun inside executor jobs will then not find this cluster).""")

    def install_etc_link(self) -> None:
        if not self.etc_link:
            return
        self.check_etc_link()
        if not self.link_is_ours():
            self.etc_conf.parent.mkdir(parents=True, exist_ok=True)
            try:
                self.etc_conf.symlink_to(self.conf)
            except OSError as e:
                raise Refused(f"cannot create symlink {self.etc_conf}") from e
            log(f"installed symlink {self.etc_conf} -> {self.conf}")

    # ------------------------------------------------------------ common daemons
    def start_munged(self) -> None:
        if self.up("munged"):
            return
        for f in (self.munge_socket, Path(f"{self.munge_socket}.lock"), self.pids["munged"]):
            f.unlink(missing_ok=True)
        mlog = self.logs / "munged.log"
        # --force: the state directory may sit below group-writable directories
        self.spawn("munged", ["munged", "--force", f"--socket={self.munge_socket}", f"--key-file={self.munge_key}",
                              f"--pid-file={self.pids['munged']}", f"--log-file={mlog}",
                              f"--seed-file={self.munge / 'munged.seed'}"], mlog)

        def works():
            cred = call(["munge", "-n", "-S", str(self.munge_socket)], 10)
            return bool(self.up("munged") and cred and cred.returncode == 0
                        and ok(["unmunge", "-S", str(self.munge_socket)], 10, input=cred.stdout))
        if not self.wait(works, seconds=5, step=0.1):
            self.fail("munged", mlog)

    def ensure_munge_key(self) -> None:
        self.munge.mkdir(parents=True, exist_ok=True)
        self.munge.chmod(0o700)
        if not self.munge_key.is_file() or self.munge_key.stat().st_size == 0:
            if shutil.which("mungekey"):
                subprocess.run(["mungekey", "--create", f"--keyfile={self.munge_key}"], check=True,
                               stdout=subprocess.DEVNULL, timeout=60)
            else:
                self.munge_key.write_bytes(os.urandom(1024))
            log(f"generated munge key {self.munge_key}")
        self.munge_key.chmod(0o600)

    def start_slurmctld(self, host: str | None = None) -> None:
        if self.up("slurmctld"):
            return
        clog = self.logs / "slurmctld.log"
        argv = ["slurmctld", "-f", str(self.conf)]
        self.spawn("slurmctld", self.as_host(host, argv) if host else argv, clog)
        # daemonized slurmctld exits shortly after a fatal error (e.g. port in use)
        pong = lambda: bool(self.up("slurmctld")) and "is UP" in getattr(call(["scontrol", "ping"], 5), "stdout", "")  # noqa: E731
        if not self.wait(pong, alive=lambda: self.up("slurmctld")):
            self.fail("slurmctld", clog)

    # ------------------------------------------------------------ one node
    def check_loopback_hostname(self) -> None:
        try:
            addr = socket.getaddrinfo(self.node_name, None, socket.AF_INET)[0][4][0]
        except (socket.gaierror, IndexError):
            addr = ""
        if not addr.startswith("127."):
            raise Refused(f"""host name '{self.node_name}' resolves to '{addr or 'nothing'}', not to a loopback address.
  srun/slurmd bind to that address; add '127.0.1.1 {self.node_name}' to /etc/hosts.""")

    def start_one(self) -> bool:
        """Start the one-node cluster; False if it was running already."""
        need("munged", "munge", "unmunge", "slurmctld", "slurmd", "sinfo", "scontrol", "squeue", "scancel")
        if self.nodes() >= 2 and (self.up("slurmctld") or self.any_slurmd_up()):
            raise Refused(f"a cluster with {self.nodes()} nodes is running from {self.d}; stop it first")
        self.check_loopback_hostname()
        self.check_etc_link()
        for sub in (self.run, self.d / "spool/ctld", self.d / "spool/d", self.logs):
            sub.mkdir(parents=True, exist_ok=True)
        if all(map(self.up, ("munged", "slurmctld", "slurmd"))) and self.conf.is_file() and self.node_state() in UP:
            self.install_etc_link()
            log(f"already running (node {self.node_name}, SLURM_CONF={self.conf})")
            return False
        if not self.up("slurmctld") and not self.up("slurmd"):   # (re)write only while none of ours runs
            self.write_conf(hardware())
            for f in (self.nodes_file, self.hosts):
                f.unlink(missing_ok=True)
        self.ensure_munge_key()
        self.start_munged()
        self.start_slurmctld()
        if not self.up("slurmd"):
            self.spawn("slurmd", ["slurmd", "-f", str(self.conf), "-N", self.node_name], self.logs / "slurmd.log")
        if not self.wait(lambda: self.node_state() in UP, alive=lambda: self.up("slurmd")):
            log(f"node {self.node_name} not idle after {self.timeout} s (state: '{self.node_state() or 'unknown'}')")
            self.fail("slurmd", self.logs / "slurmd.log")
        self.install_etc_link()
        log(f"up: node {self.node_name} idle in partition '{PARTITION}', slurmctld 127.0.0.1:{self.ctld_port}, "
            f"slurmd 127.0.0.1:{self.ctld_port + 1}")
        return True

    # ------------------------------------------------------------ several nodes: the daemons
    def start_slurmd(self, i: int) -> None:
        if self.slurmd_up(i):
            return
        name, nlog = f"slurmd of node {node(i)}", self.slurmd_log(i)
        try:   # slurmd makes its spool directory itself (and fails if it cannot)
            (self.d / "tmp" / node(i)).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            with open(nlog, "a") as fh:
                print(e, file=fh)
            self.fail(name, nlog)
        self.spawn(name, self.as_host(node(i), ["slurmd", "-f", str(self.conf), "-N", node(i)], net=node(i)), nlog)

    def wait_nodes_idle(self, n: int) -> None:
        t0, st = time.monotonic(), ""
        while time.monotonic() - t0 < self.timeout:
            st = self.node_states()
            # idle, and every slurmd can be stopped again (its pid file names it)
            if len(re.findall(r"=(?:idle|mix|alloc|mixed|allocated)", st)) >= n and all(
                    self.slurmd_up(i) for i in range(1, n + 1)):
                return
            if time.monotonic() - t0 > 2.2:
                for j in range(1, n + 1):
                    if not self.slurmd_up(j):
                        self.fail(f"slurmd of node {node(j)}", self.slurmd_log(j))
            time.sleep(0.2)
        log(f"nodes not idle after {self.timeout} s (states: {st or 'unknown'})")
        for j in range(1, n + 1):
            if not re.search(rf"{node(j)}=(idle|mix|alloc)", st):
                self.fail(f"slurmd of node {node(j)}", self.slurmd_log(j))
        self.fail("slurmctld", self.logs / "slurmctld.log")

    def start_many(self, n: int, cpus: int, acct: bool) -> bool:
        """Start ``n`` nodes of ``cpus`` CPUs each (with slurmdbd if ``acct``); False if running already."""
        need("munged", "munge", "unmunge", "slurmctld", "slurmd", "sinfo", "scontrol", "squeue", "scancel", "ip",
             "nsenter", "unshare")
        if acct:
            need("slurmdbd", "sacctmgr",
                 missing="--accounting needs slurmdbd and sacctmgr (Debian packages slurmdbd slurm-client)")
            need("mariadbd", "mariadb-install-db", "mariadb", missing="--accounting needs mariadbd, "
                 "mariadb-install-db and mariadb (Debian package mariadb-server)")
        hw = hardware()
        if cpus > hw["CPUs"]:
            raise Refused(f"--cpus-per-node {cpus} is more than this machine's {hw['CPUs']} CPUs")
        self.check_etc_link()
        running, ctld = self.nodes(), self.up("slurmctld")
        if (ctld or self.up("slurmd") or self.any_slurmd_up()) and running != n:
            raise Refused(f"a cluster with {running} node(s) is running from {self.d}; stop it first")
        if (ctld or self.any_slurmd_up()) and self.acct_file.exists() != acct:
            raise Refused(f"the cluster running from {self.d} was started with --accounting; stop it first or start "
                          "with --accounting" if not acct else
                          f"the cluster running from {self.d} was started without --accounting; stop it first")
        self.check_free()
        for sub in (self.run, self.d / "spool/ctld", self.logs):
            sub.mkdir(parents=True, exist_ok=True)
        if (self.up("munged") and ctld and all(self.slurmd_up(i) for i in range(1, n + 1)) and self.conf.is_file()
                and (not acct or (self.up("mariadbd") and self.up("slurmdbd")))
                and len(re.findall(r"=(?:idle|mix|alloc)", self.node_states())) >= n):
            self.install_etc_link()
            log(f"already running ({n} nodes{', accounting' if acct else ''}, SLURM_CONF={self.conf})")
            return False
        if not ctld and not self.any_slurmd_up():
            self.write_conf_many(n, cpus, hw["RealMemory"], acct)
        if n * cpus > hw["CPUs"]:
            log(f"note: {n} nodes x {cpus} CPUs oversubscribe this machine's {hw['CPUs']} CPUs")
        self.ensure_munge_key()
        self.start_munged()
        try:
            self.net_up(n, acct)
        except netns.TestbedError as e:
            with open(self.logs / "network.log", "a") as fh:
                print(e, file=fh)
            self.fail("network", self.logs / "network.log")
        if acct:
            self.start_mariadbd()
            self.start_slurmdbd()
        self.start_slurmctld(host=CTL_HOST)
        for i in range(1, n + 1):
            self.start_slurmd(i)
        self.wait_nodes_idle(n)
        self.install_etc_link()
        log(f"up: {n} nodes hvslurm-n[1-{n}] ({NET}.1-{n}, {cpus} CPU(s) each) idle in partition '{PARTITION}', "
            f"slurmctld {CTL_ADDR}:{self.ctld_port} on bridge {BRIDGE}")
        if acct:
            log(f"accounting: slurmdbd {DB_ADDR}:{self.ctld_port + 2} (namespace {ACCT_DB_NS}), MariaDB on "
                f"{self.mysql_socket} only, data in {self.db_dir}")
        return True

    # ------------------------------------------------------------ accounting
    def sql(self, query: str) -> bool:
        return ok(["mariadb", "--no-defaults", f"--socket={self.mysql_socket}", "-u", "root", "-N", "-B", "-e", query],
                  30)

    def start_mariadbd(self) -> None:
        """MariaDB from the state directory: no TCP port (--skip-networking), its Unix socket only."""
        if self.up("mariadbd"):
            return
        mlog = self.logs / "mysqld.log"
        if len(str(self.mysql_socket)) >= 100:     # a Unix socket path is limited to 107 bytes
            raise Refused(f"the state directory's path is too long for MariaDB's socket {self.mysql_socket}; "
                          "set HPCVIRT_WORKDIR to a shorter path")
        if not (self.db_dir / "mysql").is_dir():
            shutil.rmtree(self.db_dir, ignore_errors=True)
            self.db_dir.mkdir(parents=True)
            log(f"creating the accounting database's data directory {self.db_dir} (mariadb-install-db)")
            with open(mlog, "a") as fh:
                if not ok(["mariadb-install-db", "--no-defaults", f"--datadir={self.db_dir}", "--user=root",
                           "--auth-root-authentication-method=socket", "--skip-test-db", "--skip-name-resolve",
                           *INNODB], 300, stdout=fh, stderr=subprocess.STDOUT):
                    shutil.rmtree(self.db_dir, ignore_errors=True)
                    self.fail("mariadb-install-db", mlog)
        self.mysql_socket.unlink(missing_ok=True)
        self.pids["mariadbd"].unlink(missing_ok=True)
        self.spawn("mariadbd", ["setsid", "-f", "mariadbd", "--no-defaults", f"--datadir={self.db_dir}", "--user=root",
                                "--skip-networking", f"--socket={self.mysql_socket}",
                                f"--pid-file={self.pids['mariadbd']}", f"--log-error={mlog}", *INNODB,
                                "--skip-name-resolve"], mlog)
        if not self.wait(lambda: self.up("mariadbd") and self.mysql_socket.is_socket() and self.sql("SELECT 1")):
            self.fail("mariadbd", mlog)

    def start_slurmdbd(self) -> None:
        dlog = self.logs / "slurmdbd.log"
        if not self.up("slurmdbd"):
            self.write_dbd_conf()
            self.spawn("slurmdbd", self.as_host(ACCT_DB_NS, ["slurmdbd"], net=ACCT_DB_NS), dlog,
                       env=dict(os.environ, MYSQL_UNIX_PORT=str(self.mysql_socket)))
        # up when it answers (the first start creates the tables)
        t0, err = time.monotonic(), ""
        while True:
            cp = call(["sacctmgr", "-n", "-P", "list", "cluster", "format=cluster"], 5)
            if cp and cp.returncode == 0:
                break
            err = cp.stderr.strip() if cp else "timed out"
            if time.monotonic() - t0 >= self.timeout or (time.monotonic() - t0 >= 5 and not self.up("slurmdbd")):
                log(f"sacctmgr could not reach slurmdbd: {err}")
                self.fail("slurmdbd", dlog)
            time.sleep(0.2)
        # the cluster must be known to the database before slurmctld registers
        if "hpcvirt" not in cp.stdout.split():
            with open(dlog, "a") as fh:
                if not ok(["sacctmgr", "-i", "add", "cluster", "hpcvirt"], 10, stdout=fh, stderr=subprocess.STDOUT):
                    self.fail("slurmdbd (sacctmgr add cluster)", dlog)

    # ------------------------------------------------------------ stop
    def stop_pid(self, what: str, pidfile: Path | None = None, wait_s: float = 10) -> None:
        """SIGTERM, wait up to ``wait_s``, then SIGKILL."""
        pidfile = pidfile or self.pids[what]
        pid = pid_of(pidfile, what)
        if pid and netns.kill_pids([pid], grace_s=wait_s):
            log(f"{what} (pid {pid}) ignored SIGTERM; sending SIGKILL")
        with contextlib.suppress(OSError):      # (a directory in its way: nothing of ours)
            pidfile.unlink(missing_ok=True)
        if pid:
            log(f"stopped {what} (pid {pid})")

    def stepds(self) -> list[int]:
        """slurmstepd processes of this cluster (they have slurmd's log file open) and all below them."""
        ours, children = [], {}
        for p in Path("/proc").glob("[0-9]*"):
            try:
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(p.name))
                if (p / "comm").read_text().strip() == "slurmstepd" and any(
                        re.fullmatch(rf"{re.escape(str(self.logs))}/slurmd(-.*)?\.log", os.readlink(f))
                        for f in (p / "fd").iterdir()):
                    ours.append(int(p.name))
            except (OSError, IndexError, ValueError):
                continue
        out = []
        while ours:
            out.append(ours.pop(0))
            ours += children.get(out[-1], [])
        return out

    def stop(self) -> None:
        """Cancel the jobs, stop the daemons and what is left of the jobs, remove the network."""
        if self.up("slurmctld"):
            queued = lambda: getattr(call(["squeue", "-h", "-t", "PD,R,S,CG", "-o", "%i"], 10), "stdout", "").split()  # noqa: E731
            jobs = queued()
            if jobs:
                log(f"cancelling remaining jobs: {' '.join(jobs)}")
                call(["scancel", *jobs], 10)
                self.wait(lambda: not queued(), seconds=20)
        self.stop_pid("slurmd")
        for f in sorted(self.run.glob("slurmd-*.pid")):
            self.stop_pid("slurmd", f)
        for what in ("slurmctld", "slurmdbd"):
            self.stop_pid(what)
        self.stop_pid("mariadbd", wait_s=60)
        self.mysql_socket.unlink(missing_ok=True)
        leftovers = self.stepds()
        if leftovers:
            log(f"killing leftover job processes: {' '.join(map(str, leftovers))}")
            netns.kill_pids(leftovers, grace_s=1)
        self.net_down()
        self.stop_pid("munged")
        if self.link_is_ours():
            self.etc_conf.unlink()
            log(f"removed symlink {self.etc_conf}")
        self.acct_file.unlink(missing_ok=True)
