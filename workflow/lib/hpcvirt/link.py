"""Link settings of the two-host testbeds (``network.rate``, ``network.delay_us``
of a netns-bridge or qemu testbed file): the stand-ins for the interconnects
of different speeds the studies compared.

The settings become queueing disciplines on the switch's ports (the veth or
tap end in the testbed's own namespace), so every frame towards a host or
guest passes them, in both directions of a ping-pong:

* ``rate`` (e.g. ``1gbit``): a token bucket (``tbf``), kernel option
  CONFIG_NET_SCH_TBF; up to 2 Gbit/s with a peak rate, so that a message
  moves at the link's rate (measured with NetPIPE over the 1 Gbit/s link:
  0.90-0.93 Gbit/s from 32 KiB on; messages of a few KiB still pass at up to
  1.9 Gbit/s, as the peak bucket holds one 9000-byte frame and pacing single
  1500-byte frames halves the streaming rate); above 2 Gbit/s without a peak
  rate, so messages smaller than the bucket pass faster than the rate;
* ``delay_us``: a fixed one-way delay per port (``netem``), kernel option
  CONFIG_NET_SCH_NETEM; with both, the token bucket hangs below netem.

* ``path`` (netns-bridge testbeds): how the hosts' frames travel.
  ``bridge`` (default): through the software switch (a Linux bridge), the
  host side of bridged VMs.  ``vxlan`` / ``gretap``: an overlay tunnel
  between the hosts (Richter et al.'s TAP -> Open vSwitch -> GRE set-ups):
  each host's ``eth0`` is the tunnel, carried over an underlay link ``ul0``
  (``network.underlay``, default 198.19.254.0/24) through the switch, whose
  ports carry the rate limit; the tunnel's MTU is the link's less its
  header (50 and 38 bytes).  ``macvlan``: a direct path that bypasses the
  software switch (the stand-in for SR-IOV/PCI passthrough, Expósito et
  al. and Nanos et al.): each host's ``eth0`` is a macvlan (bridge mode) of
  one lower device, frames between hosts never cross a bridge; a rate limit
  sits at each host's egress.  Kernel options CONFIG_VXLAN, CONFIG_NET_IPGRE
  (gretap), CONFIG_MACVLAN; GRE is missing from some kernels: :func:`check`
  says so before any job runs.
* ``path`` (qemu testbeds): ``bridge`` (default): each guest's tap is a
  port of a Linux bridge (bridged VMs).  ``macvtap``: a direct path that
  bypasses the software switch (the guests' stand-in for SR-IOV/PCI
  passthrough): each guest's NIC is backed by a macvtap (bridge mode) of one
  lower device, so frames between guests are switched by the lower device's
  macvlan port table, never by a bridge; a rate limit sits at each guest's
  egress (the macvtap).  Kernel option CONFIG_MACVTAP.

The qdiscs live on interfaces of the testbed's namespaces and go with them
at teardown.  :func:`check` probes the running kernel in a throw-away network
namespace, so a setting the kernel cannot provide fails before any job runs,
naming the missing kernel option.
"""

from __future__ import annotations

import os
import re
import subprocess

#: Data paths of a netns-bridge testbed (``network.path``).
PATHS = ("bridge", "vxlan", "gretap", "macvlan")
#: Data paths of a qemu testbed (``network.path``).
GUEST_PATHS = ("bridge", "macvtap")
TUNNELS = ("vxlan", "gretap")
#: Bytes a tunnel adds to each frame (outer IPv4 + UDP + VXLAN + Ethernet; IPv4 + GRE + Ethernet).
OVERHEAD = {"vxlan": 50, "gretap": 38}
UNDERLAY = "198.19.254.0/24"
UNDERLAY_IFACE = "ul0"
VXLAN_ID, VXLAN_PORT = 42, 4789
RATE_RE = re.compile(r"^([1-9][0-9]{0,4})(mbit|gbit)$")
KERNEL_OPTION = {"tbf": "CONFIG_NET_SCH_TBF", "netem": "CONFIG_NET_SCH_NETEM", "vxlan": "CONFIG_VXLAN",
                 "gretap": "CONFIG_NET_IPGRE", "macvlan": "CONFIG_MACVLAN", "macvtap": "CONFIG_MACVTAP"}
# Up to this rate the token bucket also paces a peak rate (measured here: a 1 MiB ping-pong over a
# 1 Gbit/s link takes 8.8 ms, 8.4 ms on the wire; at 10 Gbit/s the peak rate no longer holds).
PEAKRATE_MAX = 2 * 10**9


CANNOT_PROBE = ("cannot create a network namespace", "ip is not installed", "tc is not installed")


class LinkError(RuntimeError):
    """A link setting that this host's kernel cannot provide."""


def rate_bits(rate: str) -> int:
    m = RATE_RE.match(rate)
    if not m:
        raise ValueError(f"rate {rate!r}: expected e.g. 100mbit or 1gbit")
    return int(m.group(1)) * (10**6 if m.group(2) == "mbit" else 10**9)


def label(network: dict | None) -> str:
    """The link setting as the rows record it ("" for an unshaped link)."""
    network = network or {}
    parts = [network["path"]] if network.get("path", "bridge") != "bridge" else []
    if network.get("rate"):
        parts.append(f"rate {network['rate']}")
    if network.get("delay_us"):
        parts.append(f"delay {network['delay_us']} us")
    return ", ".join(parts)


