"""The studies' figures redrawn with their reported values (hpcvirt.redraw):
the declarations, the numbers drawn, and the figures in the per-study
sections."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcvirt import claims, redraw, studies
from hpcvirt.config import load_study

ROOT = Path(__file__).resolve().parents[1]
REFDIR = ROOT / "data/reference"
CAMPAIGN = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")[0]["campaign"]


@pytest.fixture(scope="module")
def archive():
    tidy = pd.concat([pd.read_csv(p) for p in sorted((ROOT / "data/results" / CAMPAIGN).glob("*/tidy.csv"))],
                     ignore_index=True)
    summary = pd.read_csv(ROOT / "data/results" / CAMPAIGN / "summary.csv", keep_default_na=False, na_values=[""])
    return tidy, summary


def _drawing(name):
    ref, ds = redraw.load(REFDIR)
    return ref, next((s, f, d) for s, f, d in ds if d["name"] == name)


def test_the_shipped_redraws_are_valid_and_named_once():
    ref, ds = redraw.load(REFDIR)
    names = [redraw.pdf_name(s, d) for s, _, d in ds]
    assert len(names) == len(set(names)) >= 5
    assert {"study-exposito2012-fig4", "study-exposito2012-fig5", "study-nanos2010-netperf",
            "study-nanos2010-iperf", "study-nanos2010-placement", "study-richter2015-table1-time",
            "study-richter2015-table1-speedup", "study-richter2015-table1-efficiency"} <= set(names)
    assert redraw.pdf_names(REFDIR) == names


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.update(layout="pie"), r"\[0\]: layout must be one of sweep, bars"),
    (lambda d: d.update(name="Fig 4"), r"\[0\]: name must match"),
    (lambda d: d["rows"][0].update(reference=["Fig. 9 top"]), r"\[0\].rows\[0\].reference: no value of exposito2012 "
                                                               r"comes from 'Fig. 9 top'"),
    (lambda d: d["rows"][0]["ours"].update(colour="red"), r"\[0\].rows\[0\].ours: unknown keys \['colour'\]"),
    (lambda d: d.update(benchmarks=["hpl"]), r"\[0\].benchmarks: unknown \['hpl'\]"),
    (lambda d: d.pop("title"), r"\[0\]: title must say what is drawn"),
])
def test_a_bad_sweep_names_the_file_figure_and_key(tmp_path, mutate, needle):
    rmap = yaml.safe_load((REFDIR / "reproduction.yaml").read_text())
    mutate(rmap["exposito2012"]["figures"]["Fig. 4"]["redraw"][0])
    with pytest.raises(redraw.RedrawError, match=r"reproduction.yaml: exposito2012.figures\['Fig. 4'\].redraw: "
                                                 + needle):
        redraw.drawings(rmap, redraw.load(REFDIR)[0], "reproduction.yaml")


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.update(unit="furlongs"), r"unit: 'furlongs'; allowed: "),
    (lambda d: d.pop("quantity"), r"a bars drawing needs exactly groups, layout, name, quantity, title, unit"),
    (lambda d: d["groups"][0].update(reference=["nanos2010-999"]), r"'nanos2010-999' is not a row of nanos2010"),
    (lambda d: d["groups"][0]["ours"][0].pop("metric"), r"groups\[0\].ours\[0\]: needs metric"),
    (lambda d: d["groups"][0]["ours"][0].pop("label"), r"groups\[0\].ours\[0\]: needs a label"),
])
def test_a_bad_bar_drawing_names_the_file_figure_and_key(mutate, needle):
    rmap = yaml.safe_load((REFDIR / "reproduction.yaml").read_text())
    mutate(rmap["nanos2010"]["figures"]["Netperf table"]["redraw"][0])
    with pytest.raises(redraw.RedrawError, match=needle):
        redraw.drawings(rmap, redraw.load(REFDIR)[0], "reproduction.yaml")


def test_bars_show_the_reported_value_and_our_median_in_the_studys_unit(archive):
    tidy, _ = archive
    ref, (study, _, d) = _drawing("netperf")
    bars = redraw.bar_values(tidy, ref, d)
    reported = bars[bars["source"] == "reported"].set_index("group")["value"]
    csv = pd.read_csv(REFDIR / "nanos2010.csv").set_index("row_id")["value"]
    assert reported.tolist() == [csv["nanos2010-001"], csv["nanos2010-006"], csv["nanos2010-011"]]
    factors = {"Gbit/s": 1.0, "Mbit/s": 1e-3, "GB/s": 8.0, "MB/s": 8e-3}
    ours = bars[bars["source"] == "ours"].set_index("label")
    # natively, the study's quantity: four concurrent iperf3 streams' total over the 10 Gbit/s link, in MiB/s
    i = tidy[(tidy["testbed"] == "bridge-10g") & (tidy["benchmark"] == "iperf3") & (tidy["metric"] == "bandwidth")]
    per_round = i.groupby("rep")["value"].median() * factors[i["unit"].iloc[0]] * 1e9 / 8 / 2**20
    streams = ours.loc["iperf3, four streams, 10 Gbit/s link"]
    assert streams["value"] == pytest.approx(per_round.median()) and streams["n"] == len(per_round)
    # and qperf's one stream: its peak over sizes per round (Gbit/s after unit normalisation), in MiB/s
    q = tidy[(tidy["testbed"] == "bridge") & (tidy["benchmark"] == "qperf") & (tidy["variant"] == "tcp_bw")]
    peaks = q.groupby("rep")["value"].max() * factors[q["unit"].iloc[0]] * 1e9 / 8 / 2**20
    one = ours.loc["qperf, one stream, unlimited bridge"]
    assert one["value"] == pytest.approx(peaks.median())
    assert one["ci_low"] <= one["value"] <= one["ci_high"]
    assert one["n"] == len(peaks)
    vm = ours.loc["qperf, one stream, guests"]
    assert vm["tcg"] and not one["tcg"] and not streams["tcg"]


def test_placement_bars_are_the_share_of_messages_in_percent(archive):
    tidy, _ = archive
    ref, (_, _, d) = _drawing("placement")
    bars = redraw.bar_values(tidy, ref, d)
    ours = bars[bars["source"] == "ours"].set_index(["group", "label"])["value"]
    assert ours[("inter-node", "two namespaces (bridge)")] == pytest.approx(100.0)
    assert ours[("intra-node", "two QEMU guests")] == pytest.approx(0.0)
    assert ours[("hybrid (ours: mixed)", "two namespaces (bridge)")] == pytest.approx(100 / 3)


def test_sweep_reference_lines_keep_ranges_and_comparators():
    ref, (study, _, d) = _drawing("fig4")
    lines = redraw.reference_lines(ref, study, d["rows"][0]["reference"]).set_index(["metric", "what"])
    assert tuple(lines.loc[("latency", "MPICH2+OpenMPI-tcp"), ["low", "high"]]) == (55.0, 60.0)
    assert lines.loc[("bandwidth", "Hpcbench-TCP"), "comparator"] == "up_to"
    assert lines.loc[("bandwidth", "Hpcbench-TCP"), "high"] == 5.5


def test_a_campaign_without_guests_draws_the_reported_values_and_says_not_measured(archive, tmp_path):
    tidy, summary = archive
    ref, (study, _, d) = _drawing("fig5")
    native = summary[summary["testbed"] != "vm"]
    assert redraw.sweep_rows(native, d["rows"][0]["ours"], d["benchmarks"]).empty
    pdf = tmp_path / "fig5.pdf"
    assert redraw.draw(d, study, native, tidy[tidy["testbed"] != "vm"], ref, pdf) is False
    text = subprocess.run(["pdftotext", pdf, "-"], capture_output=True, text=True, check=True).stdout
    assert "not measured in this campaign" in text
    assert "reported start-up, MPICH2+OpenMPI-sm" in text and "reported peak, OpenMPI-sm" in text
    ref, (study, _, d) = _drawing("netperf")
    pdf = tmp_path / "netperf.pdf"
    assert redraw.draw(d, study, native, tidy[tidy["testbed"] != "vm"], ref, pdf) is False
    text = subprocess.run(["pdftotext", pdf, "-"], capture_output=True, text=True, check=True).stdout
    assert "not\nmeasured" in text and "TCG" not in text


def test_every_redraw_is_a_figure_of_its_study_section_with_the_tcg_warning_where_guests_are(archive):
    from hpcvirt.figures import FIGURES
    from hpcvirt.reference import load_reference

    tidy, _ = archive
    ref = load_reference(REFDIR)
    testbeds = pd.read_csv(REFDIR / "testbeds.csv", dtype=str, keep_default_na=False)
    figs = pd.read_csv(REFDIR / "figures_without_data.csv", dtype=str, keep_default_na=False)
    rmap = studies.load_map(REFDIR / "reproduction.yaml", testbeds)
    verdicts = claims.evaluate(claims.load(REFDIR / "claims.yaml"), tidy, CAMPAIGN)
    available = {f.name for f in FIGURES}
    for study, fig, d in redraw.load(REFDIR)[1]:
        tex = studies.study_tex(study, ref, testbeds, figs, verdicts, rmap, available, tidy)
        name = redraw.pdf_name(study, d)
        block = re.search(r"\\includegraphics\[width=\\linewidth\]\{" + name + r"\.pdf\}\n\\caption\{(.*?)\}"
                          r"\\label\{fig:" + name + r"\}", tex, re.S)
        assert block, name
        # the TCG warning exactly where our guests are drawn
        assert ("TCG software emulation" in block.group(1)) == redraw.uses_tcg(d, tidy), name
        # every study's redraws show guests, but Richter et al.'s wall times (2a/2b ran a smaller input there)
        assert redraw.uses_tcg(d, tidy) == (study != "richter2015" or d["name"] != "table1-time"), name
        assert f"make figure FIGURE={name}" in block.group(1)
        status, text = studies.figure_status(study, fig, "data_plot", rmap, available)
        assert status == "redrawn" and f"\\ref{{fig:{name}}}" in text
    # the map's texts follow the guests' accelerator: "TCG here" only where they ran emulated
    exposito = studies.study_tex("exposito2012", ref, testbeds, figs, verdicts, rmap, available, tidy)
    assert "hypervisor-mediated NIC; TCG here" in exposito and "{tcg" not in exposito
    kvm = tidy.replace({"virtualization": {"qemu-tcg": "qemu-kvm"}})
    exposito = studies.study_tex("exposito2012", ref, testbeds, figs, verdicts, rmap, available, kvm)
    assert "hypervisor-mediated NIC; KVM here" in exposito and "TCG here" not in exposito
    # a figure without redraw stays a counterpart
    assert studies.figure_status("atif2016", "Fig. 1a", "data_plot", rmap, available)[0] == "counterpart"


def test_ratio_bars_are_paired_by_round_and_scaled(archive):
    """Richter's efficiency: E = T(1 rank) / T(2 ranks) x 50 %, per round."""
    tidy, _ = archive
    ref, (_, _, d) = _drawing("table1-efficiency")
    bars = redraw.bar_values(tidy, ref, d)
    of = tidy[(tidy["benchmark"] == "openfoam-dambreak") & (tidy["metric"] == "wall_time")
              & (tidy["variant"] == "7800 cells, 0.5 s")]
    t1 = of[(of["testbed"] == "local") & (of["ranks"] == 1)].set_index("rep")["value"]
    t2 = of[(of["testbed"] == "local") & (of["ranks"] == 2)].set_index("rep")["value"]
    e = (t1 / t2 * 50).dropna()
    ours = bars[(bars["source"] == "ours") & (bars["label"] == "2 ranks on this host")].iloc[0]
    assert ours["value"] == pytest.approx(e.median()) and ours["n"] == len(e)
    reported = bars[(bars["source"] == "reported") & (bars["group"].str.startswith("1b"))]["value"].tolist()
    assert reported == [78.0]
    # a group without a counterpart has reported bars only, and says so in the table
    tex = redraw.bars_table_tex(bars, d, "tab:x", "caption")
    assert "ours: no counterpart on this machine" in tex and "78" in tex
    assert re.search(r"ours: 2 ranks on this host & [0-9.]+ \[[0-9.]+, [0-9.]+\], n=\d", tex), tex
