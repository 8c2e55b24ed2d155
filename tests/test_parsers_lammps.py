"""LAMMPS' Lennard-Jones melt (hpcvirt.benchmarks.lammps): the parser on real
outputs of Debian's lmp with the project's input, failed runs, the energy
check, and one run end to end through the testbed's launcher."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from hpcvirt.benchmarks import REGISTRY, lammps
from hpcvirt.config import load_study
from hpcvirt.execute import execute
from hpcvirt.matrix import configurations
from hpcvirt.testbeds import launch
from hpcvirt.tidy import ParseError
from procs import running_with

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests/fixtures/lammps"


def _thermo(text: str) -> list[list[str]]:
    block = text.split("Step Temp PotEng KinEng TotEng Press")[1].split("Loop time")[0]
    return [ln.split() for ln in block.strip().splitlines()]


@pytest.mark.parametrize("fixture, ranks", [("serial-c8-s200.out", 1), ("2ranks-c8-s200.out", 2)])
def test_a_run_gives_loop_time_performance_and_drift(fixture, ranks):
    text = (FIX / fixture).read_text()
    rows = {m.metric: m for m in lammps.parse(FIX / fixture, {"ranks": ranks, "steps": 200, "atoms": 2048})}
    loop = float(re.search(r"^Loop time of (\S+) on", text, re.M).group(1))
    assert rows["loop_time"].value == loop
    assert rows["time_per_step"].value == pytest.approx(loop / 200 * 1e6)
    assert rows["performance"].value == float(re.search(r"^Performance: (\S+) tau/day", text, re.M).group(1))
    table = _thermo(text)
    e0, e1 = float(table[0][4]), float(table[-1][4])
    assert rows["energy_drift"].value == pytest.approx(abs(e1 - e0) / abs(e0))
    assert 0 < rows["energy_drift"].value < lammps.MAX_DRIFT
    assert rows["atoms"].value == 2048 and {m.ranks for m in rows.values()} == {ranks}
    assert {m.variant for m in rows.values()} == {"2048 atoms"} and all(m.verified for m in rows.values())
    assert rows["loop_time"].extra["suite_version"] == "LAMMPS 29 Sep 2021 - Update 2"


def test_ranks_are_mpi_tasks_not_tasks_times_threads():
    """Unbound ranks get one OpenMP thread per core unless told otherwise;
    LAMMPS' "on 4 procs" is then 2 tasks x 2 threads."""
    f = FIX / "bridge-2ranks-2threads-c20-s1000.out"
    assert "on 4 procs" in f.read_text()
    rows = lammps.parse(f, {"ranks": 2, "steps": 1000, "atoms": 32000})
    assert {m.ranks for m in rows} == {2} and {m.extra["omp_threads"] for m in rows} == {"2"}


def test_the_run_must_be_the_one_launched():
    with pytest.raises(ParseError, match="the run had 2 ranks, but 4 were meant"):
        lammps.parse(FIX / "2ranks-c8-s200.out", {"ranks": 4})
    with pytest.raises(ParseError, match="the run had 2048 atoms, but 32000 were meant"):
        lammps.parse(FIX / "serial-c8-s200.out", {"atoms": 32000})
    with pytest.raises(ParseError, match="the run had 200 steps, but 1000 were meant"):
        lammps.parse(FIX / "serial-c8-s200.out", {"steps": 1000})


@pytest.mark.parametrize("fixture, needle", [
    ("killed-after-3s.out", "no 'Total wall time' line: the run did not complete"),
    ("lost-atoms.out", r"the run failed \(launcher/MPI error text at line \d+: 'ERROR: Lost atoms"),
])
def test_failed_runs_are_rejected_with_their_path(fixture, needle):
    with pytest.raises(ParseError, match=re.escape(str(FIX / fixture)) + ": " + needle):
        lammps.parse(FIX / fixture)


def test_an_energy_that_drifts_is_rejected(tmp_path):
    """The same output with its last total energy moved by 5 %: a broken integration."""
    text = (FIX / "serial-c8-s200.out").read_text()
    last = _thermo(text)[-1]
    bad_energy = f"{float(last[4]) * 1.05:.8g}"
    bad = tmp_path / "drift.out"
    bad.write_text(text.replace(" ".join(last), " ".join([*last[:4], bad_energy, last[5]])))
    assert bad.read_text() != text
    with pytest.raises(ParseError, match=re.escape(str(bad)) + r": the total energy drifted by 5\.\d\d% .* more than "
                                         r"the 1% a correct run"):
        lammps.parse(bad)


