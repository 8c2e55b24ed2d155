"""Richter et al.'s Table 1 and the data paths' tables (hpcvirt.richter) from
tidy rows, the paper's macros and tables (hpcvirt.companions.datapaths_tex), and
the committed campaigns its section reads (config key
paper.datapaths_campaign: the archive itself, or a data-path companion)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcvirt.companions import datapaths_tex
from hpcvirt.reference import load_reference
from hpcvirt.richter import datapath_table, report_cells, richter_table

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = load_reference(ROOT / "data/reference")
REASONS = yaml.safe_load((ROOT / "data/reference/reproduction.yaml").read_text())["richter2015"]["testbeds"]


def foam(testbed, virt, ranks, times, *, link="", interconnect="shm", nodes=1, cells=7800, steps=1010, end=""):
    """OpenFOAM rows of one configuration: wall time per round (dict rep -> s), its cell count and steps."""
    rows = []
    for rep, t in times.items():
        kind = "qemu" if virt.startswith("qemu-") else "netns-bridge" if virt == "netns-bridge" else "native"
        base = dict(run_id=f"c/{testbed}/openfoam/n{ranks}_c{cells}{end}/rep-{rep}", testbed=testbed, kind=kind,
                    virtualization=virt, accel=virt.removeprefix("qemu-") if kind == "qemu" else None,
                    interconnect=interconnect, link=link or None,
                    mpi="openmpi", benchmark="openfoam-dambreak", variant=f"{cells} cells{end}", ranks=ranks,
                    nodes=nodes, ranks_per_node=ranks // nodes, rep=rep, msg_bytes=None)
        rows += [dict(base, metric="wall_time", unit="s", value=t), dict(base, metric="cells", unit="count", value=cells),
                 dict(base, metric="steps", unit="count", value=steps + rep % 2)]
    return rows


def campaign_rows():
    r = [1, 2, 3, 4, 5]
    return pd.DataFrame(
        foam("local", "none", 1, {1: 90.0, 2: 40.0, 3: 44.0, 4: 42.0, 5: 40.0})          # round 1 slow: it counts
        + foam("local", "none", 2, {1: 60.0, 2: 25.0, 3: 22.0, 4: 21.0, 5: 20.0})
        + foam("bridge-vxlan-gbe", "netns-bridge", 2, dict(zip(r, [80.0, 40.0, 44.0, 84.0, 80.0])),
               link="vxlan, rate 1gbit", interconnect="tcp", nodes=2)
        + foam("bridge-vxlan", "netns-bridge", 2, dict(zip(r, [50.0, 40.0, 44.0, 42.0, 40.0])),
               link="vxlan", interconnect="tcp", nodes=2)
        + foam("bridge-macvlan", "netns-bridge", 2, dict(zip(r, [50.0, 20.0, 22.0, 21.0, 20.0])),
               link="macvlan", interconnect="tcp", nodes=2)
        # the tutorial's smaller mesh: not the report's size, not in the table
        + foam("local", "none", 1, {rep: 5.0 for rep in r}, cells=2268))


def test_setups_are_matched_paired_by_round_over_every_round():
    """Every round counts, the first too, as in the claims that read the same runs (the report left out its
    first run; here round 1 is no warm-up: the rounds interleave the configurations)."""
    t = richter_table(campaign_rows(), REFERENCE, REASONS)
    by = {(r.setup, r.kind, r.testbed if isinstance(r.testbed, str) else ""): r for r in t.itertuples()}
    one_a = by[("1a", "setup", "local")]
    assert one_a.rounds == 5 and one_a.t == pytest.approx(42.0)          # 90 s of round 1 counts
    assert one_a.s == pytest.approx(1.0) and one_a.e == pytest.approx(100.0)
    assert one_a.report_t == "144" and one_a.report_e == "100"
    one_b = by[("1b", "setup", "local")]
    # round r: T(1a)_r / T(1b)_r = 90/60, 40/25, 44/22, 42/21, 40/20 -> median 2.0; E = S / 2 ranks
    assert one_b.s == pytest.approx(2.0) and one_b.e == pytest.approx(100.0) and one_b.pairs == 5
    assert (one_b.s_lo, one_b.s_hi) == (pytest.approx(1.5), pytest.approx(2.0))
    five = by[("5", "setup", "bridge-vxlan-gbe")]
    # 90/80, 40/40, 44/44, 42/84, 40/80 -> median 1.0
    assert five.s == pytest.approx(1.0) and five.e == pytest.approx(50.0) and five.path == "VXLAN tunnel, 1 Gbit/s"
    assert by[("7a", "setup", "bridge-vxlan")].s == pytest.approx(1.0)
    # the direct path has no set-up in the report: listed after the set-ups
    extra = t[t["kind"] == "extra"]
    assert list(extra["testbed"]) == ["bridge-macvlan"] and t.index[t["kind"] == "extra"].min() > t.index[
        t["setup"] == "7b"].max()
    # the set-ups without a counterpart keep the map's reason; every set-up of the report is a row
    assert list(t.loc[t["kind"] != "extra", "setup"]) == ["1a", "1b", "2a", "2b", "3", "4a", "4b", "5", "6", "7a", "7b"]
    none = t[t["kind"] == "none"].set_index("setup")
    assert "OpenStack" in none.loc["4a", "why"] and none.loc["3", "report_t"] == "NA"
    # a campaign without guests: the map's reasons for their set-ups say nothing of TCG, and no {tcg:...} markup
    assert "{tcg:" in REASONS["setup-2a"] and none.loc["2a", "why"].startswith("not in this campaign (here: vm: one "
                                                                              "QEMU guest, 1 rank (the tutorial's")
    assert not [w for w in t["why"].dropna() if "{" in w or "TCG" in w]
    assert report_cells(campaign_rows()) == "7800 cells"


def test_a_campaign_without_the_tunnel_says_which_configuration_stands_for_the_setup():
    rows = campaign_rows()
    rows = rows[~rows["testbed"].isin(["bridge-vxlan-gbe", "bridge-vxlan"])]
    t = richter_table(rows, REFERENCE, REASONS).set_index("setup")
    assert t.loc["5", "kind"] == "none" and t.loc["5", "why"].startswith("not in this campaign (here: bridge-vxlan-gbe")


def test_a_single_round_is_kept_and_each_mpi_is_paired_with_its_own_serial_run():
    one = pd.DataFrame(foam("local", "none", 1, {1: 40.0}) + foam("local", "none", 2, {1: 20.0}))
    t = richter_table(one, REFERENCE, REASONS).set_index("setup")
    assert t.loc["1b", "rounds"] == 1 and t.loc["1b", "s"] == pytest.approx(2.0)
    mpich = campaign_rows().assign(mpi="mpich")
    mpich["run_id"] = mpich["run_id"].str.replace("/openfoam/", "/openfoam/mpich-")
    mpich.loc[mpich["metric"] == "wall_time", "value"] *= 2          # every MPICH run twice as long
    both = richter_table(pd.concat([campaign_rows(), mpich]), REFERENCE, REASONS)
    one_b = both[both["setup"] == "1b"].set_index("mpi")
    assert one_b.loc["openmpi", "s"] == pytest.approx(2.0) and one_b.loc["mpich", "s"] == pytest.approx(2.0)


def test_a_slower_configuration_gets_a_smaller_speed_up():
    """The table follows the data: doubling one set-up's times halves its S."""
    rows = campaign_rows()
    slow = rows.copy()
    sel = (slow["testbed"] == "bridge-vxlan") & (slow["metric"] == "wall_time")
    slow.loc[sel, "value"] *= 2
    before = richter_table(rows, REFERENCE, REASONS).set_index("setup").loc["7a", "s"]
    after = richter_table(slow, REFERENCE, REASONS).set_index("setup").loc["7a", "s"]
    assert after == pytest.approx(before / 2)


