"""IMB-MPI1 parser on real captured outputs (tests/fixtures/imb/README.md says how each was made)."""

from pathlib import Path

import pytest

from hpcvirt.benchmarks import imb
from hpcvirt.tidy import ParseError

FIX = Path(__file__).resolve().parent / "fixtures" / "imb"
OK = {"imb-2021.3_openmpi-4.1.4_pingpong_shm_4-4194304.out": 4194304,
      "imb-2021.3_mpich-4.0.2_pingpong_tcp_4-65536.out": 65536}
BAD = {"imb-2021.3_mpich-4.0.2_pingpong_1rank-invalid.out": "invalid for 1 processes",
       "imb-2021.3_openmpi-4.1.4_pingpong_tcp_sigint-truncated.out": "did not complete"}


def test_every_fixture_is_classified():
    assert {p.name for p in FIX.glob("*.out")} == set(OK) | set(BAD)


@pytest.mark.parametrize("name,max_bytes", sorted(OK.items()))
def test_complete_runs(name, max_bytes):
    ms = imb.parse(FIX / name, benchmark="PingPong", expected_max_bytes=max_bytes)
    lat = [m for m in ms if m.metric == "latency"]
    bw = [m for m in ms if m.metric == "bandwidth"]
    assert [m.msg_bytes for m in lat] == [0] + [4 << k for k in range(len(lat) - 1)]
    assert lat[-1].msg_bytes == max_bytes and len(bw) == len(lat) - 1   # no bandwidth at 0 bytes
    assert {m.unit for m in lat} == {"us"} and {m.unit for m in bw} == {"MB/s"}
    assert {m.variant for m in ms} == {"PingPong"} and {m.extra["suite_version"] for m in ms} == {"2021.3"}
    # IMB's Mbytes/sec is bytes / t[usec] (10^6 bytes/s), to the printed precision
    t = {m.msg_bytes: m.value for m in lat}
    for m in bw:
        assert m.value == pytest.approx(m.msg_bytes / t[m.msg_bytes], rel=0.01, abs=0.01)


def test_known_values():
    ms = imb.parse(FIX / "imb-2021.3_openmpi-4.1.4_pingpong_shm_4-4194304.out")
    row = {(m.metric, m.msg_bytes): (m.value, m.iteration_count) for m in ms}
    assert row[("latency", 8)] == (0.54, 1000)
    assert row[("bandwidth", 4194304)] == (2241.94, 10)


@pytest.mark.parametrize("name,why", sorted(BAD.items()))
def test_failed_runs_are_rejected_with_their_path(name, why):
    with pytest.raises(ParseError, match=why) as exc:
        imb.parse(FIX / name)
    assert str(FIX / name) in str(exc.value)


def test_expectations():
    good = FIX / "imb-2021.3_mpich-4.0.2_pingpong_tcp_4-65536.out"
    with pytest.raises(ParseError, match="truncated"):
        imb.parse(good, expected_max_bytes=131072)
    with pytest.raises(ParseError, match="PingPing was run"):
        imb.parse(good, benchmark="PingPing")


def test_cut_row_is_rejected(tmp_path):
    text = (FIX / "imb-2021.3_mpich-4.0.2_pingpong_tcp_4-65536.out").read_text()
    cut = tmp_path / "cut.out"
    cut.write_text(text.replace("        65536          640       306.12       214.08", "        65536          640"))
    with pytest.raises(ParseError, match="cut or malformed"):
        imb.parse(cut)
