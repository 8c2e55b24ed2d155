"""The paper follows the campaign: figures are built only for the data a
campaign has, and parts of sections that need other data are left out and
listed, instead of failing on undefined macros."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import yaml
from studies import study_for

from hpcvirt import matrix
from hpcvirt.config import load_study
from hpcvirt.figures import FIGURES, FigureError, for_campaign, load
from hpcvirt.paper import PART_CALL, part_needs, parts_tex

ROOT = Path(__file__).resolve().parents[1]
PARTS = {p.stem: p.read_text() for p in (ROOT / "paper/sections/parts").glob("*.tex")}
SECTIONS = {p.name: p.read_text() for p in (ROOT / "paper/sections").glob("*.tex")}


def test_every_part_is_called_once_and_every_call_has_a_part():
    calls = [c for text in SECTIONS.values() for c in PART_CALL.findall(text)]
    assert sorted(calls) == sorted(PARTS), "\\hvpart calls and paper/sections/parts/*.tex differ"
    for name, text in PARTS.items():
        assert re.match(r"% .+: needs .+", text.splitlines()[0]), f"{name}: first line must say what it needs"


def _true_branch(block: str) -> str:
    """The text of a conditional's true branch (``block`` starts after its ``\\if...``), up to its own
    ``\\else`` or ``\\fi``: conditionals nested in it are inside it."""
    depth = 0
    for m in re.finditer(r"\\(if[a-z]+|else|fi)\b", block):
        word = m.group(1)
        if word.startswith("if"):
            depth += 1
        elif depth == 0:
            return block[:m.start()]
        elif word == "fi":
            depth -= 1
    return block


def test_true_branch_skips_nested_conditionals():
    assert _true_branch("a \\ifx b \\else c \\fi d \\else e \\fi") == "a \\ifx b \\else c \\fi d "


def test_sections_outside_parts_use_only_macros_every_campaign_defines():
    """Campaign-specific numbers (a testbed's, an experiment's) live in parts."""
    always = {"hvCampaign", "hvReps", "hvRuns", "hvLatBytes", "hvCiLevel", "hvCiLevelMax", "hvCiRounds", "hvHostRecords", "hvCpuModel", "hvCores", "hvKernel",
              "hvOpenmpiVersion", "hvMpichVersion", "hvNetpipeVersion", "hvQperfVersion",
              "hvHostVm", "hvHostContainer", "hvHostIsVm", "hvHostInContainer", "hvVmAccels", "hvGuestsRan", "hvOmittedParts",
              "hvTestbedCount", "hvTestbedList", "hvMachines",  # the testbeds and machines the campaign measured on
              "hvArchive", "hvIsArchive",               # whether it is the archive
              "hvClaimMinCoverage", "hvClaimCampaignHosts"}          # the claims rule's, for every campaign (generated/claims.tex)
    used = {m for text in SECTIONS.values() for m in part_needs(text)[0]}
    # the container section's numbers come from the companion campaign (generated/containers.tex)
    # and stand only where it was measured (\ifhvcontainers, see test_containers_paper.py; in the
    # section and in the supplement), and the data paths' and Richter et al.'s set-ups' from the
    # second one (generated/datapaths.tex, \ifhvdatapaths)
    for prefixes, flag in ((("hvCtr",), "\\ifhvcontainers"), (("hvRichter", "hvDp"), "\\ifhvdatapaths")):
        companion = {m for m in used if m.startswith(prefixes)}
        guarded = {m for text in SECTIONS.values() for block in text.split(flag)[1:]
                   for m in part_needs(_true_branch(block))[0]}
        assert companion and companion <= guarded, (flag, sorted(companion - guarded))
        used -= companion
    assert used <= always, f"move these into a part: {sorted(used - always)}"


NUMBERS = {"hvCampaign", "hvLatBytes"}


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
    full, included, omitted = parts_tex(parts, NUMBERS | {"hvLatBridgeOpenmpiNet"}, {"x", "y"})
    assert not omitted and "Not in this campaign" not in full
    # two parts of one title (the method's and the results' of one experiment) are listed once
    parts["d"] = "% Part B: needs the bridge.\nText \\hvLatBridgeOpenmpiNetHi and \\hvLatBridgeOpenmpiNet.\n"
    tex, included, omitted = parts_tex(parts, NUMBERS, {"x", "y"})
    assert set(omitted) == {"b", "d"} and omitted["b"] == omitted["d"] and tex.count("\\item Part B") == 1
    assert "2 measured values" in omitted["b"]


def test_a_campaign_without_the_multi_pair_test_keeps_the_osu_section():
    """The OSU section needs the tests every OSU campaign runs; the multi-pair
    test's paragraph and table are a part of their own."""
    osu = {name: PARTS[name] for name in ("results-osu", "results-osu-multipair")}
    needs = set().union(*(part_needs(text)[0] for text in osu.values()))
    tex, included, omitted = parts_tex(osu, needs - {"hvOsuMbwPairs"}, {"osu"})
    assert included == ["results-osu"] and set(omitted) == {"results-osu-multipair"}
    assert "Missing here: 1 measured value, e.g." in omitted["results-osu-multipair"]
    assert "hvOsuMbwPairs" in omitted["results-osu-multipair"]
    assert "\\hvOsuMbwPairs" not in PARTS["results-osu"] and "tab:multipair" not in PARTS["results-osu"]


