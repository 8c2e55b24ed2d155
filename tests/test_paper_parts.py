"""The paper follows the campaign: figures are built only for the data a
campaign has, and parts of sections that need other data are left out and
listed, instead of failing on undefined macros."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from studies import study_for

from hpcvirt import matrix
from hpcvirt.config import load_study
from hpcvirt.figures import FIGURES, for_campaign
from hpcvirt.paper import PART_CALL, part_needs, parts_tex

ROOT = Path(__file__).resolve().parents[1]
PARTS = {p.stem: p.read_text() for p in (ROOT / "paper/sections/parts").glob("*.tex")}
SECTIONS = {p.name: p.read_text() for p in (ROOT / "paper/sections").glob("*.tex")}


def test_every_part_is_called_once_and_every_call_has_a_part():
    calls = [c for text in SECTIONS.values() for c in PART_CALL.findall(text)]
    assert sorted(calls) == sorted(PARTS), "\\hvpart calls and paper/sections/parts/*.tex differ"
    for name, text in PARTS.items():
        assert re.match(r"% .+: needs .+", text.splitlines()[0]), f"{name}: first line must say what it needs"


def test_sections_outside_parts_use_only_macros_every_campaign_defines():
    """Campaign-specific numbers (a testbed's, an experiment's) live in parts."""
    always = {"hvCampaign", "hvReps", "hvRuns", "hvLatBytes", "hvCiLevel", "hvCpuModel", "hvCores", "hvKernel",
              "hvOpenmpiVersion", "hvMpichVersion", "hvNetpipeVersion", "hvQperfVersion",
              "hvHostVm", "hvHostContainer", "hvVmAccels", "hvSizeMin", "hvSizeMax", "hvOmittedParts"}
    used = {m for text in SECTIONS.values() for m in part_needs(text)[0]}
    # the container section's numbers come from the companion campaign (generated/containers.tex)
    # and stand only where it was measured (\ifhvcontainers, see test_containers_paper.py)
    # and the data paths' section's from the second one (generated/datapaths.tex, \ifhvdatapaths)
    for prefixes, section, flag in ((("hvCtr",), "containers.tex", "\\ifhvcontainers"),
                                    (("hvRichter", "hvDp"), "datapaths.tex", "\\ifhvdatapaths")):
        companion = {m for m in used if m.startswith(prefixes)}
        measured = SECTIONS[section].split(flag, 1)[1].split("\\else", 1)[0]
        assert companion and companion <= set(part_needs(measured)[0]), section
        used -= companion
    assert used <= always, f"move these into a part: {sorted(used - always)}"


NUMBERS = "\\newcommand{\\hvCampaign}{x}\n\\newcommand{\\hvLatBytes}{8}\n"


def test_parts_with_missing_data_are_left_out_and_listed():
    parts = {"a": "% Part A: needs nothing special.\nText \\hvLatBytes.\n",
             "b": "% Part B: needs the bridge.\nText \\hvLatBridgeOpenmpiNet.\n",
             "c": "% Part C: needs figure x.\n\\includegraphics[width=1cm]{x.pdf} \\ref{fig:y}\n"}
    tex, included, omitted = parts_tex(parts, NUMBERS, {"x"})
    assert included == ["a"] and set(omitted) == {"b", "c"}
    assert "\\input{sections/parts/a}" in tex and "\\input{sections/parts/b}" not in tex
    assert "Part B: needs the bridge." in omitted["b"] and "hvLatBridgeOpenmpiNet" in omitted["b"]
    assert "figure y" in omitted["c"]
    assert "Not in this campaign" in tex
    full, included, omitted = parts_tex(parts, NUMBERS + "\\newcommand{\\hvLatBridgeOpenmpiNet}{1}\n", {"x", "y"})
    assert not omitted and "Not in this campaign" not in full


def _study(testbeds, **exps):
    cfg = study_for(testbeds, **exps)
    study, tbs = load_study(cfg, testbed_dir=ROOT / "config/testbeds")
    return matrix.configurations(study), tbs


def test_figures_follow_the_campaign():
    configs, tbs = _study(["local", "bridge", "vm"])
    assert [f.name for f in for_campaign(configs, tbs)] == [f.name for f in FIGURES]
    configs, tbs = _study(["local-slurm"], pingpong={"paths": ["shm", "tcp"]}, placement={"enabled": False})
    assert [f.name for f in for_campaign(configs, tbs)] == ["pingpong", "datapaths", "npb", "osu", "agreement",
                                                            "commprof", "apps", "speedup", "streams"]
    configs, tbs = _study(["local-slurm"], pingpong={"paths": ["shm", "tcp"]}, placement={"enabled": False},
                          imb={"enabled": False}, npb={"enabled": False}, profile={"enabled": False},
                          lammps={"enabled": False})
    assert [f.name for f in for_campaign(configs, tbs)] == ["pingpong", "datapaths", "osu", "streams"]
    configs, tbs = _study(["bridge"], pingpong={"paths": ["net"]})
    assert [f.name for f in for_campaign(configs, tbs)] == ["datapaths", "placement", "npb", "npbnorm", "osu",
                                                            "agreement", "commprof", "apps", "streams"]


def test_figure_parts_need_their_figure():
    for f in FIGURES:
        users = [n for n, t in PARTS.items() if f.name in part_needs(t)[1]]
        assert users, f"figure {f.name} is shown by no part"


def test_every_declared_figure_has_its_rule_and_notebook():
    rules = (ROOT / "workflow/rules/figures.smk").read_text()
    for f in FIGURES:
        block = rules.split(f"rule figure_{f.name}:")[1].split("\nrule ")[0]
        assert f'pdf=figure_pdf("{f.name}")' in block   # paper/figures/<name>.pdf, registered for the report
        assert f'"../../notebooks/{f.notebook}.ipynb"' in block
        assert (ROOT / "notebooks" / f"{f.notebook}.ipynb").is_file()


def test_parts_refer_only_to_labels_that_are_always_there():
    """A part may be left out: no other text may refer to a label it defines
    (a left-out label breaks the LaTeX build), and a part refers only to
    labels of the sections or of itself."""
    label = re.compile(r"\\label\{([^}]+)\}")
    ref = re.compile(r"\\(?:ref|autoref|cref)\{([^}]+)\}")
    sections = {p.name: p.read_text() for p in (ROOT / "paper/sections").glob("*.tex")}
    always = {lab for text in sections.values() for lab in label.findall(text)}
    always |= {"tab:results", "tab:overheads", "tab:reference"}            # generated tables, always built
    for name, text in PARTS.items():
        mine = set(label.findall(text))
        generated = {lab for lab in ref.findall(text) if lab.startswith("tab:")}   # its own generated table
        # \ref{fig:X} makes the part need figure X (part_needs): it is left out without it
        figures = {f"fig:{f}" for f in part_needs(text)[1]}
        bad = set(ref.findall(text)) - always - mine - generated - figures
        assert not bad, f"part {name} refers to labels another part defines: {sorted(bad)}"
    for fname, text in sections.items():
        in_parts = {lab for t in PARTS.values() for lab in label.findall(t)}
        bad = set(ref.findall(text)) & in_parts
        assert not bad, f"{fname} refers to labels of parts that may be left out: {sorted(bad)}"


def test_a_quick_look_paper_says_it_is_not_the_archived_campaign():
    from hpcvirt.paper import quick_look_tex

    assert quick_look_tex(False) == "\\newcommand{\\hvQuickLook}{}\n"
    notice = quick_look_tex(True)
    assert "not the archived campaign" in notice and "make quick" in notice and "\\hvCampaign" in notice
    assert "\\hvQuickLook" in (ROOT / "paper/main.tex").read_text()