def test_a_cut_thermo_table_is_rejected(tmp_path):
    text = (FIX / "serial-c8-s200.out").read_text()
    row = " ".join(_thermo(text)[3])
    cut = tmp_path / "cut.out"
    cut.write_text(text.replace(row, row.rsplit(" ", 3)[0]))
    with pytest.raises(ParseError, match="a thermo row is cut or malformed"):
        lammps.parse(cut)



def test_the_energy_is_read_from_the_column_named_toteng(tmp_path):
    """The thermo columns are the input's thermo_style: the parser finds the step and the total
    energy by their names, so another column order gives the same drift, and a table without
    TotEng is an error, not a drift read from another column."""
    text = (FIX / "serial-c8-s200.out").read_text()
    header = "Step Temp PotEng KinEng TotEng Press"
    drift = {m.metric: m.value for m in lammps.parse(FIX / "serial-c8-s200.out")}["energy_drift"]
    swapped = text.replace(header, "Step TotEng PotEng KinEng Temp Press")     # Temp and TotEng trade places
    for row in _thermo(text):
        swapped = swapped.replace(" ".join(row), " ".join([row[0], row[4], row[2], row[3], row[1], row[5]]), 1)
    moved = tmp_path / "moved.out"
    moved.write_text(swapped)
    assert header not in swapped
    assert {m.metric: m.value for m in lammps.parse(moved)}["energy_drift"] == pytest.approx(drift)
    renamed = tmp_path / "renamed.out"
    renamed.write_text(text.replace(header, "Step Temp PotEng KinEng Enthalpy Press"))
    with pytest.raises(ParseError, match=re.escape(str(renamed)) + ": the thermo table has no TotEng column"):
        lammps.parse(renamed)


@pytest.mark.skipif(shutil.which("lmp") is None, reason="Debian's lammps is not installed")
def test_a_small_melt_runs_through_the_local_testbed_and_a_killed_one_leaves_nothing(tmp_path, monkeypatch):
    """The declaration's job on the local testbed as the workflow launches it
    (from the repository: the input's path is relative to it)."""
    monkeypatch.chdir(ROOT)
    study, testbeds = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    c = next(c for c in configurations(study) if c.testbed == "local" and c.benchmark == "lammps"
             and c.settings["ranks"] == 2 and c.settings["path"] == "shm")
    small = dataclasses.replace(c, settings={**c.settings, "cells": 6, "steps": 100})
    out = tmp_path / "rep-1.out"
    assert execute(launch(small, testbeds["local"]), out, timeout=120)["exit_code"] == 0, out.read_text()[-2000:]
    rows = {m.metric: m.value for m in lammps.parse(out, REGISTRY["lammps"].expected(small.settings, []))}
    assert rows["atoms"] == 4 * 6 ** 3 and rows["loop_time"] > 0
    # ten times the study's steps (the study's own run can end within the limit on a fast host),
    # killed at a time limit: rejected, and no rank left running
    # (its ranks carry the directory where they record their hosts, this test's own: other tests
    # running at the same time may run lmp too)
    long = dataclasses.replace(c, settings={**c.settings, "steps": 10 * c.settings["steps"]})
    hosts = tmp_path / "rank-hosts"
    hosts.mkdir()
    status = execute(launch(long, testbeds["local"]), tmp_path / "rep-2.out", timeout=3, rank_hosts_dir=hosts)
    assert status["timed_out"]
    with pytest.raises(ParseError, match="no 'Total wall time' line"):
        lammps.parse(tmp_path / "rep-2.out")
    assert running_with(f"HPCVIRT_RANK_HOSTS={hosts.resolve()}") == []



def test_the_paper_states_the_drift_the_parser_accepts_below(monkeypatch):
    """The method section's bound of the energy drift is the parser's own (\\hvLammpsMaxDrift), not typed."""
    from hpcvirt.benchmarks import REGISTRY, lammps

    import pandas as pd

    rows = pd.DataFrame({"ranks": [2, 1, 2]})
    assert REGISTRY["lammps"].numbers(rows) == {"hvLammpsMaxDrift": "1\\,\\%", "hvLammpsRanks": "1 and 2"}
    monkeypatch.setattr(lammps, "MAX_DRIFT", 0.005)
    assert REGISTRY["lammps"].numbers(rows)["hvLammpsMaxDrift"] == "0.5\\,\\%"
    method = (ROOT / "paper/sections/parts/method-apps.tex").read_text()
    assert "drifts by less than \\hvLammpsMaxDrift." in method