def _study(testbeds, **exps):
    cfg = study_for(testbeds, **exps)
    study, tbs = load_study(cfg, testbed_dir=ROOT / "config/testbeds")
    return matrix.configurations(study), tbs


def test_figures_follow_the_campaign():
    configs, tbs = _study(["local", "bridge", "vm"])
    assert [f.name for f in for_campaign(configs, tbs)] == [f.name for f in FIGURES if f.campaign == "main"]
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
        if f.campaign != "main":                 # the companions' sections show theirs when the campaign is named
            continue
        users = [n for n, t in PARTS.items() if f.name in part_needs(t)[1]]
        assert users, f"figure {f.name} is shown by no part"


def test_every_declared_figure_has_its_rule_and_notebook():
    """One rule per declaration, made by the workflow (not written by hand),
    and run where Snakemake runs (a local rule, also under the Slurm profile)."""
    res = subprocess.run([sys.executable, "-m", "snakemake", "--list-rules"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    rules = set(res.stdout.split())
    for f in FIGURES:
        assert f"figure_{f.name}" in rules, f.name
        assert (ROOT / "notebooks" / f"{f.notebook}.ipynb").is_file()
    assert "localrule: True" in (ROOT / "workflow/rules/figures.smk").read_text()
    assert not re.search(r"^rule figure_", (ROOT / "workflow/rules/figures.smk").read_text(), re.M)


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d[0]["needs"].update(benchmark="nosuch"), "needs unknown benchmarks ['nosuch']"),
    (lambda d: d.append(dict(d[0])), "figure names are not unique: ['pingpong']"),
    (lambda d: d[0].pop("needs"), "a figure of the main campaign declares needs"),
    (lambda d: d[0].update(reads="raw"), "[0].reads: 'raw' is not one of"),
    (lambda d: d[0].update(notebook="../x"), "[0].notebook: '../x' does not match"),
    (lambda d: d[-1].update(needs={"benchmark": "npb"}), "a companion campaign's figure does not"),
    (lambda d: d[1].update(views=["nosuch"]), "unknown views ['nosuch']"),
    (lambda d: d[1].update(reads="summary"), "reads either views (of the main campaign) or one table"),
])
def test_a_bad_figure_declaration_is_refused_naming_file_and_key(tmp_path, edit, needle):
    data = yaml.safe_load((ROOT / "workflow/figures.yaml").read_text())
    edit(data)
    bad = tmp_path / "figures.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(FigureError) as exc:
        load(bad)
    assert str(bad) in str(exc.value) and needle in str(exc.value), str(exc.value)


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


def test_a_campaign_of_one_host_keeps_the_osu_section_and_the_suites_paragraph():
    """A campaign of one native testbed (a site's bare-metal node, \\hvVmAccels "no VM testbed") has no
    bridge and no guests: the OSU section with its figure and the method's paragraph on the suites stand;
    the sentence that compares shared memory with the bridge is left out and listed."""
    names = ("results-osu", "results-osu-paths", "method-suites")
    needs = set().union(*(part_needs(PARTS[n])[0] for n in names))
    one_host = {m for m in needs if "Bridge" not in m and not m.startswith("hvAccel")}
    assert {"hvVmAccels", "hvNpbRanksSpread", "hvOsuLatLocalOpenmpiShm"} <= one_host
    tex, included, omitted = parts_tex({n: PARTS[n] for n in names}, one_host, {"osu"})
    assert included == ["method-suites", "results-osu"] and list(omitted) == ["results-osu-paths"]
    assert "Missing here: 2 measured values, e.g." in omitted["results-osu-paths"]
    assert "hvOsuLatBridgeOpenmpiNet" in omitted["results-osu-paths"]


