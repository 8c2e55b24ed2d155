"""Molecular dynamics with LAMMPS: the stand-in for NAMD (Atif et al. ran
NAMD's ApoA1; NAMD is not free software and not in Debian).  Debian's
``lammps`` (29 Sep 2021, Open MPI build) runs the project's input
``workflow/inputs/lammps/in.lj``: LAMMPS' classic Lennard-Jones melt
benchmark, 4 n^3 atoms (n = 20: 32,000, the benchmark's own size), NVE.

LAMMPS prints (rank 0, on standard output)::

    LAMMPS (29 Sep 2021 - Update 2)
    ...
      1 by 2 by 1 MPI processor grid
    Created 32000 atoms
    ...
    Step Temp PotEng KinEng TotEng Press
           0 1.44 -6.7733681 2.1599325 -4.6134356 -5.0197073
    ...
        1000 0.70325873 -5.6750827 1.0548551 -4.6202276 0.71125869
    Loop time of 11.158 on 2 procs for 1000 steps with 32000 atoms
    Performance: 38716.756 tau/day, 89.622 timesteps/s
    ...
    Total wall time: 0:00:11

Emitted metrics:

``loop_time`` (s)           wall time of the run loop (setup excluded)
``time_per_step`` (us)      loop time / steps
``performance`` (tau/day)   simulated time per day, the MD throughput (NAMD reports ns/day)
``energy_drift`` (fraction) |TotEng(last) - TotEng(first)| / |TotEng(first)|
``atoms`` (count)

Success: the loop ran the declared steps on the launched number of ranks
(its ``N MPI tasks x M OpenMP threads`` line; ``Loop time ... on P procs``
counts tasks times threads) with the declared atom count, ``Total wall time`` was printed (LAMMPS ended
normally), no ``ERROR``/launcher error text, and the total energy drifts by
less than ``MAX_DRIFT`` over the run.  The bound is a correctness check of
the integration, not a physics claim: this input drifts by 0.15 % over 1,000
steps at 1 and 2 ranks here (the cut-off of the unshifted potential);
a broken run (lost atoms, a corrupted exchange) moves it by far more.
"""

from __future__ import annotations

from ..tidy import Measurement, ParseError
from .base import Application, Job
from .common import Patterns, check_no_mpi_error, check_once, error_re, ranks_text, read_text, results
from .parts import Counterpart, Int, Package

INPUT = "workflow/inputs/lammps/in.lj"
MAX_DRIFT = 0.01
ENERGY = "TotEng"    # the thermo column of the total energy (thermo_style's etotal), found by its name
ERRORS = error_re(r"^ERROR(?: on proc \d+)?:", r"Lost atoms")
LINES = Patterns(
    version=r"^LAMMPS \(([^)]+)\)",
    header=r"^[ \t]*(Step(?:[ \t]+[A-Za-z]\w*)+)[ \t]*$",    # the thermo table's column names
    loop=r"^Loop time of ([0-9.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms",
    perf=r"^Performance: ([0-9.eE+-]+) tau/day",
    tasks=r"^\S+% CPU use with (\d+) MPI tasks x (\d+) OpenMP threads",
    end=r"^Total wall time: \d+:\d\d:\d\d",
)


