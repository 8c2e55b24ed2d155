"""MILC (hpcvirt.benchmarks.milc): the parser on real outputs of
workflow/scripts/milc-run with the project's builds (tests/fixtures/milc/README.md),
every failure rejected with its path, and a tiny run end to end."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcvirt import build
from hpcvirt.benchmarks import milc
from hpcvirt.benchmarks.milc import BENCHMARK, parse
from hpcvirt.tidy import ParseError

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests/fixtures/milc"

GOOD = [  # file, ranks, lattice, trajectories
    ("openmpi-shm_l8x8x8x8_t1_n1.out", 1, "8x8x8x8", 1),
    ("openmpi-shm_l8x8x8x8_t1_n2.out", 2, "8x8x8x8", 1),
    ("mpich-shm_l6x6x6x6_t2_n2.out", 2, "6x6x6x6", 2),
]


@pytest.mark.parametrize("name, ranks, lattice, trajecs", GOOD, ids=[g[0] for g in GOOD])
def test_good_runs_give_the_values_milc_printed(name, ranks, lattice, trajecs):
    text = (FIX / name).read_text()
    rows = {m.metric: m for m in BENCHMARK.parse(FIX / name, {"ranks": ranks, "lattice": lattice,
                                                                "trajectories": trajecs})}
    assert set(rows) == set(BENCHMARK.metrics)
    assert all(m.unit == BENCHMARK.metrics[k] for k, m in rows.items())
    assert rows["wall_time"].value == float(re.search(r"^wall_s (\S+)$", text, re.M).group(1))
    milc_time = float(re.search(r"^Time = (\S+) seconds$", text, re.M).group(1))
    assert rows["time_per_trajectory"].value == pytest.approx(milc_time / trajecs)
    total = int(re.search(r"^total_iters = (\d+)$", text, re.M).group(1))
    assert rows["cg_iterations"].value == total
    cg = re.findall(r"^CONGRAD5: time = (\S+) .* iters = (\d+) ", text, re.M)
    assert sum(int(i) for _, i in cg) == total
    assert rows["time_per_cg_iteration"].value == pytest.approx(sum(float(t) for t, _ in cg) / total * 1e6)
    assert {m.ranks for m in rows.values()} == {ranks}
    assert {m.variant for m in rows.values()} == {f"{lattice} x{trajecs}"}
    assert all(m.verified for m in rows.values())
    assert {m.extra["suite_version"] for m in rows.values()} == {"MILC 1e11e121 su3_rhmd_hisq"}


def test_the_references_are_those_printed_by_every_rank_count_and_mpi():
    """1 and 2 ranks, Open MPI and MPICH printed the same observables (the check's premise)."""
    for name, _, lattice, _ in GOOD:
        observed = milc._observables((FIX / name).read_text())
        assert observed == milc.REFERENCE[lattice, milc.STEPS][:len(observed)]


@pytest.mark.parametrize("fixture, needle", [
    ("killed-after-8s_l8x8x8x8_n2.out", r"the run did not reach MILC's normal end \(no 'RUNNING COMPLETED'"),
    ("layout-3ranks_l8x8x8x8.out", r"the run failed \(launcher/MPI error text at line \d+: "
                                   r"\"LAYOUT: Can't lay out this lattice"),
    ("segfault-3ranks_l6x6x6x6_t2.out", r"the run failed \(launcher/MPI error text at line \d+: .*Segmentation fault"),
    ("cg-not-converged_l6x6x6x6_t1_n1.out", r"a CG did not converge \(line \d+: 'ks_multicg_offset_field: CG NOT "
                                            r"CONVERGED after 25 iterations"),
    ("perturbed-plaquette_l8x8x8x8_t1_n2.out", r"incorrect result after trajectory 1: PLAQ\[0\] = 2.195955, "
                                               r"reference 2.195905 \(\|difference\| 5e-05 > 2e-05\)"),
])
def test_failed_runs_are_rejected_with_their_path(fixture, needle):
    with pytest.raises(ParseError, match=re.escape(str(FIX / fixture)) + ": " + needle):
        BENCHMARK.parse(FIX / fixture, {})


def test_a_run_on_other_ranks_or_another_input_is_rejected():
    good = FIX / "openmpi-shm_l8x8x8x8_t1_n2.out"
    with pytest.raises(ParseError, match="from 2 ranks, but 4 were launched"):
        parse(good, {"ranks": 4})
    with pytest.raises(ParseError, match="of lattice 8x8x8x8, but 6x6x6x6 was run"):
        parse(good, {"ranks": 2, "lattice": "6x6x6x6"})
    with pytest.raises(ParseError, match="of trajectories 1, but 2 was run"):
        parse(good, {"ranks": 2, "trajectories": 2})


@pytest.mark.parametrize("old, new, needle", [
    ("\nMachine = MPI (portable), with 2 nodes\n", "\nMachine = MPI (portable), with 1 nodes\n",
     "MILC ran on 1 ranks, but the wrapper counted 2"),
    ("FACTION: mass = 5.000000e-01,  1.514632e+00", "FACTION: mass = 5.000000e-01,  1.514682e+00",
     r"FACTION mass 0.5 = 1.514682, reference 1.514632"),
    ("CHECK: delta S = -1.419447e+00", "CHECK: delta S = -1.319447e+00", r"delta S = -1.319447"),
    ("\nbeta 6.7\n", "\nbeta 6.8\n", r"not the reference input .*'beta': '6.8'"),
    ("\ntotal_iters = 2505\n", "\ntotal_iters = 2504\n",
     "add up to 2505 CG iterations, but MILC counted total_iters = 2504"),
    ("\nRUNNING COMPLETED\n", "\n", "no 'RUNNING COMPLETED'"),
])
def test_edited_copies_of_a_good_run_are_rejected(tmp_path, old, new, needle):
    text = (FIX / "openmpi-shm_l8x8x8x8_t1_n2.out").read_text()
    assert text.count(old) == 1
    (tmp_path / "x.out").write_text(text.replace(old, new))
    with pytest.raises(ParseError, match=re.escape(str(tmp_path / "x.out")) + ": .*" + needle):
        parse(tmp_path / "x.out", {"ranks": 2})


def test_rank_counts_milc_cannot_lay_out_are_refused_before_running():
    assert milc.layout("8x8x8x8", 2) == (4, 8, 8, 8)              # "ON EACH NODE (RANK) 4 x 8 x 8 x 8"
    assert milc.layout("6x6x6x6", 4) == (3, 3, 6, 6) and milc.layout("8x8x8x8", 16) == (4, 4, 4, 4)
    assert milc.layout("8x8x8x8", 3) is None                      # as in layout-3ranks_l8x8x8x8.out
    assert milc.layout("6x6x6x6", 3) is None                      # 2 x 6 x 6 x 6: segfault-3ranks_l6x6x6x6_t2.out
    assert milc.layout("8x8x8x8", 32) is None
    assert BENCHMARK.check({"lattices": ["6x6x6x6", "8x8x8x8"], "ranks": [1, 2, 4]}) is None
    assert "[('6x6x6x6', 3), ('8x8x8x8', 3)]" in BENCHMARK.check({"lattices": ["6x6x6x6", "8x8x8x8"], "ranks": [3]})


def test_the_declaration():
    s = {"mpi": "openmpi", "path": "net", "ranks": 4, "lattice": "8x8x8x8", "trajectories": 1}
    job = BENCHMARK.job(s, {"binary": ".hpcvirt/suites/milc-openmpi/bin/su3_rhmd_hisq"})
    assert job.argv == ["workflow/scripts/milc-run", ".hpcvirt/suites/milc-openmpi/bin/su3_rhmd_hisq", "8x8x8x8", "1"]
    assert (job.ranks, job.block, job.path) == (4, 2, "net")
    assert BENCHMARK.raw_params(s) == "openmpi-net_l8x8x8x8_t1_n4"
    assert BENCHMARK.expected(s, []) == {"ranks": 4, "lattice": "8x8x8x8", "trajectories": 1, "steps": 12}
    exp = {"mpis": ["openmpi"], "ranks": [1, 2], "paths": ["shm", "net"], "lattices": ["8x8x8x8"], "trajectories": 1}
    assert [(c["path"], c["ranks"]) for c in BENCHMARK.configurations(exp, None)] == [
        ("shm", 1), ("shm", 2), ("net", 2)]
    # short trajectories: the steps go on the command line and into the raw-output name
    short = {**s, "lattice": "4x4x4x6", "steps": 2}
    assert BENCHMARK.job(short, {"binary": "m"}).argv == ["workflow/scripts/milc-run", "m", "4x4x4x6", "1", "2"]
    assert BENCHMARK.raw_params(short) == "openmpi-net_l4x4x4x6_t1_n4_s2"
    # input sets are not crossed: the large input and beside it the guests' short one
    exp = {**exp, "ranks": [2], "paths": ["net"], "inputs": [{}, {"lattice": "4x4x4x6", "steps": 2}]}
    assert BENCHMARK.check({**exp, "steps": 12}) is None
    assert [(c["lattice"], c.get("steps")) for c in BENCHMARK.configurations(exp, None)] == [
        ("8x8x8x8", None), ("4x4x4x6", 2)]
    # an input without references is refused before any job runs
    assert "no reference values for (lattice, steps) [('8x8x8x8', 2)]" in BENCHMARK.check(
        {**exp, "steps": 12, "inputs": [{"steps": 2}]})
    assert build.RECIPES["milc"].binary_dir == "bin/su3_rhmd_hisq"
    assert build.RECIPES["milc"].source == "MILC" and build.RECIPES["milc"].package == "milc"


@pytest.mark.e2e                # runs the project's builds, which `make test` installs beside its first phase
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_a_tiny_run_end_to_end_through_the_wrapper(tmp_path, mpi):
    """The project's build (python -m hpcvirt.build milc), 6^4 for one trajectory on 2 ranks."""
    binary = build.link_path("milc", mpi) / build.RECIPES["milc"].binary_dir
    launcher = {"openmpi": "mpirun.openmpi", "mpich": "mpirun.mpich"}[mpi]
    if not binary.is_file() or shutil.which(launcher) is None:
        pytest.skip(f"no build of MILC for {mpi} (python -m hpcvirt.build --mpi {mpi} milc)")
    s = {"mpi": mpi, "path": "shm", "ranks": 2, "lattice": "6x6x6x6", "trajectories": 1}
    job = BENCHMARK.job(s, {"binary": str(binary)})
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    out = tmp_path / "run.out"
    with open(out, "w") as fh:
        cp = subprocess.run([launcher, "-np", "2", *job.argv], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=fh,
                            stderr=subprocess.STDOUT, env=env, timeout=300)
    assert cp.returncode == 0, out.read_text()[-2000:]
    rows = {m.metric: m for m in BENCHMARK.parse(out, BENCHMARK.expected(s, []))}
    assert rows["cg_iterations"].value > 0 and rows["wall_time"].value > 0 and rows["wall_time"].verified
