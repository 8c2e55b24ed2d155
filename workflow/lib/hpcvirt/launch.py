"""Build the exact command of one measurement from a configuration and its
testbed.  Machine facts (launcher, MCA parameters, binaries) come only from the
testbed file; the benchmark declaration only knows its own parameters.

The result is a :class:`Launch`: argv lists (never a shell string), the extra
environment the testbed asks for, and an optional server process (raw TCP
tests need one).  :mod:`hpcvirt.runner` executes it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .containers import container_prefix, launch_env
from .matrix import Configuration, tcp_sizes
from .placement import chain_messages, hosts_used, placement_label, plane_hosts

# Keeps only rank 0's standard output (see the script).  Relative to the
# workflow's working directory (the repository), where every job runs.
RANK0_STDOUT = "./workflow/scripts/rank0-stdout"


# The same rank-0-only standard output, inline, for guests that do not have
# the repository's script.
RANK0_INLINE = [
    "sh",
    "-c",
    'r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-0}}}; if [ "$r" = 0 ]; then exec "$@" 2>&1; fi; exec "$@" >/dev/null',
    "rank0-stdout",
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


def _fill(words: list[str], **values) -> list[str]:
    return [w.format(**values) if "{" in w else w for w in words]


def _netpipe_args(s: dict, binary: str) -> list[str]:
    return [binary, "-l", str(s["min_bytes"]), "-u", str(s["max_bytes"]), "-p", "0", "-o", "/dev/null"]


def netpipe_launch(c: Configuration, tb: dict, bed=None) -> Launch:
    s = c.settings
    mpi = tb["mpi"][s["mpi"]]
    path = mpi["paths"][s["path"]]
    ranks = 2  # a ping-pong has exactly two ranks
    nodes = 1 if s["path"] in ("shm", "tcp") else 2
    if tb["kind"] != "native":
        return _netpipe_on_bed(c, tb, bed, ranks, nodes)
    argv = _fill(list(mpi["launcher"]), ranks=ranks, nodes=nodes)
    argv += list(path.get("args", []))
    argv += [RANK0_STDOUT]
    argv += container_prefix(tb.get("runtime", {"kind": "none"}))
    argv += _netpipe_args(s, mpi["netpipe"])
    runtime = tb.get("runtime", {"kind": "none"})
    env = {**launch_env(runtime), **mpi.get("env", {}), **path.get("env", {})}
    return _netpipe_launch(s, argv, env, tb.get("isolation", "netns"), ranks, nodes)


def _netpipe_launch(s: dict, argv: list[str], env: dict, isolation: str, ranks: int, nodes: int) -> Launch:
    return Launch(
        argv=argv,
        env=env,
        isolation=isolation,
        ranks=ranks,
        nodes=nodes,
        ranks_per_node=ranks // nodes,
        mpi=s["mpi"],
        interconnect={"shm": "shm", "tcp": "tcp-loopback", "net": "tcp"}[s["path"]],
        expected={"max_bytes": s["max_bytes"], "min_bytes": s["min_bytes"]},
    )


def _netpipe_on_bed(c: Configuration, tb: dict, bed, ranks: int, nodes: int) -> Launch:
    """NetPIPE across the hosts of a netns-bridge testbed or the guests of a
    qemu testbed; the launcher runs inside the first host/guest."""
    if bed is None:
        raise ValueError(f"testbed {tb['name']} ({tb['kind']}) needs its hosts set up first")
    s = c.settings
    mpi = tb["mpi"][s["mpi"]]
    transport = "default" if s["path"] == "shm" else "tcp"
    bench = _netpipe_args(s, mpi["netpipe"])
    if tb["kind"] == "netns-bridge":
        hosts = plane_hosts(bed.hosts, ranks, ranks if nodes == 1 else 1)
        argv = bed.launcher_argv(s["mpi"], hosts, ranks=ranks, transport=transport) + [RANK0_STDOUT] + bench
    else:  # qemu: run the launcher inside guest 0
        hosts = plane_hosts(bed.guests, ranks, ranks if nodes == 1 else 1)
        argv = bed.argv(0, bed.mpi_argv(s["mpi"], hosts, ranks=ranks, transport=transport) + RANK0_INLINE + bench)
    # isolation none: the testbed's own namespaces isolate it
    return _netpipe_launch(s, argv, {}, "none", ranks, nodes)


def qperf_launch(c: Configuration, tb: dict, bed=None) -> Launch:
    s = c.settings
    tcp = tb.get("tcp", {})
    # in a container testbed qperf runs inside the image too (one process each)
    qperf_cmd = container_prefix(tb.get("runtime", {"kind": "none"}), single=True) + [tcp.get("qperf", "qperf")]
    port = int(tcp.get("port", 19765))
    host = tcp.get("server_host", "127.0.0.1")
    sizes = tcp_sizes(s["min_bytes"], s["max_bytes"], s["factor"])
    argv = [
        *qperf_cmd,
        "-lp",
        str(port),
        "-t",
        str(s['seconds_per_size']),
        "-vu",
        "-uu",
        "-oo",
        f"msg_size:{s['min_bytes']}:{s['max_bytes']}:*{s['factor']}",
        host,
        s["test"],
    ]
    server = [*qperf_cmd, "--listen_port", str(port)]
    launch = Launch(
        argv=argv,
        server_argv=server,
        server_port=port,
        # qperf's server listens on every address: always give it a private
        # namespace of its own, whatever the testbed's isolation setting.
        isolation="netns",
        ranks=2,
        nodes=1,
        ranks_per_node=2,
        env=launch_env(tb.get("runtime", {"kind": "none"})),
        mpi="none",
        interconnect="tcp-loopback",
        expected={"sizes": sizes, "test": s["test"]},
    )
    if tb["kind"] == "native":
        return launch
    if bed is None:
        raise ValueError(f"testbed {tb['name']} ({tb['kind']}) needs its hosts set up first")
    # server on the second host/guest, client on the first, across the bridge
    peer = bed.addresses[1]
    client = argv[:-2] + [peer, s["test"]]
    probe = [*qperf_cmd, "-lp", str(port), "-t", "1", peer, "conf"]
    if tb["kind"] == "netns-bridge":
        launch.argv = bed.exec_prefix(0) + client
        launch.server_argv = bed.exec_prefix(1) + server
        launch.server_probe_argv = bed.exec_prefix(0) + probe
    else:
        launch.argv = bed.argv(0, client)
        launch.server_argv = bed.argv(1, server)
        launch.server_probe_argv = bed.argv(0, probe)
    launch.isolation = "none"
    launch.nodes, launch.ranks_per_node, launch.interconnect = 2, 1, "tcp"
    return launch


def _advect_args(s: dict, binary: str) -> list[str]:
    g = s["grid"]
    args = [binary, "-x", str(g["x"]), "-y", str(g["y"]), "-z", str(g["z_per_rank"]),
            "-s", str(s["steps"]), "-w", str(s["warmup"])]
    return args + ([] if s["verify"] else ["-n"])


def advect_launch(c: Configuration, tb: dict, bed=None) -> Launch:
    """The placement benchmark: ``ranks`` ranks in blocks of ``block`` per host
    (netns-bridge hosts, qemu guests, or the nodes of a native cluster, where
    the testbed's ``advect.args`` place them, e.g. srun's plane distribution).
    Each MPI picks its own transports: shared memory inside a host or guest,
    the network between them."""
    s = c.settings
    mpi = tb["mpi"][s["mpi"]]
    adv = mpi["advect"]
    ranks, block = s["ranks"], s["block"]
    bench = _advect_args(s, adv["binary"])
    if tb["kind"] == "native":
        names = [f"node{i}" for i in range(tb["nodes"])]
        hosts = plane_hosts(names, ranks, block)
        nodes = hosts_used(hosts)
        argv = _fill(list(mpi["launcher"]), ranks=ranks, nodes=nodes)
        argv += _fill(list(adv.get("args", [])), block=block, nodes=nodes)
        argv += [RANK0_STDOUT] + container_prefix(tb.get("runtime", {"kind": "none"})) + bench
        env = {**launch_env(tb.get("runtime", {"kind": "none"})), **mpi.get("env", {}), **adv.get("env", {})}
        isolation = tb.get("isolation", "netns")
    elif bed is None:
        raise ValueError(f"testbed {tb['name']} ({tb['kind']}) needs its hosts set up first")
    else:
        extra = list(adv.get("args", []))
        envw = [f"{k}={v}" for k, v in adv.get("env", {}).items()]
        if tb["kind"] == "netns-bridge":
            hosts = plane_hosts(bed.hosts, ranks, block)
            argv = (bed.launcher_argv(s["mpi"], hosts, ranks=ranks, transport="default") + extra
                    + (["env", *envw] if envw else []) + [RANK0_STDOUT] + bench)
        else:  # qemu: the launcher runs inside guest 0
            hosts = plane_hosts(bed.guests, ranks, block)
            argv = bed.argv(0, bed.mpi_argv(s["mpi"], hosts, ranks=ranks, transport="default") + extra
                            + (["env", *envw] if envw else []) + RANK0_INLINE + bench)
        nodes, env, isolation = hosts_used(hosts), {}, "none"
    messages, network = chain_messages(hosts, s["steps"])
    return Launch(
        argv=argv,
        env=env,
        isolation=isolation,
        ranks=ranks,
        nodes=nodes,
        ranks_per_node=-(-ranks // nodes),
        mpi=s["mpi"],
        interconnect="shm" if nodes == 1 else ("shm+net" if tb["kind"] == "native" else "shm+tcp"),
        expected={"ranks": ranks, "steps": s["steps"], "messages": messages, "messages_network": network,
                  "placement": placement_label(ranks, block), "block": block, "variant": f"{block} per block",
                  "warmup": f"{s['warmup']} untimed steps"},
    )


def build(c: Configuration, tb: dict, bed=None) -> Launch:
    if c.benchmark == "netpipe":
        return netpipe_launch(c, tb, bed)
    if c.benchmark == "qperf":
        return qperf_launch(c, tb, bed)
    if c.benchmark == "advect":
        return advect_launch(c, tb, bed)
    raise ValueError(f"unknown benchmark {c.benchmark!r}")
