"""The ``netns-bridge`` testbed: "hosts" as network namespaces behind a
software switch.

Layout for ``NetnsBridge("ab1", hosts=2)``::

    netns hv-ab1-h0          netns hv-ab1-sw                  netns hv-ab1-h1
    eth0 198.18.0.1 --veth-- hvab1p0 -+- hvab1br -+- hvab1p1 --veth-- eth0 198.18.0.2

The bridge lives in its own "switch" namespace and the veth pairs are created
directly there (``ip -n``), so nothing is ever added to the caller's network
namespace.  Addresses come from the benchmarking range 198.18.0.0/15 and
never leave the namespaces.  Processes are started in a host with
``ip netns exec hv-<tag>-h<i>``; MPI launchers reach the other hosts through
``workflow/scripts/netns-rsh`` (an ssh stand-in; the launcher and its flags
come from the testbed file, see :mod:`hpcvirt.testbeds`).

Teardown (kill whatever still runs in the namespaces, delete them, which
removes veths and the bridge) happens on normal exit, on exceptions and on
SIGTERM/SIGINT (handlers installed for the duration of the ``with`` block);
:func:`cleanup` removes the leftovers of a run that was SIGKILLed.
The building blocks (:func:`add_netns`, :func:`add_bridge`, :func:`add_port`,
:func:`set_address`, :func:`delete_netns`, :func:`kill_pids`) also make the
nodes of the local Slurm clusters (:mod:`hpcvirt.slurmstate`).
Needs root and iproute2; imports nothing outside the standard library.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import link, paths

TAG_RE = re.compile(r"^[a-z0-9]{1,8}$")
BENCH_NET = ipaddress.ip_network("198.18.0.0/15")
IFNAMSIZ = 15
HOST_IFACE = "eth0"
MAX_HOSTS = 99
CMD_TIMEOUT_S = 30


class TestbedError(RuntimeError):
    """A testbed could not be created, or a job on it failed."""

    __test__ = False          # not a pytest test class


class TestbedInterrupted(TestbedError):
    """SIGTERM/SIGINT arrived while a testbed was up (it was torn down)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}; testbed torn down")


# ----------------------------------------------------------------- helpers
def validate_tag(tag: str) -> str:
    if not isinstance(tag, str) or not TAG_RE.match(tag):
        raise ValueError(f"run tag must match {TAG_RE.pattern}, got {tag!r}")
    return tag


def agent_path() -> Path:
    """The ``netns-rsh`` agent (``HPCVIRT_NETNS_RSH`` overrides)."""
    env = os.environ.get("HPCVIRT_NETNS_RSH")
    return Path(env) if env else paths.script("netns-rsh")


def names(tag: str, hosts: int = 2) -> dict:
    """All object names of a testbed (pure)."""
    validate_tag(tag)
    if not 1 <= hosts <= MAX_HOSTS:
        raise ValueError(f"hosts must be in 1..{MAX_HOSTS}, got {hosts}")
    n = {
        "switch_ns": f"hv-{tag}-sw",
        "host_ns": [f"hv-{tag}-h{i}" for i in range(hosts)],
        "bridge": f"hv{tag}br",
        "switch_ports": [f"hv{tag}p{i}" for i in range(hosts)],
        "host_iface": HOST_IFACE,
    }
    for ifname in [n["bridge"], *n["switch_ports"]]:
        assert len(ifname) <= IFNAMSIZ, ifname
    return n


def host_addresses(subnet: str, hosts: int) -> tuple[ipaddress.IPv4Network, list[str]]:
    """Validate ``subnet`` (inside 198.18.0.0/15) and give host i address i+1."""
    net = ipaddress.ip_network(subnet, strict=True)
    if net.version != 4 or not net.subnet_of(BENCH_NET):
        raise ValueError(f"subnet {subnet} must lie inside the benchmarking range {BENCH_NET}")
    usable = list(net.hosts())
    if len(usable) < hosts + 1:
        raise ValueError(f"subnet {subnet} too small for {hosts} hosts")
    return net, [str(usable[i]) for i in range(hosts)]


