"""Parser for qperf TCP tests run with ``-vu -uu`` (verbose used, unified units).

Output blocks look like::

    tcp_lat:
        latency   =        5815 ns
        msg_size  =           1 bytes
        time      =  1000000000 ns

``tcp_lat`` latency is qperf's one-way latency (half the round trip), emitted
as ``latency`` in us; ``tcp_bw`` ``bw`` (bytes/sec) is emitted as
``bandwidth`` in MB/s (10^6 bytes/s).  ParseError for a failed connection, a
block without its value or size, and -- when ``expected_sizes`` is given --
any missing size (truncation).
"""

from __future__ import annotations

import re

from ..tidy import Measurement, ParseError
from .common import read_text
from .base import ClientServer, Job
from .parts import Choices, Counterpart, Int, Package, PointToPoint

BLOCK_RE = re.compile(r"^(?P<test>tcp_lat|tcp_bw):\s*$")
FIELD_RE = re.compile(r"^\s+(?P<key>\w+)\s+=\s+(?P<value>\d+(?:\.\d+)?)\s+(?P<unit>ns|bytes/sec|bytes)\s*$")
FAIL_RE = re.compile(r"failed to connect|failed to|server not responding|invalid|usage:", re.IGNORECASE)


def _flush(path, block, out):
    test, fields = block
    if "msg_size" not in fields:
        raise ParseError(path, f"a {test} result has no msg_size: the output was cut")
    size = int(fields["msg_size"][0])
    if "time" not in fields:      # qperf prints the timed span last: a result without it was cut
        raise ParseError(path, f"{test} at {size} bytes has no time: the output was cut")
    if test == "tcp_lat":
        if "latency" not in fields:
            raise ParseError(path, f"tcp_lat at {size} bytes has no latency: the output was cut")
        value, unit = fields["latency"]
        us = value / 1000.0 if unit == "ns" else None
        out.append(Measurement("qperf", "latency", "us", us, msg_bytes=size, variant="tcp_lat"))
    else:
        if "bw" not in fields:
            raise ParseError(path, f"tcp_bw at {size} bytes has no bw: the output was cut")
        value, _unit = fields["bw"]
        out.append(Measurement("qperf", "bandwidth", "MB/s", value / 1e6, msg_bytes=size, variant="tcp_bw"))


def parse(path, *, expected_sizes: list[int] | None = None, expected_test: str | None = None) -> list[Measurement]:
    text = read_text(path)
    fail = FAIL_RE.search(text)
    if fail:
        line = text[text.rfind("\n", 0, fail.start()) + 1 : text.find("\n", fail.end())].strip()
        raise ParseError(path, f"qperf failed: {line!r}")
    out: list[Measurement] = []
    block = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = BLOCK_RE.match(line)
        if m:
            if block:
                _flush(path, block, out)
            if expected_test and m["test"] != expected_test:
                raise ParseError(path, f"line {lineno}: a {m['test']} result in a run of {expected_test}")
            block = (m["test"], {})
            continue
        f = FIELD_RE.match(line)
        if not f or block is None:
            raise ParseError(path, f"line {lineno} is not qperf -vu -uu output: {line.strip()!r}")
        if f["key"] in block[1]:
            raise ParseError(path, f"line {lineno}: a second {f['key']} in one {block[0]} result")
        block[1][f["key"]] = (float(f["value"]), f["unit"])
    if block:
        _flush(path, block, out)
    if not out:
        raise ParseError(path, "no qperf results")
    if expected_sizes is not None:
        got = sorted(m.msg_bytes for m in out)
        missing = sorted(set(expected_sizes) - set(got))
        if missing:
            raise ParseError(path, f"truncated: no result for sizes {missing}")
        extra = sorted(set(got) - set(expected_sizes))
        if extra:
            raise ParseError(path, f"results for sizes {extra} that the run did not ask for: not this run's output")
    return out


# ------------------------------------------------------------- declaration


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """min_bytes * factor^k up to max_bytes (qperf's ``-oo msg_size:MIN:MAX:*F``)."""
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out


class Qperf(ClientServer):
    name = "qperf"
    experiment = "tcp"
    port = 19765  # the server's default listen port (testbed key `port`)
    title = "Raw TCP below MPI with qperf 0.4 (tcp_lat one-way latency, tcp_bw streaming bandwidth)"
    params = {
        "tests": Choices(("tcp_lat", "tcp_bw"), "qperf tests.", sweep="test"),
        "min_bytes": Int("First size; sizes are `min_bytes * factor^k` up to `max_bytes`.", minimum=1,
                         maximum=1 << 30),
        "max_bytes": Int("Upper bound of the sizes.", minimum=1, maximum=1 << 30),
        "factor": Int("Ratio between consecutive sizes.", 4, minimum=2, maximum=1024),
        "seconds_per_size": Int("qperf `-t`: seconds per size (qperf accepts whole seconds only).", 1,
                                minimum=1, maximum=60),
    }
    raw_template = "{test}_{min_bytes}-{max_bytes}x{factor}_t{seconds_per_size}"
    build = Package(("qperf",))
    metrics = {"latency": "us", "bandwidth": "MB/s"}
    point_to_point = PointToPoint("qperf", ("qperf", None, "latency"), ("qperf", None, "bandwidth"), headline=True,
                                  datapath="qperf")
    counterparts = (Counterpart(r"qperf \texttt{tcp\_lat}", r"\citet{exposito2012}, Hpcbench TCP", "different tool"),
                    Counterpart(r"qperf \texttt{tcp\_bw}", r"\citet{nanos2010}, netperf/iperf streams",
                                "a single stream"))
    success = "a result with value and size for every requested size, and no connection error"

    def job(self, s: dict, entry: dict) -> Job:
        port = str(entry["port"])
        client = ["-lp", port, "-t", str(s["seconds_per_size"]), "-vu", "-uu", "-oo",
                  f"msg_size:{s['min_bytes']}:{s['max_bytes']}:*{s['factor']}", "{peer}", s["test"]]
        return self.client_server(entry, client, ["--listen_port", port],
                                  [*self.program(entry), "-lp", port, "-t", "1", "{peer}", "conf"])

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        return {"sizes": sizes(s["min_bytes"], s["max_bytes"], s["factor"]), "test": s["test"]}

    def parse(self, raw, expected: dict) -> list[Measurement]:
        return parse(raw, expected_sizes=expected.get("sizes"), expected_test=expected.get("test"))


BENCHMARK = Qperf()