def test_a_quick_look_paper_says_it_is_not_the_archived_campaign():
    from hpcvirt.paper import quick_look

    assert quick_look(False).tex() == "\\newcommand{\\hvQuickLook}{}\n"
    notice = quick_look(True)["hvQuickLook"]
    assert "not the archived campaign" in notice and "make quick" in notice and "\\hvCampaign" in notice
    assert "\\hvQuickLook" in (ROOT / "paper/main.tex").read_text()


def test_the_introduction_lists_the_testbeds_the_campaign_measured_on():
    """The introduction's testbeds are the campaign's (a quick look has three, the archive eight), each
    by its file's description, in the study's order; link rates come from the rows' link, not the text."""
    import pandas as pd

    from hpcvirt.paper import testbed_numbers

    study, testbeds = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    descriptions = {tb: testbeds[tb]["description"] for tb in study["testbeds"]}
    tidy = pd.concat([pd.read_csv(p) for p in sorted((ROOT / "data/results" / study["campaign"]).glob("*/tidy.csv"))],
                     ignore_index=True)
    full = testbed_numbers(tidy, descriptions)
    assert full["hvTestbedCount"] == "eight" and len(study["testbeds"]) == 8
    items = full["hvTestbedList"].split("; ")
    assert [re.search(r"\\texttt\{(.+?)\}", i).group(1) for i in items] == study["testbeds"]
    assert items[0].startswith("this host: ranks started by the host launcher, no hypervisor")
    assert "two QEMU guests on a bridge" in items[-1]
    assert full["hvRateBridgeTenG"] == "10\\,Gbit/s" and full["hvRateBridgeGbe"] == "1\\,Gbit/s"
    assert full["hvRateBridgeVxlanGbe"] == "1\\,Gbit/s" and "hvRateBridgeVxlan" not in full
    assert full["hvLinkBridgeVxlanGbe"] == "vxlan, rate 1gbit"
    quick = testbed_numbers(tidy[tidy["testbed"].isin(["local", "bridge", "vm"])], descriptions)
    assert quick["hvTestbedCount"] == "three" and quick["hvTestbedList"].count("\\texttt") == 3
    assert not any(k.startswith("hvRate") for k in quick)
    intro = SECTIONS["introduction.tex"]
    assert "\\hvTestbedCount{} testbeds interleaved in time: \\hvTestbedList." in intro
    assert not re.search(r"\b(eight|seven|nine) testbeds", intro)
    # the machines are the rows' hosts: the archive's one; a site's measurement jobs on three nodes, three
    assert full["hvMachines"] == "one machine" and "measured on \\hvMachines, with" in intro
    site = tidy.assign(host=[f"node{i % 3}" for i in range(len(tidy))])
    assert testbed_numbers(site, descriptions)["hvMachines"] == "three machines"


def test_the_guests_vcpus_and_the_host_cores_come_from_the_records():
    """The guests' count and vCPUs are those their runs booted (provenance ``guests``), the cores those
    of the host's record; no section types them, nor the guests' count or the applications' ranks in them."""
    import json

    import pandas as pd

    from hpcvirt.paper import campaign_numbers

    res = ROOT / "data/results" / yaml.safe_load((ROOT / "config/config.yaml").read_text())["campaign"]
    records = [json.loads(p.read_text()) for p in sorted(res.glob("*/provenance.json"))]
    tidy = pd.concat([pd.read_csv(p) for p in sorted(res.glob("*/tidy.csv"))], ignore_index=True)
    summary = pd.read_csv(res / "summary.csv", keep_default_na=False, na_values=[""])
    shapes = [g for r in records for g in r.get("guests", [])]
    m = campaign_numbers(summary, tidy, hosts=records[0], guest_shapes=shapes)
    assert (m["hvGuestCount"], m["hvGuestVcpus"], m["hvGuestVcpusTotal"], m["hvCores"]) == ("two", "two", "four",
                                                                                              "2")
    four = campaign_numbers(summary, tidy, hosts=records[0], guest_shapes=[dict(count=3, vcpus=4)])
    assert (four["hvGuestCount"], four["hvGuestVcpus"], four["hvGuestVcpusTotal"]) == ("three", "four", "12")
    none = campaign_numbers(summary, tidy, hosts=records[0])
    assert "hvGuestVcpus" not in none and "hvGuestCount" not in none
    assert m["hvAppVmRanks"] == "two"   # the applications' ranks across the guests (one on each)
    # a host that changed during the campaign (the archive's kernel update before it was extended) is said
    assert m["hvHostRecords"] == "1"
    assert campaign_numbers(summary, tidy, hosts=records[0], host_records=3)["hvHostRecords"] == "3"
    assert "\\ifnum\\hvHostRecords>1" in SECTIONS["method.tex"]
    parts = {p.name: p.read_text() for p in (ROOT / "paper/sections/parts").glob("*.tex")}
    main = {"main.tex": (ROOT / "paper/main.tex").read_text()}
    for name, text in {**SECTIONS, **parts, **main}.items():
        assert not re.search(r"\b(one|two|four|eight) (emulated )?vCPUs|\b(on|share) two cores|\bthe two cores"
                             r"|\b(one|two|three|four)\s+(QEMU\s+)?guests\b|\bthree applications", text), name
    assert "the \\hvGuestVcpusTotal{} vCPUs of the \\hvGuestCount{} guests" in parts[
        "threats-emulated-guests.tex"].replace("\n", " ")


