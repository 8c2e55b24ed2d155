"""Every parsed value is checked before it becomes a row (hpcvirt.tidy.checked, Benchmark.read): real
archived outputs, altered as a damaged or doubled output would be, are rejected with their path; the
archived outputs themselves parse as before."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from hpcvirt.analysis import _parse_one, row_context
from hpcvirt.tidy import Measurement, ParseError, checked

ROOT = Path(__file__).resolve().parents[1]
CAMPAIGN = yaml.safe_load((ROOT / "config/config.yaml").read_text())["campaign"]
RAW = ROOT / "data/raw" / CAMPAIGN


def _read(tmp_path: Path, src: Path, change) -> list:
    """The parse of a copy of the archived output ``src`` (its provenance beside it) changed by ``change``."""
    out = tmp_path / src.name
    out.write_text(change(src.read_text()))
    ctx = row_context(json.loads(src.with_suffix(".json").read_text()))
    return _parse_one(out, ctx)


def _reject(tmp_path, src, change, reason):
    with pytest.raises(ParseError, match=reason) as exc:
        _read(tmp_path, src, change)
    assert exc.value.path == str(tmp_path / src.name)


def test_the_archived_outputs_parse_unchanged(tmp_path):
    for src in (RAW / "local/iperf3/P4_t3_o1/rep-1.out", RAW / "bridge/advect/openmpi-n4-b2_32x32x16_s200w10/rep-1.out",
                RAW / "local/qperf/tcp_lat_8-2097152x64_t1/rep-1.out"):
        assert _read(tmp_path, src, lambda t: t)


def test_iperf3_values_that_are_no_bandwidth_are_rejected(tmp_path):
    src = RAW / "local/iperf3/P4_t3_o1/rep-1.out"

    def total(value):
        def change(text):
            d = json.loads(text)
            if value is KeyError:
                del d["end"]["sum_received"]["bits_per_second"]
            else:
                d["end"]["sum_received"]["bits_per_second"] = value
            return json.dumps(d)
        return change

    _reject(tmp_path, src, total(float("nan")), r"bandwidth \(4 streams\) is nan: not a finite, non-negative number")
    _reject(tmp_path, src, total(-1e9), r"bandwidth \(4 streams\) is -125\.0: not a finite")
    _reject(tmp_path, src, total("abc"), r"not an output of the expected form \(TypeError")
    _reject(tmp_path, src, total(KeyError), r"not an output of the expected form \(KeyError: 'bits_per_second'\)")

    def stream_inf(text):
        d = json.loads(text)
        d["end"]["streams"][0]["receiver"]["bits_per_second"] = float("inf")
        return json.dumps(d)

    _reject(tmp_path, src, stream_inf, r"stream_bandwidth .* is inf")


def test_advect_times_that_are_no_time_and_doubled_lines_are_rejected(tmp_path):
    src = RAW / "bridge/advect/openmpi-n4-b2_32x32x16_s200w10/rep-1.out"
    line = re.compile(r"^time_compute_s (\S+)", re.M)
    assert line.search(src.read_text())
    _reject(tmp_path, src, lambda t: line.sub("time_compute_s nan", t), r"is nan: not a finite")
    _reject(tmp_path, src, lambda t: line.sub(r"time_compute_s -\1", t), r"not a finite, non-negative number")
    first = next(ln for ln in src.read_text().splitlines() if ln.startswith("time_compute_s"))
    _reject(tmp_path, src, lambda t: t.replace(first, f"{first}\n{first}"), r"a second 'time_compute_s' line")


def test_qperf_results_printed_twice_or_of_another_test_are_rejected(tmp_path):
    src = RAW / "local/qperf/tcp_lat_8-2097152x64_t1/rep-1.out"
    text = src.read_text()
    block = re.search(r"^tcp_lat:\n(?:[ \t]+.*\n)+", text, re.M).group(0)
    _reject(tmp_path, src, lambda t: t + block, r"qperf latency at 8 B \(tcp_lat\) is printed twice")
    latency = re.search(r"^[ \t]+latency\s+=.*\n", block, re.M).group(0)
    _reject(tmp_path, src, lambda t: t.replace(latency, latency + latency, 1), r"a second latency in one tcp_lat")
    bw = (RAW / "local/qperf/tcp_bw_8-2097152x64_t1/rep-1.out").read_text()
    _reject(tmp_path, src, lambda t: t + bw, r"a tcp_bw result in a run of tcp_lat")


def test_a_doubled_imb_or_openfoam_output_is_rejected(tmp_path):
    imb = RAW / "local/imb/openmpi-shm_PingPong_2-26_i1000/rep-1.out"
    _reject(tmp_path, imb, lambda t: t + t, r"printed twice: a duplicated result")
    foam = sorted((RAW / "local/openfoam").glob("openmpi-shm_*_n2/rep-1.out"))[0]
    _reject(tmp_path, foam, lambda t: t + t, r"the simulated time goes back at step \d+ .*two runs' logs in one output")


def test_only_signed_units_may_be_negative():
    energy = Measurement("qe-pw", "total_energy", "Ry", -15.8)
    assert checked("x.out", [energy]) == [energy]
    with pytest.raises(ParseError, match="wall_time is -1.0: not a finite, non-negative number"):
        checked("x.out", [Measurement("qe-pw", "wall_time", "s", -1.0)])
    with pytest.raises(ParseError, match="total_energy is nan: not a finite number"):
        checked("x.out", [Measurement("qe-pw", "total_energy", "Ry", float("nan"))])
