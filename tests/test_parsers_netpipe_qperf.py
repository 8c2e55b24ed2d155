"""NetPIPE and qperf parsers on real captured outputs (tests/fixtures/{netpipe,qperf})."""

from pathlib import Path

import pytest

from hpcvirt.benchmarks import netpipe, qperf
from hpcvirt.tidy import ParseError

FIX = Path(__file__).parent / "fixtures"
NP_OK = {
    "netpipe-3.7.2_openmpi-4.1.4_shm_1-4194304.out": 4194304,
    "netpipe-3.7.2_mpich-4.0.2_tcp_1-65536.out": 65536,
    # a guest under TCG: 1 byte took 3.5 ms, which NetPIPE prints as "0.00 Mbps"
    "netpipe-3.7.2_openmpi-4.1.4_qemu-tcg-net_1-4096_rounded-0.00-mbps.out": 4096,
}
NP_BAD = [
    "netpipe-3.7.2_openmpi-4.1.4_shm_1rank-error.out",
    "netpipe-3.7.2_openmpi-4.1.4_tcp_sigint-truncated.out",
    "netpipe-3.7.2_mpich-4.0.2_bad-ucx-tls-error.out",
]
QP_SIZES = [8 * 4**k for k in range(10)]


def test_every_fixture_is_classified():
    names = {p.name for p in (FIX / "netpipe").glob("*.out")}
    assert names == set(NP_OK) | set(NP_BAD)


@pytest.mark.parametrize("name,max_bytes", sorted(NP_OK.items()))
def test_netpipe_good(name, max_bytes):
    ms = netpipe.parse(FIX / "netpipe" / name, expected_max_bytes=max_bytes)
    lat = [m for m in ms if m.metric == "latency"]
    bw = [m for m in ms if m.metric == "bandwidth"]
    assert len(lat) == len(bw) > 10
    assert {m.unit for m in lat} == {"us"} and {m.unit for m in bw} == {"Mbit/s"}
    assert lat[0].msg_bytes == 1 and lat[-1].msg_bytes == max_bytes
    assert all(m.value > 0 and m.iteration_count > 0 for m in ms)
    # bandwidth is size / one-way time in 10^6 bit/s (NetPIPE prints 2^20 bit/s);
    # the printed times have two decimals: short times are checked loosely
    for a, b in zip(lat, bw):
        assert a.msg_bytes == b.msg_bytes
        rel = 0.002 if a.value >= 10 else 0.03
        assert b.value == pytest.approx(a.msg_bytes * 8 / a.value, rel=rel)


def test_netpipe_bandwidth_unit_is_converted():
    """NetPIPE's "Mbps" are 2^20 bit/s: 4096 bytes in 979.14 us is printed as
    31.92 Mbps, which is 33.47 Mbit/s (10^6 bit/s); a value printed as 0.00
    (it rounds to zero) is computed from size and time, never dropped."""
    ms = netpipe.parse(FIX / "netpipe" / "netpipe-3.7.2_openmpi-4.1.4_qemu-tcg-net_1-4096_rounded-0.00-mbps.out")
    bw = {m.msg_bytes: m.value for m in ms if m.metric == "bandwidth"}
    assert bw[4096] == pytest.approx(31.92 * 1.048576, rel=1e-3)
    assert bw[4096] == pytest.approx(4096 * 8 / 979.14, rel=1e-3)
    assert bw[1] == pytest.approx(8 / 3501.42)


def test_netpipe_known_values():
    ms = netpipe.parse(FIX / "netpipe" / "netpipe-3.7.2_openmpi-4.1.4_shm_1-4194304.out")
    first = next(m for m in ms if m.metric == "latency")
    text = (FIX / "netpipe" / "netpipe-3.7.2_openmpi-4.1.4_shm_1-4194304.out").read_text()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("0:") and "bytes" in ln)
    assert first.value == float(line.split()[-2])
    assert first.iteration_count == int(line.split()[3])


@pytest.mark.parametrize("name", NP_BAD)
def test_netpipe_bad_raises_with_path(name):
    path = FIX / "netpipe" / name
    with pytest.raises(ParseError) as exc:
        netpipe.parse(path, expected_max_bytes=1024)
    assert str(path) in str(exc.value)


def test_netpipe_short_sweep_is_truncation(tmp_path):
    src = FIX / "netpipe" / "netpipe-3.7.2_mpich-4.0.2_tcp_1-65536.out"
    with pytest.raises(ParseError, match="truncated"):
        netpipe.parse(src, expected_max_bytes=4194304)


def test_netpipe_cut_last_line(tmp_path):
    text = (FIX / "netpipe" / "netpipe-3.7.2_mpich-4.0.2_tcp_1-65536.out").read_text()
    cut = tmp_path / "cut.out"
    cut.write_text(text.rstrip("\n")[:-7])
    with pytest.raises(ParseError):
        netpipe.parse(cut)


def test_netpipe_empty(tmp_path):
    p = tmp_path / "empty.out"
    p.write_text("")
    with pytest.raises(ParseError, match="empty"):
        netpipe.parse(p)


@pytest.mark.parametrize("test,metric,unit", [("tcp_lat", "latency", "us"), ("tcp_bw", "bandwidth", "MB/s")])
def test_qperf_good(test, metric, unit):
    ms = qperf.parse(FIX / "qperf" / f"qperf-0.4.11_{test}_8-2097152x4.out", expected_sizes=QP_SIZES)
    assert [m.msg_bytes for m in ms] == QP_SIZES
    assert {(m.metric, m.unit, m.variant) for m in ms} == {(metric, unit, test)}
    assert all(m.value > 0 for m in ms)


def test_qperf_units_converted():
    path = FIX / "qperf" / "qperf-0.4.11_tcp_lat_8-2097152x4.out"
    ns = int(path.read_text().split("latency")[1].split()[1])
    assert qperf.parse(path)[0].value == pytest.approx(ns / 1000)


@pytest.mark.parametrize("name", ["qperf-0.4.11_tcp_lat_no-server-error.out", "qperf-0.4.11_tcp_lat_sigint-truncated.out"])
def test_qperf_bad(name):
    path = FIX / "qperf" / name
    with pytest.raises(ParseError) as exc:
        qperf.parse(path)
    assert str(path) in str(exc.value)


def test_qperf_missing_size_is_truncation(tmp_path):
    text = (FIX / "qperf" / "qperf-0.4.11_tcp_bw_8-2097152x4.out").read_text()
    blocks = text.split("tcp_bw:")
    cut = tmp_path / "cut.out"
    cut.write_text("tcp_bw:".join(blocks[:-1]))
    with pytest.raises(ParseError, match="truncated"):
        qperf.parse(cut, expected_sizes=QP_SIZES)
    cut.write_text(text.rsplit("    bw", 1)[0])  # last block without its value
    with pytest.raises(ParseError):
        qperf.parse(cut, expected_sizes=QP_SIZES)
