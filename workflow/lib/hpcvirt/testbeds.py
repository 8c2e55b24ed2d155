"""Testbed kinds: how a benchmark's job becomes the exact command of one
measurement on a testbed.

A kind (:data:`hpcvirt.kinds.KINDS`) is a class with one way to
name its hosts, one exec prefix (run a command on host *i*) and one way to
build a launch; a container runtime (:mod:`hpcvirt.runtime`) wraps the ranks
of a native testbed.  Every MPI flag, launcher option and environment
variable comes from the testbed file (``mpi.<mpi>.launcher``, ``.env``,
``.paths.<path>``, ``.<benchmark>``), with its placeholders filled here:

``{ranks}`` ``{nodes}`` ``{block}``
    ranks, hosts used, ranks per block (every kind);
``{rank_hosts}`` ``{host_counts}`` ``{subnet}``
    the host of every rank (``h0,h0,h1``), the same as runs (``h0:2,h1:1``)
    and the private subnet (netns-bridge, qemu);
``{agent}``
    the remote-shell agent into a namespace (netns-bridge).

The result is a :class:`Launch`: argv lists (never a shell string), the
environment the testbed asks for, and an optional server process.
:func:`hpcvirt.execute.execute` runs it.
"""

from __future__ import annotations

import math
import shlex
from collections import Counter
from dataclasses import asdict, dataclass, field

from . import kinds
from .benchmarks import REGISTRY, Benchmark, Job
from .benchmarks.base import PATH_INTERCONNECT
from .benchmarks.common import fill
from .netns import agent_path
from .qemu import GUEST_ROOT
from .placement import hosts_used, plane_hosts, run_length
from .runtime import container_prefix, launch_env

# Keeps only rank 0's standard output (see the script).  Relative to the
# workflow's working directory, where every job runs.
RANK0_STDOUT = "./workflow/scripts/rank0-stdout"

# The same rank-0-only standard output, inline, for guests that do not have
# the repository's script.
RANK0_INLINE = [
    "sh",
    "-c",
    'r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-0}}}; if [ "$r" = 0 ]; then exec "$@" 2>&1; fi; exec "$@" >/dev/null',
    "rank0-stdout",
]


# Binds a rank in a guest to one vCPU, its local rank modulo the guest's
# vCPUs (the testbed key vm.bind_ranks).
RANK_BIND_INLINE = [
    "sh",
    "-c",
    'l=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}; exec taskset -c $((l % $(nproc))) "$@"',
    "bind-local-rank",
]


@dataclass
class Launch:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    server_argv: list[str] | None = None
    server_port: int | None = None
    server_probe_argv: list[str] | None = None
    isolation: str = "netns"
    ranks: int = 1
    nodes: int = 1
    ranks_per_node: int = 1
    mpi: str = ""
    interconnect: str = ""
    expected: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _env_words(*envs: dict) -> list[str]:
    merged: dict[str, str] = {}
    for e in envs:
        merged.update(e or {})
    return ["env", *(f"{k}={v}" for k, v in merged.items())] if merged else []


