"""Intel MPI Benchmarks (IMB-MPI1 2021.x): PingPong and PingPing, the
point-to-point tests Expósito et al. measured with.

IMB prints one table per benchmark after a header block::

    #----------------------------------------------------------------
    #    Intel(R) MPI Benchmarks 2021.3, MPI-1 part
    ...
    # Benchmarking PingPong
    # #processes = 2
    #---------------------------------------------------
           #bytes #repetitions      t[usec]   Mbytes/sec
                0         1000         2.49         0.00
                4         1000         0.61         6.54
    ...
    # All processes entering MPI_Finalize

``t[usec]`` is half the round-trip time (PingPong) and ``Mbytes/sec`` is
bytes / t in 10^6 bytes/s (checked: 4194304 B / 1870.84 us = 2241.9).
Emitted per row: ``latency`` (us) and, for sizes > 0, ``bandwidth`` (MB/s),
with ``variant`` = the IMB benchmark name and ``iteration_count`` =
``#repetitions``.  ``extra`` holds ``suite_version``.

ParseError for: launcher/MPI error text; no table for the benchmark (e.g.
"Benchmark PingPong invalid for 1 processes"); a row that is not complete
and numeric; sizes that do not double from row to row (a row lost in the
middle of the sweep); no ``All processes entering
MPI_Finalize`` line (the run was cut); and, with ``expected``, another
benchmark or a sweep that starts after ``min_bytes`` or ends before
``max_bytes``.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..tidy import Measurement, ParseError
from .base import Benchmark, Job
from .common import check_doubling, check_no_mpi_error, error_re, read_text
from .parts import Choices, Counterpart, Int, Mpis, Paths, PinnedSource, PointToPoint, View

TITLE_RE = re.compile(r"^#\s+Intel\(R\) MPI Benchmarks (?P<version>\S+), MPI-1 part", re.M)
BLOCK_RE = re.compile(r"^# Benchmarking (?P<name>\w+)\s*$", re.M)
HEADER_RE = re.compile(r"^\s*#bytes\s+#repetitions\s+(?P<columns>.+?)\s*$")
ROW_RE = re.compile(r"^\s*\d+(?:\s+\d+(?:\.\d+)?)+\s*$")
COLUMNS = {"t[usec]": ("latency", "us"), "t_avg[usec]": ("latency", "us"), "t_min[usec]": ("latency_min", "us"),
           "t_max[usec]": ("latency_max", "us"), "Mbytes/sec": ("bandwidth", "MB/s")}
ERROR_RE = error_re(r"!! Benchmark \w+ invalid", r"Invalid benchmark name")
END = "# All processes entering MPI_Finalize"


def parse(path, *, benchmark: str | None = None, expected_max_bytes: int | None = None,
          expected_min_bytes: int | None = None) -> list[Measurement]:
    text = read_text(path)
    check_no_mpi_error(path, text, ERROR_RE)
    title = TITLE_RE.search(text)
    if not title:
        raise ParseError(path, "no 'Intel(R) MPI Benchmarks ..., MPI-1 part' header: not an IMB-MPI1 output")
    blocks = list(BLOCK_RE.finditer(text))
    if not blocks:
        raise ParseError(path, "no '# Benchmarking <name>' table: nothing was measured")
    out: list[Measurement] = []
    lines = text.splitlines()
    for i, block in enumerate(blocks):
        name = block["name"]
        if benchmark and name != benchmark:
            raise ParseError(path, f"the output is of IMB {name}, but {benchmark} was run")
        end = blocks[i + 1].start() if i + 1 < len(blocks) else len(text)
        body = text[block.end():end].splitlines()
        header = next((HEADER_RE.match(ln) for ln in body if HEADER_RE.match(ln)), None)
        if header is None:
            raise ParseError(path, f"IMB {name}: no '#bytes #repetitions ...' column header")
        cols = header["columns"].split()
        unknown = [c for c in cols if c not in COLUMNS]
        if unknown:
            raise ParseError(path, f"IMB {name}: unknown columns {unknown}")
        sizes: list[tuple[str, int]] = []
        for ln in body[body.index(header.string) + 1:]:
            if not ln.strip() or ln.startswith("#"):
                continue
            cells = ln.split()
            if not ROW_RE.match(ln) or len(cells) != len(cols) + 2:
                raise ParseError(path, f"IMB {name}: a row is cut or malformed: {ln.strip()!r}")
            size, reps = int(cells[0]), int(cells[1])
            sizes.append((f"IMB {name}, row {ln.strip()!r}", size))
            check_doubling(path, sizes[-2:])
            for col, value in zip(cols, cells[2:]):
                metric, unit = COLUMNS[col]
                if metric == "bandwidth" and size == 0:
                    continue               # 0 bytes in t: no bandwidth
                out.append(Measurement("imb", metric, unit, float(value), msg_bytes=size, iteration_count=reps,
                                       variant=name, extra={"suite_version": title["version"]}))
        if expected_min_bytes is not None:   # IMB's 0-byte row, then -msglog's first size
            check_doubling(path, sizes[:1], 0)
            check_doubling(path, sizes[1:2], expected_min_bytes)
        last = sizes[-1][1] if sizes else -1
        if expected_max_bytes is not None and last < expected_max_bytes:
            raise ParseError(path, f"truncated: IMB {name} stopped at {last} bytes, expected up to "
                                   f"{expected_max_bytes} bytes")
        if expected_max_bytes is not None and last > expected_max_bytes:
            raise ParseError(path, f"IMB {name} ran to {last} bytes, beyond the {expected_max_bytes} bytes asked for: "
                                   "not this run's output")
    if not any(ln.strip() == END for ln in lines):
        raise ParseError(path, f"no '{END}' line: the run did not complete")
    if not out:
        raise ParseError(path, "no result rows")
    return out


def agreement(tidy, latency_bytes: int):
    """IMB PingPong against NetPIPE on the same testbed, MPI and path (:func:`hpcvirt.query.tool_agreement`):
    Expósito et al.'s tool beside the study's ping-pong, a check of the method."""
    from ..query import tool_agreement

    return tool_agreement(tidy, latency_bytes, ("imb", "netpipe"), "PingPong")


def agreement_tex(summary, tidy, *, latency_bytes: int = 8) -> str:
    """The table of the method check: IMB PingPong against NetPIPE on the
    same path (the ratios the text cites are declared in
    ``workflow/numbers.yaml``)."""
    import pandas as pd

    from ..labels import (MPI_LABEL, ONE_ROUND, PATH_LABEL, emulated_note, empty_table, fmt_bytes, fmt_ci,
                          latex_escape, testbed_label)

    ag = agreement(tidy, latency_bytes=latency_bytes)
    if ag.empty:
        return empty_table("runs of both IMB and NetPIPE on one path")
    rows = []
    for _, r in ag.iterrows():
        cells = []
        for name in ("lat", "peak"):
            for tool in ("imb", "netpipe"):
                v = r.get(f"{tool}_{name}")
                cells.append(fmt_ci(v, r[f"{tool}_{name}_lo"], r[f"{tool}_{name}_hi"], r.get(f"{tool}_n"))
                             if pd.notna(v) else "--")
            # the pairs of rounds are at most the rounds of either tool
            pairs = min(r.get("imb_n", float("nan")), r.get("netpipe_n", float("nan")))
            cells.append(fmt_ci(r[f"{name}_ratio"], r[f"{name}_ratio_lo"], r[f"{name}_ratio_hi"], pairs)
                         if pd.notna(r.get(f"{name}_ratio")) else "--")
        label = f"{MPI_LABEL.get(r['mpi'], r['mpi'])}, {PATH_LABEL.get(r['interconnect'], r['interconnect'])}"
        rows.append(f"{latex_escape(testbed_label(r['testbed'], r['virtualization']))} & {latex_escape(label)} & "
                    + " & ".join(cells) + " \\\\")
    table = (
        "% Generated by workflow/scripts/numbers.py. Do not edit.\n"
        "\\begin{table}[t]\n\\centering\\small\n"
        f"\\caption{{Method check: IMB PingPong and NetPIPE on the same path. Latency at {fmt_bytes(latency_bytes)} "
        "(\\textmu s; IMB: half the round trip averaged over its repetitions, NetPIPE: half the round trip of its "
        "best trial) and peak bandwidth (Gbit/s; each round's highest over the sizes, so a peak here may differ from "
        "the peak of the medians in Table~\\ref{tab:results}), median [CI] over the repetitions, and the ratio "
        "IMB/NetPIPE "
        f"paired by interleaved round.{ONE_ROUND}{emulated_note(ag['virtualization'])}}}\n"
        "\\label{tab:agreement}\n\\resizebox{\\linewidth}{!}{%\n"
        "\\begin{tabular}{llllllll}\n\\toprule\n"
        "Testbed & MPI, path & Lat.\\ IMB & Lat.\\ NetPIPE & Ratio & Peak IMB & Peak NetPIPE & Ratio "
        "\\\\\n\\midrule\n"
        + "\n".join(rows)
        + "\n\\bottomrule\n\\end{tabular}}\n\\end{table}\n"
    )
    return table


class IMB(Benchmark):
    name = "imb"
    experiment = "imb"
    title = "Intel MPI Benchmarks 2021.3 (IMB-MPI1) point-to-point tests (Expósito et al.)"
    metrics = {"latency": "us", "bandwidth": "MB/s"}
    point_to_point = PointToPoint("IMB PingPong", ("imb", "PingPong", "latency"), ("imb", "PingPong", "bandwidth"))
    params = {
        "mpis": Mpis(),
        "tests": Choices(("PingPong", "PingPing"), "IMB-MPI1 benchmarks (2 ranks each).", ["PingPong"], sweep="test"),
        "paths": Paths(),
        "min_log2": Int("Smallest message size as a power of two (`-msglog min:max`); IMB adds a 0-byte row.", 2,
                        minimum=0, maximum=30),
        "max_log2": Int("Largest message size as a power of two; a sweep that stops earlier is rejected as "
                        "truncated.", 22, minimum=0, maximum=30),
        "iterations": Int("Repetitions per message size at most (`-iter`); IMB lowers it for large messages "
                          "(its default policy: about 40 MB per size).", 1000, minimum=1, maximum=10_000_000),
    }
    raw_template = "{mpi}-{path}_{test}_{min_log2}-{max_log2}_i{iterations}"
    build = PinnedSource(
        "IMB", "2021.3", suite="imb", spack_package="intel-mpi-benchmarks", binary_dir="bin/IMB-MPI1",
        targets=("IMB-MPI1",), urls=("https://github.com/intel/mpi-benchmarks/archive/IMB-v2021.3.tar.gz",),
        files=(("IMB-v2021.3.tar.gz", "9b58a4a7eef7c0c877513152340948402fd87cb06270d2d81308dc2ef740f4c7",
                "official archive"),
               ("mpi-benchmarks-IMB-v2021.3.tar.gz", "7a22e0406d04ec45ee89eae8c2e511ca7661ef4b0389bf28a40763bd8c050ecd",
                "mirror copy")))
    counterparts = (Counterpart("IMB PingPong", r"\citet{exposito2012}, ping-pong (Figs.~4--5)",
                                "same tool; loopback, bridge, guests"),)
    success = ("a complete table for the benchmark, 0 bytes and then every power of two from 2^min_log2 to "
               "2^max_log2 bytes, and the line "
               "'All processes entering MPI_Finalize', with no launcher/MPI error text")
    views = (View("agreement", "tidy", agreement, "Per testbed, MPI and path: IMB PingPong against NetPIPE, latency "
                  "at the paper's message size and peak bandwidth, and their ratios.", ("latency_bytes",),
                  tex=agreement_tex),)

    def check(self, exp: dict) -> str | None:
        if exp.get("min_log2", 0) > exp.get("max_log2", 0):
            return f"min_log2 ({exp['min_log2']}) must not exceed max_log2 ({exp['max_log2']})"
        return None

    def job(self, s: dict, entry: dict) -> Job:
        argv = [entry["binary"], s["test"], "-msglog", f"{s['min_log2']}:{s['max_log2']}", "-iter", str(s["iterations"])]
        return Job(argv, mpi=s["mpi"], ranks=2, block=1 if s["path"] == "net" else 2, path=s["path"])

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        return {"test": s["test"], "min_bytes": 2 ** s["min_log2"], "max_bytes": 2 ** s["max_log2"]}

    def parse(self, raw, expected: dict) -> list[Measurement]:
        # a record made before min_bytes was expected: the first size its raw path names (..._2-26_i...)
        named = re.search(r"_(\d+)-\d+_i\d+$", Path(raw).parent.name)
        first = expected.get("min_bytes", 2 ** int(named.group(1)) if named else None)
        return parse(raw, benchmark=expected.get("test"), expected_max_bytes=expected.get("max_bytes"),
                     expected_min_bytes=first)


BENCHMARK = IMB()