def test_a_count_of_rounds_or_runs_is_written_with_its_noun():
    """A quick look runs one round: "1 interleaved rounds" and "measured 1 times" are written through
    ``\\hvcount``, which picks the noun's number; the rounds a campaign runs are at most ``\\hvReps``."""
    main = (ROOT / "paper/main.tex").read_text()
    assert "\\newcommand{\\hvcount}[3]{#1~\\ifnum#1=1\\relax#2\\else#3\\fi}" in main
    texts = {**SECTIONS, **{p.name: p.read_text() for p in (ROOT / "paper/sections/parts").glob("*.tex")}}
    bare = re.compile(r"\\hv[A-Za-z]*(?:Reps|Rounds)(?:\{\})?\s+(?:interleaved|times|repetitions|rounds|runs)")
    for name, text in texts.items():
        assert not bare.search(text), (name, bare.search(text).group(0))
    # a verdict's count takes its verb through \\hvcount too ("1 is inconclusive", "3 are")
    verb = re.compile(r"\\claimcount\{[^}]*\}\s+(?:claims\s+)?(?:hold|do|are|get|is|does|gets)\b")
    for name, text in {**texts, "main.tex": main}.items():
        assert not verb.search(text), (name, verb.search(text).group(0))
    # the figures' titles likewise (hpcvirt.labels.counted): "1 round", "3/5 rounds"
    from hpcvirt.labels import counted

    assert (counted([1], "round"), counted([5, 3, 5], "round"), counted([1, 1], "run")) == (
        "1 round", "3/5 rounds", "1 run")
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert not re.search(r"\}\s*(?:interleaved )?rounds", nb.read_text()), nb.name
    assert "\\hvcount{\\hvReps}{round}{rounds}" in SECTIONS["method.tex"].replace("\n", " ")
    assert "Every configuration is measured" not in SECTIONS["method.tex"]


def test_a_number_in_hvvalue_is_not_needed_and_prints_that_it_is_missing():
    """``\\hvvalue{\\hvRate...}`` stands in sentences a campaign without that testbed keeps: the part is
    not left out for it, and main.tex prints "[not in this campaign]" for it."""
    text = "% Part: needs the bridge.\nOver the \\hvvalue{\\hvRateBridgeTenG} link \\hvLatBytes.\n"
    assert part_needs(text)[0] == {"hvLatBytes"}
    tex, included, omitted = parts_tex({"p": text}, NUMBERS, set())
    assert included == ["p"] and not omitted
    main = (ROOT / "paper/main.tex").read_text()
    assert "\\newcommand{\\hvvalue}[1]{\\ifdefined#1#1\\else\\emph{[not in this campaign]}\\fi}" in main
    claims = SECTIONS["claims.tex"]
    assert "\\hvvalue{\\hvRateBridgeTenG}" in claims and not re.search(r"\b1?0\\,Gbit/s", claims)