class Kind(kinds.Kind):
    """How one testbed kind launches jobs (its facts: :mod:`hpcvirt.kinds`).  ``bed`` is the object its
    context manager yields (None for native testbeds)."""

    net_label = "net"          # interconnect label of MPI traffic between hosts
    server_shape = (2, 1, 2)   # client/server jobs: (processes, hosts, per host)

    def hosts(self) -> list[str]:
        """Host names, rank placement uses them (before set-up: generic names)."""
        return [f"node{i}" for i in range(self.tb["nodes"])]

    def shape(self, bench: Benchmark, settings: dict) -> tuple[int, int, int]:
        """(ranks, hosts used, most ranks on one host) of a configuration;
        needs no set-up (Slurm allocation shapes come from it)."""
        job = bench.job(settings, self.entry(bench, settings))
        if job.mpi is None:
            return self.server_shape
        nodes = hosts_used(self.place(job))
        return job.ranks, nodes, math.ceil(job.ranks / nodes)

    def place(self, job: Job) -> list[str]:
        """The host of every rank: blocks of ``job.block`` ranks per host (plane distribution)."""
        return plane_hosts(self.hosts(), job.ranks, job.block or job.ranks)

    def on(self, i: int, cmd: list[str]) -> list[str]:
        """argv that runs ``cmd`` on host ``i``."""
        raise NotImplementedError

    # -- MPI jobs
    def values(self, job: Job, rank_hosts: list[str]) -> dict:
        return {"ranks": job.ranks, "nodes": hosts_used(rank_hosts), "block": job.block or job.ranks}

    def mpi_argv(self, job: Job, entry: dict, rank_hosts: list[str], wrap: bool = True) -> tuple[list[str], dict]:
        """(argv, environment) of an MPI job; ``wrap``: keep rank 0's output only."""
        raise NotImplementedError

    def mpi_launcher(self, mpi: str, rank_hosts: list[str], path: str | None = None) -> list[str]:
        """The argv prefix that starts ``len(rank_hosts)`` ranks of ``mpi``,
        rank i on ``rank_hosts[i]``, over data path ``path``; append the
        program (for the tests that run a command under MPI; every
        rank's output is kept)."""
        job = Job([], mpi=mpi, ranks=len(rank_hosts), path=path)
        argv, _ = self.mpi_argv(job, {}, list(rank_hosts), wrap=False)
        return argv

    # -- client/server jobs
    def client_server(self, job: Job, entry: dict) -> Launch:
        raise NotImplementedError

    def launch(self, bench: Benchmark, settings: dict) -> Launch:
        entry = self.entry(bench, settings)
        job = bench.job(settings, entry)
        if job.mpi is None:
            launch = self.client_server(job, entry)
            launch.expected = bench.expected(settings, [])
            return launch
        rank_hosts = self.place(job)
        argv, env = self.mpi_argv(job, entry, rank_hosts)
        nodes = hosts_used(rank_hosts)
        if job.path:   # a site's net may say what carries it (fabric: ib, ...); else TCP
            path = self.tb["mpi"][job.mpi]["paths"].get(job.path, {})
            interconnect = path.get("fabric") or PATH_INTERCONNECT[job.path]
        else:  # the MPI picks shared memory inside a host, the network between hosts
            interconnect = "shm" if nodes == 1 else f"shm+{self.net_label}"
        return Launch(argv=argv, env=env, isolation=self.isolation(), ranks=job.ranks, nodes=nodes,
                      ranks_per_node=math.ceil(job.ranks / nodes), mpi=job.mpi, interconnect=interconnect,
                      expected=bench.expected(settings, rank_hosts))

    def entry(self, bench: Benchmark, settings: dict) -> dict:
        entry = self.tb["mpi"][settings["mpi"]] if bench.mpi else self.tb
        if bench.name not in entry:
            raise ValueError(f"testbed {self.tb['name']} does not offer {bench.name}"
                             + (f" with {settings['mpi']}" if bench.mpi else ""))
        return entry[bench.name]

    def isolation(self) -> str:
        return "none"   # the testbed's own namespaces isolate it


def _even_ranks_per_node(rank_hosts: list[str]) -> int | None:
    """The ranks on each node when every node has as many; otherwise None."""
    counts = set(Counter(rank_hosts).values())
    return counts.pop() if len(counts) == 1 else None