def test_the_tex_has_the_table_and_the_macros_and_says_when_there_is_no_campaign():
    t = richter_table(campaign_rows(), REFERENCE, REASONS)
    tex = datapaths_tex(t, None, campaign="dp-x")
    macros = dict(re.findall(r"\\newcommand\{\\(hv\w+)\}\{(.*)\}", tex))
    assert macros["hvDpCampaign"] == "dp-x" and macros["hvRichterRounds"] == "5"
    assert macros["hvRichterOneBS"] == "2.00" and macros["hvRichterFiveE"] == "50.0"
    assert macros["hvRichterCells"] == "7{,}800" and "hvRichterSingle" not in macros
    # a configuration left with one round (e.g. the guests) neither sets the rounds nor the coverage of the
    # others' intervals: it is named apart
    one = t.copy()
    one.loc[one["setup"] == "5", ["rounds", "ci_level"]] = [1, 0.0]
    m1 = dict(re.findall(r"\\newcommand\{\\(hv\w+)\}\{(.*)\}", datapaths_tex(one, None, campaign="dp-x")))
    assert m1["hvRichterRounds"] == "5" and m1["hvRichterCoverage"] == macros["hvRichterCoverage"]
    assert m1["hvRichterSingle"] == "5"
    every = t.copy()
    every.loc[every["kind"] != "none", ["rounds", "ci_level"]] = [1, 0.0]
    m2 = dict(re.findall(r"\\newcommand\{\\(hv\w+)\}\{(.*)\}", datapaths_tex(every, None, campaign="dp-x")))
    assert m2["hvRichterRounds"] == "1" and "hvRichterSingle" not in m2
    # the solver's steps: the median over the set-ups' rounds kept (1,010 in even rounds, 1,011 in odd ones)
    assert macros["hvRichterSteps"] in ("1{,}010", "1{,}011") and "\\hvRichterSteps{} time steps" in tex
    assert "second companion campaign" in macros["hvDpSource"] and "config/datapaths.yaml" in macros["hvDpSource"]
    own = dict(re.findall(r"\\newcommand\{\\(hv\w+)\}\{(.*)\}", datapaths_tex(t, None, campaign="local-x", own=True)))
    assert "own campaign" in own["hvDpSource"] and "local-x" in own["hvDpSource"]
    assert "\\label{tab:richter}" in tex and "needs OpenStack" in tex and "direct (macvlan)" in tex
    assert "\\hvdatapathstrue" in tex
    off = datapaths_tex(None, campaign="")
    assert "\\hvdatapathsfalse" in off and "\\newcommand" not in off
    # the data paths' section and, in the supplement, Richter et al.'s set-ups
    section = "".join((ROOT / f"paper/sections/{f}.tex").read_text() for f in ("datapaths", "richter"))
    assert "\\ifhvdatapaths" in section and "\\else" in section


