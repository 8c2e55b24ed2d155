"""The guests of a running ``qemu`` testbed (:mod:`hpcvirt.qemu`), as
``with QemuCluster(...) as c`` yields them: a :class:`Cluster` runs commands
in each guest over ssh from the testbed's namespace, with the key pair of
the guest image and a ``known_hosts`` file pinned to the image's host key,
through one ssh master connection per guest where it can start one.

A guest that dies while a command runs (:meth:`Cluster.run`) aborts the
command at once with :class:`GuestDied` naming the guest and showing its
serial log, instead of waiting for TCP timeouts.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .netns import TestbedError

SSH_CONNECT_TIMEOUT_S = 3
#: The longest path of a Unix socket (sun_path's 108 bytes, less the terminating NUL).
MAX_SOCKET_PATH = 107


class GuestDied(TestbedError):
    """A guest's qemu process exited while the cluster was in use."""


def tail(path: Path, lines: int = 25) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no serial log)"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Cluster:
    """What ``with QemuCluster(...) as c`` yields."""

    kind: str
    tag: str
    guests: list[str]             # guest host names (g0, g1, ...), known inside the guests
    addresses: list[str]
    subnet: str
    accel: str                    # "kvm" or "tcg": the accelerator actually used
    ns: str
    key: Path
    known_hosts: Path
    run_dir: Path
    serial_logs: list[Path]
    procs: list[subprocess.Popen] = field(repr=False, default_factory=list)
    info: dict = field(default_factory=dict)
    # where each guest's ssh master connection listens (None: every command makes its own connection)
    control_path: str | None = None

    def _index(self, g: int | str) -> int:
        if isinstance(g, int):
            return g
        if g in self.guests:
            return self.guests.index(g)
        if g in self.addresses:
            return self.addresses.index(g)
        raise KeyError(f"unknown guest {g!r}; guests are {self.guests}")

    def exec_prefix(self, g: int | str) -> list[str]:
        """argv prefix running a command in guest ``g`` (ssh from the
        namespace).  ssh joins the remaining arguments with spaces and hands
        them to the guest's shell: quote with :func:`shlex.join`."""
        i = self._index(g)
        return ["ip", "netns", "exec", self.ns, "ssh", "-i", str(self.key),
                "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={SSH_CONNECT_TIMEOUT_S}", "-o", "LogLevel=ERROR",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                # OpenSSH 9's default post-quantum exchange costs the emulated sshd about a second
                "-o", "KexAlgorithms=curve25519-sha256",
                # the guest's master connection if it has one (start_masters), else a connection of its own
                *(["-o", "ControlMaster=no", "-o", f"ControlPath={self.control_path}"] if self.control_path else []),
                f"root@{self.addresses[i]}"]

    def start_masters(self, timeout: float = 60) -> list[str]:
        """Open one ssh master connection per guest (in the namespace, in the
        background), which every later command shares: under TCG a new
        connection costs the emulated sshd a key exchange and an
        authentication, about 1.5 s.  A guest whose master does not start is
        reached as before, one connection per command; returns their names.
        The masters end with the namespace (teardown kills what runs in it)."""
        path = self.run_dir / "mux-%h"
        # %h: an IPv4 address, up to 15 characters; ssh makes the socket under a name 17 characters longer
        if len(str(path)) - 2 + 15 + 17 > MAX_SOCKET_PATH:
            return list(self.guests)
        self.control_path = str(path)
        failed = []
        for i, g in enumerate(self.guests):
            argv = self.exec_prefix(i)
            argv[argv.index("ControlMaster=no")] = "ControlMaster=yes"
            # -f: to the background once authenticated; its standard streams must not be ours (a master
            # keeps standard error open, and a caller reading it to its end would wait for the master)
            cp = subprocess.run([*argv[:-1], "-o", "ControlPersist=yes", "-N", "-f", argv[-1]],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                timeout=timeout, check=False)
            if cp.returncode != 0:
                failed.append(g)
        return failed

    def argv(self, g: int | str, cmd: Sequence[str] | str) -> list[str]:
        remote = cmd if isinstance(cmd, str) else shlex.join(cmd)
        return self.exec_prefix(g) + [remote]

    def steer_nic_irqs(self, timeout: float = 60) -> dict[str, int]:
        """Deliver each guest's NIC interrupts (virtio-net's input and output
        queues) to vCPU 0, where a guest's first rank runs when the testbed
        binds its ranks (``vm.bind_ranks``: hpcvirt.testbeds.RANK_BIND_INLINE),
        as an HPC guest is set up.  The guest's driver spreads them over the
        vCPUs; a packet for a rank then wakes an idle vCPU first, which under
        TCG on a busy host waits for a host core: 8-byte NetPIPE latency
        between the guests was 4.8 ms without steering and binding, 0.38 ms
        with both (one run each).  Returns how many interrupts were steered
        per guest."""
        cmd = ("n=0; for i in $(awk -F: '/virtio[0-9]+-(input|output)\\./ { print $1 }' /proc/interrupts); do "
               "echo 1 > /proc/irq/$i/smp_affinity && n=$((n+1)); done; echo $n")
        out = {}
        for i, g in enumerate(self.guests):
            cp = self.run(i, cmd, timeout=timeout, check=False)
            out[g] = int(cp.stdout.split()[-1]) if cp.returncode == 0 and cp.stdout.split() else 0
        return out

    def kill_strays(self, names: Sequence[str], timeout: float = 30) -> None:
        """Kill, in every guest, the processes of these names (exact names,
        validated: what a run killed at its time limit may have left, since
        killing the ssh client does not end the command in the guest)."""
        names = [n[:15] for n in names]       # the kernel's process name is cut at 15 characters
        bad = [n for n in names if not re.fullmatch(r"[A-Za-z0-9._+-]{1,15}", n)]
        if bad:
            raise ValueError(f"not process names: {bad}")
        cmd = "; ".join(f"pkill -KILL -x {shlex.quote(n)}" for n in names) + "; true"
        for g in self.guests:
            self.run(g, cmd, timeout=timeout)

    def check_alive(self) -> None:
        for i, p in enumerate(self.procs):
            rc = p.poll()
            if rc is not None:
                raise GuestDied(
                    f"guest {self.guests[i]} ({self.addresses[i]}, qemu pid {p.pid}) exited "
                    f"with status {rc}; serial log {self.serial_logs[i]} ends with:\n"
                    f"{tail(self.serial_logs[i])}")

    def run(self, g: int | str, cmd: Sequence[str] | str, timeout: float,
            check: bool = True, poll_s: float = 0.5) -> subprocess.CompletedProcess:
        """Run ``cmd`` in guest ``g``; stop it and raise :class:`GuestDied`
        as soon as any guest's qemu exits, :class:`TestbedError` on timeout
        or (``check``) non-zero exit."""
        argv = self.argv(g, cmd)
        self.check_alive()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    out, err = p.communicate(timeout=poll_s)
                    break
                except subprocess.TimeoutExpired:
                    self.check_alive()
                    if time.monotonic() > deadline:
                        raise TestbedError(
                            f"command in guest {self.guests[self._index(g)]} timed out "
                            f"after {timeout} s: {argv[-1]}") from None
        finally:
            if p.poll() is None:
                p.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.communicate(timeout=5)
        cp = subprocess.CompletedProcess(argv, p.returncode, out, err)
        if check and cp.returncode != 0:
            self.check_alive()        # a dead guest explains the failure better
            raise TestbedError(f"command in guest {self.guests[self._index(g)]} failed "
                               f"({cp.returncode}): {argv[-1]}\n{(err or out).strip()[-2000:]}")
        return cp
