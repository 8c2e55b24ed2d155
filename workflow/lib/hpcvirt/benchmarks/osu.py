"""Parser for OSU Micro-Benchmarks (OMB) MPI output, versions 5.x and 7.x.

An OMB output is one table::

    # OSU MPI Latency Test v7.4          <- title line: benchmark and version
    # Datatype: MPI_CHAR.                <- 7.x only
    # Size       Avg Latency(us)         <- column header line
    1                       0.42         <- one row per message size
    ...

Every value cell becomes one :class:`~hpcvirt.tidy.Measurement`.  Columns are
identified by their header text, never by position:

==========================  ======================  =====
header text                 metric                  unit
==========================  ======================  =====
``Avg Latency(us)``         ``latency_avg``         us
``Latency (us)`` (5.x)      ``latency_avg``         us
``Min Latency(us)``         ``latency_min``         us
``Max Latency(us)``         ``latency_max``         us
``P<n> Tail Lat(us)``       ``latency_p<n>``        us
``Bandwidth (MB/s)``        ``bandwidth``           MB/s
``MB/s`` (``osu_mbw_mr``)   ``bandwidth``           MB/s
``P<n> Tail BW(MB/s)``      ``bandwidth_p<n>``      MB/s
``Iterations``              (no metric: sets ``iteration_count`` of the row)
``Messages/s``              (no metric: the bandwidth over the size, the same numbers)
==========================  ======================  =====

OMB 5.x pt2pt ``Latency (us)`` is the mean over the timed iterations, the
same quantity 7.x labels ``Avg Latency(us)``, hence the shared metric name.

Bidirectional bandwidth (``osu_bibw``) keeps the metric ``bandwidth`` and the
benchmark ``osu_bibw``, and is marked ``variant="bidirectional"`` so that a
filter on metric and variant alone cannot mix it with ``osu_bw``.

The multi-pair test (``osu_mbw_mr``, "Multiple Bandwidth / Message Rate") runs
``ranks`` ranks as ``ranks / 2`` pairs, rank i sending windows of messages to
rank i + ranks/2, all pairs at once; its ``bandwidth`` is the pairs' aggregate.
Its line ``# [ pairs: 2 ] [ window size: 64 ]`` before the column header puts
``pairs`` and ``window_size`` into ``extra``; with ``expected_pairs`` given, a
run of another number of pairs is rejected.

``msg_bytes`` is the Size column.  ``ranks`` is left unset: the output does
not print the process count.  ``extra`` holds ``suite_version`` (e.g. "7.4")
and, when printed, ``datatype`` (e.g. "MPI_CHAR").

:class:`~hpcvirt.tidy.ParseError` is raised when the file has no title line,
no column header or no data rows; contains any MPI / launcher error text
(even if rows were parsed); has an unknown column; has a row that is not
complete and numeric (including a last line without its newline, i.e. a cut
file); has message sizes that do not double from row to row (a row lost in
the middle of the sweep) or, with ``expected_min_bytes``, do not start at
that size; or, when ``expected_max_bytes`` is given, ends before that size.  Unrecognised lines
before the title (e.g. loader warnings) are ignored; after the column header
only data rows and blank lines are allowed.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..tidy import Measurement, ParseError
from .common import check_doubling, check_no_mpi_error, error_re
from .base import Benchmark, Job
from .parts import Choices, Counterpart, Int, Mpis, Paths, PinnedSource, PointToPoint, View

TITLE_RE = re.compile(r"^# OSU MPI(?:-\w+)? (?P<title>.+?) Test v(?P<version>\d+(?:\.\d+)*)\s*$")
DATATYPE_RE = re.compile(r"^# Datatype: (?P<datatype>\w+)\.?\s*$")
PAIRS_RE = re.compile(r"^# \[ pairs: (?P<pairs>\d+) \] \[ window size: (?P<window>\d+) \]\s*$")
COLUMN_HEADER_RE = re.compile(r"^# Size\s+(?P<columns>.+?)\s*$")
SIZE_RE = re.compile(r"^\d+$")
NUMBER_RE = re.compile(r"^\d+(?:\.\d+)?$")

# Text that only appears when the MPI library, the launcher or the benchmark
# itself reports a failure or refuses to run.
ERROR_RE = error_re(r"requires exactly two processes", r"requires at least two processes", r"Invalid option", r"^\s*Usage:")

# Title text (between "OSU MPI" and "Test") -> benchmark name.
BENCHMARKS: dict[str, str] = {
    "Latency": "osu_latency",
    "Bandwidth": "osu_bw",
    "Bi-Directional Bandwidth": "osu_bibw",
    "Allreduce Latency": "osu_allreduce",
    "All-to-All Personalized Exchange Latency": "osu_alltoall",
    "Allgather Latency": "osu_allgather",
    "Broadcast Latency": "osu_bcast",
    "Reduce Latency": "osu_reduce",
    "Gather Latency": "osu_gather",
    "Scatter Latency": "osu_scatter",
    "Multiple Bandwidth / Message Rate": "osu_mbw_mr",
}
BIDIRECTIONAL = {"osu_bibw"}

# Column header text -> (metric, unit); metric None marks the Iterations
# column, "" a column of no metric of its own (osu_mbw_mr's message rate: its
# bandwidth over the size).  "{n}" is replaced by the percentile captured in
# the label.
COLUMNS: list[tuple[re.Pattern[str], str | None, str | None]] = [
    (re.compile(r"Avg Latency\(us\)"), "latency_avg", "us"),
    (re.compile(r"Latency \(us\)"), "latency_avg", "us"),
    (re.compile(r"Min Latency\(us\)"), "latency_min", "us"),
    (re.compile(r"Max Latency\(us\)"), "latency_max", "us"),
    (re.compile(r"P(?P<n>\d+) Tail Lat\(us\)"), "latency_p{n}", "us"),
    (re.compile(r"Bandwidth \(MB/s\)"), "bandwidth", "MB/s"),
    (re.compile(r"P(?P<n>\d+) Tail BW\(MB/s\)"), "bandwidth_p{n}", "MB/s"),
    (re.compile(r"MB/s"), "bandwidth", "MB/s"),
    (re.compile(r"Messages/s"), "", None),
    (re.compile(r"Iterations"), None, None),
]


def _columns(path: Path, text: str) -> list[tuple[str | None, str | None]]:
    """Split the column header text (after "# Size") into (metric, unit) pairs."""
    found = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        for label_re, metric, unit in COLUMNS:
            m = label_re.match(text, pos)
            if m:
                if metric and "{n}" in metric:
                    metric = metric.format(n=m.group("n"))
                found.append((metric, unit))
                pos = m.end()
                break
        else:
            raise ParseError(path, f"unknown column in header at {text[pos:]!r}")
    return found


def parse(path, *, expected_max_bytes: int | None = None, expected_pairs: int | None = None,
          expected_min_bytes: int | None = None) -> list[Measurement]:
    """Parse one OMB output file into measurements (see module docstring)."""
    path = Path(path)
    content = path.read_text(errors="replace")

    check_no_mpi_error(path, content, ERROR_RE)

    benchmark = version = datatype = None
    pairs: dict[str, str] = {}
    columns: list[tuple[str | None, str | None]] | None = None
    rows: list[tuple[int, list[str]]] = []
    lines = content.split("\n")
    for lineno, line in enumerate(lines, start=1):
        stripped = line.strip()
        if columns is None:
            title = TITLE_RE.match(stripped)
            if title:
                if benchmark is not None:
                    raise ParseError(path, f"second title line at line {lineno}")
                version = title.group("version")
                benchmark = BENCHMARKS.get(title.group("title"))
                if benchmark is None:
                    raise ParseError(path, f"unknown OSU benchmark title {title.group('title')!r}")
            elif benchmark is not None and (m := DATATYPE_RE.match(stripped)):
                datatype = m.group("datatype")
            elif benchmark is not None and (m := PAIRS_RE.match(stripped)):
                pairs = {"pairs": m.group("pairs"), "window_size": m.group("window")}
            elif benchmark is not None and (m := COLUMN_HEADER_RE.match(stripped)):
                columns = _columns(path, m.group("columns"))
            continue
        if not stripped:
            continue
        cells = stripped.split()
        if len(cells) != len(columns) + 1:
            raise ParseError(
                path, f"line {lineno} has {len(cells)} fields, expected {len(columns) + 1}: {stripped!r}"
            )
        if not SIZE_RE.match(cells[0]) or not all(NUMBER_RE.match(c) for c in cells[1:]):
            raise ParseError(path, f"line {lineno} is not a numeric data row: {stripped!r}")
        if lineno == len(lines):
            raise ParseError(path, f"last line {lineno} has no newline (output cut): {stripped!r}")
        rows.append((lineno, cells))

    if benchmark is None:
        raise ParseError(path, "no '# OSU MPI ... Test vX.Y' title line")
    if columns is None:
        raise ParseError(path, "no '# Size ...' column header line")
    if not rows:
        raise ParseError(path, "no data rows")

    sizes = [int(cells[0]) for _, cells in rows]
    check_doubling(path, [(f"line {lineno}", size) for (lineno, _), size in zip(rows, sizes)], expected_min_bytes)
    if expected_max_bytes is not None and sizes[-1] < expected_max_bytes:
        raise ParseError(
            path, f"sweep ends at {sizes[-1]} B, expected up to {expected_max_bytes} B (truncated)"
        )
    if expected_max_bytes is not None and sizes[-1] > expected_max_bytes:
        raise ParseError(path, f"sweep ends at {sizes[-1]} B, beyond the {expected_max_bytes} B asked for: "
                               "not this run's output")
    if expected_pairs is not None and pairs.get("pairs") != str(expected_pairs):
        raise ParseError(path, f"the run reports {pairs.get('pairs', 'no')} pairs, expected {expected_pairs}")

    extra = {"suite_version": version, **pairs}
    if datatype:
        extra["datatype"] = datatype
    variant = "bidirectional" if benchmark in BIDIRECTIONAL else ""
    iterations_at = [i for i, (metric, _) in enumerate(columns) if metric is None]

    measurements = []
    for size, (_, cells) in zip(sizes, rows):
        values = cells[1:]
        iteration_count = int(float(values[iterations_at[0]])) if iterations_at else None
        for (metric, unit), value in zip(columns, values):
            if not metric:
                continue
            measurements.append(
                Measurement(
                    benchmark=benchmark,
                    metric=metric,
                    unit=unit,
                    value=float(value),
                    msg_bytes=size,
                    iteration_count=iteration_count,
                    variant=variant,
                    extra=dict(extra),
                )
            )
    return measurements


# ------------------------------------------------------------- declaration

#: Where each test lives below the testbed's ``binary`` directory, the
#: installed ``libexec/osu-micro-benchmarks/mpi`` of OSU 7.x (the project's
#: build, or a site's Spack prefix).
TESTS = {
    "osu_latency": "pt2pt",
    "osu_bw": "pt2pt",
    "osu_bibw": "pt2pt",
    "osu_mbw_mr": "pt2pt",
    "osu_allreduce": "collective",
    "osu_alltoall": "collective",
}
#: Tests of ``ranks`` ranks as ``ranks / 2`` sending pairs (the others of pt2pt run two ranks).
MULTI_PAIR = {"osu_mbw_mr"}
PT2PT = {t for t, d in TESTS.items() if d.startswith("pt2pt")} - MULTI_PAIR


def multipair(tidy, latency_bytes: int):
    """Per testbed, MPI and path: the peak aggregate bandwidth of the pairs of ``osu_mbw_mr`` and one pair's
    (``osu_bw``), each per round the largest over the sizes, median and CI over its rounds
    (:func:`hpcvirt.query.tool_agreement`), and the number of pairs.  The two are separate runs, compared
    side by side, not paired: a campaign may hold them from different sessions (one extended in place)."""
    import pandas as pd

    from ..query import tool_agreement

    keys = ["testbed", "virtualization", "mpi", "interconnect"]
    peaks = [f"{t}_{c}" for t in ("osu_mbw_mr", "osu_bw") for c in ("peak", "peak_lo", "peak_hi", "n")]
    out = tool_agreement(tidy, latency_bytes, ("osu_mbw_mr", "osu_bw"), "")
    if out.empty:
        return pd.DataFrame(columns=keys + ["pairs"] + peaks + ["same_build"])
    where = ["testbed", "mpi", "interconnect"]
    pairs = tidy[tidy["benchmark"] == "osu_mbw_mr"].groupby(where)["ranks"].max() // 2
    out["pairs"] = [int(pairs[(r.testbed, r.mpi, r.interconnect)]) for r in out.itertuples()]
    # the builds each side ran (source checksum, Spack hash): a campaign extended in place may hold two
    runs = tidy[where + ["benchmark"]].assign(build=tidy["source_sha256"].astype(str) + " "
                                              + tidy["spack_hash"].astype(str))
    builds = {b: runs[runs["benchmark"] == b].groupby(where)["build"].agg(frozenset) for b in ("osu_mbw_mr", "osu_bw")}
    out["same_build"] = [builds["osu_mbw_mr"][k] == builds["osu_bw"][k]
                         for k in zip(out["testbed"], out["mpi"], out["interconnect"])]
    return out[keys + ["pairs"] + peaks + ["same_build"]]


def multipair_tex(summary, tidy, *, latency_bytes: int = 8) -> str:
    """The table of the multi-pair bandwidth (no table without ``osu_mbw_mr`` and ``osu_bw`` on one path)."""
    from ..labels import ONE_ROUND, fmt_ci, latex_escape, mpi_label, path_label, testbed_label

    mp = multipair(tidy, latency_bytes)
    if mp.empty:
        return "% Generated by workflow/scripts/numbers.py: no osu_mbw_mr beside osu_bw in this campaign.\n"
    rows = [f"{latex_escape(testbed_label(r.testbed, r.virtualization))} & "
            f"{latex_escape(mpi_label(r.mpi))}, {latex_escape(path_label(r.interconnect))} & {r.pairs} & "
            f"{fmt_ci(r.osu_mbw_mr_peak, r.osu_mbw_mr_peak_lo, r.osu_mbw_mr_peak_hi, r.osu_mbw_mr_n)} & "
            f"{int(r.osu_mbw_mr_n)} & {fmt_ci(r.osu_bw_peak, r.osu_bw_peak_lo, r.osu_bw_peak_hi, r.osu_bw_n)}"
            f"{'' if r.same_build else '$^*$'} & "
            f"{int(r.osu_bw_n)} \\\\" for r in mp.itertuples()]
    builds = ("" if mp["same_build"].all() else " $^*$: the two tests ran different builds of the same OSU "
              "source (the artifact appendix lists the builds).")
    # when each ran: a campaign extended in place holds them from different days
    days = {b: sorted({str(t)[:10] for t in tidy.loc[tidy["benchmark"] == b, "started_at"] if str(t)[:4].isdigit()})
            for b in ("osu_mbw_mr", "osu_bw")}
    if all(days.values()) and days["osu_mbw_mr"] != days["osu_bw"]:
        builds += (" They ran on different days (" + "; ".join(
            f"\\texttt{{{latex_escape(b)}}}: {', '.join(d)}" for b, d in days.items()) + ").")
    return ("% Generated by workflow/scripts/numbers.py. Do not edit.\n"
            "\\begin{table}[t]\n\\centering\\small\n"
            "\\caption{Several pairs at once against one pair on the same path: the peak aggregate bandwidth "
            "(Gbit/s) of \\texttt{osu\\_mbw\\_mr}'s $p$ pairs (rank $i$ sends windows of 64 messages to rank "
            "$i + p$, all pairs together) and of \\texttt{osu\\_bw}'s one pair: per round the largest over the "
            f"message sizes, median [CI] over $n$ rounds. The two are separate runs, side by side.{builds}"
            f"{ONE_ROUND}}}\n"
            "\\label{tab:multipair}\n\\resizebox{\\linewidth}{!}{%\n"
            "\\begin{tabular}{llllrlr}\n\\toprule\n"
            "Testbed & MPI, path & $p$ & Peak, $p$ pairs & $n$ & Peak, one pair & $n$ \\\\\n\\midrule\n"
            + "\n".join(rows) + "\n\\bottomrule\n\\end{tabular}}\n\\end{table}\n")


class OSU(Benchmark):
    name = "osu"
    row_prefix = "osu_"            # one row name per test, as OSU names its programs
    experiment = "osu"
    # the official archive's checksum is the one Spack's recipe records (after Spack 0.21.2)
    build = PinnedSource(
        "osu-micro-benchmarks", "7.4", suite="osu", spack_package="osu-micro-benchmarks",
        binary_dir="libexec/osu-micro-benchmarks/mpi", targets=("c/mpi (pt2pt, collective, one-sided, startup)",),
        urls=("https://mvapich.cse.ohio-state.edu/download/mvapich/osu-micro-benchmarks-7.4.tar.gz",),
        files=(("osu-micro-benchmarks-7.4.tar.gz", "1edd0c2efa61999409bfb28740a7f39689a5b42b1a1b4c66d1656e5637f7cefc",
                "official archive"),
               ("osu-micro-benchmarks-7.4.tar.gz", "4511e08613fb751e6f7ba9c40ac8becba1320cef88a6d86dfc95e90bcb11bab4",
                "mirror copy")))
    title = "OSU Micro-Benchmarks 7.4: latency/bandwidth of one and several pairs, and collectives (Atif et al.)"
    params = {
        "mpis": Mpis(),
        "tests": Choices(tuple(TESTS), "OSU tests; point-to-point ones run 2 ranks, `osu_mbw_mr` `ranks` ranks as "
                         "`ranks`/2 pairs sending at once, collectives `ranks` ranks.", sweep="test"),
        "paths": Paths("Data paths (as for the ping-pong); `net` spreads the ranks over two hosts."),
        "ranks": Int("Ranks of the collective tests and of `osu_mbw_mr` (even there: OSU 7.4 hangs on an odd "
                     "count).", 4, minimum=2, maximum=4096),
        "min_bytes": Int("Smallest message size (`-m min:max`).", 1, minimum=1, maximum=1 << 30),
        "max_bytes": Int("Largest message size; a sweep that stops earlier is rejected as truncated.", 4194304,
                         minimum=1, maximum=1 << 30),
        "iterations": Int("Timed iterations per size (`-i`).", 1000, minimum=1, maximum=10_000_000),
        "warmup": Int("Untimed iterations per size before them (`-x`).", 100, minimum=0, maximum=1_000_000),
    }
    metrics = {"latency_avg": "us", "latency_min": "us", "latency_max": "us", "latency_p{n}": "us",
               "bandwidth": "MB/s", "bandwidth_p{n}": "MB/s"}
    point_to_point = PointToPoint("OSU", ("osu_latency", None, "latency_avg"), ("osu_bw", None, "bandwidth"))
    counterparts = (Counterpart(r"OSU \hvOsuTests", r"\citet{atif2016}, Fig.~1",
                                "same tool; fewer iterations and sizes"),)
    success = ("a title, a column header and a complete numeric row for every size from min_bytes to max_bytes "
               "(each twice the one before), "
               "as many pairs as asked (osu_mbw_mr), and no launcher/MPI error text")
    views = (View("multipair", "tidy", multipair, "Per testbed, MPI and path: the peak aggregate bandwidth of "
                  "osu_mbw_mr's pairs and one pair's (osu_bw), side by side, and the number of pairs.",
                  ("latency_bytes",), tex=multipair_tex),)

    def check(self, exp: dict) -> str | None:
        if MULTI_PAIR & set(exp.get("tests", ())) and exp.get("ranks", 4) % 2:
            return f"ranks ({exp['ranks']}) must be even with osu_mbw_mr (ranks/2 pairs; OSU 7.4 hangs on an odd count)"
        return super().check(exp)

    def normalize(self, s: dict) -> dict:
        if s["test"] in PT2PT:
            s = dict(s, ranks=2)
        return s

    def raw_params(self, s: dict) -> str:
        return (f"{s['mpi']}-{s['path']}_{s['test']}_n{s['ranks']}_{s['min_bytes']}-{s['max_bytes']}"
                f"_i{s['iterations']}x{s['warmup']}")

    def job(self, s: dict, entry: dict) -> Job:
        argv = [f"{entry['binary']}/{TESTS[s['test']]}/{s['test']}", "-m", f"{s['min_bytes']}:{s['max_bytes']}",
                "-i", str(s["iterations"]), "-x", str(s["warmup"])]
        ranks = s["ranks"]
        return Job(argv, mpi=s["mpi"], ranks=ranks, block=-(-ranks // 2) if s["path"] == "net" else ranks,
                   path=s["path"])

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        return {"min_bytes": s["min_bytes"], "max_bytes": s["max_bytes"], "test": s["test"],
                "warmup": f"{s['warmup']} untimed iterations per size (-x)",
                **({"pairs": s["ranks"] // 2} if s["test"] in MULTI_PAIR else {})}

    def numbers(self, rows) -> dict[str, str]:
        """The OSU tests the campaign ran, in the declared order, as the method section names them, and the
        pairs of its multi-pair runs."""
        from ..labels import and_list, latex_escape

        ran = [f"\\texttt{{{latex_escape(t)}}}" for t in TESTS if (rows["benchmark"] == t).any()]
        out = {"hvOsuTests": and_list(ran)}
        pairs = sorted({int(r) // 2 for r in rows.loc[rows["benchmark"].isin(MULTI_PAIR), "ranks"].dropna()})
        if pairs:   # the pairs of the multi-pair runs
            out["hvOsuMbwPairs"] = and_list(map(str, pairs))
        return out

    def parse(self, raw, expected: dict) -> list[Measurement]:
        # a record made before min_bytes was expected: the first size its raw path names (..._1-262144_i...)
        named = re.search(r"_(\d+)-\d+_i\d+x\d+$", Path(raw).parent.name)
        first = expected.get("min_bytes", int(named.group(1)) if named else None)
        rows = parse(raw, expected_max_bytes=expected.get("max_bytes"), expected_pairs=expected.get("pairs"),
                     expected_min_bytes=first)
        if expected.get("test") and rows[0].benchmark != expected["test"]:
            raise ParseError(raw, f"the output is of {rows[0].benchmark}, but {expected['test']} was run")
        return rows


BENCHMARK = OSU()
