"""The communication profile parser (benchmarks/commprof.py) on outputs
captured from the project's build (tests/fixtures/commprof/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcvirt.benchmarks import commprof
from hpcvirt.tidy import ParseError

FIX = Path(__file__).parent / "fixtures" / "commprof"
B = commprof.BENCHMARK


def _by(rows, metric):
    return [r for r in rows if r.metric == metric]


def test_alltoall_kernel_is():
    rows = B.parse(FIX / "commprof_local_openmpi-shm_is.W_n4.out", {"kernel": "is", "class": "W", "ranks": 4})
    assert {r.benchmark for r in rows} == {"commprof-is"}
    (share,) = _by(rows, "mpi_time_share")
    assert 0 < share.value < 1 and share.variant == "W" and share.ranks == 4
    sent = {r.variant: r.value for r in _by(rows, "bytes_sent")}
    # IS exchanges keys with every other rank (Alltoallv): all 12 off-diagonal pairs
    assert {v.split()[1] for v in sent} >= {f"{s}>{d}" for s in range(4) for d in range(4) if s != d}
    assert all(v > 0 for v in sent.values())


def test_point_to_point_kernel_mg_is_symmetric():
    rows = B.parse(FIX / "commprof_local_openmpi-tcp_mg.W_n4.out", {"kernel": "mg", "class": "W", "ranks": 4})
    sent = {tuple(map(int, r.variant.split()[1].split(">"))): r.value for r in _by(rows, "bytes_sent")}
    assert sent and all(sent.get((d, s)) == v for (s, d), v in sent.items())  # halo exchange both ways
    (wall,) = _by(rows, "wall_time")
    assert wall.unit == "s" and wall.value > 0


def test_run_without_the_profiler_is_rejected():
    f = FIX / "commprof_no-profiler_openmpi-shm_cg.S_n4.out"
    with pytest.raises(ParseError, match="no communication profile") as e:
        B.parse(f, {})
    assert str(f) in str(e.value)


def test_cut_run_is_rejected():
    with pytest.raises(ParseError, match="did not finish"):
        B.parse(FIX / "commprof_sigint_openmpi-shm_lu.W_n4.out", {})


def test_wrong_configuration_is_rejected():
    with pytest.raises(ParseError, match="lu class S on 2"):
        B.parse(FIX / "commprof_local_openmpi-shm_lu.S_n2.out", {"kernel": "lu", "class": "S", "ranks": 4})


@pytest.mark.parametrize("damage, why", [
    (lambda t: t.replace("hpcvirt-commprof: end\n", ""), "end"),
    (lambda t: t.replace("hpcvirt-commprof: rank 1 wall", "hpcvirt-commprof: rank 7 wall"), "rank lines"),
    (lambda t: t.replace("hpcvirt-commprof: peer 0 1 ", "hpcvirt-commprof: peer 0 9 "), "outside"),
    (lambda t: t.replace("hpcvirt-commprof: fn 0 MPI_Send", "hpcvirt-commprof: fn 0 MPI_Send x"), "malformed"),
])
def test_damaged_profile_is_rejected(tmp_path, damage, why):
    src = (FIX / "commprof_local_openmpi-shm_is.W_n4.out").read_text()
    bad = damage(src)
    assert bad != src
    f = tmp_path / "rep-1.out"
    f.write_text(bad)
    with pytest.raises(ParseError, match=why):
        B.parse(f, {})