def test_report_labels_name_what_each_figure_shows(tmp_path):
    """The report's labels come from the figure's own table and kinds: the
    native-only ping-pong figure lists no guest; the companions' figures
    (no virtualization column, study set-ups without a counterpart) get theirs."""
    from hpcvirt.figures import by_name, report_labels

    study, tbs = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    kinds = {n: tb["kind"] for n, tb in tbs.items()}
    main = ROOT / "data/results" / study["campaign"]
    ping = report_labels(by_name("pingpong"), [main / "summary.csv"], study["campaign"], kinds)
    assert ping["testbeds"] == "1" and ping["virtualization"] == "none" and ping["guests"] == "none"
    data = report_labels(by_name("datapaths"), [main / "summary.csv"], study["campaign"], kinds)
    assert data["virtualization"] == "netns-bridge, none, qemu-tcg"
    assert data["guests"] == "TCG (emulation)"
    agree = report_labels(by_name("agreement"), [main / "local/tidy.csv", main / "bridge-gbe/tidy.csv"],
                          study["campaign"], kinds)
    assert agree["testbeds"] == "2"                      # it draws IMB and NetPIPE (bridge-gbe: NetPIPE)
    osu = report_labels(by_name("osu"), [main / "local/tidy.csv", main / "bridge-gbe/tidy.csv"],
                        study["campaign"], kinds)
    assert osu["testbeds"] == "2"
    npb = report_labels(by_name("npb"), [main / "local/tidy.csv", main / "bridge-gbe/tidy.csv"],
                        study["campaign"], kinds)
    assert npb["testbeds"] == "1"                        # bridge-gbe runs no NPB
    # the speed-up figure draws LAMMPS and MILC natively and across the unlimited bridge (its view), not the
    # limited links (4 testbeds ran them)
    import pandas as pd

    from hpcvirt.apps import app_speedup          # the view, as rule views writes it (not committed)

    tidy = pd.concat([pd.read_csv(p) for p in sorted(main.glob("*/tidy.csv"))], ignore_index=True)
    app_speedup(tidy).to_csv(tmp_path / "app_speedup.csv", index=False)
    speed = report_labels(by_name("speedup"), [tmp_path / "app_speedup.csv"], study["campaign"], kinds)
    assert speed["testbeds"] == "2" and speed["virtualization"] == "netns-bridge, none", speed
    # the applications' figure: the testbeds of the inputs it draws (its view app_panels), each in a panel
    from hpcvirt.apps import app_panels

    panels = app_panels(tidy)
    panels.to_csv(tmp_path / "app_panels.csv", index=False)
    apps = report_labels(by_name("apps"), [tmp_path / "app_panels.csv"], study["campaign"], kinds)
    assert apps["testbeds"] == str(panels["testbed"].nunique()) and apps["guests"] == "TCG (emulation)", apps
    assert panels.groupby(["panel", "benchmark"])["variant"].nunique().eq(1).all()   # one input a panel
    ctr = study["paper"]["containers_campaign"]
    labels = report_labels(by_name("containers"), [ROOT / "data/results" / ctr / "container_ratios.csv"], ctr)
    assert labels["testbeds"] == "2", labels
    assert labels["virtualization"] == "none+apptainer, none+charliecloud"
    dp = study["paper"]["datapaths_campaign"]
    labels = report_labels(by_name("richter"), [ROOT / "data/results" / dp / "richter_table.csv"], dp)
    assert labels["testbeds"] == "4" and labels["guests"] == "TCG (emulation)", labels


def test_figures_read_views_and_compute_nothing():
    """A notebook draws what its views (or its one table) hold: it imports
    from the library only labels and the view reader, and reads only its
    declared inputs."""
    import json

    for f in FIGURES:
        nb = json.loads((ROOT / "notebooks" / f"{f.notebook}.ipynb").read_text())
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        imports = re.findall(r"^from (hpcvirt[\w.]*) import (.+)$", code, re.M)
        assert {m for m, _ in imports} <= {"hpcvirt.labels", "hpcvirt.views"}, (f.name, imports)
        assert all(names.strip() == "read" for m, names in imports if m == "hpcvirt.views"), (f.name, imports)
        used = set(re.findall(r"snakemake\.input\.(\w+)", code))
        declared = set(f.views) or {{"summary": "summary", "container_ratios": "ratios",
                                     "richter_table": "table"}[f.reads]}
        assert used == declared, (f.name, used, declared)


