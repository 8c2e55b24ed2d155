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
    total = re.compile(r"^time_total_s (\S+)", re.M)
    assert total.search(src.read_text())
    _reject(tmp_path, src, lambda t: total.sub("time_total_s 0.0", t), r"is 0 us: a run takes time")
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
    _reject(tmp_path, foam, lambda t: t + t, r"the wrapper's 'hpcvirt-openfoam' line appears twice")

    def solver_log_twice(text):   # the solver's log doubled within one run of the wrapper
        log = text[text.index("\n", text.index("\nend_time ") + 1) + 1:text.index("\nwall_s ") + 1]
        return text.replace(log, log + log)

    _reject(tmp_path, foam, solver_log_twice,
            r"the simulated time goes back at step \d+ .*two runs' logs in one output")


def test_only_signed_units_may_be_negative():
    energy = Measurement("qe-pw", "total_energy", "Ry", -15.8)
    assert checked("x.out", [energy]) == [energy]
    with pytest.raises(ParseError, match="wall_time is -1.0: not a finite, non-negative number"):
        checked("x.out", [Measurement("qe-pw", "wall_time", "s", -1.0)])
    with pytest.raises(ParseError, match="total_energy is nan: not a finite number"):
        checked("x.out", [Measurement("qe-pw", "total_energy", "Ry", float("nan"))])


def test_a_result_line_lost_in_the_middle_of_a_sweep_is_rejected(tmp_path):
    """The parsers checked only the ends of a sweep; a line lost between them is a gap in the doubling sizes
    (OSU, IMB) or in NetPIPE's numbering of its lines."""
    osu = RAW / "local/osu/openmpi-shm_osu_latency_n2_1-262144_i100x10/rep-1.out"
    _reject(tmp_path, osu, lambda t: re.sub(r"^1024 .*\n", "", t, flags=re.M),
            r"line 15: size 2048 B after 512 B, expected 1024 B: a result line is missing in the middle")
    _reject(tmp_path, osu, lambda t: re.sub(r"^(1024 .*\n)", r"\1\1", t, flags=re.M), r"size 1024 does not increase")
    imb = RAW / "local/imb/openmpi-shm_PingPong_2-26_i1000/rep-1.out"
    _reject(tmp_path, imb, lambda t: re.sub(r"^ +1024 .*\n", "", t, flags=re.M),
            r"IMB PingPong, row '2048 .*': size 2048 B after 512 B, expected 1024 B")
    netpipe = RAW / "local/netpipe/openmpi-shm_8-4194304/rep-1.out"
    _reject(tmp_path, netpipe, lambda t: re.sub(r"^ +5: .*\n", "", t, flags=re.M),
            r"line \d+: result 6 follows result 4: a result line is missing")


def test_a_sweep_that_starts_late_is_rejected(tmp_path):
    """The first size the run was asked for (newer records carry it in their expected values)."""
    from hpcvirt.benchmarks import imb, netpipe, osu

    def cut(src, pattern):
        out = tmp_path / f"{src.parent.parent.name}.out"
        out.write_text(re.sub(pattern, "", src.read_text(), count=1, flags=re.M))
        return out

    src = RAW / "local/osu/openmpi-shm_osu_latency_n2_1-262144_i100x10/rep-1.out"
    assert osu.parse(src, expected_min_bytes=1)
    with pytest.raises(ParseError, match=r"line \d+: the sweep starts at 2 B, expected 1 B"):
        osu.parse(cut(src, r"^1 .*\n"), expected_min_bytes=1)
    src = RAW / "local/imb/openmpi-shm_PingPong_2-26_i1000/rep-1.out"
    assert imb.parse(src, expected_min_bytes=4)
    with pytest.raises(ParseError, match=r"the sweep starts at 8 B, expected 4 B"):
        imb.parse(cut(src, r"^ +4 .*\n"), expected_min_bytes=4)
    with pytest.raises(ParseError, match=r"the sweep starts at 4 B, expected 0 B"):
        imb.parse(cut(src, r"^ +0 .*\n"), expected_min_bytes=4)
    src = RAW / "local/netpipe/openmpi-shm_8-4194304/rep-1.out"
    assert netpipe.parse(src, expected_min_bytes=8)
    with pytest.raises(ParseError, match=r"line \d+: the sweep starts at 8 bytes, expected 12"):
        netpipe.parse(src, expected_min_bytes=12) and None
    for b, s in ((osu.BENCHMARK, {"test": "osu_bw", "min_bytes": 1, "max_bytes": 64, "ranks": 2, "warmup": 10}),
                 (imb.BENCHMARK, {"test": "PingPong", "min_log2": 2, "max_log2": 6}),
                 (netpipe.BENCHMARK, {"min_bytes": 8, "max_bytes": 64})):
        assert {"min_bytes", "max_bytes"} <= set(b.expected(s, []))