class Native(Kind, kinds.Native):
    """Ranks on the host(s) themselves, started by the testbed's launcher
    (``mpirun``, ``srun``); each rank optionally inside a container.  Host
    names serve only the placement arithmetic: the launcher's own arguments
    (``{block}``) place the ranks on real nodes."""

    def isolation(self) -> str:
        return self.tb.get("isolation", "netns")

    def mpi_argv(self, job: Job, entry: dict, rank_hosts: list[str], wrap: bool = True) -> tuple[list[str], dict]:
        mpi = self.tb["mpi"][job.mpi]
        path = mpi["paths"][job.path] if job.path else {}
        v = self.values(job, rank_hosts)
        runtime = self.tb.get("runtime", {"kind": "none"})
        argv = (fill(mpi["launcher"], **v) + fill(path.get("args", []), **v) + fill(entry.get("args", []), **v)
                + ([RANK0_STDOUT] if wrap else [])
                + container_prefix(runtime, ranks_per_node=_even_ranks_per_node(rank_hosts))
                + job.argv)
        env = {**launch_env(runtime), **mpi.get("env", {}), **path.get("env", {}), **entry.get("env", {})}
        return argv, env

    def client_server(self, job: Job, entry: dict) -> Launch:
        runtime = self.tb.get("runtime", {"kind": "none"})
        prefix = container_prefix(runtime, single=True)   # one process each, inside the image too
        peer = entry.get("server_host", "127.0.0.1")
        return Launch(argv=prefix + fill(job.argv, peer=peer), env={**launch_env(runtime), **entry.get("env", {})},
                      server_argv=prefix + job.server_argv, server_port=job.port,
                      # a probe of the server's own namespace (which the runner shares); else a connect
                      server_probe_argv=job.probe_argv if job.probe_on_server else None,
                      # the server listens on every address: always give it a
                      # private namespace of its own, whatever the testbed's isolation
                      isolation="netns", ranks=self.server_shape[0], nodes=self.server_shape[1],
                      ranks_per_node=self.server_shape[2], mpi="none", interconnect="tcp-loopback")


class VmCluster(Native, kinds.VmCluster):
    """Ranks on a provider's virtual machines, started as on bare metal (:class:`Native`)."""


class _TwoHostKind(Kind, kinds.TwoHost):
    """Hosts that are namespaces or guests of the project's own: the launcher
    runs in the first host, the server of client/server jobs in the second."""

    net_label = "tcp"
    server_shape = (2, 2, 1)   # client on the first host, server on the second
    rank0: list[str] = []

    def rank_prefix(self) -> list[str]:
        """Words between the launcher's options and the program (its ranks' own wrappers)."""
        return []

    def _bed(self):
        if self.bed is None:
            raise ValueError(f"testbed {self.tb['name']} ({self.tb['kind']}) needs its hosts set up first")
        return self.bed

    def values(self, job: Job, rank_hosts: list[str]) -> dict:
        return {**super().values(job, rank_hosts), "rank_hosts": ",".join(rank_hosts),
                "host_counts": ",".join(f"{h}:{n}" for h, n in run_length(rank_hosts)),
                "subnet": self._bed().subnet}

    def mpi_argv(self, job: Job, entry: dict, rank_hosts: list[str], wrap: bool = True) -> tuple[list[str], dict]:
        mpi = self.tb["mpi"][job.mpi]
        path = mpi["paths"][job.path] if job.path else {}
        v = self.values(job, rank_hosts)
        words = (_env_words(mpi.get("env"), path.get("env")) + fill(mpi["launcher"], **v)
                 + fill(path.get("args", []), **v) + fill(entry.get("args", []), **v)
                 + _env_words(entry.get("env")) + self.rank_prefix() + (self.rank0 if wrap else []) + job.argv)
        return self.on(self.hosts().index(rank_hosts[0]), words), {}

    def client_server(self, job: Job, entry: dict) -> Launch:
        peer = self._bed().addresses[1]
        return Launch(argv=self.on(0, fill(job.argv, peer=peer)), server_argv=self.on(1, job.server_argv),
                      server_port=job.port,
                      server_probe_argv=self.on(1 if job.probe_on_server else 0, fill(job.probe_argv, peer=peer)),
                      isolation="none", ranks=self.server_shape[0], nodes=self.server_shape[1],
                      ranks_per_node=self.server_shape[2], mpi="none", interconnect="tcp")


class NetnsBridgeKind(_TwoHostKind, kinds.NetnsBridge):
    """Hosts are network namespaces on a Linux bridge (:mod:`hpcvirt.netns`)."""

    rank0 = [RANK0_STDOUT]

    def hosts(self) -> list[str]:
        return list(self.bed.hosts) if self.bed else super().hosts()

    def values(self, job: Job, rank_hosts: list[str]) -> dict:
        return {**super().values(job, rank_hosts), "agent": str(agent_path())}

    def on(self, i: int, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self._bed().hosts[i], *cmd]


