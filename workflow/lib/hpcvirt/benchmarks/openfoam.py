"""OpenFOAM's damBreak case (Richter et al.): Debian's ``openfoam`` 1912 and
the case of ``openfoam-examples`` (``multiphase/interFoam/laminar/damBreak``),
run per rank by ``workflow/scripts/openfoam-dambreak``.

Rank 0 stages the case (mesh refined to ``refine_pct`` % cells per block edge:
185 % gives 7,800 cells, near the report's 7,700; blockMesh, setFields,
decomposePar with the simple method along x), then all ranks run interFoam.
The output (rank 0)::

    hpcvirt-openfoam 1
    cells 7800
    ranks 2
    end_time 1
    ... interFoam's log: "Time = <t>" per step, "ExecutionTime = <s> s ..." ...
    wall_s 20.365
    exit 0
    end

Emitted metrics:

``wall_time`` (s)       wall clock of the solver run (staging excluded), as Richter's Table 1
``time_per_step`` (us)  rank 0's ExecutionTime per step after the first ``warmup_steps`` steps
``steps`` (count)       time steps the solver took to reach the end time
``cells`` (count)       cells of the mesh

Rows name the input by their variant: the mesh, and the simulated time when
it is not the report's 1 s (``7800 cells``, ``7800 cells, 0.5 s``).

ParseError for: launcher/MPI errors, a FOAM FATAL ERROR, a staging step that
failed, a missing ``end`` (cut or killed), a solver that stopped before the
end time, and a different rank count, or number of hosts the ranks ran on
(interFoam's ``Hosts`` list), than was launched.
"""

from __future__ import annotations

import re

from ..tidy import Measurement, ParseError
from .base import VALUE_KEY, Application, Job
from .common import WrapperOutput, check_no_mpi_error, error_re, read_text, results
from .parts import Counterpart, Int, Ints, Package

CASE = "/usr/share/doc/openfoam-examples/examples/multiphase/interFoam/laminar/damBreak/damBreak"
ERRORS = error_re(r"FOAM FATAL (?:IO )?ERROR", r"^openfoam-dambreak: ")
TIME_RE = re.compile(r"^Time = ([0-9.eE+-]+)\s*$", re.M)
EXEC_RE = re.compile(r"^ExecutionTime = ([0-9.eE+-]+) s", re.M)
BUILD_RE = re.compile(r"^Build\s*:\s*OPENFOAM=(\S+)(?: patch=(\S+))?", re.M)   # the solver's banner
HOSTS_RE = re.compile(r"^Hosts\s*:\s*\n\(\n(.*?)\n\)", re.M | re.S)   # interFoam -parallel: (host nRanks)
HOST_RE = re.compile(r"^\s*\((\S+) \d+\)", re.M)
OUTPUT = WrapperOutput("openfoam", "workflow/scripts/openfoam-dambreak", "cells", "ranks", "end_time")


def variant(cells: int, end_time: float) -> str:
    """The input as the rows name it: the mesh, and the simulated time when it is not the report's 1 s
    ("7800 cells", "2268 cells, 0.05 s")."""
    return f"{cells} cells" + ("" if abs(end_time - 1) < 1e-9 else f", {end_time:g} s")


def end_time_of(variant: str) -> float:
    """The simulated time a variant names (:func:`variant`'s inverse; none named: the report's 1 s)."""
    _, sep, end = str(variant).rpartition(", ")
    try:
        return float(end.removesuffix(" s")) if sep else 1.0
    except ValueError:
        return 1.0


#: Solver steps left out of ``time_per_step`` (the first steps set up the flow and the caches).
WARMUP_STEPS = 20