def run(cmd: Sequence[str], timeout: float = CMD_TIMEOUT_S, check: bool = True,
        **kw) -> subprocess.CompletedProcess:
    """subprocess.run with a mandatory timeout and a readable error."""
    try:
        cp = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        raise TestbedError(f"timed out after {timeout} s: {' '.join(cmd)}") from e
    if check and cp.returncode != 0:
        raise TestbedError(f"command failed ({cp.returncode}): {' '.join(cmd)}\n"
                           f"{(cp.stderr or cp.stdout).strip()}")
    return cp


def list_netns() -> list[str]:
    cp = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in cp.stdout.splitlines() if line.strip()]


def netns_pids(ns: str) -> list[int]:
    cp = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in cp.stdout.split() if p.isdigit()]


def alive(pid: int) -> bool:
    """True while process ``pid`` runs: it exists and is not a zombie (a
    daemon's parent is init, which may reap it only a while after it exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kill_pids(pids: Sequence[int], grace_s: float = 3.0) -> list[int]:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL; returns the pids that
    needed the SIGKILL."""
    me = os.getpid()
    pids = [p for p in pids if p != me]
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if alive(p)]
        time.sleep(0.05)
    pids = [p for p in pids if alive(p)]
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)
    return pids


def delete_netns(ns: str) -> None:
    """Kill every process inside ``ns`` (all started by us), then delete it.
    Deleting a namespace destroys the interfaces in it (veth peers go too)."""
    if ns not in list_netns():
        return
    kill_pids(netns_pids(ns))
    run(["ip", "netns", "delete", ns], check=False)


def add_netns(ns: str, timeout: float = CMD_TIMEOUT_S) -> None:
    """Network namespace ``ns`` with its loopback up."""
    run(["ip", "netns", "add", ns], timeout=timeout)
    run(["ip", "-n", ns, "link", "set", "lo", "up"], timeout=timeout)


def _in(ns: str | None) -> list[str]:
    return ["-n", ns] if ns else []


def _mtu(mtu: int | None) -> list[str]:
    return ["mtu", str(mtu)] if mtu else []


def add_bridge(bridge: str, ns: str | None = None, mtu: int | None = None, alias: str | None = None,
               address: str | None = None, timeout: float = CMD_TIMEOUT_S) -> None:
    """Linux bridge ``bridge`` in namespace ``ns`` (None: the caller's), up;
    ``alias`` names its owner, ``address`` (CIDR) is the bridge's own."""
    run(["ip", *_in(ns), "link", "add", bridge, *_mtu(mtu), "type", "bridge"], timeout=timeout)
    if alias:
        run(["ip", *_in(ns), "link", "set", "dev", bridge, "alias", alias], timeout=timeout)
    if address:
        run(["ip", *_in(ns), "addr", "add", address, "dev", bridge], timeout=timeout)
    run(["ip", *_in(ns), "link", "set", bridge, "up"], timeout=timeout)


def add_port(port: str, bridge: str, peer_ns: str, peer: str = HOST_IFACE, ns: str | None = None,
             mtu: int | None = None, timeout: float = CMD_TIMEOUT_S) -> None:
    """A veth pair: ``port`` in namespace ``ns`` (None: the caller's), a port
    of ``bridge`` there and up, and its peer ``peer`` in namespace ``peer_ns``."""
    run(["ip", *_in(ns), "link", "add", port, *_mtu(mtu), "type", "veth", "peer", "name", peer, *_mtu(mtu),
         "netns", peer_ns], timeout=timeout)
    run(["ip", *_in(ns), "link", "set", port, "master", bridge, "up"], timeout=timeout)


def set_address(ns: str, dev: str, address: str, timeout: float = CMD_TIMEOUT_S) -> None:
    """``address`` (CIDR) on ``dev`` in namespace ``ns``, and ``dev`` up."""
    run(["ip", "-n", ns, "addr", "add", address, "dev", dev], timeout=timeout)
    run(["ip", "-n", ns, "link", "set", dev, "up"], timeout=timeout)


