"""The declarations' parsers on outputs of the project's own builds of the
pinned suites (hpcvirt.build), captured through the workflow on the local,
bridge and vm testbeds, and failures captured by hand from the same builds
(tests/fixtures/suites/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcvirt.benchmarks import REGISTRY
from hpcvirt.tidy import ParseError

FIX = Path(__file__).parent / "fixtures" / "suites"

# (file, declaration, what the launch expected, benchmark rows, metrics)
GOOD = [
    ("npb_local_openmpi-shm_cg.W_n4.out", "npb", {"kernel": "cg", "class": "W", "ranks": 4}, "npb-cg",
     {"mops_total", "mops_per_process", "time"}),
    ("npb_bridge_openmpi-net_is.W_n4.out", "npb", {"kernel": "is", "class": "W", "ranks": 4}, "npb-is",
     {"mops_total", "mops_per_process", "time"}),
    ("npb_vm_openmpi-net_ep.W_n4.out", "npb", {"kernel": "ep", "class": "W", "ranks": 4}, "npb-ep",
     {"mops_total", "mops_per_process", "time"}),
    ("imb_local_mpich-tcp_PingPong_2-22_i1000.out", "imb", {"test": "PingPong", "max_bytes": 1 << 22}, "imb",
     {"latency", "bandwidth"}),
    ("imb_vm_openmpi-shm_PingPong_2-22_i50.out", "imb", {"test": "PingPong", "max_bytes": 1 << 22}, "imb",
     {"latency", "bandwidth"}),
    ("osu_local_openmpi-shm_osu_allreduce_n4.out", "osu", {"test": "osu_allreduce", "max_bytes": 262144},
     "osu_allreduce", {"latency_avg"}),
    ("osu_bridge_openmpi-net_osu_bw_n2.out", "osu", {"test": "osu_bw", "max_bytes": 262144}, "osu_bw", {"bandwidth"}),
    ("osu_vm_openmpi-net_osu_latency_n2.out", "osu", {"test": "osu_latency", "max_bytes": 65536}, "osu_latency",
     {"latency_avg"}),
    ("osu-7.4_openmpi-4.1.4_osu_mbw_mr_shm_4r_hpcvirt-build.out", "osu",
     {"test": "osu_mbw_mr", "max_bytes": 262144, "pairs": 2}, "osu_mbw_mr", {"bandwidth"}),
]

BAD = [
    # NPB LU with a non-standard time step: NPB cannot verify it (class U, UNSUCCESSFUL)
    ("npb-3.4.1_openmpi-4.1.4_lu.S_dt0.4-verif-fail_2r_hpcvirt-build.out", "npb",
     {"kernel": "lu", "class": "S", "ranks": 2}, r"class U \(non-standard input"),
    # interrupted during the sweep (SIGINT to mpirun)
    ("imb-2021.3_openmpi-4.1.4_pingpong_tcp_sigint_hpcvirt-build.out", "imb",
     {"test": "PingPong", "max_bytes": 1 << 22}, r"truncated: IMB PingPong stopped at 512 bytes"),
    ("osu-7.4_openmpi-4.1.4_osu_bw_tcp_sigint_hpcvirt-build.out", "osu",
     {"test": "osu_bw", "max_bytes": 262144}, r"sweep ends at 256 B.*truncated"),
    # osu_mbw_mr on an odd number of ranks: its header, then a hang (SIGINT to mpirun after 10 s)
    ("osu-7.4_openmpi-4.1.4_osu_mbw_mr_shm_odd-ranks_sigint_3r_hpcvirt-build.out", "osu",
     {"test": "osu_mbw_mr", "max_bytes": 262144, "pairs": 1}, r"no data rows"),
]


@pytest.mark.parametrize("name,bench,expected,benchmark,metrics", GOOD, ids=[g[0] for g in GOOD])
def test_outputs_of_the_project_builds_parse(name, bench, expected, benchmark, metrics):
    rows = REGISTRY[bench].parse(FIX / name, expected)
    assert rows and {r.benchmark for r in rows} == {benchmark}
    assert {r.metric for r in rows} == metrics
    assert all(r.value > 0 for r in rows)
    version = {"npb": "3.4.1", "imb": "2021.3", "osu": "7.4"}[bench]
    assert {r.extra.get("suite_version") for r in rows} == {version}
    if bench == "npb":
        assert all(r.verified for r in rows) and {r.variant for r in rows} == {expected["class"]}
        assert {r.ranks for r in rows} == {expected["ranks"]}
    else:
        assert max(r.msg_bytes for r in rows) == expected["max_bytes"]


@pytest.mark.parametrize("name,bench,expected,reason", BAD, ids=[b[0] for b in BAD])
def test_failed_outputs_of_the_project_builds_are_rejected(name, bench, expected, reason):
    with pytest.raises(ParseError, match=reason) as exc:
        REGISTRY[bench].parse(FIX / name, expected)
    assert str(FIX / name) in str(exc.value)            # the error names the file


def test_a_run_of_another_kernel_or_size_is_rejected():
    with pytest.raises(ParseError, match="npb-ep class W on 4"):
        REGISTRY["npb"].parse(FIX / "npb_local_openmpi-shm_cg.W_n4.out", {"kernel": "ep", "class": "W", "ranks": 4})
    with pytest.raises(ParseError, match="truncated"):
        REGISTRY["osu"].parse(FIX / "osu_vm_openmpi-net_osu_latency_n2.out", {"test": "osu_latency", "max_bytes": 1 << 20})


def test_multi_pair_bandwidth_is_the_pairs_aggregate_and_names_its_pairs():
    name = FIX / "osu-7.4_openmpi-4.1.4_osu_mbw_mr_shm_4r_hpcvirt-build.out"
    rows = REGISTRY["osu"].parse(name, {"test": "osu_mbw_mr", "max_bytes": 262144, "pairs": 2})
    # the MB/s column, not the message rate (the same numbers over the size): 1 B at 7.72 MB/s, 7724002.10 msg/s
    assert [(r.msg_bytes, r.value, r.unit) for r in rows[:1]] == [(1, 7.72, "MB/s")]
    assert rows[-1].msg_bytes == 262144 and rows[-1].value == 15660.58
    assert {(r.extra["pairs"], r.extra["window_size"], r.variant) for r in rows} == {("2", "64", "")}
    with pytest.raises(ParseError, match="reports 2 pairs, expected 3"):
        REGISTRY["osu"].parse(name, {"test": "osu_mbw_mr", "max_bytes": 262144, "pairs": 3})


def test_multi_pair_runs_ranks_as_pairs_across_the_hosts():
    osu = REGISTRY["osu"]
    s = dict(mpi="openmpi", path="net", ranks=4, min_bytes=1, max_bytes=1024, iterations=10, warmup=1)
    mbw, bw = osu.normalize(dict(s, test="osu_mbw_mr")), osu.normalize(dict(s, test="osu_bw"))
    assert (mbw["ranks"], bw["ranks"]) == (4, 2)
    job = osu.job(mbw, {"binary": "osu"})
    assert job.argv[0] == "osu/pt2pt/osu_mbw_mr" and (job.ranks, job.block) == (4, 2)  # one rank of each pair per host
    assert osu.expected(mbw, [])["pairs"] == 2 and "pairs" not in osu.expected(bw, [])
    # OSU 7.4 hangs on an odd number of ranks (the fixture above): refused before any job runs
    assert "must be even" in osu.check({"tests": ["osu_mbw_mr"], "ranks": 3})
    assert osu.check({"tests": ["osu_allreduce"], "ranks": 3}) is None


def test_multi_pair_table_says_when_its_two_tests_ran_different_builds():
    """The archive, extended in place, holds osu_bw from its first build and osu_mbw_mr from Spack's build of the
    same source: the table marks those rows; a campaign measured in one piece (one build) has no mark."""
    import pandas as pd

    from hpcvirt.benchmarks.osu import multipair, multipair_tex

    root = Path(__file__).resolve().parents[1] / "data/results"

    def tidy(campaign):
        return pd.concat([pd.read_csv(p) for p in sorted((root / campaign).glob("*/tidy.csv"))], ignore_index=True)

    extended, one_piece = tidy("local-20261127T135345Z"), tidy("local-20261129T081109Z")
    assert not multipair(extended, 8)["same_build"].any() and "different builds" in multipair_tex(None, extended)
    assert multipair(one_piece, 8)["same_build"].all() and "$^*$" not in multipair_tex(None, one_piece)
    # and on which days: the archive's osu_mbw_mr ran two days after its osu_bw; the one-piece campaign, the same day
    assert ("They ran on different days (\\texttt{osu\\_mbw\\_mr}: 2026-11-29; \\texttt{osu\\_bw}: 2026-11-27)"
            in multipair_tex(None, extended))
    assert "different days" not in multipair_tex(None, one_piece)
    assert len(multipair(one_piece, 8)) == 3 and set(multipair(one_piece, 8)["pairs"]) == {2}