def parse(path, expected: dict | None = None) -> list[Measurement]:
    text = read_text(path)
    check_no_mpi_error(path, text, ERRORS)
    version = LINES.version.search(text)
    if not version:
        raise ParseError(path, "no 'LAMMPS (<version>)' banner: not a LAMMPS output")
    for pattern, what in ((LINES.version, "LAMMPS banner"), (LINES.loop, "'Loop time' line"),
                          (LINES.end, "'Total wall time' line")):
        check_once(path, text, pattern, what)
    if not LINES.end.search(text):
        raise ParseError(path, "no 'Total wall time' line: the run did not complete (cut, killed or failed)")
    loop, perf, header = LINES.loop.search(text), LINES.perf.search(text), LINES.header.search(text)
    if not (loop and perf and header):
        raise ParseError(path, "no thermo table, 'Loop time' or 'Performance' line: the run loop did not complete")
    seconds, procs, steps, atoms = float(loop.group(1)), int(loop.group(2)), int(loop.group(3)), int(loop.group(4))
    tasks = LINES.tasks.search(text)          # "procs" counts MPI tasks x OpenMP threads
    ranks, threads = (int(tasks.group(1)), int(tasks.group(2))) if tasks else (procs, 1)
    columns = header.group(1).split()
    if ENERGY not in columns:
        raise ParseError(path, f"the thermo table has no {ENERGY} column (its columns: {' '.join(columns)}): "
                               f"the input's thermo_style must print etotal")
    step, energy = columns.index("Step"), columns.index(ENERGY)
    table = []
    for line in text[header.end():loop.start()].strip().splitlines():
        cells = line.split()
        try:
            table.append((int(cells[step]), float(cells[energy])))
        except (IndexError, ValueError):
            raise ParseError(path, f"a thermo row is cut or malformed: {line.strip()!r}") from None
    if len(table) < 2 or table[0][0] != 0 or table[-1][0] != steps:
        raise ParseError(path, f"the thermo table does not run from step 0 to step {steps}")
    exp = expected or {}
    for key, got in (("ranks", ranks), ("steps", steps), ("atoms", atoms)):
        if exp.get(key) not in (None, got):
            raise ParseError(path, f"the run had {got} {key}, but {exp[key]} were meant")
    e0, e1 = table[0][1], table[-1][1]
    drift = abs(e1 - e0) / abs(e0)
    if not drift < MAX_DRIFT:
        raise ParseError(path, f"the total energy drifted by {drift:.2%} (from {e0} to {e1}), more than the "
                               f"{MAX_DRIFT:.0%} a correct run of this input stays within")
    return results([("loop_time", "s", seconds, steps),
                    ("time_per_step", "us", seconds / steps * 1e6, steps),
                    ("performance", "tau/day", float(perf.group(1))),
                    ("energy_drift", "fraction", drift),
                    ("atoms", "count", atoms)],
                   benchmark="lammps", ranks=ranks, variant=f"{atoms} atoms", verified=True,
                   extra={"suite_version": f"LAMMPS {version.group(1)}", "steps": str(steps),
                          "omp_threads": str(threads)})


class LAMMPS(Application):
    name = "lammps"
    row_name = "lammps"
    label = "LAMMPS, Lennard-Jones melt (NAMD's stand-in)"
    time_metric = "loop_time"
    experiment = "lammps"
    title = ("LAMMPS Lennard-Jones melt (in.lj, NVE): the stand-in for NAMD (Atif et al.) over the data paths "
             "(Ramakrishnan et al.'s interconnect classes)")
    params = {
        **Application.run_params("Debian's LAMMPS is built with Open MPI"),
        "cells": Int("fcc unit cells per box edge (4 n^3 atoms; 20: 32,000 atoms, the benchmark's size).", 20,
                     minimum=2, maximum=200),
        "steps": Int("Time steps of 0.005 tau.", 1000, minimum=20, maximum=1_000_000),
    }
    raw_template = "{mpi}-{path}_c{cells}_s{steps}_n{ranks}"
    build = Package(("lammps",))
    metrics = {"loop_time": "s", "time_per_step": "us", "performance": "tau/day", "energy_drift": "fraction",
               "atoms": "count"}
    counterparts = (Counterpart("LAMMPS LJ melt", r"\citet{atif2016}, NAMD",
                                r"stand-in for NAMD; \hvLammpsRanks{} ranks"),)
    success = (f"LAMMPS ends normally ('Total wall time'), the loop ran the declared steps on the launched ranks, "
               f"no ERROR or launcher error text, and the total energy drifts by less than {MAX_DRIFT:.0%}")

    def numbers(self, rows) -> dict[str, str]:
        """The energy drift its rows were accepted below (``\\hvLammpsMaxDrift``, in percent) and the rank
        counts it ran (``\\hvLammpsRanks``)."""
        return {"hvLammpsMaxDrift": f"{100 * MAX_DRIFT:g}\\,\\%", "hvLammpsRanks": ranks_text(rows)}

    def job(self, s: dict, entry: dict) -> Job:
        every = max(1, s["steps"] // 10)
        return self.app_job([entry["binary"], "-in", INPUT, "-var", "n", str(s["cells"]), "-var", "steps",
                             str(s["steps"]), "-var", "every", str(every), "-log", "none", "-nocite"], s)

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        return {"ranks": s["ranks"], "steps": s["steps"], "atoms": 4 * s["cells"] ** 3}

    def parse(self, raw, expected: dict) -> list[Measurement]:
        return parse(raw, expected)


BENCHMARK = LAMMPS()