def test_the_data_path_table_reads_each_path():
    rows = []
    for tb, virt, link, lat, bw, streams in (("local", "none", "", 5.0, 60e3, 27e3 / 8),
                                             ("bridge-gbe", "netns-bridge", "rate 1gbit", 8.0, 2e3, 0.95e3 / 8)):
        for rep in (1, 2, 3):
            base = dict(testbed=tb, virtualization=virt, link=link or None, mpi="openmpi", rep=rep, ranks=2,
                        interconnect="tcp", variant=None)
            rows += [dict(base, benchmark="netpipe", metric="latency", unit="us", value=lat, msg_bytes=8),
                     dict(base, benchmark="netpipe", metric="bandwidth", unit="Mbit/s", value=bw, msg_bytes=65536),
                     dict(base, benchmark="iperf3", mpi="none", metric="bandwidth", unit="MB/s", value=streams,
                          msg_bytes=None),
                     dict(base, benchmark="iperf3", mpi="none", metric="retransmits", unit="count", value=0.0,
                          msg_bytes=None)]
    d = datapath_table(pd.DataFrame(rows)).set_index("testbed")
    assert d.loc["local", "path"] == "loopback" and d.loc["bridge-gbe", "path"] == "bridge, 1 Gbit/s"
    assert d.loc["bridge-gbe", "netpipe_openmpi_lat"] == pytest.approx(8.0)
    assert d.loc["bridge-gbe", "netpipe_openmpi_bw"] == pytest.approx(2.0)
    assert d.loc["bridge-gbe", "streams"] == pytest.approx(0.95)