class QemuKind(_TwoHostKind, kinds.Qemu):
    """Hosts are QEMU guests on a bridge (:mod:`hpcvirt.qemu`), reached over ssh."""

    rank0 = RANK0_INLINE           # the guests do not have the repository's script

    def hosts(self) -> list[str]:
        return list(self.bed.guests) if self.bed else super().hosts()

    def rank_prefix(self) -> list[str]:
        return RANK_BIND_INLINE if self.tb.get("vm", {}).get("bind_ranks") else []

    def on(self, i: int, cmd: list[str]) -> list[str]:
        # from the directory where the image holds the repository's files the ranks read
        # (workflow/scripts/build-guest-image.sh), so that relative paths name them as on the host
        return self._bed().argv(i, f"cd {GUEST_ROOT} && {shlex.join(cmd)}")


KINDS: dict[str, type[Kind]] = {k.name: k for k in (Native, VmCluster, NetnsBridgeKind, QemuKind)}
assert set(KINDS) == set(kinds.KINDS), "every kind launches"


#: UCX transports that need RDMA hardware (InfiniBand or RoCE), by their first part (rc_x, ud_verbs, dc_mlx5).
RDMA_TLS = {"rc", "ud", "dc", "ib"}
#: What an MPI's TCP-only selection may list beside tcp: the rank itself and transports inside one host.
LOCAL_TLS = {"self", "sm", "shm", "posix", "sysv", "cma", "knem", "xpmem", "vader"}


def fabric_problem(path: dict) -> str | None:
    """Why a path's declared ``fabric`` contradicts the transports its args/env select (None: it does not,
    or they do not say): ``ib``/``roce`` where Open MPI's ob1 or UCX may use TCP only, ``tcp``/``ipoib``
    where UCX is told to use RDMA transports.  The rows' interconnect and the paper's labels follow
    ``fabric``, so TCP labelled InfiniBand would be compared with a site's InfiniBand."""
    words = [str(w) for w in path.get("args", [])] + [f"{k}={v}" for k, v in path.get("env", {}).items()]
    env = dict(w.split("=", 1) for w in words if "=" in w)
    fabric = path.get("fabric", "tcp")
    btl = set(env.get("OMPI_MCA_btl", "").split(",")) - {""}
    tls = [t for t in env.get("UCX_TLS", "").split(",") if t]
    if env.get("OMPI_MCA_pml") == "ob1" and "tcp" in btl and btl <= {"tcp"} | LOCAL_TLS:
        tcp_only = f"OMPI_MCA_pml=ob1, OMPI_MCA_btl={env['OMPI_MCA_btl']}"
    elif tls and not any(t.startswith("^") for t in tls) and "tcp" in tls and set(tls) <= {"tcp"} | LOCAL_TLS:
        tcp_only = f"UCX_TLS={env['UCX_TLS']}"
    else:
        tcp_only = ""
    rdma = [t for t in tls if t.split("_")[0] in RDMA_TLS]
    if fabric in ("ib", "roce") and tcp_only:
        return (f"{fabric!r}, but its args/env let the MPI use TCP only ({tcp_only}): its rows would be labelled "
                f"and compared as {fabric}; say fabric: tcp (ipoib for TCP over InfiniBand)")
    if fabric in ("tcp", "ipoib") and rdma:
        return (f"{fabric!r}{'' if 'fabric' in path else ' (the default)'}, but its env tells UCX to use RDMA "
                f"({', '.join(rdma)} in UCX_TLS): say fabric: ib or roce")
    return None


def kind(tb: dict, bed=None) -> Kind:
    return KINDS[tb["kind"]](tb, bed)


def launch(c, tb: dict, bed=None) -> Launch:
    """The launch of configuration ``c`` (:class:`hpcvirt.matrix.Configuration`) on testbed ``tb``."""
    return kind(tb, bed).launch(REGISTRY[c.benchmark], c.settings)
