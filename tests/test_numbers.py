"""The paper's numbers declared as data (workflow/numbers.yaml, hpcvirt.numbers)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcvirt import numbers
from hpcvirt.analysis import comparisons, paired_overhead
from hpcvirt.config import load_study

ROOT = Path(__file__).resolve().parents[1]
DECLARED = ROOT / "workflow/numbers.yaml"
STUDY = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")[0]


def archive_tidy() -> pd.DataFrame:
    tables = sorted((ROOT / "data/results" / STUDY["campaign"]).glob("*/tidy.csv"))
    return pd.concat([pd.read_csv(p) for p in tables], ignore_index=True)


def test_every_declared_number_is_cited_by_the_text_and_grep_finds_its_declaration():
    text = "".join(p.read_text() for p in (ROOT / "paper").rglob("*.tex") if "generated" not in p.parts)
    declared = numbers.load(DECLARED)
    assert declared
    for n in declared:
        assert re.search(rf"\\{n.macro}(?![A-Za-z])", text), f"{n.macro} is declared but no text cites it"
        assert re.search(rf"^- macro: {n.macro}\b", DECLARED.read_text(), re.M)


def _table_values(tidy: pd.DataFrame, latency_bytes: int) -> dict[tuple, dict]:
    """What the paper's tables print for the same quantities (their own code): the overheads table's
    pairs, the NPB table's Mop/s and its time ratios to the native testbed."""
    from hpcvirt.analysis import summarize_tidy
    from hpcvirt.benchmarks.advect import placement_pairs, placement_summary
    from hpcvirt.benchmarks.imb import agreement
    from hpcvirt.benchmarks.iperf3 import streams_summary
    from hpcvirt.benchmarks.npb import npb_ratios, npb_summary

    out = {}
    for _, subject, reference in comparisons(tidy):
        res = paired_overhead(tidy, subject, reference, latency_bytes=latency_bytes) or {}
        for key, kind in (("lat_diff", "difference"), ("bw_ratio", "ratio")):
            if key in res:
                out[(kind, subject["testbed"], subject["benchmark"], subject["mpi"])] = res[key]
    for _, r in npb_summary(summarize_tidy(tidy)).iterrows():
        out[("value", r["testbed"], r["benchmark"], r["mpi"], r["klass"], int(r["ranks"]))] = \
            dict(median=r["mops"], ci_low=r["mops_lo"], ci_high=r["mops_hi"])
    for _, r in npb_ratios(tidy).iterrows():
        if r["reference"] == "local":
            out[("ratio", r["testbed"], f"npb-{r['kernel'].lower()}", r["mpi"], r["klass"], int(r["ranks"]))] = \
                dict(median=r["ratio"], ci_low=r["ratio_lo"], ci_high=r["ratio_hi"])
    for _, r in placement_summary(summarize_tidy(tidy)).iterrows():
        for metric, scale in (("time_per_step", 1), ("network_share", 100)):
            out[("value", r["testbed"], "advect", r["mpi"], r["placement"], metric)] = \
                {k: scale * r[f"{metric}{s}"] for k, s in (("median", ""), ("ci_low", "_lo"), ("ci_high", "_hi"))}
    for _, r in agreement(tidy, latency_bytes).iterrows():
        for name, metric in (("lat", "latency"), ("peak", "bandwidth")):
            out[("ratio", r["testbed"], "imb", r["mpi"], r["interconnect"], metric)] = \
                {k: r[f"{name}_ratio{s}"] for k, s in (("median", ""), ("ci_low", "_lo"), ("ci_high", "_hi"))}
    for _, r in streams_summary(tidy).iterrows():
        out[("value", r["testbed"], "iperf3", "none", "bandwidth")] = \
            dict(median=r["gbits"], ci_low=r["gbits_lo"], ci_high=r["gbits_hi"])
    for o in placement_pairs(tidy):
        out[("ratio", o["subject"], "advect", o["mpi"], o["placement"], "time_per_step")] = o["ratio"]
    return out


