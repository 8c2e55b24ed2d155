"""Tests of the OSU Micro-Benchmarks and NPB parsers on the captured outputs in
tests/fixtures (see tests/fixtures/README.md for how each file was made and
for the hand-read values used below)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from hpcvirt.benchmarks import npb, osu
from hpcvirt.tidy import UNITS, ParseError

FIXTURES = Path(__file__).parent / "fixtures"
OSU_DIR = FIXTURES / "osu"
NPB_DIR = FIXTURES / "npb"

# Files the fixture README marks as EXPECTED ERROR, ABORTED ON PURPOSE,
# verification failed, or version-only output.  Typed out by hand from the
# README, not derived from the parsers.
OSU_BAD = {
    "osu-5.7_openmpi-4.1.4_osu_latency_default_1r.txt",
    "osu-7.4_mpich-4.0.2_osu_latency_default_1r.txt",
    "osu-7.4_openmpi-4.1.4_osu_allreduce_default_1r.txt",
    "osu-7.4_openmpi-4.1.4_osu_alltoall_default_1r.txt",
    "osu-7.4_openmpi-4.1.4_osu_bibw_default_1r.txt",
    "osu-7.4_openmpi-4.1.4_osu_bibw_default_4r.txt",
    "osu-7.4_openmpi-4.1.4_osu_bw_default_1r.txt",
    "osu-7.4_openmpi-4.1.4_osu_bw_default_4r.txt",
    "osu-7.4_openmpi-4.1.4_osu_latency_default_1r.txt",
    "osu-7.4_openmpi-4.1.4_osu_latency_default_4r.txt",
    "osu-7.4_openmpi-4.1.4_osu_latency_f-unsupported_2r.txt",
    "osu-7.4_openmpi-4.1.4_osu_latency_version_2r.txt",
}
NPB_BAD = {
    "npb-3.3.1_openmpi-4.1.4_cg.S.2-binary_wrong-nprocs_4r.txt",
    "npb-3.4.1_mpich-4.0.2_cg.S_invalid-nprocs_3r.txt",
    "npb-3.4.1_openmpi-4.1.4_cg.S_invalid-nprocs_3r.txt",
    "npb-3.4.1_openmpi-4.1.4_ep.A_sigint-mpirun_2r.txt",
    "npb-3.4.1_openmpi-4.1.4_lu.S_inputlu-dt0.4-verif-fail_2r.txt",
    "npb-3.4.1_openmpi-4.1.4_lu.S_inputlu-omega1.1-verif-fail_2r.txt",
    "npb-3.4.1_openmpi-4.1.4_lu.S_invalid-nprocs_3r.txt",
    "npb-3.4.1_openmpi-4.1.4_lu.W_rank-killed_2r.txt",
}

OSU_FILES = sorted(p.name for p in OSU_DIR.glob("*.txt"))
NPB_FILES = sorted(p.name for p in NPB_DIR.glob("*.txt"))
OSU_NAME_RE = re.compile(r"^osu-(?P<version>[\d.]+)_[^_]+_(?P<bench>osu_[a-z]+)_")
NPB_NAME_RE = re.compile(
    r"^npb-(?P<version>[\d.]+)_[^_]+_(?P<kernel>[a-z]+)\.(?P<klass>[A-Z]).*_(?P<ranks>\d+)r(?:_rep\d+)?\.txt$"
)


def by_key(measurements):
    """(metric, msg_bytes) -> Measurement; fails on duplicates."""
    table = {}
    for m in measurements:
        key = (m.metric, m.msg_bytes)
        assert key not in table, f"duplicate {key}"
        table[key] = m
    return table


def test_fixture_lists_are_complete():
    listed = re.findall(r"^\| `((?:osu|npb)/[^`]+)`", (FIXTURES / "README.md").read_text(), re.MULTILINE)
    on_disk = [f"osu/{n}" for n in OSU_FILES] + [f"npb/{n}" for n in NPB_FILES]
    assert sorted(listed) == sorted(on_disk) and len(on_disk) == 144
    assert OSU_BAD <= set(OSU_FILES) and NPB_BAD <= set(NPB_FILES)


# --- every fixture: error files raise, all others parse ---------------------


@pytest.mark.parametrize(
    "parser, path",
    [(osu.parse, OSU_DIR / n) for n in sorted(OSU_BAD)] + [(npb.parse, NPB_DIR / n) for n in sorted(NPB_BAD)],
    ids=lambda x: x.name if isinstance(x, Path) else "",
)
def test_error_fixture_raises_naming_the_file(parser, path):
    with pytest.raises(ParseError) as excinfo:
        parser(path)
    assert str(path) in str(excinfo.value)
    assert excinfo.value.reason


def _check_common(measurements):
    assert measurements
    for m in measurements:
        assert m.unit in UNITS
        assert math.isfinite(m.value) and m.value > 0


@pytest.mark.parametrize("name", [n for n in OSU_FILES if n not in OSU_BAD])
def test_good_osu_fixture_parses(name):
    measurements = osu.parse(OSU_DIR / name)
    _check_common(measurements)
    expected = OSU_NAME_RE.match(name)
    assert {m.benchmark for m in measurements} == {expected["bench"]}
    assert {m.extra["suite_version"] for m in measurements} == {expected["version"]}
    assert {m.variant for m in measurements} == {"bidirectional" if expected["bench"] == "osu_bibw" else ""}
    sizes = sorted({m.msg_bytes for m in measurements})
    assert sizes[-1] >= 1048576
    units = {m.metric: m.unit for m in measurements}
    assert all(u == ("MB/s" if metric.startswith("bandwidth") else "us") for metric, u in units.items())


@pytest.mark.parametrize("name", [n for n in NPB_FILES if n not in NPB_BAD])
def test_good_npb_fixture_parses(name):
    measurements = npb.parse(NPB_DIR / name)
    _check_common(measurements)
    expected = NPB_NAME_RE.match(name)
    ranks = 2 if "nprocs-strict-off" in name else int(expected["ranks"])
    for m in measurements:
        assert m.benchmark == f"npb-{expected['kernel']}"
        assert m.variant == expected["klass"]
        assert m.ranks == ranks
        assert m.verified is True
        assert m.extra["suite_version"] == expected["version"]
        assert m.extra["total_processes"] == expected["ranks"]
    assert {m.metric for m in measurements} >= {"mops_total", "mops_per_process"}


# --- OSU values against the README's hand-read tables -----------------------

# File -> average latency (us) at 1 B, 8 B, 1024 B.
OSU_LATENCY = {
    "osu-5.7_openmpi-4.1.4_osu_latency_default_2r.txt": (0.17, 0.19, 1.64),
    "osu-5.7_openmpi-4.1.4_osu_latency_m1-4194304_2r.txt": (1.79, 6.44, 6.80),
    "osu-5.7_openmpi-4.1.4_osu_latency_tcp-lo_default_2r.txt": (86.00, 54.63, 98.93),
    "osu-7.4_mpich-4.0.2_osu_latency_default_2r.txt": (0.53, 1.38, 1.92),
    "osu-7.4_mpich-4.0.2_osu_latency_z_2r.txt": (2.31, 2.43, 3.12),
    "osu-7.4_openmpi-4.1.4_osu_latency_default_2r.txt": (7.86, 0.79, 3.92),
    "osu-7.4_openmpi-4.1.4_osu_latency_default_2r_rep2.txt": (0.42, 0.43, 0.81),
    "osu-7.4_openmpi-4.1.4_osu_latency_default_2r_rep3.txt": (0.22, 0.22, 1.02),
    "osu-7.4_openmpi-4.1.4_osu_latency_m1-4194304_2r.txt": (5.20, 0.19, 1.37),
    "osu-7.4_openmpi-4.1.4_osu_latency_tcp-lo_default_2r.txt": (10.81, 8.97, 95.13),
    "osu-7.4_openmpi-4.1.4_osu_latency_tcp-lo_default_2r_rep2.txt": (8.36, 9.02, 10.01),
    "osu-7.4_openmpi-4.1.4_osu_latency_tcp-lo_default_2r_rep3.txt": (24.01, 8.72, 9.75),
    "osu-7.4_openmpi-4.1.4_osu_latency_tcp-lo_m1-4194304_2r.txt": (75.18, 91.77, 29.65),
    "osu-7.4_openmpi-4.1.4_osu_latency_tcp-lo_z_2r.txt": (109.64, 25.26, 81.34),
    "osu-7.4_openmpi-4.1.4_osu_latency_z_2r.txt": (0.18, 0.73, 0.71),
}


@pytest.mark.parametrize("name, expected", sorted(OSU_LATENCY.items()))
def test_osu_latency_values(name, expected):
    table = by_key(osu.parse(OSU_DIR / name))
    for size, value in zip((1, 8, 1024), expected):
        m = table[("latency_avg", size)]
        assert m.value == pytest.approx(value, abs=1e-9)
        assert m.unit == "us"


# File -> (peak bandwidth MB/s, size where it occurs).
OSU_PEAK_BW = {
    "osu-5.7_openmpi-4.1.4_osu_bw_default_2r.txt": (8716.17, 4194304),
    "osu-5.7_openmpi-4.1.4_osu_bw_tcp-lo_default_2r.txt": (4184.82, 2097152),
    "osu-7.4_mpich-4.0.2_osu_bw_default_2r.txt": (5292.36, 1024),
    "osu-7.4_openmpi-4.1.4_osu_bw_default_2r.txt": (3313.25, 2097152),
    "osu-7.4_openmpi-4.1.4_osu_bw_default_2r_rep2.txt": (10159.08, 2097152),
    "osu-7.4_openmpi-4.1.4_osu_bw_default_2r_rep3.txt": (11101.80, 1048576),
    "osu-7.4_openmpi-4.1.4_osu_bw_m1-4194304_2r.txt": (9931.58, 2048),
    "osu-7.4_openmpi-4.1.4_osu_bw_tcp-lo_default_2r.txt": (1181.17, 16384),
    "osu-7.4_openmpi-4.1.4_osu_bw_tcp-lo_default_2r_rep2.txt": (6686.69, 524288),
    "osu-7.4_openmpi-4.1.4_osu_bw_tcp-lo_default_2r_rep3.txt": (5612.20, 524288),
    "osu-7.4_openmpi-4.1.4_osu_bw_tcp-lo_m1-4194304_2r.txt": (1209.49, 1048576),
    "osu-7.4_openmpi-4.1.4_osu_bw_z_2r.txt": (10290.11, 2048),
    "osu-5.7_openmpi-4.1.4_osu_bibw_default_2r.txt": (9209.53, 1048576),
    "osu-5.7_openmpi-4.1.4_osu_bibw_tcp-lo_default_2r.txt": (1037.54, 131072),
    "osu-7.4_mpich-4.0.2_osu_bibw_default_2r.txt": (10290.11, 2048),
    "osu-7.4_openmpi-4.1.4_osu_bibw_default_2r.txt": (6276.93, 262144),
    "osu-7.4_openmpi-4.1.4_osu_bibw_m1-4194304_2r.txt": (7749.62, 4194304),
    "osu-7.4_openmpi-4.1.4_osu_bibw_tcp-lo_default_2r.txt": (2261.66, 2097152),
    "osu-7.4_openmpi-4.1.4_osu_bibw_tcp-lo_m1-4194304_2r.txt": (1170.81, 2097152),
    "osu-7.4_openmpi-4.1.4_osu_bibw_z_2r.txt": (16694.72, 1048576),
}


@pytest.mark.parametrize("name, expected", sorted(OSU_PEAK_BW.items()))
def test_osu_peak_bandwidth(name, expected):
    bandwidth = [m for m in osu.parse(OSU_DIR / name) if m.metric == "bandwidth"]
    assert all(m.unit == "MB/s" for m in bandwidth)
    peak = max(bandwidth, key=lambda m: m.value)
    assert (peak.value, peak.msg_bytes) == pytest.approx(expected)


def test_osu_tail_columns_map_by_header():
    table = by_key(osu.parse(OSU_DIR / "osu-7.4_openmpi-4.1.4_osu_latency_z_2r.txt"))
    assert table[("latency_avg", 4194304)].value == pytest.approx(2119.13)
    assert table[("latency_p50", 4194304)].value == pytest.approx(759.99)
    assert table[("latency_p90", 4194304)].value == pytest.approx(4694.79)
    assert table[("latency_p99", 4194304)].value == pytest.approx(10557.93)
    bw = by_key(osu.parse(OSU_DIR / "osu-7.4_openmpi-4.1.4_osu_bw_z_2r.txt"))
    assert bw[("bandwidth", 4194304)].value == pytest.approx(7197.95)
    assert bw[("bandwidth_p99", 4194304)].value == pytest.approx(10202.37)
    assert bw[("bandwidth_p99", 4194304)].unit == "MB/s"


def test_osu_columns_follow_header_order_not_position(tmp_path):
    path = tmp_path / "reordered.txt"
    path.write_text(
        "# OSU MPI Allreduce Latency Test v7.4\n"
        "# Size  Iterations  Max Latency(us)  Avg Latency(us)\n"
        "4       1000        3.00             2.00\n"
        "8       100         5.00             4.00\n"
    )
    table = by_key(osu.parse(path))
    assert table[("latency_max", 4)].value == 3.0
    assert table[("latency_avg", 4)].value == 2.0
    assert table[("latency_avg", 8)].iteration_count == 100
    assert ("latency_min", 4) not in table


@pytest.mark.parametrize(
    "name, size, iterations, avg, lo, hi",
    [
        ("osu-5.7_openmpi-4.1.4_osu_allreduce_f_2r.txt", 32768, 1000, 15.12, 15.08, 15.15),
        ("osu-5.7_openmpi-4.1.4_osu_allreduce_f_2r.txt", 65536, 100, 23.17, 23.13, 23.22),
        ("osu-7.4_openmpi-4.1.4_osu_allreduce_f_4r.txt", 8192, 1000, 136.33, 133.95, 139.04),
        ("osu-7.4_openmpi-4.1.4_osu_allreduce_f_4r.txt", 16384, 100, 260.25, 255.59, 267.30),
        ("osu-7.4_mpich-4.0.2_osu_alltoall_f_2r.txt", 1048576, 100, 379.92, 359.94, 399.89),
    ],
)
def test_osu_full_listing_iterations_and_min_max(name, size, iterations, avg, lo, hi):
    table = by_key(osu.parse(OSU_DIR / name))
    assert table[("latency_avg", size)].value == pytest.approx(avg)
    assert table[("latency_min", size)].value == pytest.approx(lo)
    assert table[("latency_max", size)].value == pytest.approx(hi)
    assert {table[(m, size)].iteration_count for m in ("latency_avg", "latency_min", "latency_max")} == {
        iterations
    }
    assert not any(m.metric == "iterations" for m in table.values())


def test_osu_without_iterations_column_has_no_iteration_count():
    assert {
        m.iteration_count for m in osu.parse(OSU_DIR / "osu-7.4_openmpi-4.1.4_osu_allreduce_default_2r.txt")
    } == {None}


def test_osu_extra_and_variant():
    bibw = osu.parse(OSU_DIR / "osu-7.4_mpich-4.0.2_osu_bibw_default_2r.txt")
    assert bibw[0].extra == {"suite_version": "7.4", "datatype": "MPI_CHAR"}
    assert {m.variant for m in bibw} == {"bidirectional"}
    old = osu.parse(OSU_DIR / "osu-5.7_openmpi-4.1.4_osu_latency_default_2r.txt")
    assert old[0].extra == {"suite_version": "5.7"}
    assert old[0].msg_bytes == 0 and old[0].metric == "latency_avg"


# --- OSU synthetic damage ---------------------------------------------------

GOOD_OSU = OSU_DIR / "osu-7.4_openmpi-4.1.4_osu_latency_default_2r.txt"  # sizes 1 .. 4194304
GOOD_OSU_F = OSU_DIR / "osu-7.4_openmpi-4.1.4_osu_allreduce_f_2r.txt"


def _write(tmp_path, text, name="damaged.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_osu_cut_in_middle_of_line_raises(tmp_path):
    text = GOOD_OSU.read_text()
    cut = text.index("250.51") + 3  # the 1 MiB row becomes "1048576   250", still numeric
    path = _write(tmp_path, text[:cut])
    assert path.read_text().endswith("1048576               250")
    assert osu.parse(GOOD_OSU)  # the intact original parses
    with pytest.raises(ParseError, match=re.escape(str(path))):
        osu.parse(path)


def test_osu_cut_row_followed_by_more_output_raises(tmp_path):
    lines = GOOD_OSU_F.read_text().splitlines(keepends=True)
    row = next(i for i, line in enumerate(lines) if line.startswith("1024 "))
    lines[row] = lines[row][:30] + "\n"  # drops the Max and Iterations columns
    with pytest.raises(ParseError, match="fields"):
        osu.parse(_write(tmp_path, "".join(lines)))


def test_osu_non_numeric_cell_raises(tmp_path):
    text = GOOD_OSU.read_text().replace("0.63\n", "0.6x\n", 1)
    with pytest.raises(ParseError, match="not a numeric data row"):
        osu.parse(_write(tmp_path, text))


def test_osu_sizes_must_increase(tmp_path):
    lines = GOOD_OSU.read_text().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if line.startswith("256 "))
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    with pytest.raises(ParseError, match="size 512 B after 128 B, expected 256 B"):
        osu.parse(_write(tmp_path, "".join(lines)))
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    lines[i + 1] = lines[i]                 # 256 twice
    with pytest.raises(ParseError, match="size 256 does not increase"):
        osu.parse(_write(tmp_path, "".join(lines)))


def test_osu_error_block_after_good_rows_raises(tmp_path):
    text = GOOD_OSU.read_text() + (OSU_DIR / "osu-7.4_openmpi-4.1.4_osu_latency_default_1r.txt").read_text()
    with pytest.raises(ParseError, match="error text"):
        osu.parse(_write(tmp_path, text))


def test_osu_unknown_column_raises(tmp_path):
    text = "# OSU MPI Latency Test v7.4\n# Size       Avg Latency(us)   Validation\n1  0.5  Pass\n"
    with pytest.raises(ParseError, match="unknown column"):
        osu.parse(_write(tmp_path, text))


def test_osu_expected_max_bytes():
    assert osu.parse(GOOD_OSU, expected_max_bytes=4194304)
    with pytest.raises(ParseError, match="truncated") as excinfo:
        osu.parse(GOOD_OSU, expected_max_bytes=8388608)
    assert str(GOOD_OSU) in str(excinfo.value)


def test_osu_truncated_sweep_detected_by_expected_max_bytes(tmp_path):
    text = GOOD_OSU.read_text()
    path = _write(tmp_path, text[: text.index("2097152")])  # whole rows up to 1 MiB
    assert max(m.msg_bytes for m in osu.parse(path)) == 1048576
    with pytest.raises(ParseError, match="1048576"):
        osu.parse(path, expected_max_bytes=4194304)


# --- NPB values against the README's hand-read table ------------------------

# File -> (Mop/s total, Time in seconds; None where printed as 0.00).
NPB_VALUES = {
    "npb-3.3.1_openmpi-4.1.4_cg.S_2r.txt": (2919.46, 0.02),
    "npb-3.3.1_openmpi-4.1.4_ep.W_2r.txt": (170.98, 0.39),
    "npb-3.3.1_openmpi-4.1.4_is.S_4r.txt": (259.39, None),
    "npb-3.3.1_openmpi-4.1.4_lu.W_2r.txt": (10326.56, 1.75),
    "npb-3.3.1_openmpi-4.1.4_mg.S_1r.txt": (4976.19, None),
    "npb-3.4.1_mpich-4.0.2_cg.S_1r.txt": (2562.39, 0.03),
    "npb-3.4.1_mpich-4.0.2_ep.S_4r.txt": (131.10, 0.26),
    "npb-3.4.1_mpich-4.0.2_mg.W_2r.txt": (6366.63, 0.08),
    "npb-3.4.1_openmpi-4.1.4_cg.A_2r_rep3.txt": (3556.09, 0.42),
    "npb-3.4.1_openmpi-4.1.4_cg.S_2r.txt": (2645.08, 0.03),
    "npb-3.4.1_openmpi-4.1.4_ep.A_2r.txt": (105.93, 5.07),
    "npb-3.4.1_openmpi-4.1.4_ft.S_4r.txt": (2836.97, 0.06),
    "npb-3.4.1_openmpi-4.1.4_is.A_2r.txt": (108.78, 0.77),
    "npb-3.4.1_openmpi-4.1.4_lu.A_2r.txt": (2471.93, 48.26),
    "npb-3.4.1_openmpi-4.1.4_lu.S_inputlu-default_2r.txt": (748.56, 0.14),
    "npb-3.4.1_openmpi-4.1.4_lu.W_2r.txt": (2000.78, 9.03),
    "npb-3.4.1_openmpi-4.1.4_mg.S_2r.txt": (5475.93, None),
}


@pytest.mark.parametrize("name, expected", sorted(NPB_VALUES.items()))
def test_npb_values(name, expected):
    mops, seconds = expected
    table = {m.metric: m for m in npb.parse(NPB_DIR / name)}
    assert table["mops_total"].value == pytest.approx(mops)
    assert table["mops_total"].unit == "Mop/s"
    if seconds is None:
        assert "time" not in table
    else:
        assert table["time"].value == pytest.approx(seconds)
        assert table["time"].unit == "s"


def test_npb_cg_fields():
    ms = npb.parse(NPB_DIR / "npb-3.4.1_openmpi-4.1.4_cg.S_2r.txt")
    table = {m.metric: m for m in ms}
    assert table["mops_per_process"].value == pytest.approx(1322.54)
    m = table["mops_total"]
    assert (m.benchmark, m.variant, m.ranks, m.iteration_count, m.verified) == ("npb-cg", "S", 2, 15, True)
    assert m.extra == {
        "suite_version": "3.4.1",
        "class": "S",
        "size": "1400",
        "total_processes": "2",
        "active_processes": "2",
    }
    old = npb.parse(NPB_DIR / "npb-3.3.1_openmpi-4.1.4_is.S_2r.txt")
    assert old[0].benchmark == "npb-is"  # 3.3.1 IS prints "Completed" without a period
    assert old[0].extra["compiled_procs"] == "2" and old[0].extra["active_processes"] == "2"
    ep = npb.parse(NPB_DIR / "npb-3.4.1_openmpi-4.1.4_ep.S_2r.txt")
    assert {m.iteration_count for m in ep} == {None}  # EP prints Iterations = 0


@pytest.mark.parametrize(
    "name, mops, per_process",
    [
        ("npb-3.4.1_openmpi-4.1.4_cg.S_nprocs-strict-off_3r.txt", 896.01, 298.67),
        ("npb-3.4.1_openmpi-4.1.4_lu.S_nprocs-strict-off_3r.txt", 6123.29, 2041.10),
    ],
)
def test_npb_fewer_active_than_total_processes(name, mops, per_process):
    table = {m.metric: m for m in npb.parse(NPB_DIR / name)}
    assert table["mops_total"].value == pytest.approx(mops)
    assert table["mops_per_process"].value == pytest.approx(per_process)  # as printed: total / 3
    for m in table.values():
        assert m.ranks == 2
        assert (m.extra["total_processes"], m.extra["active_processes"]) == ("3", "2")


def test_npb_verification_and_class_u_reasons():
    with pytest.raises(ParseError, match="Verification = UNSUCCESSFUL"):
        npb.parse(NPB_DIR / "npb-3.4.1_openmpi-4.1.4_lu.S_inputlu-omega1.1-verif-fail_2r.txt")
    with pytest.raises(ParseError, match="class U"):
        npb.parse(NPB_DIR / "npb-3.4.1_openmpi-4.1.4_lu.S_inputlu-dt0.4-verif-fail_2r.txt")


# --- NPB synthetic damage ---------------------------------------------------

GOOD_NPB = NPB_DIR / "npb-3.4.1_openmpi-4.1.4_cg.S_2r.txt"


def test_npb_summary_cut_raises(tmp_path):
    text = GOOD_NPB.read_text()
    path = _write(tmp_path, text[: text.index(" Mop/s/process")])
    with pytest.raises(ParseError, match="lacks") as excinfo:
        npb.parse(path)
    assert str(path) in str(excinfo.value)


def test_npb_error_block_next_to_summary_raises(tmp_path):
    text = GOOD_NPB.read_text() + (NPB_DIR / "npb-3.4.1_openmpi-4.1.4_lu.W_rank-killed_2r.txt").read_text()
    with pytest.raises(ParseError, match="error text"):
        npb.parse(_write(tmp_path, text))


def test_npb_non_numeric_summary_value_raises(tmp_path):
    text = GOOD_NPB.read_text().replace("2645.08", "2645.0?")
    with pytest.raises(ParseError, match="not a number"):
        npb.parse(_write(tmp_path, text))


def test_npb_names_the_kernels_the_campaign_ran_and_those_in_guests():
    import pandas as pd

    rows = pd.DataFrame({"benchmark": ["npb-ep", "npb-cg", "npb-is", "npb-cg", "npb-ep"],
                         "virtualization": ["none", "none", "netns-bridge", "qemu-tcg", "qemu-kvm+apptainer"],
                         "variant": ["W", "S", "W", "W", "W"], "ranks": [1, 4, 2, 4, 4],
                         "interconnect": ["shm", "shm", "tcp", "tcp", "tcp"]})
    assert npb.BENCHMARK.numbers(rows) == {"hvNpbKernels": "CG, EP and IS", "hvNpbGuestKernels": "CG and EP",
                                           "hvNpbClasses": "S and W", "hvNpbRanksOneHost": "1 and 4",
                                           "hvNpbRanksSpread": "2 and 4", "hvNpbOneHostWhere": "host",
                                           "hvNpbSpreadWhere": "hosts or guests"}
    native = npb.BENCHMARK.numbers(rows[rows["virtualization"] == "none"])
    assert native["hvNpbGuestKernels"] == "none" and native["hvNpbRanksSpread"] == "none"
    guests = npb.BENCHMARK.numbers(rows[rows["virtualization"].str.startswith("qemu")])
    assert guests["hvNpbSpreadWhere"] == "guests"
