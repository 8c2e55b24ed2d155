"""Communication profiles of the NPB kernels (Atif et al. Fig. 3, which used IPM).

An NPB kernel runs with the project's PMPI profiler preloaded
(``workflow/src/commprof.c``, built with NPB into
``<npb build>/lib/libhpcvirt-commprof.so``; Open MPI only, because it wraps
Open MPI's Fortran bindings).  At ``MPI_Finalize`` rank 0 prints one block::

    hpcvirt-commprof: begin 1 ranks 4
    hpcvirt-commprof: rank 0 wall 0.621344 mpi 0.532586
    hpcvirt-commprof: fn 0 MPI_Send 1680 0.292522 23302912
    hpcvirt-commprof: peer 0 1 11654912 1264 0
    ...
    hpcvirt-commprof: end

Emitted measurements (benchmark ``commprof-<kernel>``):

* ``mpi_time_share`` (fraction, variant = class): time inside MPI calls over
  the time from ``MPI_Init`` to ``MPI_Finalize``, summed over the ranks;
* ``wall_time`` (s, variant = class): the slowest rank's time from
  ``MPI_Init`` to ``MPI_Finalize``;
* ``bytes_sent`` (count of bytes, variant = ``<class> <src>><dst>``): payload
  that rank ``src`` sent to rank ``dst`` (point-to-point sends plus its
  ``MPI_Alltoall(v)`` blocks), one row per pair that exchanged data.

Success: the NPB run itself is accepted by the NPB parser (complete summary,
verification SUCCESSFUL, the requested kernel, class and ranks), and the
profile block is complete: one ``rank`` line per rank, well-formed lines,
``end``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from ..tidy import Measurement, ParseError
from .base import Benchmark, Job
from .parts import Choices, Counterpart, Ints, Library, Paths, PinnedSource, View
from .npb import CLASSES, KERNELS
from .npb import BENCHMARK as NPB

PREFIX = "hpcvirt-commprof: "
LIB = "lib/libhpcvirt-commprof.so"
BEGIN_RE = re.compile(r"^begin 1 ranks (\d+)$")
RANK_RE = re.compile(r"^rank (\d+) wall (\d+\.\d+) mpi (\d+\.\d+)$")
FN_RE = re.compile(r"^fn (\d+) (MPI_[A-Za-z]+) (\d+) (\d+\.\d+) (\d+)$")
PEER_RE = re.compile(r"^peer (\d+) (\d+) (\d+) (\d+) (\d+)$")


def parse_profile(path: Path, content: str) -> dict:
    """The profile block: {ranks, wall: {rank: s}, mpi: {rank: s}, fn: [...], peer: {(src, dst): bytes}}."""
    lines = [ln[len(PREFIX):].rstrip() for ln in content.splitlines() if ln.startswith(PREFIX)]
    if not lines:
        raise ParseError(path, "no communication profile (the profiler was not loaded?)")
    m = BEGIN_RE.match(lines[0])
    if not m:
        raise ParseError(path, f"profile does not start with 'begin 1 ranks N': {lines[0]!r}")
    if lines[-1] != "end" or lines.count("end") != 1:
        raise ParseError(path, "profile has no single final 'end' line (output cut?)")
    n = int(m.group(1))
    prof = {"ranks": n, "wall": {}, "mpi": {}, "fn": [], "peer": {}}
    for ln in lines[1:-1]:
        if r := RANK_RE.match(ln):
            prof["wall"][int(r[1])], prof["mpi"][int(r[1])] = float(r[2]), float(r[3])
        elif f := FN_RE.match(ln):
            prof["fn"].append((int(f[1]), f[2], int(f[3]), float(f[4]), int(f[5])))
        elif p := PEER_RE.match(ln):
            src, dst = int(p[1]), int(p[2])
            if not (0 <= src < n and 0 <= dst < n):
                raise ParseError(path, f"profile names rank {src} or {dst} outside 0..{n - 1}")
            prof["peer"][(src, dst)] = int(p[3]) + int(p[5])
        else:
            raise ParseError(path, f"malformed profile line {ln!r}")
    if sorted(prof["wall"]) != list(range(n)):
        raise ParseError(path, f"profile has rank lines for {sorted(prof['wall'])}, expected 0..{n - 1}")
    if any(prof["mpi"][r] > prof["wall"][r] * 1.001 + 1e-6 or prof["wall"][r] <= 0 for r in range(n)):
        raise ParseError(path, "profile: time in MPI exceeds the run time, or a zero run time")
    return prof


#: One tidy row name per profiled kernel: commprof-<kernel>.
ROW_PREFIX = "commprof-"


# ------------------------------------------------------------------- views
def commprof_summary(summary: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(shares, matrix) of the communication profiles: per testbed, MPI,
    kernel, class and ranks the share of time in MPI (median [CI]); and the
    bytes each rank sent to each rank, itself included (median over repetitions), with
    ``src`` and ``dst`` split out of the variant (``<class> <src>><dst>``)."""
    import pandas as pd

    d = summary[summary["benchmark"].astype(str).str.startswith(ROW_PREFIX)]
    if d.empty:
        return pd.DataFrame(), pd.DataFrame()
    d = d.assign(kernel=d["benchmark"].str.removeprefix(ROW_PREFIX).str.upper())
    keep = ["testbed", "virtualization", "interconnect", "mpi", "kernel", "ranks", "median", "ci_low", "ci_high", "n",
            "ci_level"]
    shares = d[d["metric"] == "mpi_time_share"].assign(klass=lambda x: x["variant"])[keep + ["klass"]]
    m = d[d["metric"] == "bytes_sent"].copy()
    parts = m["variant"].str.extract(r"^(?P<klass>\S+) (?P<src>\d+)>(?P<dst>\d+)$")
    m = pd.concat([m[keep], parts], axis=1).astype({"src": int, "dst": int})
    return (shares.sort_values(["kernel", "testbed"]).reset_index(drop=True),
            m.sort_values(["kernel", "testbed", "src", "dst"]).reset_index(drop=True))