def test_the_archive_has_every_declared_number_and_the_tables_print_the_same():
    """A number the text cites and the same quantity in a table of the paper are one value."""
    from hpcvirt.labels import fmt

    tidy = archive_tidy()
    latency_bytes = STUDY["paper"]["latency_bytes"]
    declared = numbers.load(DECLARED)
    got = numbers.macros(tidy, declared, latency_bytes=latency_bytes)
    assert {f"{n.macro}{s}" for n in declared for s in ("", "Lo", "Hi", "N")} == set(got)
    tables = _table_values(tidy, latency_bytes)
    for n in declared:
        s = n.selectors[0]
        if n.kind == "ratio" and s.get("metric") == "mops_total":
            s = n.selectors[1]      # NPB's time over the native time: the native rate over this testbed's
        key = (n.kind, s["testbed"], s["benchmark"], s.get("mpi", "none"))
        if str(s["benchmark"]).startswith("npb-"):
            key += (s["variant"], s["ranks"])
        elif s["benchmark"] == "advect":
            key += (s["placement"], s["metric"])
        elif s["benchmark"] == "imb":
            key += (s["interconnect"], s["metric"])
        elif s["benchmark"] == "iperf3":
            key += (s["metric"],)
        if key not in tables and s["metric"] == "retransmits":
            continue                                  # the table prints the median only
        ref = tables[key]
        assert (got[n.macro], got[n.macro + "Lo"], got[n.macro + "Hi"]) == \
            (fmt(ref["median"]), fmt(ref["ci_low"]), fmt(ref["ci_high"])), n.macro


def test_a_campaign_without_the_rows_writes_no_macro_for_them():
    tidy = archive_tidy()
    no_vm = tidy[tidy["testbed"] != "vm"]
    got = numbers.macros(no_vm, numbers.load(DECLARED), latency_bytes=8)
    assert "hvOvhLatVmOpenmpiNet" not in got and "hvOvhLatBridgeOpenmpiNet" in got


def test_a_number_of_one_round_says_so_and_the_text_prints_no_interval_of_it():
    """Each number writes its rounds (``N``); ``\\hvci``/``\\hvint`` (paper/main.tex) print no interval
    of no width for a number of one round (the guests ran one round in the archive), and no text
    prints a number's ``Lo``/``Hi`` but through them."""
    got = numbers.macros(archive_tidy(), numbers.load(DECLARED), latency_bytes=8)
    assert got["hvOvhLatVmOpenmpiNetN"] == "1" and got["hvOvhLatVmOpenmpiNetLo"] == got["hvOvhLatVmOpenmpiNetHi"]
    assert int(got["hvOvhLatBridgeOpenmpiNetN"]) == 5
    texts = [ROOT / "paper/main.tex", *sorted((ROOT / "paper/sections").rglob("*.tex"))]
    for path in texts:
        text = "".join(line for line in path.read_text().splitlines(True) if not line.lstrip().startswith("%"))
        raw = re.findall(r"\\hv[A-Za-z]+(?:Lo|Hi)\b", text)
        assert not raw, f"{path.name} prints {raw}: write \\hvci{{\\hvX}} or \\hvint{{\\hvX}}"
    main = (ROOT / "paper/main.tex").read_text()
    assert "\\newcommand{\\hvci}[1]{\\hv@ifone{#1}{one round, no interval}" in main


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d[0].update(macro="OvhLat"), "macro must be a macro name"),
    (lambda d: d[0].update(ratio=d[0]["difference"]), "needs exactly one of value, ratio, difference"),
    (lambda d: d[0].update(difference=d[0]["difference"][:1]), "difference is [subject, reference]"),
    (lambda d: d[0]["difference"][0].update(at="latency"), "at 'latency'; allowed"),
    (lambda d: d[0]["difference"][0].update(nic="eth0"), "unknown selector keys ['nic']"),
    (lambda d: d.append(dict(d[0])), "declared twice"),
])
def test_a_bad_declaration_is_refused_naming_file_and_macro(tmp_path, edit, needle):
    data = yaml.safe_load(DECLARED.read_text())
    edit(data)
    bad = tmp_path / "numbers.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(numbers.NumbersError) as exc:
        numbers.load(bad)
    assert str(bad) in str(exc.value) and needle in str(exc.value)


def test_a_selector_that_picks_two_configurations_is_refused_or_reported():
    """Another study's campaign may hold two configurations a declaration's selector matches (here a
    second NetPIPE build on this host): no number is picked silently."""
    tidy = archive_tidy()
    ping = tidy[(tidy["testbed"] == "local") & (tidy["benchmark"] == "netpipe")].copy()
    ping["run_id"] = ping["run_id"].str.replace("/netpipe/", "/netpipe-other-build/", regex=False)
    twice = pd.concat([tidy, ping], ignore_index=True)
    with pytest.raises(numbers.NumbersError, match="hvOvhLatLocalOpenmpiTcp: selector .* matches 2 configurations"):
        numbers.macros(twice, numbers.load(DECLARED), latency_bytes=8)
    reported = []
    got = numbers.macros(twice, numbers.load(DECLARED), latency_bytes=8, ambiguous=reported.append)
    assert "hvOvhLatLocalOpenmpiTcp" not in got and "hvNpbRatioCgWBridgeOpenmpiFour" in got
    assert any("hvOvhLatLocalOpenmpiTcp" in m for m in reported)


