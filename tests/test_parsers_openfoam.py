"""OpenFOAM's damBreak (hpcvirt.benchmarks.openfoam): the parser on real
outputs of workflow/scripts/openfoam-dambreak, and a killed run that leaves
nothing behind."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from hpcvirt.benchmarks import REGISTRY
from hpcvirt.benchmarks import openfoam
from hpcvirt.benchmarks.openfoam import parse
from hpcvirt.config import load_study
from hpcvirt.execute import execute
from hpcvirt.matrix import configurations
from hpcvirt.testbeds import launch
from hpcvirt.tidy import ParseError
from procs import running_with

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests/fixtures/openfoam"
needs_openfoam = pytest.mark.skipif(shutil.which("interFoam") is None or not Path(openfoam.CASE).is_dir(),
                                    reason="Debian's openfoam and openfoam-examples are not installed")


def test_a_serial_run_gives_wall_time_steps_and_cells():
    text = (FIX / "serial-r100-t0.1.out").read_text()
    rows = {m.metric: m for m in parse(FIX / "serial-r100-t0.1.out", {"ranks": 1, "nodes": 1})}
    assert rows["wall_time"].value == float(re.search(r"^wall_s (\S+)", text, re.M).group(1))
    assert rows["steps"].value == len(re.findall(r"^Time = ", text, re.M))
    assert rows["cells"].value == 2268 and rows["cells"].variant == "2268 cells, 0.1 s"   # not the report's 1 s
    execs = [float(x) for x in re.findall(r"^ExecutionTime = (\S+) s", text, re.M)]
    assert rows["time_per_step"].value == pytest.approx((execs[-1] - execs[19]) / (len(execs) - 20) * 1e6)
    assert {m.ranks for m in rows.values()} == {1} and all(m.verified for m in rows.values())


def test_ranks_must_have_run_where_they_were_meant():
    assert parse(FIX / "bridge-2ranks-r100-t0.1.out", {"ranks": 2, "nodes": 2})
    with pytest.raises(ParseError, match=r"the ranks ran on 2 host\(s\), but 1 were meant"):
        parse(FIX / "bridge-2ranks-r100-t0.1.out", {"ranks": 2, "nodes": 1})
    with pytest.raises(ParseError, match=r"the ranks ran on 1 host\(s\), but 2 were meant"):
        parse(FIX / "local-2ranks-r100-t0.1.out", {"ranks": 2, "nodes": 2})
    with pytest.raises(ParseError, match="from 2 ranks, but 4 were launched"):
        parse(FIX / "local-2ranks-r100-t0.1.out", {"ranks": 4})


@pytest.mark.parametrize("fixture, needle", [
    ("killed-after-3s.out", r"no 'end' line: the run did not complete"),
    ("blockmesh-failed.out", r"the run failed \(launcher/MPI error text at line \d+: .*(Segmentation fault|FOAM FATAL|blockMesh failed)"),
])
def test_failed_runs_are_rejected_with_their_path(fixture, needle):
    with pytest.raises(ParseError, match=re.escape(str(FIX / fixture)) + ": " + needle):
        parse(FIX / fixture)


def test_a_solver_that_stopped_before_the_end_time_is_rejected(tmp_path):
    text = (FIX / "serial-r100-t0.1.out").read_text().replace("end_time 0.1", "end_time 0.5")
    (tmp_path / "x.out").write_text(text)
    with pytest.raises(ParseError, match=r"stopped at t = 0.1\d* s before the end time 0.5 s"):
        parse(tmp_path / "x.out")


@pytest.mark.vm
@needs_openfoam
def test_a_killed_run_leaves_no_process_and_no_case(tmp_path):
    """The local testbed's real launch of a long damBreak, killed at its time limit."""
    study, testbeds = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    c = next(c for c in configurations(study) if c.testbed == "local" and c.benchmark == "openfoam"
             and c.settings["ranks"] == 2 and c.settings["refine_pct"] == 185)
    out = tmp_path / "rep-1.out"
    hosts = tmp_path / "rank-hosts"     # its ranks carry it in their environment: this launch's own
    hosts.mkdir()
    status = execute(launch(c, testbeds["local"]), out, timeout=6, rank_hosts_dir=hosts)
    assert status["timed_out"] and "killed after the time limit" in status["note"]
    assert "hpcvirt-openfoam 1" in out.read_text()
    with pytest.raises(ParseError, match="no 'end' line"):
        REGISTRY["openfoam"].parse(out, {"ranks": 2})
    assert running_with(f"HPCVIRT_RANK_HOSTS={hosts.resolve()}") == []
    # the killed run's case is removed by the next run (Open MPI may SIGKILL the wrapper before its traps run)
    status = execute(launch(c, testbeds["local"]), tmp_path / "rep-2.out", timeout=2)
    assert status["timed_out"]
    left = list((ROOT / ".hpcvirt/runs").glob("openfoam-*"))
    assert len(left) <= 1, left
    out3 = tmp_path / "tiny.out"
    small = dataclasses.replace(c, settings={**c.settings, "refine_pct": 50, "end_time_ms": 20})
    assert execute(launch(small, testbeds["local"]), out3, timeout=120)["exit_code"] == 0, out3.read_text()[-2000:]
    assert not list((ROOT / ".hpcvirt/runs").glob("openfoam-*"))


def test_a_run_too_short_for_the_warm_up_is_rejected_with_its_path():
    """A guest's run of 0.05 s simulated (a real output, under TCG emulation) took 13 steps: fewer than the 20
    left out as warm-up, so it has no time per step; it is rejected, saying why, not parsed into numbers."""
    path = FIX / "guest-r100-t0.05-13steps.out"
    assert len(re.findall(r"^Time = ", path.read_text(), re.M)) == 13
    with pytest.raises(ParseError) as exc:
        parse(path, {"ranks": 1, "nodes": 1})
    assert str(path) in str(exc.value) and "only 13 steps" in str(exc.value) and "end_time_ms" in str(exc.value)


def test_the_variant_names_the_simulated_time_unless_it_is_the_reports():
    assert openfoam.variant(7800, 1.0) == "7800 cells"
    assert openfoam.variant(7800, 0.5) == "7800 cells, 0.5 s" and openfoam.variant(2268, 0.1) == "2268 cells, 0.1 s"
    assert [openfoam.end_time_of(openfoam.variant(7800, t)) for t in (1.0, 0.5, 0.1)] == [1.0, 0.5, 0.1]