def cleanup(tag: str) -> list[str]:
    """Remove every namespace of run ``tag`` (``hv-<tag>-*``), killing the
    processes left inside.  Idempotent; returns the names removed."""
    validate_tag(tag)
    prefix = f"hv-{tag}-"
    removed = []
    # hosts first, switch last (their veth peers then vanish with the hosts)
    for ns in sorted((n for n in list_netns() if n.startswith(prefix)),
                     key=lambda n: n.endswith("-sw")):
        delete_netns(ns)
        removed.append(ns)
    return removed


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """While active, SIGTERM and SIGINT raise :class:`TestbedInterrupted`
    (so ``finally`` blocks tear the testbed down); previous handlers are
    restored afterwards.  No-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise TestbedInterrupted(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_deferred() -> Iterator[list]:
    """Ignore-and-record SIGTERM/SIGINT (used around teardown so a second
    signal cannot interrupt it).  Yields the list of received signals."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return
    old = {s: signal.signal(s, lambda n, f: got.append(n)) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def redeliver(signums: Sequence[int]) -> None:
    """Re-send signals that arrived during a deferred teardown, now that the
    caller's handlers are back."""
    for s in dict.fromkeys(signums):
        os.kill(os.getpid(), s)


def require_root_tools(*tools: str) -> None:
    if os.geteuid() != 0:
        raise TestbedError("network namespaces need root")
    for t in ("ip", *tools):
        if shutil.which(t) is None:
            raise TestbedError(f"required tool not found: {t}")


# ----------------------------------------------------------------- testbed
@dataclass
class Testbed:
    """What ``with NetnsBridge(...) as tb`` yields."""

    __test__ = False

    kind: str
    tag: str
    hosts: list[str]              # namespace names, also the MPI host names
    addresses: list[str]          # eth0 address of each host
    subnet: str
    mtu: int
    iface: str = HOST_IFACE
    switch_ns: str = ""
    bridge: str = ""
    info: dict = field(default_factory=dict)

    def host(self, h: int | str) -> str:
        if isinstance(h, int):
            return self.hosts[h]
        if h not in self.hosts:
            raise KeyError(f"unknown host {h!r}; hosts are {self.hosts}")
        return h

    def exec_prefix(self, h: int | str) -> list[str]:
        """argv prefix running a command inside host ``h``."""
        return ["ip", "netns", "exec", self.host(h)]



class GuardedTestbed:
    """Set-up and guaranteed teardown shared by the testbed context managers.

    SIGTERM/SIGINT raise TestbedInterrupted while the testbed exists;
    leftovers of a crashed run with the same tag are removed first; teardown
    runs on normal exit, exception and signal, with signals deferred while
    it runs and re-delivered afterwards.  Subclasses provide ``tag``,
    ``_tools()``, ``_build()``, ``_stop()`` (optional) and ``_cleanup()``.
    """

    _signals: contextlib.ExitStack | None = None

    def _tools(self) -> tuple[str, ...]:
        return ()

    def _build(self):
        raise NotImplementedError

    def _stop(self) -> None:
        """Stop what the build started, before the cleanup removes the rest."""

    def _cleanup(self) -> None:
        cleanup(self.tag)

    def __enter__(self):
        require_root_tools(*self._tools())
        self._signals = contextlib.ExitStack()
        self._signals.enter_context(signals_raise())
        try:
            self._cleanup()            # leftovers of a crashed run with this tag
            return self._build()
        except BaseException:
            self._teardown()
            raise

    def __exit__(self, *exc) -> bool:
        self._teardown()
        return False

    def _teardown(self) -> None:
        try:
            with signals_deferred() as pending:
                self._stop()
                self._cleanup()
        finally:
            if self._signals is not None:
                self._signals.close()      # restore the caller's handlers
                self._signals = None
        redeliver(pending)


class NetnsBridge(GuardedTestbed):
    """Context manager building the ``netns-bridge`` testbed (see module doc).

    >>> with NetnsBridge("r1") as tb:                         # doctest: +SKIP
    ...     subprocess.run(tb.exec_prefix(0) + ["hostname"], timeout=30)
    """

    def __init__(self, tag: str, hosts: int = 2, subnet: str = "198.18.0.0/24",
                 mtu: int = 1500, setup_timeout_s: float = 30, rate: str | None = None,
                 delay_us: int | None = None, path: str = "bridge", underlay: str = link.UNDERLAY):
        self.names = names(tag, hosts)
        self.link = {"rate": rate, "delay_us": delay_us}   # hpcvirt.link: qdiscs on the switch ports
        if path not in link.PATHS:
            raise ValueError(f"data path {path!r}: expected one of {', '.join(link.PATHS)}")
        if path == "gretap" and hosts != 2:
            raise ValueError(f"a gretap tunnel joins two hosts, not {hosts}")
        if path == "macvlan" and delay_us:
            raise ValueError("macvlan has no switch port for a delay (network.delay_us)")
        self.path = path
        self.underlay_net, self.underlay = host_addresses(underlay, hosts)
        self.tag = tag
        self.nhosts = hosts
        self.net, self.addresses = host_addresses(subnet, hosts)
        if not 68 <= int(mtu) <= 65535:
            raise ValueError(f"mtu out of range: {mtu}")
        self.mtu = int(mtu)
        self.setup_timeout_s = setup_timeout_s
        self.testbed: Testbed | None = None

    # -- construction
    def _create(self) -> Testbed:
        n, sw, t = self.names, self.names["switch_ns"], self.setup_timeout_s
        ip = lambda *a: run(["ip", *a], timeout=t)  # noqa: E731
        add_netns(sw, timeout=t)
        if self.path == "macvlan":
            # the direct path: one lower device, and a macvlan of it (bridge mode) per host; frames
            # between hosts pass from one macvlan to the other inside the driver, no software switch
            lower = f"{n['bridge'][:-2]}lo"
            ip("-n", sw, "link", "add", lower, "mtu", str(self.mtu), "type", "veth", "peer", "name",
               f"{lower}x", "mtu", str(self.mtu))
            for dev in (lower, f"{lower}x"):
                ip("-n", sw, "link", "set", dev, "up")
        else:
            add_bridge(n["bridge"], ns=sw, mtu=self.mtu, timeout=t)
        for i, (hns, port) in enumerate(zip(n["host_ns"], n["switch_ports"])):
            add_netns(hns, timeout=t)
            address = f"{self.addresses[i]}/{self.net.prefixlen}"
            if self.path == "macvlan":
                ip("-n", sw, "link", "add", port, "link", lower, "type", "macvlan", "mode", "bridge")
                ip("-n", sw, "link", "set", port, "netns", hns)
                ip("-n", hns, "link", "set", port, "name", HOST_IFACE)
                for argv in link.qdisc_argv(hns, HOST_IFACE, **self.link):   # at each host's egress
                    run(argv, timeout=t)
                set_address(hns, HOST_IFACE, address, timeout=t)
                continue
            # the host's link to the switch: eth0, or under a tunnel the underlay ul0
            wire = HOST_IFACE if self.path == "bridge" else link.UNDERLAY_IFACE
            add_port(port, n["bridge"], hns, peer=wire, ns=sw, mtu=self.mtu, timeout=t)
            for argv in link.qdisc_argv(sw, port, **self.link):
                run(argv, timeout=t)
            if self.path == "bridge":
                set_address(hns, HOST_IFACE, address, timeout=t)
                continue
            set_address(hns, wire, f"{self.underlay[i]}/{self.underlay_net.prefixlen}", timeout=t)
            peers = [a for j, a in enumerate(self.underlay) if j != i]
            for argv in link.tunnel_argv(self.path, hns, HOST_IFACE, wire, self.underlay[i], peers):
                run(argv, timeout=t)
            set_address(hns, HOST_IFACE, address, timeout=t)
        mtu = self.mtu - link.OVERHEAD.get(self.path, 0)
        return Testbed(kind="netns-bridge", tag=self.tag, hosts=list(n["host_ns"]),
                       addresses=list(self.addresses), subnet=str(self.net), mtu=mtu,
                       switch_ns=sw, bridge="" if self.path == "macvlan" else n["bridge"],
                       info={"testbed": "netns-bridge", "hosts": self.nhosts,
                             "subnet": str(self.net), "mtu": mtu, "path": self.path,
                             "link": link.label({**self.link, "path": self.path}),
                             **({"underlay": str(self.underlay_net), "underlay_mtu": self.mtu}
                                if self.path in link.TUNNELS else {}),
                             "agent": str(agent_path())})

    def _build(self) -> Testbed:
        self.testbed = self._create()
        return self.testbed