def test_a_number_is_made_once_under_a_valid_name():
    """The paper's numbers are data (hpcvirt.labels.Macros): a second value for a name, from the same producer
    or another, stops the build instead of replacing the first (LaTeX would stop at a second \\newcommand, far
    from its cause); a name LaTeX cannot take is refused as it is set."""
    from hpcvirt.labels import Macros

    m = Macros(hvLatBytes="8")
    m["hvCampaign"] = "c"
    assert m.tex() == "\\newcommand{\\hvLatBytes}{8}\n\\newcommand{\\hvCampaign}{c}\n"
    with pytest.raises(ValueError, match=r"hvLatBytes is made twice: '8' and '16'"):
        m |= {"hvLatBytes": "16"}
    with pytest.raises(ValueError, match="bad macro name"):
        m["hvLat2"] = "1"
    with pytest.raises(TypeError):
        m.setdefault("hvOther", "1")
    assert m == {"hvLatBytes": "8", "hvCampaign": "c"}


def test_a_value_of_one_round_prints_its_median_alone_in_the_tables_and_the_claims():
    """The guests ran one round in the archive: their rows in the tables and their claims' values print
    the median alone (with "one round" in the claims), not an interval of no width; the others keep
    theirs, and every such table's caption says why."""
    from hpcvirt import claims_tex
    from hpcvirt.labels import ONE_ROUND, fmt_ci
    from hpcvirt.tables import overheads_tex, results_table_tex

    assert fmt_ci(3.0, 3.0, 3.0, 1) == "3.00" and fmt_ci(3.0, 2.0, 4.0, 5) == "3.00 [2.00, 4.00]"
    assert fmt_ci(3.0, 2.0, 4.0) == "3.00 [2.00, 4.00]" and fmt_ci(3.0, 2.0, 4.0, float("nan")) == "3.00 [2.00, 4.00]"
    res = ROOT / "data/results" / STUDY["campaign"]
    summary = pd.read_csv(res / "summary.csv", keep_default_na=False, na_values=[""])
    tidy = archive_tidy()
    degenerate = re.compile(r"(-?[\d.]+) \[\1, \1\]")
    for table in (results_table_tex(summary, latency_bytes=8), overheads_tex(tidy, latency_bytes=8)):
        assert ONE_ROUND in table and not degenerate.search(table), degenerate.search(table)
        vm = [line for line in table.splitlines() if line.startswith("vm")]
        assert vm and all("[" not in line for line in vm) and re.search(r"\d \[[-\d.]+, [-\d.]+\]", table)
    claims = pd.read_csv(res / "claims.csv", keep_default_na=False, na_values=[""])
    one = claims[(claims["n"] == 1) & claims["median"].notna()].iloc[0]
    assert claims_tex.value_text(one).endswith("(one round)") and "[" not in claims_tex.value_text(one)
    many = claims[(claims["n"] >= 2) & claims["median"].notna()].iloc[0]
    assert "[" in claims_tex.value_text(many)
    # a multiple of a size: "times" in LaTeX, the unit as written in plain text
    size = dict(many, unit="x L3/4")
    assert claims_tex.value_text(size).endswith("] $\\times$ L3/4")
    assert claims_tex.value_text(size, unit=str).endswith("] x L3/4")


def test_a_quick_look_against_the_archive_prints_no_interval_of_its_one_round():
    """A campaign of one round against the archive (the quick look's section "This Campaign Against the
    Archive"): its medians stand alone, the archive's keep their intervals."""
    from hpcvirt import compare

    tidy = archive_tidy()
    one = tidy[tidy["rep"] == tidy["rep"].min()]
    metrics = compare.compare(one, tidy, latency_bytes=8)
    assert len(metrics) and (metrics["new_n"] == 1).all() and (metrics["archive_n"] >= 2).any()
    verdicts = pd.DataFrame({"claim": ["EXP-1"], "claim_verdict": ["holds"]})
    text = compare.tex(metrics, verdicts, verdicts, "quick-x", STUDY["campaign"])
    assert not re.search(r"(-?[\d.e+]+) \[\1, \1\]", text) and "one round: the median" in text
    assert re.search(r"\d \[[-\d.e+]+, [-\d.e+]+\] & [-\d.e+]+ & (yes|no)", text)