class CommProfile(Benchmark):
    name = "commprof"
    row_prefix = ROW_PREFIX
    experiment = "profile"
    title = ("Communication profile of NPB kernels with the project's PMPI profiler: share of time in MPI and bytes "
             "sent between each pair of ranks (Atif et al. Fig. 3)")
    params = {
        "mpis": Choices(("openmpi",), "MPI libraries (the profiler wraps Open MPI's Fortran bindings).", ["openmpi"],
                        sweep="mpi", offered_by="mpi"),
        "kernels": Choices(KERNELS, "Kernels; each binary is `<binary>/bin/<kernel>.<class>.x`.", sweep="kernel"),
        "classes": Choices(CLASSES, "Problem classes.", ["W"], sweep="klass"),
        "ranks": Ints("Process counts; one configuration each.", [4], minimum=2, maximum=4096, sweep="ranks"),
        "paths": Paths("Data paths; `net` spreads the ranks over two hosts.", ["shm"]),
    }
    raw_template = "{mpi}-{path}_{kernel}.{klass}_n{ranks}"
    # NPB's build (npb.py declares it), with the profiler compiled into it for Open MPI
    build = PinnedSource("NPB", "3.4.1", suite="npb",
                         library=Library("workflow/src/commprof.c", LIB, "openmpi", ("-lmpi_mpifh",)))
    metrics = {"mpi_time_share": "fraction", "wall_time": "s", "bytes_sent": "count"}
    counterparts = (Counterpart("NPB communication profiles", r"\citet{atif2016}, Fig.~3 (IPM)",
                                "own PMPI library instead of IPM"),)
    success = ("the NPB run is accepted (complete summary, verification SUCCESSFUL) and the profile block is complete "
               "(a rank line per rank, end line)")
    views = (View("mpi_time_shares", "summary", lambda s: commprof_summary(s)[0], "Per testbed, kernel and "
                  "class: the share of run time inside MPI."),
             View("bytes_per_pair", "summary", lambda s: commprof_summary(s)[1], "Per testbed, kernel and "
                  "class: the bytes each rank sent to each rank (itself included)."))

    def check(self, exp: dict) -> str | None:
        return NPB.check(exp)

    def job(self, s: dict, entry: dict) -> Job:
        """NPB's job (same binary and rank layout) with the profiler preloaded."""
        root = entry["binary"].rstrip("/")
        npb = NPB.job(s, {"binary": f"{root}/bin"})
        return replace(npb, argv=["env", f"LD_PRELOAD={root}/{LIB}", *npb.argv])

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        return NPB.expected(s, rank_hosts)

    def parse(self, raw, expected: dict) -> list[Measurement]:
        path = Path(raw)
        npb = NPB.parse(path, expected)[0]
        prof = parse_profile(path, path.read_text(errors="replace"))
        if prof["ranks"] != npb.ranks:
            raise ParseError(path, f"profile of {prof['ranks']} ranks, but NPB ran {npb.ranks}")
        bench, klass = "commprof-" + npb.benchmark.removeprefix("npb-"), npb.variant
        extra = {"suite_version": npb.extra.get("suite_version", "")}
        share = sum(prof["mpi"].values()) / sum(prof["wall"].values())
        rows = [Measurement(bench, "mpi_time_share", "fraction", share, ranks=npb.ranks, variant=klass,
                            verified=True, extra=extra),
                Measurement(bench, "wall_time", "s", max(prof["wall"].values()), ranks=npb.ranks, variant=klass,
                            verified=True, extra=extra)]
        rows += [Measurement(bench, "bytes_sent", "count", float(b), ranks=npb.ranks, variant=f"{klass} {s}>{d}",
                             verified=True, extra=extra)
                 for (s, d), b in sorted(prof["peer"].items()) if b > 0]
        return rows


BENCHMARK = CommProfile()