def test_every_view_computes_from_the_archive_and_reads_back_as_computed(tmp_path):
    """Each declared view of the archived campaign: computed, written, read as
    its notebook reads it, the same values (an empty text cell reads as "")."""
    import pandas as pd

    from hpcvirt import views

    study, _ = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    main = ROOT / "data/results" / study["campaign"]
    outputs = {v.name: tmp_path / f"{v.name}.csv" for v in views.VIEWS}
    views.write_all(main / "summary.csv", sorted(main.glob("*/tidy.csv")), outputs, latency_bytes=8)
    summary, tidy = views.read_tables(main / "summary.csv", sorted(main.glob("*/tidy.csv")))
    for v in views.VIEWS:
        want = views.compute(v, summary, tidy, latency_bytes=8)
        got = views.read(outputs[v.name])
        assert len(want) > 0, f"view {v.name} has no rows in the archive {main.name}: measure its rows into it"
        assert list(got.columns) == list(want.columns), v.name
        for c in want.columns:
            if pd.api.types.is_numeric_dtype(want[c]) and not pd.api.types.is_bool_dtype(want[c]):
                assert got[c].to_numpy() == pytest.approx(want[c].to_numpy(dtype=float), nan_ok=True), (v.name, c)
            else:
                assert list(got[c].astype(str)) == list(want[c].fillna("").astype(str)), (v.name, c)


def test_a_view_keeps_its_types_when_a_column_is_empty_on_every_row(tmp_path):
    """A campaign without link limits (the tiny study) has no link on any row: the
    view still reads that column as text, so a figure that selects ``link == ""``
    finds its rows; a number missing on every row still reads as a number."""
    import numpy as np
    import pandas as pd

    from hpcvirt import views

    study, _ = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    main = ROOT / "data/results" / study["campaign"]
    tidy = pd.concat([pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in sorted(main.glob("*/tidy.csv"))])
    tidy = tidy[tidy["link"].isna()]
    want = views.compute(views.by_name("app_scaling"), None, tidy).assign(spare=np.nan)
    assert len(want) and want["link"].eq("").all()
    views.write(tmp_path / "app_scaling.csv", want)
    got = views.read(tmp_path / "app_scaling.csv")
    assert got["link"].eq("").all() and len(got[got["link"] == ""]) == len(want)
    assert pd.api.types.is_float_dtype(got["spare"]) and got["spare"].isna().all()
    assert pd.api.types.is_integer_dtype(got["ranks"]) and got["perf"].to_numpy() == pytest.approx(want["perf"])


def _first_arguments(text: str, command: str) -> list[tuple[int, int]]:
    """The spans of the first braced argument of every ``command`` in ``text``."""
    spans = []
    for m in re.finditer(re.escape(command) + r"\{", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0) if text[i - 1] != "\\" else 0
            i += 1
        spans.append((m.end(), i - 1))
    return spans


def test_the_text_says_tcg_only_where_the_guests_ran_emulated():
    """Under KVM the guests' numbers are a hypervisor's: every sentence that says they measure the emulator
    stands in the first branch of \\hvifemulated, whose flag comes from the rows' accelerator; only the
    method and the appendix, which say when TCG is used, name it outside one."""
    import pandas as pd

    from hpcvirt.paper import campaign_numbers

    res = ROOT / "data/results" / yaml.safe_load((ROOT / "config/config.yaml").read_text())["campaign"]
    tidy = pd.concat([pd.read_csv(p) for p in sorted(res.glob("*/tidy.csv"))], ignore_index=True)
    summary = pd.read_csv(res / "summary.csv", keep_default_na=False, na_values=[""])
    assert campaign_numbers(summary, tidy)["hvEmulated"] == "1"          # the archive's guests: TCG
    kvm = summary.assign(accel=summary["accel"].replace({"tcg": "kvm"}))
    assert campaign_numbers(kvm, tidy)["hvEmulated"] == "0"
    hosts = summary[summary["accel"].fillna("") == ""]
    assert "hvEmulated" not in campaign_numbers(hosts, tidy[tidy["kind"] != "qemu"])
    parts = {f"parts/{p.name}": p.read_text() for p in (ROOT / "paper/sections/parts").glob("*.tex")}
    texts = {**SECTIONS, **parts, "main.tex": (ROOT / "paper/main.tex").read_text()}
    outside = {}
    for name, text in texts.items():
        spans = _first_arguments(text, "\\hvifemulated")
        for m in re.finditer(r"TCG", text):
            line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
            if not re.search(r"(?<!\\)%", line) and not any(a <= m.start() < b for a, b in spans):
                outside[Path(name).name] = outside.get(Path(name).name, 0) + 1
    assert outside and set(outside) <= {"method.tex", "appendix.tex"}, outside
