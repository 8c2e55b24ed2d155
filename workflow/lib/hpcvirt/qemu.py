"""The ``qemu`` testbed: Debian guests on a bridge inside a network namespace.

Layout for ``QemuCluster("ab1", guests=2)``::

    netns hv-ab1-vm
      hvab1br 198.18.1.254/24  (bridge; the ssh client side)
        +- hvab1t0 (tap) -- qemu guest g0, virtio-net, 198.18.1.1
        +- hvab1t1 (tap) -- qemu guest g1, virtio-net, 198.18.1.2

With ``path="macvtap"`` (a direct path that bypasses the software switch,
:mod:`hpcvirt.link`) there is no bridge::

    netns hv-ab1-vm
      hvab1lo (veth, the lower device; its peer hvab1lp idles)
        +- hvab1br 198.18.1.254/24 (macvlan, bridge mode; the ssh client side)
        +- hvab1t0 (macvtap, bridge mode, the guest's MAC) -- /dev node -- qemu guest g0
        +- hvab1t1 (macvtap, bridge mode, the guest's MAC) -- /dev node -- qemu guest g1

qemu gets each macvtap's character device as an open file descriptor (a
node made in the run directory from the device's major:minor in the
namespace's sysfs, since /dev names it by an interface index that is only
unique per namespace).

Guests boot the image of ``workflow/scripts/build-guest-image.sh`` (kernel
and initrd passed with ``-kernel/-initrd``, root disk through a per-guest
qcow2 overlay, so the cached base image is never written).  The address and
host name of each guest come from the kernel command line
(``hpcvirt.ip=``, ``hpcvirt.hostname=``, ``hpcvirt.hosts=``).  ssh from the
namespace into each guest uses the key pair generated when the image was built
and a ``known_hosts`` file pinned to the image's host key.

``accel="auto"`` uses KVM only if a quick probe boot (kernel with no root
file system, ``-no-reboot``: it must print its banner and panic within
seconds) really works; otherwise TCG (:mod:`hpcvirt.kvm`, whose functions
are imported from here as well).  The choice is in ``cluster.accel``
and ``cluster.info`` (record it: under TCG the numbers measure the emulator).

Teardown (qemu processes, anything else inside the namespace, taps, bridge,
macvtaps and their device nodes, namespace, overlays) runs on normal exit, exceptions, boot timeouts,
SIGTERM and SIGINT; :func:`cleanup` removes what a SIGKILLed run left.
What the context manager yields, a :class:`Cluster` that runs commands in
the guests (and raises :class:`GuestDied` when one dies meanwhile), is
:mod:`hpcvirt.qemuguests`; both are imported from here as well.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from .netns import (GuardedTestbed, host_addresses, TestbedError, kill_pids, delete_netns,
                    list_netns, run, validate_tag)
from .qemuguests import SSH_CONNECT_TIMEOUT_S, Cluster, GuestDied, tail
from . import link, paths
from .kvm import QEMU, planned_accel, probe_kvm, probe_kvm_cached

# with the running guests' handle and its error (hpcvirt.qemuguests), which callers import from here
__all__ = ["QEMU", "DEFAULT_SUBNET", "GUEST_ROOT", "BootTimeout", "Cluster", "GuestDied", "QemuCluster", "build_script",
           "ensure_guest_image", "KEY_FILES", "keep_keys_private", "names", "guest_addresses", "guest_mac",
           "kernel_cmdline", "qemu_argv", "tail", "planned_accel", "probe_kvm_cached", "probe_kvm", "cleanup"]

DEFAULT_SUBNET = "198.18.1.0/24"
#: Where the guest image holds the pinned suites and the repository's files that ranks read
#: (workflow/scripts/build-guest-image.sh); commands in the guests run from here.
GUEST_ROOT = "/opt/hpcvirt"


class BootTimeout(TestbedError):
    """A guest did not answer ssh in time."""


# ----------------------------------------------------------------- paths
def build_script() -> Path:
    return paths.script("build-guest-image.sh")


def ensure_guest_image(timeout_s: float = 1800, force: bool = False) -> Path:
    """Build (or reuse from the cache) the guest image; return its directory
    ``$HPCVIRT_WORKDIR/guest/<key>``."""
    cmd = ["bash", str(build_script())] + (["--force"] if force else [])
    # the script builds the pinned suites with this interpreter (hpcvirt.build)
    cp = run(cmd, timeout=timeout_s, check=False, env={**os.environ, "HPCVIRT_PYTHON": sys.executable})
    if cp.returncode != 0:
        raise TestbedError(f"guest image build failed ({cp.returncode}):\n{cp.stderr[-3000:]}")
    out = Path(cp.stdout.strip().splitlines()[-1])
    for f in ("vmlinuz", "initrd.img", "rootfs.raw", "ssh/id_ed25519",
              "ssh/ssh_host_ed25519_key.pub", ".complete"):
        if not (out / f).exists():
            raise TestbedError(f"guest image {out} incomplete: {f} missing")
    keep_keys_private(out)
    return out


#: Files of a guest image that hold private keys (the root filesystem holds both).
KEY_FILES = ("rootfs.raw", "ssh/id_ed25519", "ssh/ssh_host_ed25519_key")


def keep_keys_private(image: Path) -> list[Path]:
    """Make the image directory 0700 and its files that hold private keys
    0600 (the build script creates them so; an image built before it did is
    corrected, saying so); return the files corrected."""
    fixed = []
    for path, mode in ((image, 0o700), *((image / f, 0o600) for f in KEY_FILES)):
        if path.exists() and path.stat().st_mode & 0o077:
            os.chmod(path, mode)
            fixed.append(path)
    if fixed:
        print(f"guest image {image}: made {', '.join(str(p.relative_to(image)) for p in fixed)} private "
              "(they hold private keys)", file=sys.stderr)
    return fixed


# ----------------------------------------------------------------- pure parts
def names(tag: str, guests: int = 2) -> dict:
    validate_tag(tag)
    if not 1 <= guests <= 99:
        raise ValueError(f"guests must be in 1..99, got {guests}")
    return {
        "ns": f"hv-{tag}-vm",
        "bridge": f"hv{tag}br",
        "taps": [f"hv{tag}t{i}" for i in range(guests)],
        "lower": f"hv{tag}lo", "lower_peer": f"hv{tag}lp",      # path macvtap
        "guests": [f"g{i}" for i in range(guests)],
        "run_dir": paths.workdir() / "run" / f"qemu-{tag}",
    }


def guest_addresses(subnet: str, guests: int) -> tuple[ipaddress.IPv4Network, list[str], str]:
    """(network, guest addresses .1 .. .n, bridge address = last usable)."""
    net, addresses = host_addresses(subnet, guests)
    return net, addresses, str(list(net.hosts())[-1])


def guest_mac(tag: str, i: int) -> str:
    """Deterministic locally administered MAC per (tag, guest)."""
    h = sum(ord(c) * 31 ** k for k, c in enumerate(tag)) & 0xFFFF
    return f"52:54:{h >> 8:02x}:{h & 0xFF:02x}:00:{i:02x}"


def kernel_cmdline(name: str, addr: str, prefixlen: int, hosts: dict[str, str],
                   mtu: int = 1500) -> str:
    hosts_s = ",".join(f"{n}:{a}" for n, a in hosts.items())
    return (f"console=ttyS0 root=/dev/vda rw panic=-1 quiet "
            f"hpcvirt.ip={addr}/{prefixlen} hpcvirt.hostname={name} "
            f"hpcvirt.hosts={hosts_s} hpcvirt.mtu={mtu}")


def qemu_argv(*, accel: str, vcpus: int, memory_mb: int, kernel: Path, initrd: Path,
              disk: Path, append: str, tap: str, mac: str, serial_log: Path,
              pidfile: Path, tap_fd: int | None = None) -> list[str]:
    """qemu's command line; the NIC is the tap ``tap`` or, with ``tap_fd``, the
    open character device of a macvtap."""
    if accel == "kvm":
        accel_args = ["-accel", "kvm", "-cpu", "host"]
    elif accel == "tcg":
        accel_args = ["-accel", "tcg,thread=multi", "-cpu", "max"]
    else:
        raise ValueError(f"accel must be 'kvm' or 'tcg', got {accel!r}")
    return [
        QEMU, *accel_args, "-machine", "q35", "-smp", str(vcpus), "-m", str(memory_mb),
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-kernel", str(kernel), "-initrd", str(initrd), "-append", append,
        "-drive", f"file={disk},if=virtio,format=qcow2,cache=unsafe",
        "-netdev", (f"tap,id=n0,fd={tap_fd}" if tap_fd is not None
                    else f"tap,id=n0,ifname={tap},script=no,downscript=no"),
        "-device", f"virtio-net-pci,netdev=n0,mac={mac}",
        "-serial", f"file:{serial_log}", "-pidfile", str(pidfile),
    ]


# ----------------------------------------------------------------- accel probe
# ----------------------------------------------------------------- cleanup
def _pid_is_our_qemu(pid: int, run_dir: Path) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmd) and cmd[0].endswith(QEMU.encode()) and any(
        str(run_dir).encode() in a for a in cmd)


def cleanup(tag: str) -> list[str]:
    """Kill the qemu processes of run ``tag`` (from their pidfiles, checked
    against /proc/PID/cmdline), everything else in its namespace, delete the
    namespace (taps and bridge go with it) and the overlays.  Idempotent;
    returns what it removed."""
    n = names(tag)
    removed = []
    run_dir = n["run_dir"]
    pids = []
    if run_dir.is_dir():
        for pf in run_dir.glob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                pid = int(pf.read_text().strip())
                if _pid_is_our_qemu(pid, run_dir):
                    pids.append(pid)
    if pids:
        kill_pids(pids, grace_s=5)
        removed += [f"qemu pid {p}" for p in pids]
    if n["ns"] in list_netns():
        delete_netns(n["ns"])
        removed.append(n["ns"])
    if run_dir.is_dir():
        for f in list(run_dir.glob("*.qcow2")) + list(run_dir.glob("*.pid")) + list(run_dir.glob("*.tapdev")):
            with contextlib.suppress(OSError):
                f.unlink()
    return removed


class QemuCluster(GuardedTestbed):
    """Context manager: boot ``guests`` qemu guests on a private bridge and
    wait until ssh answers in each; yields a :class:`Cluster`."""

    def __init__(self, tag: str, guests: int = 2, vcpus: int = 1, memory_mb: int = 1024,
                 accel: str = "auto", boot_timeout_s: float = 240,
                 subnet: str = DEFAULT_SUBNET, mtu: int = 1500, image: Path | None = None,
                 rate: str | None = None, delay_us: int | None = None, path: str = "bridge"):
        self.link = {"rate": rate, "delay_us": delay_us}   # hpcvirt.link: qdiscs on the taps
        if path not in link.GUEST_PATHS:
            raise ValueError(f"path must be one of {', '.join(link.GUEST_PATHS)}, got {path!r}")
        if path == "macvtap" and delay_us:
            raise ValueError("a macvtap has no switch port for a delay (allowed: rate)")
        self.path = path
        if accel not in ("auto", "kvm", "tcg"):
            raise ValueError(f"accel must be auto, kvm or tcg, got {accel!r}")
        self.n = names(tag, guests)
        self.tag, self.nguests = tag, guests
        self.vcpus, self.memory_mb, self.mtu = int(vcpus), int(memory_mb), int(mtu)
        self.accel_req, self.boot_timeout_s = accel, boot_timeout_s
        self.net, self.addresses, self.bridge_addr = guest_addresses(subnet, guests)
        self.image = Path(image) if image else None
        self.cluster: Cluster | None = None

    def _tools(self) -> tuple[str, ...]:
        return (QEMU, "qemu-img", "ssh")

    def _build(self) -> Cluster:
        self.cluster = self._start()
        return self.cluster

    def _stop(self) -> None:
        if self.cluster is not None:
            kill_pids([p.pid for p in self.cluster.procs if p.poll() is None], grace_s=5)
            for p in self.cluster.procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=5)

    def _cleanup(self) -> None:
        cleanup(self.tag)

    def _start(self) -> Cluster:
        t0 = time.monotonic()
        image = self.image or ensure_guest_image()
        n, ns, run_dir = self.n, self.n["ns"], self.n["run_dir"]
        run_dir.mkdir(parents=True, exist_ok=True)
        accel, accel_note = self.accel_req, "requested"
        if accel == "auto":
            ok, accel_note = probe_kvm_cached(image)
            accel = "kvm" if ok else "tcg"

        # known_hosts pinned to the image's host key, under names and addresses
        hostkey = (image / "ssh" / "ssh_host_ed25519_key.pub").read_text().split()[:2]
        known = run_dir / "known_hosts"
        known.write_text("".join(f"{a} {' '.join(hostkey)}\n" for a in self.addresses))
        key = image / "ssh" / "id_ed25519"

        ip = lambda *a: run(["ip", *a], timeout=30)  # noqa: E731
        ip("netns", "add", ns)
        ip("-n", ns, "link", "set", "lo", "up")
        if self.path == "macvtap":
            # the lower device of the guests' macvtaps and of the namespace's own port (a veth end: no
            # bridge anywhere); macvlan ports in bridge mode on one lower device reach each other
            ip("-n", ns, "link", "add", n["lower"], "mtu", str(self.mtu), "type", "veth", "peer", "name",
               n["lower_peer"], "mtu", str(self.mtu))
            ip("-n", ns, "link", "set", n["lower_peer"], "up")
            ip("-n", ns, "link", "set", n["lower"], "up")
            ip("-n", ns, "link", "add", n["bridge"], "link", n["lower"], "type", "macvlan", "mode", "bridge")
        else:
            ip("-n", ns, "link", "add", n["bridge"], "mtu", str(self.mtu), "type", "bridge")
        ip("-n", ns, "addr", "add", f"{self.bridge_addr}/{self.net.prefixlen}", "dev", n["bridge"])
        ip("-n", ns, "link", "set", n["bridge"], "up")
        hosts = dict(zip(n["guests"], self.addresses))
        procs, serials = [], []
        cluster = Cluster(kind="qemu", tag=self.tag, guests=list(n["guests"]),
                          addresses=list(self.addresses), subnet=str(self.net), accel=accel,
                          ns=ns, key=key, known_hosts=known, run_dir=run_dir,
                          serial_logs=serials, procs=procs)
        self.cluster = cluster            # from here on teardown knows the processes
        for i, (g, tap) in enumerate(zip(n["guests"], n["taps"])):
            tap_fd = None
            if self.path == "macvtap":
                ip("-n", ns, "link", "add", tap, "link", n["lower"], "type", "macvtap", "mode", "bridge")
                ip("-n", ns, "link", "set", tap, "address", guest_mac(self.tag, i), "mtu", str(self.mtu), "up")
                tap_fd = os.open(self._macvtap_node(tap, run_dir / f"{g}.tapdev"), os.O_RDWR)
            else:
                ip("-n", ns, "tuntap", "add", "dev", tap, "mode", "tap")
                ip("-n", ns, "link", "set", tap, "mtu", str(self.mtu), "master", n["bridge"], "up")
            for argv in link.qdisc_argv(ns, tap, **self.link):
                run(argv, timeout=30)
            overlay = run_dir / f"{g}.qcow2"
            run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(image / "rootfs.raw"),
                 "-F", "raw", str(overlay)], timeout=30)
            serial = run_dir / f"{g}.serial"
            serial.unlink(missing_ok=True)
            serials.append(serial)
            argv = qemu_argv(accel=accel, vcpus=self.vcpus, memory_mb=self.memory_mb,
                             kernel=image / "vmlinuz", initrd=image / "initrd.img",
                             disk=overlay, tap=tap, mac=guest_mac(self.tag, i),
                             append=kernel_cmdline(g, self.addresses[i], self.net.prefixlen,
                                                   hosts, self.mtu),
                             serial_log=serial, pidfile=run_dir / f"{g}.pid", tap_fd=tap_fd)
            # ip netns exec execs qemu directly: Popen.pid is qemu's pid.
            # New session: a terminal's Ctrl-C reaches only us; we stop qemu.
            try:
                with open(run_dir / f"{g}.qemu.log", "w") as qlog:
                    procs.append(subprocess.Popen(
                        ["ip", "netns", "exec", ns, *argv], stdin=subprocess.DEVNULL,
                        stdout=qlog, stderr=subprocess.STDOUT, start_new_session=True,
                        pass_fds=() if tap_fd is None else (tap_fd,)))
            finally:
                if tap_fd is not None:
                    os.close(tap_fd)
        boot = self._wait_ssh(cluster, time.monotonic())
        no_master = cluster.start_masters()
        nic_irqs = cluster.steer_nic_irqs()
        cluster.info = {
            "testbed": "qemu", "accel": accel, "accel_reason": accel_note,
            "accel_requested": self.accel_req, "guests": self.nguests, "vcpus": self.vcpus,
            "memory_mb": self.memory_mb, "subnet": str(self.net), "mtu": self.mtu,
            "link": link.label({**self.link, "path": self.path}),
            "image": str(image), "image_key": image.name,
            "qemu_version": run([QEMU, "--version"], timeout=10).stdout.splitlines()[0],
            "boot_to_ssh_s": boot, "setup_s": round(time.monotonic() - t0, 1),
            "ssh_master": sorted(set(cluster.guests) - set(no_master)),
            "nic_irqs_on_cpu0": nic_irqs,
        }
        with contextlib.suppress(OSError):
            cluster.info["image_build"] = json.loads((image / "build.json").read_text())
        return cluster

    def _macvtap_node(self, dev: str, node: Path) -> Path:
        """A character device node at ``node`` for macvtap ``dev`` of the namespace."""
        sysfs = f"/sys/class/net/{dev}"
        cp = run(["ip", "netns", "exec", self.n["ns"], "sh", "-c",
                  f'cat {sysfs}/macvtap/tap"$(cat {sysfs}/ifindex)"/dev'], timeout=30)
        major, minor = (int(x) for x in cp.stdout.strip().split(":"))
        node.unlink(missing_ok=True)
        try:
            os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(major, minor))
        except OSError as exc:
            raise TestbedError(f"cannot make the device node {node} of macvtap {dev} ({major}:{minor}): {exc}; "
                               "the run directory must be on a file system that allows device nodes "
                               "(not mounted nodev)") from None
        return node

    def _wait_ssh(self, c: Cluster, t_start: float) -> dict[str, float]:
        deadline = t_start + self.boot_timeout_s
        pending = set(range(self.nguests))
        ready: dict[str, float] = {}
        while pending:
            c.check_alive()
            for i in sorted(pending):
                cp = run(c.argv(i, "true"), timeout=SSH_CONNECT_TIMEOUT_S + 10, check=False)
                if cp.returncode == 0:
                    ready[c.guests[i]] = round(time.monotonic() - t_start, 1)
                    pending.discard(i)
            if pending and time.monotonic() > deadline:
                i = min(pending)
                raise BootTimeout(
                    f"guest {c.guests[i]} ({c.addresses[i]}, accel {c.accel}) did not answer "
                    f"ssh within {self.boot_timeout_s} s; serial log {c.serial_logs[i]} ends with:\n"
                    f"{tail(c.serial_logs[i])}")
            if pending:
                time.sleep(1)
        return ready