def qdisc_argv(ns: str, dev: str, rate: str | None = None, delay_us: int | None = None) -> list[list[str]]:
    """The tc commands that set the link of one switch port."""
    out = []
    parent = ["root"]
    if delay_us:
        out.append(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay",
                    f"{int(delay_us)}us"])
        parent = ["parent", "1:1"]
    if rate:
        bits = rate_bits(rate)
        if bits <= PEAKRATE_MAX:
            # a small bucket emptied at no more than the rate (peakrate, per jumbo frame): a message is never
            # faster than the link, ping-pong included (a large bucket lets a message of its size pass at once)
            shape = ["burst", "32768", "latency", "50ms", "peakrate", f"{bits * 1001 // 1000 // 1000}kbit",
                     "mtu", "9000"]
        else:
            # above that the qdisc's timers cannot pace a peak rate: a bucket of one timer tick (HZ >= 250);
            # a ping-pong message smaller than it passes faster than the rate
            shape = ["burst", str(max(256 * 1024, bits // 8 // 250)), "latency", "50ms"]
        out.append(["tc", "-n", ns, "qdisc", "add", "dev", dev, *parent, "handle", "10:", "tbf", "rate", rate, *shape])
    return out


def tunnel_argv(path: str, ns: str, dev: str, underlay_dev: str, local: str, peers: list[str]) -> list[list[str]]:
    """The commands that make ``dev`` in namespace ``ns`` a tunnel to ``peers`` over ``underlay_dev``."""
    if path == "vxlan":
        # unicast VXLAN: one all-zero forwarding entry per peer floods to each of them (head-end replication)
        return [["ip", "-n", ns, "link", "add", dev, "type", "vxlan", "id", str(VXLAN_ID), "dstport",
                 str(VXLAN_PORT), "local", local, "dev", underlay_dev],
                *(["bridge", "-n", ns, "fdb", "append", "00:00:00:00:00:00", "dev", dev, "dst", peer]
                  for peer in peers)]
    if path == "gretap":
        (peer,) = peers
        return [["ip", "-n", ns, "link", "add", dev, "type", "gretap", "local", local, "remote", peer]]
    raise ValueError(f"not a tunnel: {path}")


def needed(network: dict | None) -> list[str]:
    network = network or {}
    out = [k for k, on in (("netem", network.get("delay_us")), ("tbf", network.get("rate"))) if on]
    return out + ([network["path"]] if network.get("path", "bridge") != "bridge" else [])


def probe(kind: str, timeout: float = 20) -> str | None:
    """None if the kernel takes a ``kind`` qdisc or link, else tc's or ip's complaint."""
    ns = f"hvprobe{os.getpid()}"
    args = {"tbf": ["tbf", "rate", "1gbit", "burst", "262144", "latency", "50ms"],
            "netem": ["netem", "delay", "100us"],
            "vxlan": ["type", "vxlan", "id", "1", "dstport", str(VXLAN_PORT), "dev", "hvpa"],
            "gretap": ["type", "gretap", "local", "198.19.254.1", "remote", "198.19.254.2"],
            "macvlan": ["link", "hvpa", "type", "macvlan", "mode", "bridge"],
            "macvtap": ["link", "hvpa", "type", "macvtap", "mode", "bridge"]}[kind]
    run = lambda *a: subprocess.run(list(a), capture_output=True, text=True, timeout=timeout)  # noqa: E731
    try:
        made = run("ip", "netns", "add", ns)
        if made.returncode:
            return f"cannot create a network namespace to probe the kernel: {made.stderr.strip()}"
        run("ip", "-n", ns, "link", "add", "hvpa", "type", "veth", "peer", "name", "hvpb")
        if kind in PATHS + GUEST_PATHS:
            r = run("ip", "-n", ns, "link", "add", "hvpc", *args)
        else:
            r = run("tc", "-n", ns, "qdisc", "add", "dev", "hvpa", "root", *args)
        return None if r.returncode == 0 else (r.stderr.strip() or f"tc exit {r.returncode}")
    except FileNotFoundError as exc:
        return f"{exc.filename} is not installed"
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=timeout)


def check(network: dict | None, where: str) -> None:
    """Raise LinkError naming ``where`` and the missing kernel option if the
    kernel cannot provide the link settings."""
    for kind in needed(network):
        why = probe(kind)
        if why and why.startswith(CANNOT_PROBE):
            # no namespaces or no iproute2 here (e.g. redrawing figures without root rights): the
            # testbed itself cannot be built either, and its job says so; this is no kernel verdict
            continue
        if why and kind in PATHS + GUEST_PATHS:
            other = [p for p in (GUEST_PATHS if kind in GUEST_PATHS else PATHS) if p not in ("bridge", kind)]
            raise LinkError(f"{where}: network.path {kind} needs the kernel's {kind} devices ({KERNEL_OPTION[kind]}), "
                            f"which this host does not provide: ip said {why!r}. Use a kernel with "
                            f"{KERNEL_OPTION[kind]}, or another path ({', '.join([*other, 'bridge'])}).")
        if why:
            setting = "network.delay_us" if kind == "netem" else "network.rate"
            raise LinkError(f"{where}: {setting} needs the kernel's {kind} qdisc ({KERNEL_OPTION[kind]}), which "
                            f"this host does not provide: tc said {why!r}. Use a kernel with {KERNEL_OPTION[kind]} "
                            f"or remove {setting}.")
