"""Build the exact command of one measurement from a configuration and its
testbed.  Machine facts (launcher, MCA parameters, binaries) come only from the
testbed file; the benchmark declaration only knows its own parameters.

The result is a :class:`Launch`: argv lists (never a shell string), the extra
environment the testbed asks for, and an optional server process (raw TCP
tests need one).  :mod:`hpcvirt.runner` executes it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .containers import container_prefix
from .matrix import Configuration, tcp_sizes

# Keeps only rank 0's standard output (see the script).  Relative to the
# workflow's working directory (the repository), where every job runs.
RANK0_STDOUT = "./workflow/scripts/rank0-stdout"


@dataclass
class Launch:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    server_argv: list[str] | None = None
    server_port: int | None = None
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


def netpipe_launch(c: Configuration, tb: dict) -> Launch:
    s = c.settings
    mpi = tb["mpi"][s["mpi"]]
    path = mpi["paths"][s["path"]]
    ranks = 2  # a ping-pong has exactly two ranks
    nodes = 1 if s["path"] in ("shm", "tcp") else 2
    argv = _fill(list(mpi["launcher"]), ranks=ranks, nodes=nodes)
    argv += list(path.get("args", []))
    argv += [RANK0_STDOUT]
    argv += container_prefix(tb.get("runtime", {"kind": "none"}))
    argv += [mpi["netpipe"], "-l", str(s["min_bytes"]), "-u", str(s["max_bytes"]), "-p", "0", "-o", "/dev/null"]
    env = {**mpi.get("env", {}), **path.get("env", {})}
    return Launch(
        argv=argv,
        env=env,
        isolation=tb.get("isolation", "netns"),
        ranks=ranks,
        nodes=nodes,
        ranks_per_node=ranks // nodes,
        mpi=s["mpi"],
        interconnect={"shm": "shm", "tcp": "tcp-loopback", "net": "tcp"}[s["path"]],
        expected={"max_bytes": s["max_bytes"], "min_bytes": s["min_bytes"]},
    )


def qperf_launch(c: Configuration, tb: dict) -> Launch:
    s = c.settings
    tcp = tb.get("tcp", {})
    qperf = tcp.get("qperf", "qperf")
    port = int(tcp.get("port", 19765))
    host = tcp.get("server_host", "127.0.0.1")
    sizes = tcp_sizes(s["min_bytes"], s["max_bytes"], s["factor"])
    argv = [
        qperf,
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
    return Launch(
        argv=argv,
        server_argv=[qperf, "--listen_port", str(port)],
        server_port=port,
        isolation=tb.get("isolation", "netns"),
        ranks=2,
        nodes=1,
        ranks_per_node=2,
        mpi="none",
        interconnect="tcp-loopback",
        expected={"sizes": sizes, "test": s["test"]},
    )


def build(c: Configuration, tb: dict) -> Launch:
    if c.benchmark == "netpipe":
        return netpipe_launch(c, tb)
    if c.benchmark == "qperf":
        return qperf_launch(c, tb)
    raise ValueError(f"unknown benchmark {c.benchmark!r}")