CONFIG = yaml.safe_load((ROOT / "config/config.yaml").read_text())


def _campaigns() -> list[str]:
    """The campaign the section reads (config key paper.datapaths_campaign: the archive itself, or a companion),
    and every committed companion campaign of config/datapaths.yaml."""
    named = CONFIG["paper"].get("datapaths_campaign") or ""
    return sorted({named} - {""} | {p.name for p in (ROOT / "data/raw").glob("datapaths-*")})


@pytest.mark.parametrize("name", _campaigns())
def test_the_archived_data_path_campaigns_are_committed_and_define_the_sections_macros(name):
    testbeds = {p.parent.name for p in (ROOT / "data/raw" / name).glob("*/testbed.json")}
    overlay = "config/config.yaml" if name == CONFIG["campaign"] else "config/datapaths.yaml"
    assert testbeds == set(yaml.safe_load((ROOT / overlay).read_text())["testbeds"])
    tidy = pd.concat([pd.read_csv(ROOT / "data/results" / name / tb / "tidy.csv", keep_default_na=False,
                                  na_values=[""]) for tb in sorted(testbeds)], ignore_index=True)
    tex = datapaths_tex(richter_table(tidy, REFERENCE, REASONS), datapath_table(tidy), campaign=name,
                        own=name == CONFIG["campaign"])
    defined = set(re.findall(r"\\newcommand\{\\(hv\w+)\}", tex))
    # the data paths' section and, in the supplement, Richter et al.'s set-ups
    section = "".join((ROOT / f"paper/sections/{f}.tex").read_text() for f in ("datapaths", "richter"))
    used = set(re.findall(r"\\(hv(?:Richter|Dp)[A-Za-z]*)", section))
    # the guests' set-ups are in a campaign with guests only: the section tests for them (\ifdefined\hvRichterTwoAS),
    # and for configurations left with one round beside the others (\ifdefined\hvRichterSingle)
    guards = {g.removesuffix("S") for g in re.findall(r"\\ifdefined\\(hv\w+)", section)}
    assert guards == {"hvRichterTwoA", "hvRichterTwoB", "hvRichterSingle"}
    needed = {m for m in used if not any(m.startswith(g) for g in guards)}
    assert needed and needed <= defined, f"not defined by campaign {name}: {sorted(needed - defined)}"
    if name == CONFIG["campaign"]:      # the archive's guests ran under TCG: their row and the caption say so
        assert "guests (TCG) & vm &" in tex and "whose numbers measure the emulator" in tex
    else:
        assert "(TCG)" not in tex
    # the caption explains an MPI peak above a link's rate limit only where the table shows one
    paths = datapath_table(tidy)
    limited = paths[paths["link"].astype(str).str.startswith("rate ")]
    burst = "peak over a limited link is above the limit"
    assert (burst in tex) == bool(len(limited)) and len(limited.dropna(subset=["netpipe_openmpi_bw"])) > 0
    capped = paths.assign(netpipe_openmpi_bw=paths["netpipe_openmpi_bw"].where(~paths.index.isin(limited.index), 0.5))
    assert burst not in datapaths_tex(None, capped, campaign=name)