def test_a_summary_field_or_a_wrapper_line_printed_twice_is_rejected(tmp_path):
    npb = RAW / "local/npb/openmpi-shm_cg.W_n2/rep-1.out"
    total = re.compile(r"^( Mop/s total\s+=\s+)(\S+)\n", re.M)
    value = total.search(npb.read_text()).group(2)
    _reject(tmp_path, npb, lambda t: total.sub(r"\g<0>\g<1>9999.99\n", t),
            rf"summary field 'Mop/s total' appears twice \('{value}', then '9999.99'\): a garbled summary")
    foam = RAW / "local/openfoam/openmpi-shm_r100_t100_n2/rep-1.out"
    _reject(tmp_path, foam, lambda t: t.replace("\nend\n", "\nwall_s 0.1\nend\n"),
            r"line \d+: the wrapper's 'wall_s' line appears twice")


def test_more_than_the_run_asked_for_is_rejected(tmp_path):
    """Two LAMMPS runs in one output, a sweep beyond the largest size asked for (OSU, IMB), a qperf size not
    asked for, and a qperf result cut before its timed span: none is this run's output as it was asked."""
    lmp = RAW / "local/lammps/openmpi-shm_c20_s700_n1/rep-1.out"
    _reject(tmp_path, lmp, lambda t: t + t, r"a second LAMMPS banner \(the first at line 1\): one run per output")
    osu = RAW / "local/osu/openmpi-shm_osu_latency_n2_1-262144_i100x10/rep-1.out"
    _reject(tmp_path, osu, lambda t: t.rstrip("\n") + "\n524288                 55.10\n",
            r"sweep ends at 524288 B, beyond the 262144 B asked for")
    imb = RAW / "local/imb/openmpi-shm_PingPong_2-26_i1000/rep-1.out"
    last = re.compile(r"^( +)67108864( +\d+ +\S+ +\S+)\n", re.M)
    assert last.search(imb.read_text())
    _reject(tmp_path, imb, lambda t: last.sub(lambda m: m.group(0) + f"{m.group(1)}134217728{m.group(2)}\n", t, 1),
            r"IMB PingPong ran to 134217728 bytes, beyond the 67108864 bytes asked for")
    qp = RAW / "local/qperf/tcp_lat_8-2097152x64_t1/rep-1.out"
    block = re.search(r"^tcp_lat:\n(?:[ \t]+.*\n)+", qp.read_text(), re.M).group(0)
    _reject(tmp_path, qp, lambda t: t + re.sub(r"msg_size\s+=\s+\d+", "msg_size  =           4", block),
            r"results for sizes \[4\] that the run did not ask for")
    _reject(tmp_path, qp, lambda t: t.rstrip("\n").rsplit("\n", 1)[0] + "\n", r"tcp_lat at 2097152 bytes has no time")


def test_an_archived_record_without_its_first_size_takes_it_from_its_raw_path(tmp_path):
    """Records made before min_bytes was expected (the archive's OSU runs): a lost first size is refused all the
    same, by the first size the raw path names (..._1-262144_i100x10)."""
    src = RAW / "local/osu/openmpi-shm_osu_allreduce_n4_1-262144_i100x10/rep-1.out"
    assert "min_bytes" not in json.loads(src.with_suffix(".json").read_text())["context"]["expected"]
    first = re.compile(r"^1 +\S+\n", re.M)
    assert first.search(src.read_text())
    dest = tmp_path / src.parent.name
    dest.mkdir()
    _reject(dest, src, lambda t: first.sub("", t, 1), r"the sweep starts at 2 B, expected 1 B")
