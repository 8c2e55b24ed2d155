"""iperf3 -J reports (captured from real runs on this kind of machine): the
aggregate and per-stream bandwidth; a refused connection, a cut report and
a report of other settings than declared are rejected with their path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcvirt.benchmarks import iperf3
from hpcvirt.tidy import ParseError

FIX = Path(__file__).parent / "fixtures/iperf3"
IPERF3 = iperf3.BENCHMARK


def test_four_streams_give_the_aggregate_and_each_stream():
    rows = IPERF3.parse(FIX / "ok-loopback-P4.json", {"streams": 4, "seconds": 2, "omit": 1})
    report = json.loads((FIX / "ok-loopback-P4.json").read_text())
    by = {(m.metric, m.variant): m for m in rows}
    agg = by[("bandwidth", "4 streams")]
    assert agg.unit == "MB/s" and agg.value == pytest.approx(report["end"]["sum_received"]["bits_per_second"] / 8e6)
    streams = [m for m in rows if m.metric == "stream_bandwidth"]
    assert [m.variant for m in streams] == ["stream 1", "stream 2", "stream 3", "stream 4"]
    # the streams add up to the aggregate (both are the receiver's, over the same timed seconds)
    assert sum(m.value for m in streams) == pytest.approx(agg.value, rel=0.01)
    assert by[("retransmits", "4 streams")].unit == "count"
    assert all(m.unit in IPERF3.metrics.values() and m.metric in IPERF3.metrics for m in rows)


@pytest.mark.parametrize("fixture,message", [
    ("refused.json", "iperf3 failed: 'unable to connect to server: Connection refused'"),
    ("truncated.json", "not a complete iperf3 JSON report"),
])
def test_a_failed_or_cut_run_is_rejected_with_its_path(fixture, message):
    with pytest.raises(ParseError, match=message) as exc:
        IPERF3.parse(FIX / fixture, {"streams": 4, "seconds": 2, "omit": 1})
    assert str(FIX / fixture) in str(exc.value)


def test_a_report_of_other_settings_is_rejected():
    with pytest.raises(ParseError, match="test_start.num_streams is 2, but 4 was declared"):
        IPERF3.parse(FIX / "ok-loopback-P2.json", {"streams": 4, "seconds": 1, "omit": 0})
    with pytest.raises(ParseError, match="test_start.duration is 2, but 5 was declared"):
        IPERF3.parse(FIX / "ok-loopback-P4.json", {"streams": 4, "seconds": 5, "omit": 1})


def test_a_report_without_its_end_block_is_rejected(tmp_path):
    report = json.loads((FIX / "ok-loopback-P4.json").read_text())
    report["end"] = {}
    cut = tmp_path / "no-end.json"
    cut.write_text(json.dumps(report))
    with pytest.raises(ParseError, match="no end block"):
        IPERF3.parse(cut, {"streams": 4})
    report = json.loads((FIX / "ok-loopback-P4.json").read_text())
    report["end"]["streams"] = report["end"]["streams"][:3]
    cut.write_text(json.dumps(report))
    with pytest.raises(ParseError, match="3 stream results for 4 streams"):
        IPERF3.parse(cut, {"streams": 4})


def test_the_job_runs_the_client_against_the_second_host():
    job = IPERF3.job({"streams": 4, "seconds": 3, "omit": 1}, {"binary": "iperf3", "port": 19801})
    assert job.argv == ["iperf3", "-c", "{peer}", "-p", "19801", "-P", "4", "-t", "3", "-O", "1", "-J"]
    assert job.server_argv == ["iperf3", "-s", "-p", "19801"] and job.port == 19801
    assert IPERF3.raw_params({"streams": 4, "seconds": 3, "omit": 1}) == "P4_t3_o1"


def test_the_readiness_probe_checks_the_listening_socket_without_connecting():
    """iperf3 serves one client at a time: a connect as the readiness probe is
    taken for a client, and the real client, connecting while the server drops
    it, was reset ("unable to receive control message: Connection reset by
    peer").  The probe looks for the listening socket instead."""
    import socket
    import subprocess

    from hpcvirt.benchmarks.base import listening_probe

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    probe = listening_probe(port)
    assert subprocess.run(probe).returncode != 0       # bound, not listening
    srv.listen()
    assert subprocess.run(probe).returncode == 0
    srv.settimeout(0.2)
    with pytest.raises(socket.timeout):                # and it made no connection
        srv.accept()
    srv.close()
    assert subprocess.run(probe).returncode != 0
