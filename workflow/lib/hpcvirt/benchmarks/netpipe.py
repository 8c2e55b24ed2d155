"""Parser for NetPIPE 3.x output (NPmpi / NPopenmpi / NPmpich2 / NPtcp).

NetPIPE prints one line per message size on the transmitting rank::

      5:       8 bytes  14832 times -->     17.92 Mbps in       3.41 usec

``usec`` is the one-way time (half of the round trip) of the best of
NetPIPE's trials for that size; ``Mbps`` is size / that time in units of
2^20 bit/s (NetPIPE divides by 1024 * 1024: every captured line has
Mbps = 8 * bytes / usec / 1.048576).  ``times`` is the number of ping-pongs
per trial, which NetPIPE chose itself.  Each line gives two measurements:
``latency`` (us) and ``bandwidth`` in Mbit/s = 10^6 bit/s: NetPIPE's value
times 1.048576, or 8 * bytes / usec where the time has more significant
digits than the printed bandwidth (slow links; NetPIPE even prints
``0.00 Mbps`` when the value rounds to zero), with ``iteration_count`` = times.

ParseError is raised for an empty output, a launcher/MPI error, a line that
looks like a result but does not parse (a cut line), sizes that do not
increase, a gap in NetPIPE's numbering of its lines (a line lost in the
middle of the sweep), no result lines, and -- when ``expected_min_bytes`` or
``expected_max_bytes`` is given -- a sweep that started after or stopped
before that size (truncation).
"""

from __future__ import annotations

import re

from ..tidy import Measurement, ParseError
from .common import check_no_mpi_error, read_text
from .base import Benchmark, Job
from .parts import Counterpart, Int, Mpis, Package, Paths, PointToPoint

LINE_RE = re.compile(
    r"^\s*(?P<idx>\d+):\s+(?P<bytes>\d+) bytes\s+(?P<times>\d+) times -->\s+"
    r"(?P<mbps>\d+(?:\.\d+)?) Mbps in\s+(?P<usec>\d+(?:\.\d+)?) usec\s*$"
)
# NetPIPE prints bandwidth in 2^20 bit/s; the tidy unit Mbit/s is 10^6 bit/s.
MIBIT_PER_MBIT = 1.048576

# Anything starting like a result line must match LINE_RE completely.
RESULT_START_RE = re.compile(r"^\s*\d+:\s+\d+ bytes")


def parse(path, *, expected_max_bytes: int | None = None, expected_min_bytes: int | None = None,
          benchmark: str = "netpipe") -> list[Measurement]:
    text = read_text(path)
    check_no_mpi_error(path, text)
    out: list[Measurement] = []
    last = 0
    lines = text.splitlines()
    for lineno, line in enumerate(lines, 1):
        if not RESULT_START_RE.match(line):
            continue
        m = LINE_RE.match(line)
        if not m:
            raise ParseError(path, f"line {lineno} is cut or malformed: {line.strip()!r}")
        size = int(m["bytes"])
        if size <= last:
            raise ParseError(path, f"line {lineno}: size {size} does not increase (previous {last})")
        if int(m["idx"]) != len(out) // 2:   # NetPIPE numbers its result lines from 0
            raise ParseError(path, f"line {lineno}: result {m['idx']} follows result {len(out) // 2 - 1}: "
                                   "a result line is missing")
        if not out and expected_min_bytes is not None and size != expected_min_bytes:
            raise ParseError(path, f"line {lineno}: the sweep starts at {size} bytes, expected {expected_min_bytes}")
        last = size
        times = int(m["times"])
        usec, mbps = float(m["usec"]), float(m["mbps"])
        if usec <= 0:
            raise ParseError(path, f"line {lineno}: non-positive time {line.strip()!r}")
        # NetPIPE's Mbps are 2^20 bit/s.  Both numbers are printed with two
        # decimals: take the bandwidth from whichever has more significant
        # digits (Mbps for fast small messages, the time for slow ones,
        # e.g. "0.05 Mbps in 300.14 usec" or "0.00 Mbps" under emulation).
        mbit_s = mbps * MIBIT_PER_MBIT if mbps >= usec else 8 * size / usec
        out.append(Measurement(benchmark, "latency", "us", usec, msg_bytes=size, iteration_count=times))
        out.append(Measurement(benchmark, "bandwidth", "Mbit/s", mbit_s, msg_bytes=size, iteration_count=times))
    if not out:
        raise ParseError(path, "no NetPIPE result lines: the run did not reach its main loop")
    if not text.endswith("\n") and RESULT_START_RE.match(lines[-1]):
        raise ParseError(path, "the last result line has no line end: the output was cut")
    if expected_max_bytes is not None and last < expected_max_bytes:
        raise ParseError(
            path, f"truncated: the sweep stopped at {last} bytes, expected up to {expected_max_bytes} bytes"
        )
    return out


# ------------------------------------------------------------- declaration


class NetPIPE(Benchmark):
    name = "netpipe"
    experiment = "pingpong"
    title = "MPI ping-pong with NetPIPE 3.7 (latency = half round trip, bandwidth = size / half round trip)"
    build = Package(("netpipe-openmpi", "netpipe-mpich2"))
    params = {
        "mpis": Mpis(),
        "paths": Paths(),
        "min_bytes": Int("Smallest message size (NetPIPE `-l`).", minimum=1, maximum=1 << 30),
        "max_bytes": Int("Largest message size (NetPIPE `-u`); a sweep that stops earlier is rejected as "
                         "truncated.", minimum=1, maximum=1 << 30),
    }
    raw_template = "{mpi}-{path}_{min_bytes}-{max_bytes}"
    wireup = {"min_bytes": 1, "max_bytes": 64}
    metrics = {"latency": "us", "bandwidth": "Mbit/s"}
    point_to_point = PointToPoint("NetPIPE", ("netpipe", None, "latency"), ("netpipe", None, "bandwidth"), headline=True,
                                  datapath="netpipe")
    counterparts = (
        Counterpart("NetPIPE, shared memory", r"\citet{exposito2012}, intra-VM ping-pong",
                    "two ranks on one host or in one guest"),
        Counterpart("NetPIPE, TCP", r"\citet{exposito2012}, ping-pong over Ethernet",
                    "loopback, a software bridge or guests instead of a NIC"),
        Counterpart("NetPIPE per data path", r"\citet{nanos2010}, bridged vs.\ IOV; \citet{richter2015}, GRE",
                    "macvlan for IOV, VXLAN for GRE"),
    )
    success = ("every size from min_bytes to max_bytes has a complete result line, numbered without a gap, "
               "sizes increase, and no launcher/MPI error text appears")

    def job(self, s: dict, entry: dict) -> Job:
        argv = [entry["binary"], "-l", str(s["min_bytes"]), "-u", str(s["max_bytes"]), "-p", "0", "-o", "/dev/null"]
        # two ranks: on one host for shm/tcp, one per host for net
        return Job(argv, mpi=s["mpi"], ranks=2, block=1 if s["path"] == "net" else 2, path=s["path"])

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        return {"max_bytes": s["max_bytes"], "min_bytes": s["min_bytes"]}

    def parse(self, raw, expected: dict) -> list[Measurement]:
        return parse(raw, expected_max_bytes=expected.get("max_bytes"), expected_min_bytes=expected.get("min_bytes"))


BENCHMARK = NetPIPE()