def parse(path, expected: dict | None = None, warmup_steps: int = WARMUP_STEPS) -> list[Measurement]:
    text = read_text(path)
    check_no_mpi_error(path, text, ERRORS)
    fields = OUTPUT.fields(path, text)
    OUTPUT.check_end(path, fields)
    try:
        cells, ranks, end_time = int(fields["cells"]), int(fields["ranks"]), float(fields["end_time"])
        wall = float(fields["wall_s"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ParseError(path, f"the header or footer is incomplete: {exc}") from None
    times = [float(t) for t in TIME_RE.findall(text)]
    execs = [float(t) for t in EXEC_RE.findall(text)]
    if not times or times[-1] < end_time * (1 - 1e-6):
        raise ParseError(path, f"the solver stopped at t = {times[-1] if times else 0} s before the end time "
                               f"{end_time} s")
    back = next((i for i in range(1, len(times)) if times[i] <= times[i - 1]), None)
    if back is not None:
        raise ParseError(path, f"the simulated time goes back at step {back + 1} (t = {times[back]} s after "
                               f"{times[back - 1]} s): two runs' logs in one output")
    if len(execs) != len(times):
        raise ParseError(path, f"{len(times)} steps and {len(execs)} ExecutionTime lines: the log is incomplete")
    if len(times) <= warmup_steps:
        raise ParseError(path, f"only {len(times)} steps: the time per step is measured after the first "
                               f"{warmup_steps} (a longer end time is needed: end_time_ms)")
    if expected and expected.get("ranks") not in (None, ranks):
        raise ParseError(path, f"the output is from {ranks} ranks, but {expected['ranks']} were launched")
    hosts = HOSTS_RE.search(text)
    nodes = len({h.rsplit(".", 1)[0] if h.count(".") else h for h in HOST_RE.findall(hosts.group(1))}) if hosts else 1
    if expected and expected.get("nodes") not in (None, nodes):
        raise ParseError(path, f"the ranks ran on {nodes} host(s), but {expected['nodes']} were meant")
    per_step = (execs[-1] - execs[warmup_steps - 1]) / (len(execs) - warmup_steps) * 1e6
    build = BUILD_RE.search(text)
    extra = {"end_time": fields["end_time"],
             "suite_version": f"OpenFOAM {build.group(1)}" + (f" (patch {build.group(2)})" if build.group(2) else "")
             if build else ""}
    return results([("wall_time", "s", wall),
                    ("time_per_step", "us", per_step, len(times) - warmup_steps),
                    ("steps", "count", len(times)),
                    ("cells", "count", cells)],
                   benchmark="openfoam-dambreak", ranks=ranks, variant=variant(cells, end_time), verified=True,
                   extra=extra)


class OpenFOAM(Application):
    name = "openfoam"
    row_name = "openfoam-dambreak"
    label = "OpenFOAM damBreak"
    span = staticmethod(end_time_of)      # the simulated time a variant names
    reproduces = ("richter2015",)
    experiment = "openfoam"
    title = ("OpenFOAM 1912 damBreak (interFoam, laminar): solver wall time, speed-up and efficiency per set-up "
             "(Richter et al., Table 1)")
    params = {
        **Application.run_params("Debian's OpenFOAM is built with Open MPI"),
        "refines": Ints("Cells per block edge of damBreak's mesh in % of the tutorial's, one configuration each "
                        "(100: 2,268 cells; 185: 7,800 cells, near the report's 7,700).", [185], minimum=50,
                        maximum=1000, sweep="refine_pct"),
        "end_time_ms": Int("Simulated time in ms (the report: 1 s in about 1,000 steps).", 1000, minimum=10,
                           maximum=10000),
    }
    raw_template = "{mpi}-{path}_r{refine_pct}_t{end_time_ms}_n{ranks}"
    build = Package(("openfoam", "openfoam-examples"))
    metrics = {"wall_time": "s", "time_per_step": "us", "steps": "count", "cells": "count"}
    counterparts = (Counterpart("OpenFOAM damBreak", r"\citet{richter2015}, Table~1",
                                r"\hvCores{} cores; namespaces as servers; guests on a smaller input"),)
    success = ("the staging steps succeed, the solver reaches the end time and ends normally ('end'), "
               "no FOAM FATAL ERROR and no launcher error text")

    testbed_keys = {
        "case": {**VALUE_KEY,
                 "description": "The damBreak case directory of the testbed's OpenFOAM (its tutorials' "
                                "multiphase/interFoam/laminar/damBreak/damBreak) where rank 0 sees it (default: "
                                "Debian's openfoam-examples)."},
    }

    def job(self, s: dict, entry: dict) -> Job:
        return self.app_job([entry["binary"], entry.get("case", CASE), str(s["refine_pct"]),
                             f"{s['end_time_ms'] / 1000:g}"], s)

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        return {"ranks": s["ranks"], "end_time": s["end_time_ms"] / 1000,
                "warmup": f"none in wall_time; time_per_step after the first {WARMUP_STEPS} steps",
                "nodes": 2 if s["path"] == "net" and s["ranks"] > 1 else 1}

    def numbers(self, rows) -> dict[str, str]:
        """The package version, the mesh sizes, the steps at the largest mesh over its longest simulated
        time ("7800 cells" is 1 s, "7800 cells, 0.5 s"), and the rounds."""
        from ..labels import latex_escape

        cells = sorted({int(v) for v in rows.loc[rows["metric"] == "cells", "value"]})
        big_runs = rows[(rows["metric"] == "steps") & rows["variant"].astype(str).str.startswith(f"{cells[-1]} cells")]
        longest = max(big_runs["variant"].astype(str).unique(), key=self.span)
        big = big_runs[big_runs["variant"] == longest]["value"]
        versions = sorted({str(v) for v in rows["suite_version"].dropna() if v}) if "suite_version" in rows else []
        return {
            "hvOpenfoamEndTime": f"{self.span(longest):g}",
            "hvOpenfoamVersion": latex_escape(", ".join(versions) or "unknown"),
            "hvOpenfoamCells": " and ".join(f"{c:,}".replace(",", "{,}") for c in cells),
            "hvOpenfoamSteps": f"{int(big.min())}--{int(big.max())}" if big.nunique() > 1 else str(int(big.min())),
            "hvOpenfoamReps": str(int(rows["rep"].nunique())),
        }

    def parse(self, raw, expected: dict) -> list[Measurement]:
        return parse(raw, expected)


BENCHMARK = OpenFOAM()
