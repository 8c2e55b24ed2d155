"""The studies' claims as data (hpcvirt.claims): the claims file, the verdict
rules, and the paper's sentences that cite verdicts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcvirt import claims, claims_tex, provenance, query
from hpcvirt.config import load_study

ROOT = Path(__file__).resolve().parents[1]
CLAIMS, CLAIMS_MD = ROOT / "data/reference/claims.yaml", ROOT / "data/reference/claims.md"
CAMPAIGN = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")[0]["campaign"]


def archive_tidy() -> pd.DataFrame:
    return pd.concat([pd.read_csv(p) for p in sorted((ROOT / "data/results" / CAMPAIGN).glob("*/tidy.csv"))],
                     ignore_index=True)


def archive_caches() -> dict:
    return {p.parent.name: provenance.cache_sizes(json.loads(p.read_text())["host"])
            for p in sorted((ROOT / "data/results" / CAMPAIGN).glob("*/provenance.json"))}


def test_every_claim_of_claims_md_has_one_entry():
    entries = claims.load(CLAIMS, CLAIMS_MD)
    ids = re.findall(r"^\| ((?:EXP|NAN|ATI|RAM|RIC)-\d+) \|", CLAIMS_MD.read_text(), re.M)
    assert len(ids) == 64 and sorted(e.id for e in entries) == sorted(ids)
    for e in entries:
        assert bool(e.checks) != bool(e.not_testable), e.id


def _entry(raw: list, cid: str) -> dict:
    return next(e for e in raw if e["id"] == cid)


@pytest.mark.parametrize("mutate, needle", [
    (lambda c: c[0].update(study="nobody"), "claim EXP-1: study 'nobody'; allowed: exposito2012"),
    (lambda c: c[0].pop("checks"), "claim EXP-1: needs exactly one of checks"),
    (lambda c: c[0]["checks"][0].update(within=[10, -10]), "claim EXP-1, check 1: within must be [low, high]"),
    (lambda c: c[0]["checks"][0]["difference"][0].update(host="x"), "unknown selector keys ['host']"),
    (lambda c: c[0]["checks"][0]["difference"][0].update(at="largest"), "at 'largest'; allowed: smallest, peak"),
    (lambda c: c[0]["checks"][0].update(below=3), "needs exactly one of below, above, within"),
    (lambda c: c[0]["checks"][0]["difference"][0].update(at={"knee": 1.5}), "or {knee: f} with 0 < f < 1"),
    (lambda c: c[0]["checks"][0].update(per={"cache": "L4", "times": 1}), "per must be {cache: <L1d, L2, L3>"),
    (lambda c: c.append(dict(c[1])), "claim EXP-2: duplicate id"),
    (lambda c: c.pop(5), "must match"),
    (lambda c: c[0].update(mapping="guests {vm: here}"), "claim EXP-1: mapping: 'guests {vm: here}': braces only"),
    (lambda c: _entry(c, "EXP-7").pop("lacks"), "claim EXP-7: lacks None: a claim with not_testable needs lacks, "
                                                "one of hardware, software, measurement"),
    (lambda c: _entry(c, "EXP-7").update(lacks="time"), "claim EXP-7: lacks 'time'"),
    (lambda c: c[0].update(lacks="hardware"), "claim EXP-1: lacks 'hardware': a claim with not_testable"),
])
def test_a_bad_claims_file_names_the_file_claim_and_key(tmp_path, mutate, needle):
    data = yaml.safe_load(CLAIMS.read_text())
    mutate(data)
    bad = tmp_path / "claims.yaml"
    bad.write_text(yaml.safe_dump(data, allow_unicode=True))
    with pytest.raises(claims.ClaimError) as exc:
        claims.load(bad, CLAIMS_MD)
    assert str(bad) in str(exc.value) and needle in str(exc.value)


def _tidy(values: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for testbed, vals in values.items():
        for rep, v in enumerate(vals, 1):
            rows.append(dict(run_id=f"c/{testbed}/npb/x/rep-{rep}", testbed=testbed, virtualization="none",
                             benchmark="npb-cg", variant="W", metric="mops_total", unit="Mop/s", value=v,
                             msg_bytes=float("nan"), ranks=4, rep=rep, interconnect="tcp", mpi="openmpi"))
    return pd.DataFrame(rows)


def _claim(**check) -> claims.Claim:
    sel = lambda tb: {"testbed": tb, "benchmark": "npb-cg", "metric": "mops_total"}  # noqa: E731
    chk = {"kind": "ratio", "selectors": (sel("a"), sel("b")), "quantity": "a/b", "unit": "", **check}
    return claims.Claim("EXP-13", "exposito2012", "s", "r", "m", (chk,), None)


@pytest.mark.parametrize("a, test, bound, verdict", [
    ([1, 2, 3, 2.5, 1.5], "below", 4, "holds"),            # ratios 0.1 to 0.3: all below
    ([1, 2, 3, 2.5, 1.5], "below", 0.05, "does not hold"),
    ([1, 2, 3, 2.5, 1.5], "below", 0.25, "inconclusive"),  # the CI [0.1, 0.3] straddles 0.25
    ([1, 2, 3, 2.5, 1.5], "above", 0.05, "holds"),
    ([1, 2, 3, 2.5, 1.5], "within", [0.05, 0.35], "holds"),
    ([1, 2, 3, 2.5, 1.5], "within", [0.5, 0.9], "does not hold"),
    ([1, 2, 3, 2.5, 1.5], "within", [0.15, 0.9], "inconclusive"),
])
def test_verdict_rules_on_the_ci(a, test, bound, verdict):
    v = claims.evaluate([_claim(test=test, bound=bound)], _tidy({"a": a, "b": [10] * 5}), "c")
    assert v["verdict"].tolist() == [verdict] and v["claim_verdict"].tolist() == [verdict]
    assert (v["ci_low"].iloc[0], v["ci_high"].iloc[0]) == pytest.approx((0.1, 0.3))
    assert v["ci_level"].iloc[0] == pytest.approx(0.9375)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_too_few_rounds_decide_nothing(n):
    """Below five rounds the [min, max] interval covers the median with less
    than 90 % (three rounds: 75 %): the check is inconclusive and says why,
    however clearly its values meet the threshold."""
    v = claims.evaluate([_claim(test="below", bound=4)], _tidy({"a": [1, 2, 3, 2.5][:n], "b": [10] * n}), "c")
    assert v["verdict"].tolist() == ["inconclusive"] and v["claim_verdict"].tolist() == ["inconclusive"]
    reason = v["reason"].iloc[0]
    assert reason == "one value: no confidence interval" if n == 1 else reason.startswith(f"too few rounds: {n} values")
    assert n == 1 or "below 90 %" in reason


def test_a_campaign_with_too_few_rounds_decides_no_stability():
    """Stability counts only campaigns whose intervals may decide: one with three rounds (75 %) neither agrees
    nor disagrees; a straddling interval of five rounds is a decision (inconclusive), a refuting one flips."""
    claim = [_claim(test="below", bound=0.5)]
    five = claims.evaluate(claim, _tidy({"a": [1, 2, 3, 2.5, 1.5], "b": [10] * 5}), "five")        # holds
    three = claims.evaluate(claim, _tidy({"a": [1, 2, 3], "b": [10] * 3}), "three")                 # too few
    flips = claims.evaluate(claim, _tidy({"a": [6, 7, 8, 9, 7], "b": [10] * 5}), "flips")           # does not hold
    straddles = claims.evaluate(claim, _tidy({"a": [1, 2, 6, 7, 3], "b": [10] * 5}), "straddles")   # inconclusive
    assert [v["claim_verdict"].iloc[0] for v in (five, three, flips, straddles)] == [
        "holds", "inconclusive", "does not hold", "inconclusive"]
    assert [bool(claims.deciding(v).iloc[0]) for v in (five, three, flips, straddles)] == [True, False, True, True]
    alone = claims.stability(five, {"three": three}).iloc[0]
    assert (alone["decided"], alone["agree"], alone["stable"]) == (1, 1, False)
    assert claims.stability_text(alone) == ""
    macros = claims_tex.tex_macros(five.merge(pd.DataFrame([alone]), on="claim"))
    assert "hvclaimcount@single}{1}" in macros and "hvclaimcount@stable}{0}" in macros
    assert "hvClaimMinCoverage{90}" in macros
    both = claims.stability(five, {"three": three, "flips": flips, "straddles": straddles}).iloc[0]
    assert (both["decided"], both["agree"], bool(both["stable"])) == (3, 1, False)
    assert claims.stability_text(both) == "1 of 3 campaigns agree: unstable"
    # a verdict carries, where the text states it, whether the other campaigns agree and its coverage
    # (\claimnote in paper/main.tex); five rounds: an interval of 93.8 % coverage
    cid = five["claim"].iloc[0]
    assert f"\\@namedef{{hvclaimnote@{cid}}}{{alone, 93.8\\,\\%}}" in macros
    # an inconclusive verdict here, however wide its coverage, is not among the claims the text counts as
    # decided (it still votes where another campaign's verdict is weighed)
    here = claims.stability(straddles, {"five": five, "flips": flips}).iloc[0]
    counted = claims_tex.tex_macros(straddles.merge(pd.DataFrame([here]), on="claim"))
    assert "hvclaimcount@decided}{0}" in counted and "hvclaimcount@unstable}{0}" in counted
    assert "hvclaimcount@decided}{1}" in macros
    assert (f"\\@namedef{{hvclaimnote@{cid}}}{{unstable: 1/3, 93.8\\,\\%}}"
            in claims_tex.tex_macros(five.merge(pd.DataFrame([both]), on="claim")))
    stable = claims.stability(five, {"again": claims.evaluate(claim, _tidy({"a": [1, 2, 3, 2, 1], "b": [10] * 5}),
                                                              "again")}).iloc[0]
    assert (f"\\@namedef{{hvclaimnote@{cid}}}{{2/2, 93.8\\,\\%}}"
            in claims_tex.tex_macros(five.merge(pd.DataFrame([stable]), on="claim")))
    main = (ROOT / "paper/main.tex").read_text()
    assert main.count("\\claimnote{#1}") == 2       # in \claimverdict and in \claimsays
    # a campaign that does not decide the claim (too few rounds) has no verdict to mark, whatever the others say
    few = claims.stability(three, {"five": five, "flips": flips})
    assert "hvclaimnote@" not in claims_tex.tex_macros(three.merge(few, on="claim"))
    # a campaign that does not decide here is neither stable nor agreeing, whatever the others say
    none = claims.stability(three, {"five": five}).iloc[0]
    assert (none["decided"], none["agree"], bool(none["stable"])) == (1, 0, False)


def test_missing_rows_leave_the_claim_not_tested_with_the_reason():
    v = claims.evaluate([_claim(test="below", bound=1)], _tidy({"a": [1, 2, 3]}), "c")
    assert v["claim_verdict"].tolist() == ["not tested"]
    assert "not measured in this campaign: no rows for {'testbed': 'b'" in v["reason"].iloc[0]


def test_a_check_left_out_of_emulated_guests_is_not_testable_there():
    """Guests that ran emulated and without the check's experiment (emulated_guests): not testable on this
    host, as a check on their rows would be; a testbed with no rows at all, or guests under KVM without
    them, leave the claim not tested."""
    other = _tidy({"b": [1.0] * 5}).assign(testbed="b", benchmark="netpipe")       # the guests ran NetPIPE only
    tidy = pd.concat([_tidy({"a": [1, 2, 3, 2.5, 1.5]}), other.assign(virtualization="qemu-tcg")])
    v = claims.evaluate([_claim(test="below", bound=1)], tidy, "c")
    assert v["claim_verdict"].tolist() == ["not testable"] and v["tcg"].tolist() == [True]
    assert v["reason"].tolist() == [claims.TCG_LEFT_OUT_REASON]
    for rows in (_tidy({"a": [1, 2, 3, 2.5, 1.5]}),
                 pd.concat([_tidy({"a": [1, 2, 3, 2.5, 1.5]}), other.assign(virtualization="qemu-kvm")])):
        v = claims.evaluate([_claim(test="below", bound=1)], rows, "c")
        assert v["claim_verdict"].tolist() == ["not tested"], v["reason"].tolist()
    # both sides missing: the emulated guests' rows and those of a testbed the campaign did not measure
    # (NAN-8: the direct-path guests over the bridged ones): not tested, naming the unmeasured testbed
    v = claims.evaluate([_claim(test="below", bound=1)], other.assign(virtualization="qemu-tcg"), "c")
    assert v["claim_verdict"].tolist() == ["not tested"]
    assert "no rows for {'testbed': 'a'" in v["reason"].iloc[0] and "no rows for {'testbed': 'b'" in v["reason"].iloc[0]


def test_the_archive_evaluates_claims_with_cis_and_marks_tcg():
    v = claims.evaluate(claims.load(CLAIMS, CLAIMS_MD), archive_tidy(), CAMPAIGN, caches=archive_caches())
    tested = v[v["claim_verdict"].isin(["holds", "does not hold", "inconclusive"])]
    assert tested["claim"].nunique() >= 15
    assert "EXP-10" in set(tested["claim"])        # the knee, relative to the archive host's L3
    assert tested["ci_low"].le(tested["median"]).all() and tested["median"].le(tested["ci_high"]).all()
    assert v.loc[v["claim"] == "NAN-1", "tcg"].all()            # bridged guests vs native: TCG-marked
    assert not v.loc[v["claim"] == "ATI-1", "tcg"].any()
    # a check on emulated guests keeps its value but decides nothing: not testable on this host
    tcg = v[v["tcg"].eq(True)]
    assert len(tcg) >= 8 and tcg["median"].notna().all()
    assert (tcg["verdict"] == "not testable").all() and (tcg["reason"] == claims.TCG_REASON).all()
    assert v.loc[v["claim"] == "RAM-1", "claim_verdict"].iloc[0] == "not testable"
    # ... and a claim with a check on bare metal and one on the guests stays undecided whatever the first
    # gives (NAN-2: the native line rate, and the bridged guests' deficit)
    assert v.loc[(v["claim"] == "NAN-2") & (v["check"] == 1), "verdict"].iloc[0] in claims.DECIDED
    assert v.loc[v["claim"] == "NAN-2", "claim_verdict"].iloc[0] == "not testable"
    # the same rows as if measured with KVM: the rule decides again, on intervals of enough rounds only
    # (the guests run one round in the default study: one value, no interval)
    kvm = archive_tidy().replace({"virtualization": {"qemu-tcg": "qemu-kvm"}})
    vk = claims.evaluate(claims.load(CLAIMS, CLAIMS_MD), kvm, CAMPAIGN, caches=archive_caches())
    ram1 = vk[vk["claim"] == "RAM-1"]
    assert ram1["claim_verdict"].iloc[0] == "inconclusive"
    assert set(ram1["reason"]) == {"one value: no confidence interval"}
    # every check that is not testable (by declaration or on this host) says why
    assert set(v.loc[v["verdict"] == "not testable", "reason"].str.len().gt(10)) == {True}
    # the mappings and reasons say "TCG" only where the guests ran emulated: with KVM, and without guests,
    # the parts said under TCG are left out
    texts = lambda df: " ".join(df["mapping"].fillna("")) + " ".join(df["reason"].fillna(""))  # noqa: E731
    assert "guests here run under TCG" in texts(v) and "TCG" not in texts(vk)
    none = claims.evaluate(claims.load(CLAIMS, CLAIMS_MD), kvm[~kvm["virtualization"].str.startswith("qemu")],
                           CAMPAIGN, caches=archive_caches())
    assert "TCG" not in texts(none) and "KVM here" not in texts(none)


def _gbe_osu_bw(tidy: pd.DataFrame) -> pd.Series:
    """The archive's OSU bandwidth rows over the 1 Gbit/s link (ATI-1's denominator)."""
    sel = (tidy["testbed"] == "bridge-gbe") & (tidy["benchmark"] == "osu_bw") & (tidy["metric"] == "bandwidth")
    assert sel.sum() >= 5
    return sel


def test_a_flipped_verdict_names_the_sentence_and_the_claim():
    """The archived OSU bandwidths over the 1 Gbit/s link changed so that ATI-1 flips: the 10 Gbit/s link
    no longer about ten times faster.  The sentence that relies on it is named."""
    tidy = archive_tidy()
    tidy.loc[_gbe_osu_bw(tidy), "value"] *= 100
    v = claims.evaluate(claims.load(CLAIMS, CLAIMS_MD), tidy, CAMPAIGN)
    assert v.loc[v["claim"] == "ATI-1", "claim_verdict"].iloc[0] == "does not hold"
    sections = sorted((ROOT / "paper/sections").rglob("*.tex"))
    problems = claims_tex.check_sentences(sections, v)
    assert len(problems) == 1, problems
    assert "paper/sections/claims.tex:" in problems[0] and "claim ATI-1 holds" in problems[0]
    assert "follows the link rates" in problems[0]          # the sentence itself
    # the archive as it is: no sentence is stale
    assert claims_tex.check_sentences(sections, claims.evaluate(claims.load(CLAIMS, CLAIMS_MD), archive_tidy(),
                                                              CAMPAIGN)) == []


def test_the_paper_build_fails_on_a_flipped_claim(tmp_path):
    """The workflow's claims rule (an input of the paper) on a fresh copy
    whose archived OSU outputs over the 1 Gbit/s link were changed: it fails
    naming the sentence and the claim, and writes no verdicts."""
    from test_workflow import PROFILE, fresh_copy, snakemake

    work = fresh_copy(tmp_path / "repo")
    tidy = work / "data/results" / CAMPAIGN / "bridge-gbe/tidy.csv"
    df = pd.read_csv(tidy)
    df.loc[_gbe_osu_bw(df), "value"] *= 100
    df.to_csv(tidy, index=False)
    res = snakemake(*PROFILE, "paper/generated/claims.tex", cwd=work, check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "claims.tex" in out and "claim ATI-1 holds" in out and "rewrite the sentence" in out
    assert not (work / "data/results" / CAMPAIGN / "claims.csv").exists()


def test_a_claim_without_data_in_the_campaign_contradicts_no_sentence(tmp_path):
    """A quick look measures little: its 'not tested' claims leave the text alone."""
    tidy = archive_tidy()
    tidy = tidy[tidy["testbed"] == "local"]
    v = claims.evaluate(claims.load(CLAIMS, CLAIMS_MD), tidy, "quick")
    assert v.loc[v["claim"] == "ATI-1", "claim_verdict"].iloc[0] == "not tested"
    assert claims_tex.check_sentences(sorted((ROOT / "paper/sections").rglob("*.tex")), v) == []
    text = tmp_path / "s.tex"
    text.write_text("It \\claimsays{ATI-1}{hold}. And \\claimsays{XYZ-1}{holds}.\n")
    problems = claims_tex.check_sentences([text], v)
    assert "'hold' is not a verdict" in problems[0] and "claim XYZ-1 has no verdict" in problems[1]


def test_on_the_archive_a_sentence_whose_claim_lost_its_rows_is_named():
    """The text is written for the archived campaign: there a claim it states that finds none of its
    rows (e.g. the native side of the guests' pw.x input renamed without its check; rows missing in
    emulated guests make it not testable) is an error naming the sentence and the missing rows; on
    another campaign (a quick look) it is not."""
    sections = sorted((ROOT / "paper/sections").rglob("*.tex"))
    entries = claims.load(CLAIMS, CLAIMS_MD)
    # (without the hosts' cache sizes, which the workflow passes, the cache claims are not tested either)
    before = claims_tex.check_sentences(sections, claims.evaluate(entries, archive_tidy(), CAMPAIGN), archived=True)
    assert not any("RAM-1" in p for p in before)
    tidy = archive_tidy()
    tidy = tidy[~((tidy["testbed"] == "bridge") & (tidy["benchmark"] == "qe-pw") & (tidy["variant"] == "Si2 24 Ry k2"))]
    v = claims.evaluate(entries, tidy, CAMPAIGN)
    assert v.loc[v["claim"] == "RAM-1", "claim_verdict"].iloc[0] == "not tested"
    problems = [p for p in claims_tex.check_sentences(sections, v, archived=True) if p not in before]
    assert len(problems) == 1, problems
    assert "results-apps-guests.tex:" in problems[0] and "says claim RAM-1 not testable" in problems[0]
    assert "does not test it" in problems[0] and "'benchmark': 'qe-pw'" in problems[0]
    assert claims_tex.check_sentences(sections, v) == []


# ------------------------------------------------------------------ one section per study
def _study_inputs():
    from hpcvirt import studies
    from hpcvirt.reference import load_reference

    ref = load_reference(ROOT / "data/reference")
    testbeds = pd.read_csv(ROOT / "data/reference/testbeds.csv", dtype=str, keep_default_na=False)
    figs = pd.read_csv(ROOT / "data/reference/figures_without_data.csv", dtype=str, keep_default_na=False)
    rmap = studies.load_map(ROOT / "data/reference/reproduction.yaml", testbeds)
    return studies, ref, testbeds, figs, rmap


def test_every_reference_value_testbed_and_figure_is_in_its_study_section():
    from hpcvirt.figures import FIGURES

    studies, ref, testbeds, figs, rmap = _study_inputs()
    verdicts = claims.evaluate(claims.load(CLAIMS, CLAIMS_MD), archive_tidy(), CAMPAIGN)
    available = {f.name for f in FIGURES}
    assert len(ref) == 133
    for study in claims.STUDIES:
        tex = studies.study_tex(study, ref, testbeds, figs, verdicts, rmap, available)
        for row_id in ref.loc[ref["study"] == study, "row_id"]:
            assert f"\n{row_id.rsplit('-', 1)[-1]} & " in tex, row_id
        for name in testbeds.loc[testbeds["study"] == study, "testbed_name_as_in_paper"]:
            assert studies.latex_escape(name).replace("µ", "\\textmu{}") in tex, name
        for fig, kind in studies.figures_of(study, ref, figs):
            status, _ = studies.figure_status(study, fig, kind, rmap, available)
            # a figure the study reports values from is redrawn with them, or says why not
            assert status in ({"redrawn", "measured, values not drawn", "not reproduced"} if kind == studies.VALUES
                              else {"counterpart", "redrawn", "not reproduced", "schematic"}), (fig, status)
        for cid in verdicts.loc[verdicts["study"] == study, "claim"].unique():
            assert f"\n{cid} & " in tex, cid
    # units as the studies report them
    assert studies.unit_of("latency_us") == ("latency", "µs")
    assert studies.unit_of("bandwidth_MiBps") == ("bandwidth", "MiB/s")
    assert studies.unit_of("efficiency_drop_pctpts") == ("efficiency drop", "points")
    # a figure whose experiment is not in the campaign is listed as not reproduced, with why
    assert studies.figure_status("exposito2012", "Fig. 6 (FT, CAG Native)", "data_plot", rmap, available)[0] == \
        "counterpart"
    assert studies.figure_status("exposito2012", "Fig. 6 (FT, CAG Native)", "data_plot", rmap, available - {"npb"}) \
        == ("not reproduced", "npb not measured in this campaign")
    assert studies.figure_status("atif2016", "Fig. 1a", "data_plot", rmap, available - {"osu"}) == \
        ("not reproduced", "osu not measured in this campaign")


def test_a_figure_that_reports_values_says_whether_they_are_drawn():
    """A study figure listed without data that also reports values (Atif et al.'s Fig. 1a and 4b) is of
    kind VALUES: its row says its values are not drawn beside ours, and why."""
    studies, ref, testbeds, figs, rmap = _study_inputs()
    kinds = dict(studies.figures_of("atif2016", ref, figs))
    assert kinds["Fig. 1a"] == kinds["Fig. 4b"] == studies.VALUES and kinds["Fig. 4a"] == "data_plot"
    status, text = studies.figure_status("atif2016", "Fig. 4b", kinds["Fig. 4b"], rmap, {"speedup"})
    assert status == "measured, values not drawn" and "COLA stops scaling" in text


def test_a_map_that_misses_a_testbed_or_a_figure_is_refused(tmp_path):
    studies, ref, testbeds, figs, rmap = _study_inputs()
    bad = yaml.safe_load((ROOT / "data/reference/reproduction.yaml").read_text())
    del bad["nanos2010"]["testbeds"]["IOV"]
    path = tmp_path / "reproduction.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(studies.StudyError, match=r"reproduction.yaml: nanos2010.testbeds: .*missing \['IOV'\]"):
        studies.load_map(path, testbeds)
    bad = yaml.safe_load((ROOT / "data/reference/reproduction.yaml").read_text())
    bad["nanos2010"]["testbeds"]["IOV"] = "two guests {TCG here}"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(studies.StudyError, match=r"nanos2010.testbeds: 'two guests \{TCG here\}': braces only"):
        studies.load_map(path, testbeds)
    del rmap["atif2016"]["figures"]["Fig. 1"]["not_redrawn"]
    with pytest.raises(studies.StudyError, match="atif2016 figure 'Fig. 1a' reports values: its entry 'Fig. 1' "
                                                 "needs redraw or not_redrawn"):
        studies.figure_status("atif2016", "Fig. 1a", studies.VALUES, rmap, {"osu"})
    del rmap["atif2016"]["figures"]["Fig. 2"]
    with pytest.raises(studies.StudyError, match="atif2016 figure 'Fig. 2' .* has no entry"):
        studies.figure_status("atif2016", "Fig. 2", "data_plot", rmap, set())


def test_a_new_campaign_is_compared_with_the_archive():
    """The previous archive (another host) as the 'new' campaign: headline
    metrics both measured, CI overlap, and the claims whose verdict changed."""
    from hpcvirt import compare

    old = "local-20261123T120821Z"
    new = pd.concat([pd.read_csv(p) for p in sorted((ROOT / "data/results" / old).glob("*/tidy.csv"))],
                    ignore_index=True)
    arch = archive_tidy()
    m = compare.compare(new, arch)
    assert len(m) > 40 and 0 < m["agree"].sum() < len(m)
    row = m[(m.testbed == "local") & (m.benchmark == "netpipe") & (m.mpi == "openmpi") & (m.interconnect == "shm")
            & (m.what == "latency at 8 B")].iloc[0]
    assert row["archive_lo"] <= row["archive"] <= row["archive_hi"] and row["agree"] == (
        row["archive_lo"] <= row["new_hi"] and row["new_lo"] <= row["archive_hi"])
    entries = claims.load(CLAIMS, CLAIMS_MD)
    vn, va = claims.evaluate(entries, new, old), claims.evaluate(entries, arch, CAMPAIGN)
    hosts = tuple(compare.host_line(sorted((ROOT / "data/results" / c).glob("*/provenance.json")))
                  for c in (CAMPAIGN, old))
    tex = compare.tex(m, vn, va, old, CAMPAIGN, hosts=hosts)
    assert f"Of {len(m)} headline metrics both campaigns measured, {int(m['agree'].sum())} agree" in tex
    # why so few agree: the two hosts, and how far each kind of metric moved from one to the other
    assert all(h.startswith("AMD EPYC, 2 CPUs, L2 ") and "kernel " in h for h in hosts)
    assert f"The archive's host: {hosts[0]}; this campaign's: {hosts[1]}." in tex
    ratio = m.loc[m["what"] == "peak bandwidth", "ratio"].median()
    assert f"peak bandwidth {claims.fmt_g(ratio)} times" in tex
    assert "differ in speed" in tex and "quick look" not in tex
    quick = compare.tex(m, vn, va, old, CAMPAIGN, hosts=hosts, quick=True)
    assert "This is a quick look: its reduced study" in quick and "differ in speed" not in quick
    # ... and that the claims' quantities, ratios on one machine, are what carries over
    n, same = compare.checks_agree(vn, va)
    assert n > 5 and 0 < same <= n and f"of the {n} checks both campaigns computed outside emulated guests, " \
        f"{same} have overlapping intervals" in tex
    first = {c: d.drop_duplicates("claim").set_index("claim")["claim_verdict"] for c, d in (("n", vn), ("a", va))}
    changed = [c for c in first["n"].index if first["n"][c] != first["a"][c] and first["a"][c] != "not testable"]
    assert changed
    for c in changed:
        assert c in tex
    # a claim the archive's host could not test (emulated guests), decided on a host with KVM: listed
    kvm = claims.evaluate(entries, new.replace({"virtualization": {"qemu-tcg": "qemu-kvm"}}), old)
    assert "Decided on this campaign, not testable on the archive's host: " in compare.tex(m, kvm, va, old, CAMPAIGN)
    assert compare.tex(m, va, va, CAMPAIGN, CAMPAIGN).startswith("% The campaign is the archived one")


def test_an_ambiguous_selector_names_the_claim_and_the_configurations():
    chk = {"kind": "value", "selectors": ({"testbed": "local", "benchmark": "npb-cg", "metric": "time"},),
           "quantity": "q", "unit": "", "test": "below", "bound": 1}
    with pytest.raises(claims.ClaimError, match=r"claim EXP-13, check 1: selector .* matches 3 configurations"):
        claims.evaluate([claims.Claim("EXP-13", "exposito2012", "s", "r", "m", (chk,), None)], archive_tidy(), "c")


def test_a_new_campaign_lists_the_sentences_it_contradicts():
    from hpcvirt import compare

    tidy = archive_tidy()
    tidy.loc[_gbe_osu_bw(tidy), "value"] *= 100
    v = claims.evaluate(claims.load(CLAIMS, CLAIMS_MD), tidy, "mine")
    problems = claims_tex.check_sentences(sorted((ROOT / "paper/sections").rglob("*.tex")), v)
    tex = compare.tex(compare.compare(tidy, archive_tidy()), v, v, "mine", CAMPAIGN, problems)
    assert "Sentences written for the archive" in tex
    assert "claim ATI-1 holds, but this campaign's verdict is 'does not hold'" in tex


def _sweep(knee_at: int, top_log2: int = 26, testbed: str = "local") -> pd.DataFrame:
    """Five rounds of a shared-memory bandwidth sweep: a protocol dip at
    4 KiB that recovers, a plateau, and a drop to 40 % from ``knee_at`` on."""
    rows = []
    for rep in (1, 2, 3, 4, 5):
        for k in range(2, top_log2 + 1):
            size = 2 ** k
            bw = min(size, 2 ** 20) / 2 ** 20 * 100 * (0.5 if size == 4096 else 1) * (0.4 if size >= knee_at else 1)
            rows.append(dict(run_id=f"c/{testbed}/imb/openmpi-shm/rep-{rep}", testbed=testbed,
                             virtualization="none", benchmark="imb", variant="PingPong", metric="bandwidth",
                             unit="Gbit/s", value=bw * (1 + 0.01 * rep), msg_bytes=float(size), ranks=2, rep=rep,
                             interconnect="shm", mpi="openmpi"))
    return pd.DataFrame(rows)


def test_the_knee_is_where_the_value_drops_for_good():
    one = _sweep(2 ** 23)
    one = one[one["rep"] == 1]
    assert query.knee(one, 0.2) == 2 ** 23                   # the 4 KiB dip recovers: not the knee
    assert query.knee(_sweep(2 ** 40).query("rep == 1"), 0.2) == float("inf")     # never drops
    assert query.knee(one, 0.7) == float("inf")              # a 60 % drop is not a 70 % one


@pytest.mark.parametrize("knee_at, l3, top, verdict, reason", [
    (2 ** 23, 2 ** 25, 26, "holds", ""),                                    # at L3/4: 1.0
    (2 ** 23, 2 ** 28, 27, "does not hold", ""),                            # 8 MiB / 64 MiB = 0.125
    (2 ** 23, None, 26, "not tested", "provenance gives no single L3 size for testbed(s) local"),
    (2 ** 21, 2 ** 25, 22, "not tested", "the sweep ends at 4194304 B, below 2 x 0.25 L3 = 16777216 B"),
])
def test_a_knee_relative_to_the_hosts_l3(knee_at, l3, top, verdict, reason):
    chk = {"kind": "value", "quantity": "knee / (L3/4)", "unit": "x L3/4", "test": "within", "bound": [0.5, 2.0],
           "per": {"cache": "L3", "times": 0.25},
           "selectors": ({"testbed": "local", "benchmark": "imb", "interconnect": "shm", "metric": "bandwidth",
                          "at": {"knee": 0.2}},)}
    caches = {"local": {"L3": l3}} if l3 else {"local": {"L2": 2 ** 20}}
    v = claims.evaluate([claims.Claim("EXP-10", "exposito2012", "s", "r", "m", (chk,), None)],
                        _sweep(knee_at, top), "c", caches=caches)
    assert v["verdict"].tolist() == [verdict]
    assert reason in v["reason"].iloc[0]
    if verdict == "holds":
        assert (v["ci_low"].iloc[0], v["median"].iloc[0], v["ci_high"].iloc[0]) == (1.0, 1.0, 1.0)


def test_cache_sizes_come_from_the_hosts_hwloc_topology():
    host = {"cpu": {"hwloc_synthetic": "Package:1 [NUMANode(memory=8818733056)] L3Cache:1(size=33554432) "
                                       "L2Cache:2(size=1048576) L1dCache:1(size=32768) Core:1 PU:1"}}
    assert provenance.cache_sizes(host) == {"L3": 2 ** 25, "L2": 2 ** 20, "L1d": 2 ** 15}
    assert provenance.cache_sizes({"cpu": {"hwloc_synthetic": None}}) == {} == provenance.cache_sizes(None)


def _campaign(name: str) -> tuple[pd.DataFrame, dict]:
    d = ROOT / "data/results" / name
    tidy = pd.concat([pd.read_csv(p) for p in sorted(d.glob("*/tidy.csv"))], ignore_index=True)
    caches = {p.parent.name: provenance.cache_sizes(json.loads(p.read_text())["host"])
              for p in sorted(d.glob("*/provenance.json"))}
    return tidy, caches


def test_every_archived_campaign_is_evaluated_and_each_verdict_says_how_stable_it_is():
    """The engine of today on every archived campaign of the study; a verdict
    that flips between them is reported unstable, one they all share stable."""
    entries = claims.load(CLAIMS, CLAIMS_MD)
    names = sorted(p.name for p in (ROOT / "data/results").glob(CAMPAIGN.split("-")[0] + "-*")
                   if (p / "summary.csv").exists())
    assert CAMPAIGN in names and len(names) >= 5
    verdicts = {}
    for n in names:
        tidy, caches = _campaign(n)
        verdicts[n] = claims.evaluate(entries, tidy, n, caches=caches)
    for n, v in verdicts.items():
        assert v["claim"].nunique() == len(entries), n
    here = verdicts[CAMPAIGN]
    st = claims.stability(here, {n: v for n, v in verdicts.items() if n != CAMPAIGN}).set_index("claim")
    assert len(st) == len(entries)
    decides = {n: claims.deciding(v) for n, v in verdicts.items()}
    for cid, row in st.iterrows():
        assert row["decided"] == sum(bool(d.get(cid, False)) for d in decides.values()), cid
        assert 0 <= row["agree"] <= row["decided"], cid
        assert row["stable"] == (bool(decides[CAMPAIGN][cid]) and row["decided"] >= 2
                                 and row["agree"] == row["decided"]), cid
    # the campaigns of three rounds decide nothing that their suites measured (NPB's scaling) ...
    five = [n for n in names if claims.deciding(verdicts[n]).get("ATI-6", False)]
    assert CAMPAIGN in five and st.loc["ATI-6", "decided"] == len(five) < len(names) - 3
    # ... but do decide where they measured five rounds (NetPIPE and qperf between the namespaces)
    assert st.loc["EXP-4", "decided"] >= 5
    # a claim not decided here is neither stable nor counted as agreeing
    assert not st.loc["EXP-3", "stable"] and st.loc["EXP-3", "agree"] == 0
    # the table and the macros carry it
    merged = here.merge(st.reset_index(), on="claim")
    table = claims_tex.tex_table(merged)
    for cid, row in st.iterrows():
        if row["decided"] >= 2 and row["agree"]:
            assert claims.stability_text(row) in table, cid
    macros = claims_tex.tex_macros(merged)
    count = {k: int(re.search(rf"hvclaimcount@{k}\}}\{{(\d+)\}}", macros).group(1))
             for k in ("stable", "unstable", "single", "decided")}
    # the decided ones the text counts: those that hold or do not hold here (an inconclusive one decides nothing)
    verdict = here.drop_duplicates("claim").set_index("claim")["claim_verdict"]
    final = [cid for cid in st.index if decides[CAMPAIGN][cid] and verdict[cid] in ("holds", "does not hold")]
    assert count["stable"] + count["unstable"] + count["single"] == count["decided"] == len(final) >= 12


def test_the_report_page_of_the_verdicts_gives_each_values_coverage_and_the_campaigns_that_agree():
    from hpcvirt.config import archived_campaign

    campaign = archived_campaign()
    verdicts = pd.read_csv(ROOT / "data/results" / campaign / "claims.csv")
    page = claims_tex.verdicts_html(verdicts, campaign)
    assert "<th>CI coverage</th>" in page and "<th>campaigns that agree</th>" in page
    ati1 = verdicts[verdicts["claim"] == "ATI-1"].iloc[0]
    assert f"{claims_tex.fmt_g(100 * ati1['ci_level'])} %" in page
    assert f"{int(ati1['agree'])} of {int(ati1['decided'])} campaigns agree" in page


def test_a_refuted_check_refutes_the_claim_even_when_another_is_not_measured():
    """A claim is the conjunction of its checks: one that does not hold refutes it, whatever the others; a
    check whose rows the campaign lacks makes it not tested only when none is refuted."""
    sel = lambda tb: {"testbed": tb, "benchmark": "npb-cg", "metric": "mops_total"}  # noqa: E731
    refuted = {"kind": "ratio", "selectors": (sel("a"), sel("b")), "quantity": "a/b", "unit": "", "test": "below",
               "bound": 0.05}
    missing = dict(refuted, selectors=(sel("a"), sel("absent")), quantity="a/absent")
    tidy = _tidy({"a": [1, 2, 3, 2.5, 1.5], "b": [10] * 5})
    both = claims.evaluate([claims.Claim("EXP-13", "exposito2012", "s", "r", "m", (refuted, missing), None)],
                           tidy, "c")
    assert both["verdict"].tolist() == ["does not hold", "not tested"]
    assert set(both["claim_verdict"]) == {"does not hold"}
    holds = dict(refuted, bound=4)
    open_ = claims.evaluate([claims.Claim("EXP-13", "exposito2012", "s", "r", "m", (holds, missing), None)], tidy, "c")
    assert set(open_["claim_verdict"]) == {"not tested"}


def test_the_other_campaigns_machines_are_named_by_cpu_and_count(tmp_path):
    """What the stability of a verdict rests on: the machines of the study's other campaigns, from their host
    records, most campaigns first."""
    recs = []
    for i, (model, n) in enumerate([("AMD EPYC", "2"), ("Intel(R) Xeon(R)", "2"), ("AMD EPYC", "2")]):
        p = tmp_path / f"c{i}/local/provenance.json"
        p.parent.mkdir(parents=True)
        p.write_text(json.dumps({"host": {"cpu": {"model": model, "lscpu": {"CPU(s)": n}}}}))
        recs.append(p)
    assert claims_tex.campaign_hosts_tex(recs) == ("\\def\\hvClaimCampaignHosts{AMD EPYC, 2 CPUs (2) and "
                                                   "Intel(R) Xeon(R), 2 CPUs (1)}\n")
    assert claims_tex.campaign_hosts_tex([]) == "\\def\\hvClaimCampaignHosts{none}\n"


def test_the_rule_settings_the_text_explains_come_from_claims_yaml(tmp_path):
    """The knee's fall and the sweep's required reach (\\claimknee, \\claimreach) are claims.yaml's, so a
    changed rule changes the sentence that explains it."""
    tex = claims_tex.rule_macros(claims.load(CLAIMS, CLAIMS_MD))
    assert "\\@namedef{hvclaimknee@EXP-10@1}{20\\,\\%}" in tex
    assert "\\@namedef{hvclaimreach@EXP-10@2}{2$\\times$ L3/4}" in tex
    changed = tmp_path / "claims.yaml"
    changed.write_text(CLAIMS.read_text().replace("at: {knee: 0.2}}", "at: {knee: 0.3}}", 1))
    assert "\\@namedef{hvclaimknee@EXP-10@1}{30\\,\\%}" in claims_tex.rule_macros(claims.load(changed, CLAIMS_MD))


def test_the_claims_not_testable_here_are_counted_by_what_they_lack():
    """The text's split of the claims that cannot be tested here: by what claims.yaml says each lacks
    (hardware, software, a measurement), and, on a campaign whose guests ran under TCG, those whose checks
    run in the guests; the parts add up to the claims not testable."""
    entries = claims.load(CLAIMS, CLAIMS_MD)
    verdicts = pd.read_csv(ROOT / "data/results" / CAMPAIGN / "verdicts.csv")
    macros = claims_tex.rule_macros(entries) + claims_tex.tex_macros(verdicts)
    n = {k: int(v) for k, v in re.findall(r"hvclaimcount@([^}]+)\}\{(\d+)\}", macros)}
    assert n["lacks-software"] == sum("not part of this artifact" in c.not_testable for c in entries
                                      if c.not_testable) >= 1
    assert min(n["lacks-hardware"], n["lacks-measurement"], n["not testable-tcg"]) >= 1
    assert (n["lacks-hardware"] + n["lacks-software"] + n["lacks-measurement"] + n["not testable-tcg"]
            == n["not testable"])
    # the README's counts are claims.yaml's
    readme = " ".join((ROOT / "README.md").read_text().split())
    said = re.search(r"`hardware`, (\d+) claims; `software` the artifact does not include, (\d+); "
                     r"a `measurement`, (\d+),", readme)
    assert said and [int(x) for x in said.groups()] == [n[f"lacks-{w}"] for w in claims.LACKS]
    # with KVM (no check on emulated guests) the guests decide: none is left out for the emulator
    kvm = verdicts[verdicts["check"] == 0]
    assert "hvclaimcount@not testable-tcg}{0}" in claims_tex.tex_macros(kvm)


def test_a_verdict_on_a_weaker_or_different_quantity_says_so_where_it_rests_on_it():
    """The audit's judgement of each check reaches the verdict's note and the count of the abstract: a claim
    that holds counts any weaker or different check; one that does not hold only a failing check of a
    different quantity (a weaker check is a necessary part of the claim: its failure refutes it)."""
    rows = [dict(claim="A-1", check=1, claim_verdict="holds", verdict="holds", median=1.0),
            dict(claim="A-1", check=2, claim_verdict="holds", verdict="holds", median=1.0),
            dict(claim="B-1", check=1, claim_verdict="does not hold", verdict="does not hold", median=1.0),
            dict(claim="B-1", check=2, claim_verdict="does not hold", verdict="holds", median=1.0),
            dict(claim="C-1", check=1, claim_verdict="does not hold", verdict="does not hold", median=1.0),
            dict(claim="D-1", check=0, claim_verdict="not testable", verdict="not testable", median=float("nan"))]
    audit = {"x": [{"id": "A-1", "checks": [{"quantity": "own"}, {"quantity": "weaker"}]},
                   {"id": "B-1", "checks": [{"quantity": "weaker"}, {"quantity": "different"}]},
                   {"id": "C-1", "checks": [{"quantity": "different"}]}, {"id": "D-1"}]}
    v = claims_tex.with_audit(pd.DataFrame(rows), audit)
    assert list(v["audit_quantity"]) == ["own", "weaker", "weaker", "different", "different", ""]
    got = {c: claims_tex.lesser_quantity(v, c) for c in ("A-1", "B-1", "C-1", "D-1")}
    assert got == {"A-1": "weaker", "B-1": "", "C-1": "different", "D-1": ""}
    assert claims_tex.lesser_quantity(v.drop(columns="audit_quantity"), "A-1") == ""