def test_the_archived_mpi_time_shares_print_intervals_whose_ends_differ():
    """A share of 98 % with an interval of 97.7 to 98.1 % printed as "98 (CI 98-98)" says nothing of its
    width: the profile macros keep the digits that tell the ends apart (the archive's campaign)."""
    from hpcvirt.paper import commprof_numbers

    campaign = yaml.safe_load((ROOT / "config/config.yaml").read_text())["campaign"]
    summary = pd.read_csv(ROOT / "data/results" / campaign / "summary.csv", keep_default_na=False, na_values=[""])
    m = dict(commprof_numbers(summary))
    shares = [k for k in m if k.startswith("hvProfShare") and not k.endswith(("Lo", "Hi", "N"))]
    assert shares
    for k in shares:
        if int(m[k + "N"]) >= 2:
            assert m[k + "Lo"] != m[k + "Hi"], (k, m[k], m[k + "Lo"], m[k + "Hi"])


def test_the_coverage_the_text_states_spans_the_campaigns_intervals():
    """The archive's intervals rest on 3 or 5 rounds: the text gives both coverages (75.0 to 93.8 %), not the
    lowest alone as the campaign's; a configuration of one round (the guests) has no interval and no say."""
    from hpcvirt.paper import campaign_numbers

    campaign = yaml.safe_load((ROOT / "config/config.yaml").read_text())["campaign"]
    res = ROOT / "data/results" / campaign
    summary = pd.read_csv(res / "summary.csv", keep_default_na=False, na_values=[""])
    tidy = pd.concat([pd.read_csv(p) for p in sorted(res.glob("*/tidy.csv"))], ignore_index=True)
    m = campaign_numbers(summary, tidy)
    assert (m["hvCiLevel"], m["hvCiLevelMax"], m["hvCiRounds"]) == ("75.0", "93.8", "3 or 5 rounds")
    # the archive's paper speaks of the archived campaign; a user's campaign's of itself (\hvifarchive)
    assert (m["hvIsArchive"], m["hvArchive"]) == ("1", campaign)
    assert campaign_numbers(summary, tidy, archive=campaign)["hvIsArchive"] == "1"
    other = campaign_numbers(summary, tidy, archive="local-20990101T000000Z")
    assert (other["hvIsArchive"], other["hvArchive"], other["hvCampaign"]) == ("0", "local-20990101T000000Z", campaign)
    five = summary[summary["n"] == 5]
    m5 = campaign_numbers(five, tidy)
    assert (m5["hvCiLevel"], m5["hvCiLevelMax"], m5["hvCiRounds"]) == ("93.8", "93.8", "5 rounds")
    one = campaign_numbers(summary[summary["n"] == 1], tidy)
    assert (one["hvCiLevel"], one["hvCiRounds"]) == ("0", "1 round")
    main = (ROOT / "paper/main.tex").read_text()
    assert "\\newcommand{\\hvcoverage}" in main
    for name in ("method.tex", "threats.tex"):
        assert "\\hvcoverage" in (ROOT / "paper/sections" / name).read_text(), name
    # a campaign of one round (a quick look) says it has no intervals instead of "a coverage of 0 %"
    assert "\\newcommand{\\hvifoneround}" in main and "none: one round" in main
    assert "\\hvifoneround{; this campaign ran one round" in (ROOT / "paper/sections/method.tex").read_text()


def test_a_latency_size_no_run_measured_stops_the_numbers_naming_the_key_and_the_sizes():
    """paper.latency_bytes is checked against what the headline point-to-point runs measured: a size none of
    them has would leave every latency of the paper empty ("not in this campaign"), so it is refused, naming
    the key and the sizes every run measured."""
    from hpcvirt.analysis import latency_size_problem

    study = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")[0]
    summary = pd.read_csv(ROOT / "data/results" / study["campaign"] / "summary.csv")
    assert latency_size_problem(summary, study["paper"]["latency_bytes"]) is None
    why = latency_size_problem(summary, 3)
    assert why.startswith("paper.latency_bytes: 3 B is a size no headline point-to-point run measured")
    assert why.endswith("sizes every one measured: 8, 512, 32768, 2097152")
    assert latency_size_problem(summary.iloc[0:0], 3) is None       # a campaign without them: nothing to say