def test_the_guests_run_their_own_input_and_are_paired_with_this_host_on_it():
    """Set-ups 2a/2b: one guest under TCG runs a smaller input; its S is against the serial run on this host of
    that input (listed as an extra row), not against 1a at the report's mesh."""
    r = [1, 2, 3]
    small = dict(cells=2268, end=", 0.1 s", steps=27)
    rows = pd.DataFrame(
        foam("local", "none", 1, {1: 40.0, 2: 41.0, 3: 40.0})
        + foam("local", "none", 1, {1: 0.9, 2: 0.5, 3: 0.6}, **small)
        + foam("vm", "qemu-tcg", 1, dict(zip(r, [12.0, 5.0, 6.0])), **small)
        + foam("vm", "qemu-tcg", 2, dict(zip(r, [12.0, 5.0, 4.0])), **small))
    t = richter_table(rows, REFERENCE, REASONS)
    two_a = t[t["setup"] == "2a"].iloc[0]
    assert two_a["kind"] == "setup" and two_a["variant"] == "2268 cells, 0.1 s" and two_a["path"] == "one guest (TCG)"
    # every round: 0.9/12, 0.5/5, 0.6/6 -> S 0.1; E = 10 %
    assert two_a["s"] == pytest.approx(0.1) and two_a["e"] == pytest.approx(10.0) and two_a["rounds"] == 3
    two_b = t[t["setup"] == "2b"].iloc[0]
    assert two_b["ranks"] == 2 and two_b["s"] == pytest.approx(0.1)     # 0.075, 0.1, 0.15
    assert t[t["setup"] == "1a"].iloc[0]["variant"] == "7800 cells" == two_a["report_variant"]
    base = t[(t["kind"] == "extra") & (t["testbed"] == "local")]
    assert list(base["variant"]) == ["2268 cells, 0.1 s"] and base.iloc[0]["s"] == pytest.approx(1.0)
    tex = datapaths_tex(t, None, campaign="local-x", own=True)
    assert "vm, 1 rank (2268 cells, 0.1 s)" in tex and "the serial run of the guests' input" in tex
    macros = dict(re.findall(r"\\newcommand\{\\(hv\w+)\}\{(.*)\}", tex))
    assert macros["hvRichterTwoAS"] == "0.100" and "hvRichterTwoBS" in macros


def test_a_configuration_of_one_round_is_paired_with_the_serial_runs_same_round():
    """The guests ran only the first round; their S pairs it with the serial run's first round (a first run
    against a first run), not with the serial run's median."""
    rows = pd.concat([campaign_rows(), pd.DataFrame(
        foam("local", "none", 1, {rep: 4.0 + rep for rep in (1, 2, 3)}, cells=2268, end=", 0.1 s")
        + foam("vm", "qemu-tcg", 1, {1: 50.0}, cells=2268, end=", 0.1 s", interconnect="tcp"))])
    t = richter_table(rows, REFERENCE, REASONS)
    two_a = t.set_index("setup").loc["2a"]
    assert two_a["testbed"] == "vm" and two_a["rounds"] == 1 and two_a["t"] == pytest.approx(50.0)
    assert two_a["pairs"] == 1 and two_a["s"] == pytest.approx(5.0 / 50.0)
    extra = t[(t["kind"] == "extra") & (t["testbed"] == "local")].iloc[0]
    assert extra["rounds"] == 3 and extra["t"] == pytest.approx(6.0)    # its own T: every round
    assert t.set_index("setup").loc["1b", "s"] == pytest.approx(2.0)
    # its macros carry the rounds, so that the text prints "one round, no interval", not "CI 0.1-0.1"
    m = dict(re.findall(r"\\newcommand\{\\(hv\w+)\}\{(.*)\}", datapaths_tex(t, None, campaign="c")))
    assert (m["hvRichterTwoASN"], m["hvRichterTwoATN"], m["hvRichterOneBSN"]) == ("1", "1", "5")
