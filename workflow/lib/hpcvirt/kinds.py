"""The testbed kinds: what each kind is, in one class apiece.

A testbed file's ``kind`` names one of :data:`KINDS`.  Each class says what
its kind allows and does: the placeholders its launcher words may hold,
whether its hosts are the project's own with a link it sets up (rate, delay,
data path), which data paths that link may take, whether a container runtime
may wrap its ranks (and a scheduler start them), whether its hosts boot once
per interleaved round, whether its image carries the suites, and the
virtualization label its tidy rows get.  Configuration checks, the
workflow's rules, the builds and the measurements read these facts here;
how a kind launches its jobs is :mod:`hpcvirt.testbeds`, whose classes
extend these.  (This module imports nothing heavy, so that the configuration
can import it.)
"""

from __future__ import annotations

from . import link


class Kind:
    """A testbed kind's facts.  ``tb``: the testbed file; ``bed``: the object the kind's set-up yields (its
    namespaces or guests; None before set-up and for native testbeds)."""

    name = ""
    #: placeholders the kind fills in launcher words, path and benchmark arguments
    placeholders: frozenset[str] = frozenset({"ranks", "nodes", "block"})
    #: the kind's hosts are the project's own, joined by a link it sets up (rate, delay, data path)
    own_link = False
    #: the data paths (network.path) its link may take
    network_paths: tuple[str, ...] = ("bridge",)
    #: a container runtime may wrap its ranks, and a scheduler other than the local one may start them
    wraps_ranks = False
    #: its hosts are booted once per interleaved round (a job per round, not per measurement)
    boots_per_round = False
    #: its hosts' image carries every build of the pinned suites (hpcvirt.build), copied in when it is built
    image_carries_suites = False
    #: its hosts are set up for each run (each attempt of a measurement) and gone when it ends
    hosts_per_run = False
    #: its hosts are guests that run with KVM or emulated (TCG), as the testbed's ``vm.accel`` and the host
    #: allow: emulated, they run only the study's ``emulated_guests.experiments`` (hpcvirt.matrix)
    may_be_emulated = False

    def __init__(self, tb: dict, bed=None):
        self.tb, self.bed = tb, bed

    def virtualization(self) -> str:
        """The tidy rows' virtualization label: what the ranks ran in, with ``+<runtime>`` for a container
        runtime; for guests the accelerator actually used (so it appears beside every VM number)."""
        runtime = self.tb.get("runtime", {"kind": "none"})["kind"]
        return self._virtualization() + ("" if runtime == "none" else f"+{runtime}")

    def _virtualization(self) -> str:
        return self.name


class Native(Kind):
    """The host(s) themselves: ranks started by the testbed's launcher (``mpirun``, ``srun``), each
    optionally inside a container."""

    name = "native"
    wraps_ranks = True

    def _virtualization(self) -> str:
        return "none"


class VmCluster(Native):
    """Hosts that are virtual machines a site or a cloud provides (a VM cluster, cloud instances): the
    project neither boots nor configures them, so ranks start as on bare metal, through the testbed's
    launcher.  The testbed file names the hypervisor under them (``hypervisor``); its rows are labelled
    ``vm-<hypervisor>``, so that the analysis sets each of its paths against the same path of a bare-metal
    testbed of the campaign (between nodes against between nodes)."""

    name = "vm-cluster"
    #: its rows' virtualization label is this and the hypervisor
    label_prefix = "vm-"

    def _virtualization(self) -> str:
        return f"{self.label_prefix}{self.tb['hypervisor']}"


class TwoHost(Kind):
    """Hosts of the project's own (namespaces or guests) on a link it sets up."""

    placeholders = Kind.placeholders | {"rank_hosts", "host_counts", "subnet"}
    own_link = True


class NetnsBridge(TwoHost):
    """Hosts are network namespaces on a Linux bridge or another data path (:mod:`hpcvirt.netns`)."""

    name = "netns-bridge"
    placeholders = TwoHost.placeholders | {"agent"}
    network_paths = link.PATHS
    hosts_per_run = True


class Qemu(TwoHost):
    """Hosts are QEMU guests (:mod:`hpcvirt.qemu`), booted once per interleaved round from an image that
    carries the suites."""

    name = "qemu"
    network_paths = link.GUEST_PATHS
    boots_per_round = True
    image_carries_suites = True
    may_be_emulated = True

    def _virtualization(self) -> str:
        return f"qemu-{getattr(self.bed, 'accel', 'unknown')}"


KINDS: dict[str, type[Kind]] = {k.name: k for k in (Native, VmCluster, NetnsBridge, Qemu)}


def guest_accel(virtualization) -> str:
    """The accelerator in a tidy row's virtualization label when its ranks ran in guests
    (``qemu-tcg+apptainer`` -> ``tcg``); empty for any other label."""
    label = str(virtualization or "").split("+")[0]
    prefix = f"{Qemu.name}-"
    return label[len(prefix):] if label.startswith(prefix) else ""


def cluster_hypervisor(virtualization) -> str:
    """The hypervisor in a tidy row's virtualization label when its ranks ran on a VM cluster
    (``vm-kvm`` -> ``kvm``); empty for any other label."""
    label, prefix = str(virtualization or "").split("+")[0], VmCluster.label_prefix
    return label[len(prefix):] if label.startswith(prefix) else ""


def is_bridge(virtualization) -> bool:
    """Whether a tidy row's virtualization label is the namespaces' (their hosts on the project's link)."""
    return str(virtualization or "").split("+")[0] == NetnsBridge.name
