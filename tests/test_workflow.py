"""Workflow tests: lint, formatting, dry-runs, config errors before any job,
and a tiny end-to-end run (real MPI, real notebook, real LaTeX) in a fresh
copy of the repository."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcvirt import build, matrix
from hpcvirt.config import emulated_note, load_study
from hpcvirt.tidy import COLUMNS

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ENV = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}",
           # the suites are built once for all copies of the repository (hpcvirt.build)
           HPCVIRT_BUILD_CACHE=os.environ.get("HPCVIRT_BUILD_CACHE", str(ROOT / ".hpcvirt" / "suites")))
PROFILE = ["--workflow-profile", "workflow/profiles/default"]
# what `make quick` measures: the reduced study, and a paper that says so
QUICK = ["config/tiny.yaml", "config/quick.yaml"]


def snakemake(*args, cwd=ROOT, timeout=600, check=True, env=None):
    res = subprocess.run(
        [str(BIN / "snakemake"), *args], cwd=cwd, env=env or ENV, capture_output=True, text=True, timeout=timeout
    )
    if check and res.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res


def test_lint_is_clean():
    res = snakemake("--lint", check=False)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "Lints for" not in out, out


def test_snakefmt_is_clean():
    res = subprocess.run(
        [str(BIN / "snakefmt"), "--check", "Snakefile", "workflow/rules"], cwd=ROOT, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_dry_run_of_the_full_study():
    res = snakemake(*PROFILE, "-n", "--config", "campaign=dryrun-full")
    study, testbeds = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    study = dict(study, campaign="dryrun-full")    # a new campaign: the archive's plan keeps the rounds it holds
    reps = study["repetitions"]
    per_job = [(c, r) for c, r in matrix.schedule(study) if testbeds[c.testbed]["kind"] != "qemu"]
    m = re.search(r"^measure\s+(\d+)$", res.stdout, re.M)
    assert m and int(m.group(1)) == len(per_job), res.stdout
    for name, tb in testbeds.items():
        if tb["kind"] == "qemu":  # one job per round boots the guests once (they may have fewer rounds: by_kind)
            jobs = dict(re.findall(rf"^(measure_round_{name}_\d+)\s+(\d+)$", res.stdout, re.M))  # first table
            rounds = sum(len(r) for r, _ in matrix.round_groups(study, name))
            assert sum(int(n) for n in jobs.values()) == rounds <= reps, res.stdout
    for rule in ("parse", "aggregate", "figure_pingpong", "numbers", "paper"):
        assert re.search(rf"^{rule}\s+\d+$", res.stdout, re.M), rule
    # guests that would be emulated here: what the plan leaves out of them is said, and why
    note = emulated_note(dict(study, campaign="dryrun-full"))
    assert bool(note) == bool(study["emulated"])
    for line in note:
        assert f"hpcvirt: {line}" in res.stderr, res.stderr[-3000:]
    assert not (ROOT / "data/raw/dryrun-full").exists()


def test_a_grown_study_plans_the_measurements_its_campaign_lacks():
    """The archived campaign is complete: nothing to measure.  With one
    repetition more, the measurements it lacks are planned and the tables that
    hold them re-parsed, though the tables exist and their inputs are ancient()."""
    study, _ = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    res = snakemake(*PROFILE, "-n")
    assert not re.search(r"^(measure|parse)\b", res.stdout, re.M), res.stdout[-2000:]
    grown = dict(study, repetitions=study["repetitions"] + 1)
    lacking = [p for p in matrix.all_raw_paths(grown) if not (ROOT / p).exists()]
    assert lacking and all(f"rep-{study['repetitions'] + 1}.out" in p for p in lacking)
    res = snakemake(*PROFILE, "-n", "--config", f"repetitions={study['repetitions'] + 1}")
    assert re.search(rf"^measure\s+{len(lacking)}$", res.stdout, re.M), res.stdout[-3000:]
    assert re.search(r"^parse\s+\d+$", res.stdout, re.M) and re.search(r"^aggregate\s+1$", res.stdout, re.M)


def test_a_round_that_has_some_outputs_measures_only_the_missing_ones():
    """When the study gains a configuration, a round of the guests that has
    finished before gets a job whose outputs are the new measurements only:
    the workflow manager must not remove (and re-measure) the others."""
    campaign = "dryrun-grown"
    study, testbeds = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    study = dict(study, campaign=campaign)
    round1 = [c for c, r in matrix.schedule(study) if r == 1 and c.testbed == "vm"]
    have, new = round1[:-2], round1[-2:]
    made = []
    try:
        for c in have:
            for ext in ("out", "json"):
                path = ROOT / matrix.raw_path(campaign, c, 1, ext)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("measured before\n")
                made.append(path)
        res = snakemake(*PROFILE, "-n", "--config", f"campaign={campaign}")
        assert re.search(r"^measure_round_vm_\d+_rep1\s+1$", res.stdout, re.M), res.stdout
        assert "measure round 1 on vm: the 2 missing measurements" in res.stdout
        job = res.stdout[res.stdout.index("measure round 1 on vm: the 2"):].split("\n")[1]
        assert all(matrix.raw_path(campaign, c, 1) in job for c in new)
        assert not any(matrix.raw_path(campaign, c, 1) in job for c in have)
        # the other rounds (if the guests have more than one) have none of their outputs: one job each
        others = max(r for c, r in matrix.schedule(study) if c.testbed == "vm") - 1
        assert bool(re.search(rf"^measure_round_vm_0\s+{others}$", res.stdout, re.M)) == (others > 0), res.stdout
        assert all(p.read_text() == "measured before\n" for p in made)
    finally:
        shutil.rmtree(ROOT / "data/raw" / campaign, ignore_errors=True)


@pytest.mark.parametrize(
    "override,needles",
    [
        ("repetitions=0", ["config/config.yaml", "repetitions", "minimum"]),
        ("campaign=bad/../name", ["campaign", "pattern"]),
        ("testbeds=[nosuch]", ["config/testbeds/nosuch.yaml", "not found"]),
        ('paper={"containers_campaign": "container-nosuch"}',
         ["config/config.yaml + --config: paper.containers_campaign", "container-nosuch", "make containers"]),
        ('paper={"datapaths_campaign": "datapaths-nosuch"}',
         ["config/config.yaml + --config: paper.datapaths_campaign", "datapaths-nosuch", "make datapaths"]),
        ("repetitions=3.0", ["config/config.yaml + --config: repetitions: 3.0 is not of type 'integer'"]),
    ],
)
def test_bad_config_fails_before_any_job(override, needles):
    res = snakemake(*PROFILE, "-n", "--config", override, check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    for needle in needles:
        assert needle in out, out
    assert "Job stats" not in out  # failed while loading, before building the DAG


def test_a_bad_layer_is_named_in_the_error(tmp_path):
    """An error in a --configfile layer names the layer beside config/config.yaml (the merged study is what
    is checked); an integer written as 3.0 is refused (it would name new configurations: ``_i100.0``)."""
    layer = tmp_path / "layer.yaml"
    layer.write_text("experiments:\n  pingpong:\n    mpis: [intelmpi]\n  osu:\n    iterations: 100.0\n")
    res = snakemake(*PROFILE, "-n", "--configfile", str(layer), check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "Job stats" not in out
    assert f"config/config.yaml + {layer}: experiments.osu.iterations: 100.0 is not of type 'integer'" in out, out
    assert f"config/config.yaml + {layer}: experiments.pingpong.mpis[0]: 'intelmpi' is not one of" in out


@pytest.mark.parametrize("override,needle", [
    ("repetitions=0", "config/config.yaml + --config: repetitions: 0 is less than the minimum of 1"),
    ("testbeds=[nosuch]", "config/testbeds/nosuch.yaml: file not found"),
    ("seed=abc", "config/config.yaml + --config: seed: 'abc' is not of type 'integer'"),
])
def test_bad_config_writes_nothing(tmp_path, override, needle):
    """Not a dry run: the workflow stops while loading, before it creates anything."""
    work = fresh_copy(tmp_path / "repo")
    before = sorted(str(p.relative_to(work)) for p in work.rglob("*") if ".git/" not in str(p))
    res = snakemake(*PROFILE, "--config", "campaign=never", override, cwd=work, check=False)
    assert res.returncode != 0 and needle in res.stdout + res.stderr, res.stderr[-2000:]
    after = sorted(str(p.relative_to(work)) for p in work.rglob("*") if ".git/" not in str(p))
    new = [p for p in after if p not in before and not p.startswith(".snakemake")]
    assert new == [], new
    assert not (work / "data/raw/never").exists()


BOMB = 'l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n' + "".join(
    f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 10))


@pytest.mark.parametrize("text,needles", [
    ("repetitions: 2\nrepetitions: 3\n", ["overlay.yaml: repetitions: duplicate key at line 2 (first at line 1)"]),
    ("paper:\n  quick_look: true\n  quick_look: false\n", ["overlay.yaml: paper.quick_look: duplicate key"]),
    (BOMB, ["overlay.yaml: l", "expands to more than 100000 values"]),
    ("description: " + "x" * 70_000 + "\n", ["overlay.yaml: description: a value of 70000 characters"]),
])
def test_unsafe_overlay_fails_before_any_job(tmp_path, text, needles):
    """A --configfile overlay is read safely before the study is loaded: one error naming file and key."""
    (tmp_path / "overlay.yaml").write_text(text)
    start = time.monotonic()
    res = snakemake(*PROFILE, "-n", "--configfile", str(tmp_path / "overlay.yaml"), "--config", "campaign=never",
                    check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and time.monotonic() - start < 60, out
    for needle in needles:
        assert needle in out, out
    assert "Traceback" not in out and "Job stats" not in out, out
    assert not (ROOT / "data/raw/never").exists()


def test_unsafe_study_and_testbed_files_fail_before_any_job(tmp_path):
    """Bad bytes in config/config.yaml or a testbed file, a format spec in a placeholder: one error naming
    file and key, no traceback, nothing written."""
    work = fresh_copy(tmp_path / "repo")
    local = (work / "config/testbeds/local.yaml").read_bytes()
    study = (work / "config/config.yaml").read_bytes()
    cases = [
        ("config/testbeds/local.yaml", local.replace(b"no hypervisor", b"no hyperv\xe9sor"),
         "config/testbeds/local.yaml: not UTF-8 (byte 0xe9 at line"),
        ("config/testbeds/local.yaml", local + b"kind: qemu\n", "config/testbeds/local.yaml: kind: duplicate key"),
        ("config/testbeds/local.yaml", local.replace(b'"{ranks}", --map-by', b'"{ranks:0999999999}", --map-by'),
         "config/testbeds/local.yaml: mpi.openmpi.launcher[2]: placeholder {ranks} takes no format spec"),
        ("config/config.yaml", study + b"# \xff\n", "config/config.yaml: not UTF-8 (byte 0xff at line"),
        ("config/config.yaml", study + b"seed: 1\n", "config/config.yaml: seed: duplicate key"),
        ("config/config.yaml", study + b"#" * (2 << 20) + b"\n", "config/config.yaml: larger than the 1048576 bytes"),
    ]
    before = sorted(str(p.relative_to(work)) for p in work.rglob("*") if ".git/" not in str(p))
    for name, data, needle in cases:
        original = (work / name).read_bytes()
        assert data != original, needle
        (work / name).write_bytes(data)
        try:
            res = snakemake(*PROFILE, "--config", "campaign=never", cwd=work, check=False)
        finally:
            (work / name).write_bytes(original)
        out = res.stdout + res.stderr
        assert res.returncode != 0 and needle in out, out[-3000:]
        assert "Traceback" not in out and "Job stats" not in out, out[-3000:]
    after = sorted(str(p.relative_to(work)) for p in work.rglob("*") if ".git/" not in str(p))
    assert [p for p in after if p not in before and not p.startswith(".snakemake")] == []


def test_a_symlinked_raw_directory_is_refused_before_any_job(tmp_path):
    """A raw directory of the archive that is a symlink to outside data/: refused with its path, nothing read
    through it or written."""
    from hpcvirt.config import archived_campaign

    work = fresh_copy(tmp_path / "repo")
    rel = Path("data/raw", archived_campaign(), "local", "netpipe")
    shutil.move(work / rel, tmp_path / "outside")
    (work / rel).symlink_to(tmp_path / "outside")
    before = sorted(p.name for p in (tmp_path / "outside").rglob("*"))
    res = snakemake(*PROFILE, "--config", "campaign=never", cwd=work, check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and f"{rel}: a symlink (to {tmp_path / 'outside'})" in out, out[-3000:]
    assert "Traceback" not in out and "Job stats" not in out, out[-3000:]
    assert sorted(p.name for p in (tmp_path / "outside").rglob("*")) == before
    assert not (work / "data/raw/never").exists()


def test_raw_outputs_that_differ_from_the_tables_stop_the_run(tmp_path):
    """In a copy of the archive: a deleted raw output, one changed byte, an output the table was not parsed
    from: the run names it and stops before any job (rather than draw the paper from a stale table)."""
    from hpcvirt.config import archived_campaign

    work = fresh_copy(tmp_path / "repo")
    archive = archived_campaign()
    raws = sorted((work / "data/raw" / archive / "local" / "netpipe").glob("*/rep-1.out"))
    containers = yaml.safe_load((work / "config/config.yaml").read_text())["paper"]["containers_campaign"]
    companion = sorted((work / "data/raw" / containers / "local" / "netpipe").glob("*/rep-1.out"))[0]
    deleted, changed, extra = raws[0], raws[1], companion.with_name("rep-9.out")
    keep, keep_changed = deleted.read_bytes(), changed.read_bytes()
    for p in (deleted, changed):
        p.chmod(0o644)
    deleted.unlink()
    changed.write_bytes(changed.read_bytes().replace(b"1", b"2", 1))

    def refused(*needles):
        res = snakemake(*PROFILE, "-n", "paper/main.pdf", cwd=work, check=False)
        out = res.stdout + res.stderr
        assert res.returncode != 0 and "Traceback" not in out and "Job stats" not in out, out[-3000:]
        assert all(n in out for n in needles), out[-3000:]

    refused(f"missing: {deleted.relative_to(work)}", f"changed: {changed.relative_to(work)}",
            f"data/results/{archive}/local")
    deleted.write_bytes(keep)
    changed.write_bytes(keep_changed)
    assert changed.read_bytes() == (ROOT / changed.relative_to(work)).read_bytes()
    shutil.copy(companion, extra)           # a companion campaign's table is parsed from every output on disk
    refused(f"extra: {extra.relative_to(work)}")
    extra.unlink()
    # restored: the paper is drawn from the archive as it is, measuring nothing
    res = snakemake(*PROFILE, "-n", "paper/main.pdf", cwd=work)
    assert not re.search(r"^(measure|parse)\s+\d+$", res.stdout, re.M), res.stdout


def tiny_study(work: Path, campaign: str, overlays=tuple(QUICK)) -> dict:
    """config.yaml overlaid with the quick look's files (tiny.yaml, quick.yaml), as Snakemake merges them."""
    def merge(a, b):
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
        return out

    study = yaml.safe_load((work / "config/config.yaml").read_text())
    for overlay in overlays:
        study = merge(study, yaml.safe_load((work / overlay).read_text()))
    study, _ = load_study(dict(study, campaign=campaign), testbed_dir=work / "config/testbeds")
    return study


def fresh_copy(dst: Path) -> Path:
    """The tracked files of the repository (what a fresh clone has), plus the
    files not yet committed when run from a working tree."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True,
        check=True,
    ).stdout.split()
    for f in files:
        src = ROOT / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    subprocess.run(["git", "init", "-q"], cwd=dst, check=True)
    return dst


# The applications' experiments and the benchmarks they write.
APPS = ("openfoam", "lammps", "milc", "qe")
APP_BENCHMARKS = ("openfoam-dambreak", "lammps", "milc", "qe-pw")


def suites_only(work: Path) -> str:
    """An overlay in a copy that leaves the applications out (for tests of a path that every benchmark
    takes alike): its path relative to the copy, for --configfile."""
    (work / "config/suites-only.yaml").write_text(yaml.safe_dump({"experiments": {
        app: {"enabled": False} for app in APPS}}))
    return "config/suites-only.yaml"


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="benchmarks run in a private network namespace (unshare -n needs root)")


@pytest.mark.e2e
@pytest.mark.vm                 # its study has the guests' testbed: it runs once their image is built
@pytest.mark.shares_cores       # it checks what ran and where, not how fast (time limits of 2 min and more)
@needs_root
def test_tiny_study_end_to_end(tmp_path):
    """What `make quick` runs (config/tiny.yaml + config/quick.yaml), checked in detail."""
    work = fresh_copy(tmp_path / "repo")
    campaign = "tiny-e2e"
    # the guest image is shared with the other VM tests (built once per machine, like the suites)
    snakemake(*PROFILE, "--configfile", *QUICK, "--config", f"campaign={campaign}", cwd=work, timeout=900,
              env=dict(ENV, HPCVIRT_WORKDIR=str(ROOT / ".hpcvirt")))

    # the paper, its figure and generated files exist; it says it is a quick look
    assert (work / "paper/main.pdf").stat().st_size > 50_000
    text = subprocess.run(["pdftotext", "-l", "1", work / "paper/main.pdf", "-"], capture_output=True, text=True,
                          check=True).stdout
    assert "Quick look" in text and "not the archived campaign" in text, text[:2000]
    # one round: the abstract gives no interval of no width ("CI 1.47–1.47") but says there is none
    assert "one round, no interval" in text and not re.search(r"CI (-?[\d.]+)–\1\b", text), text[:3000]
    assert (work / "paper/figures/pingpong.pdf").exists()
    numbers = (work / "paper/generated/numbers.tex").read_text()
    for name in ("hvLatLocalOpenmpiShm", "hvLatLocalOpenmpiTcp", "hvPeakLocalOpenmpiTcp", "hvLatLocalQperfTcp",
                 "hvOvhLatBridgeOpenmpiNet", "hvOvhLatVmOpenmpiNet", "hvAccelVm"):
        assert f"\\{name}}}" in numbers, name
    assert (work / "paper/figures/datapaths.pdf").exists()
    assert (work / "paper/figures/placement.pdf").exists()
    # each figure rule ran its own notebook
    figures = [(work / "paper/figures" / f"{f}.pdf").read_bytes() for f in ("pingpong", "datapaths", "placement")]
    assert len(set(figures)) == 3
    for f, nb in (("pingpong", "01-pingpong"), ("datapaths", "02-datapaths"), ("placement", "03-placement")):
        assert f"paper/figures/{f}.pdf" in (work / "logs/notebooks" / f"{nb}.ipynb").read_text()
    res = work / "data/results" / campaign
    study = tiny_study(work, campaign)
    # guests that would be emulated (TCG) run only the experiments that show their paths work
    # (emulated_guests); test_faults' interrupted round runs the applications in them all the same
    emulated = "vm" in study["emulated"]
    guests = () if emulated else ("vm",)
    vm_numbers = ("hvPlaceStepVmOpenmpiInterNode", "hvPlaceRatioVmOpenmpiInterNodeVsBridge",
                  "hvPlaceRatioVmOpenmpiIntraNodeVsBridge")
    for name in ("hvPlaceShareBridgeOpenmpiMixed", *vm_numbers):
        assert (f"\\{name}}}" in numbers) == (name not in vm_numbers or not emulated), name
    vm_benchmarks = set(pd.read_csv(res / "vm/tidy.csv")["benchmark"])
    if emulated:
        assert vm_benchmarks == {"netpipe", "qperf", "imb"}, vm_benchmarks

    # every configuration produced parsed rows; nothing rejected
    for testbed in study["testbeds"]:
        rejected = pd.read_csv(res / testbed / "rejected.csv")
        assert rejected.empty, rejected.to_string()
        vm = pd.read_csv(res / testbed / "tidy.csv", keep_default_na=False)
        assert set(vm["run_id"].str.split("/").str[1]) == {testbed}
        # the testbed's kind and, for guests, the accelerator, on every row
        assert set(vm["kind"]) == {yaml.safe_load((work / f"config/testbeds/{testbed}.yaml").read_text())["kind"]}
        if testbed == "vm":
            assert vm["virtualization"].isin(["qemu-kvm", "qemu-tcg"]).all()
            assert (vm["accel"] == vm["virtualization"].str.removeprefix("qemu-")).all()
        else:
            assert set(vm["accel"]) == {""}, testbed
    # placement: the benchmark counted the messages the placement implies, and verified its result
    for testbed in ("bridge", *guests):
        adv = pd.read_csv(res / testbed / "tidy.csv").query("benchmark == 'advect'")
        share = adv[adv.metric == "network_share"].set_index("placement")["value"]
        assert share.to_dict() == pytest.approx({"intra-node": 0.0, "mixed": 1 / 3, "inter-node": 1.0})
        assert adv["verified"].all()
    tidy = pd.read_csv(res / "local/tidy.csv")
    assert list(tidy.columns) == list(COLUMNS)
    # where the ranks ran, as they recorded it: this host; the bridge's two namespaces across
    # the bridge, one of them otherwise; nothing in the guests (they do not share the file system)
    mpi_rows = tidy[tidy["mpi"] != "none"]
    assert (mpi_rows["rank_hosts"].str.split(",").map(set) == {socket.gethostname()}).all()
    assert tidy.loc[tidy["mpi"] == "none", "rank_hosts"].isna().all()
    br = pd.read_csv(res / "bridge/tidy.csv").query("mpi != 'none'")
    hosts = br["rank_hosts"].str.split(",")
    assert hosts.map(lambda h: all(re.fullmatch(r"hv-[0-9a-f]{8}-h[01]", x) for x in h)).all(), br["rank_hosts"]
    assert (hosts.map(lambda h: len(set(h))) == br["nodes"]).all()
    assert set(br.loc[br["interconnect"] == "tcp", "mpi"]) == {"openmpi", "mpich"}
    assert pd.read_csv(res / "vm/tidy.csv")["rank_hosts"].isna().all()
    assert set(tidy["benchmark"]) == {"netpipe", "qperf", "imb", "osu_latency", "npb-ep", "commprof-cg",
                                      "openfoam-dambreak", "lammps", "milc", "qe-pw", "iperf3"}
    # four TCP streams over loopback here and from one namespace host to the other
    for testbed in ("local", "bridge"):
        st = pd.read_csv(res / testbed / "tidy.csv").query("benchmark == 'iperf3'")
        assert (st.query("metric == 'bandwidth'")["value"] > 0).all() and len(st.query("metric == 'bandwidth'")) == 1
        assert len(st.query("metric == 'stream_bandwidth'")) == 4, testbed
    # the applications: 1 and 2 ranks on this host, 2 ranks across the two namespaces, each result checked
    for bench, metric in (("lammps", "loop_time"), ("milc", "wall_time"), ("qe-pw", "wall_time")):
        app = tidy[(tidy["benchmark"] == bench) & (tidy["metric"] == metric)]
        assert sorted(app["ranks"]) == [1, 2] and app["verified"].all() and (app["value"] > 0).all(), bench
        appb = pd.read_csv(res / "bridge/tidy.csv").query(f"benchmark == '{bench}' and metric == '{metric}'")
        assert appb[["ranks", "nodes"]].values.tolist() == [[2, 2]], bench
        # and in the two guests, on their small input, each result checked there too
        for testbed in guests:
            appv = pd.read_csv(res / testbed / "tidy.csv").query(f"benchmark == '{bench}' and metric == '{metric}'")
            assert appv[["ranks", "nodes"]].values.tolist() == [[2, 2]] and appv["verified"].all(), bench
            assert set(appv["variant"]).isdisjoint(app["variant"]), bench    # not the host's input
    # the applications' outputs name no path of this machine (MILC runs beside its rational-function
    # file, pw.x in its run directory; OpenFOAM still prints its case directory)
    for out in [*res.parent.parent.joinpath("raw", campaign).rglob("milc/*/rep-*.out"),
                *res.parent.parent.joinpath("raw", campaign).rglob("qe/*/rep-*.out")]:
        assert str(work) not in out.read_text(errors="replace"), out
    # OpenFOAM's damBreak (the tutorial's mesh, 0.1 s): 1 and 2 ranks on this host, 2 ranks on the two
    # namespaces, and 1 and 2 ranks in one guest (Richter et al.'s set-ups 2a/2b)
    of = tidy[(tidy["benchmark"] == "openfoam-dambreak") & (tidy["metric"] == "wall_time")]
    assert sorted(of["ranks"]) == [1, 2] and set(of["variant"]) == {"2268 cells, 0.1 s"} and (of["value"] > 0).all()
    ofb = pd.read_csv(res / "bridge/tidy.csv").query("benchmark == 'openfoam-dambreak' and metric == 'wall_time'")
    assert ofb[["ranks", "nodes"]].values.tolist() == [[2, 2]]
    for testbed in guests:
        ofv = pd.read_csv(res / testbed / "tidy.csv").query("benchmark == 'openfoam-dambreak' and metric == 'wall_time'")
        assert sorted(ofv[["ranks", "nodes"]].values.tolist()) == [[1, 1], [2, 1]] and ofv["verified"].all()
        assert set(ofv["variant"]) == {"2268 cells, 0.1 s"} and ofv["virtualization"].str.startswith("qemu-").all()
    # the communication profile (NPB CG with the project's PMPI profiler) natively and across the bridge
    for testbed in ("local", "bridge"):
        prof = pd.read_csv(res / testbed / "tidy.csv").query("benchmark == 'commprof-cg'")
        share = prof.loc[prof["metric"] == "mpi_time_share", "value"]
        assert len(share) == 1 and 0 < share.iloc[0] < 1, testbed
        sent = prof[prof["metric"] == "bytes_sent"]
        assert set(sent["variant"]) >= {"S 0>1", "S 1>0"} and (sent["value"] > 0).all(), testbed
    assert tidy.groupby(["mpi", "interconnect"]).ngroups == 5  # 2 MPIs x 2 paths + raw TCP
    # the pinned suites ran from the project's builds, on local and bridge (and in the guests):
    # their rows name the suite version and the checksum of the source they were built from
    shas = {}
    for testbed in study["testbeds"]:
        t = pd.read_csv(res / testbed / "tidy.csv", keep_default_na=False, na_values=[""])
        suites = t[t["benchmark"].isin(["imb", "osu_latency", "npb-ep"])]
        expected = {"imb"} if testbed == "vm" and emulated else {"imb", "osu_latency", "npb-ep"}
        assert set(suites["benchmark"]) == expected, testbed
        assert suites["source_sha256"].str.fullmatch(r"[0-9a-f]{64}").all(), testbed
        # and the Spack DAG hash of the build that ran: the laptop stack's locked root of that suite and MPI
        for (bench, mpi), h in suites.groupby(["benchmark", "mpi"])["spack_hash"]:
            suite = {"imb": "imb", "osu_latency": "osu", "npb-ep": "npb"}[bench]
            assert set(h) == {build.root_of(suite, mpi)["hash"]}, (testbed, bench, mpi)
        versions = {"imb": "2021.3", "osu_latency": "7.4", "npb-ep": "3.4.1"}
        assert set(suites["suite_version"].astype(str)) == {versions[b] for b in expected}, testbed
        assert t.loc[t["benchmark"] == "npb-ep", "verified"].all()
        shas[testbed] = dict(zip(suites["benchmark"], suites["source_sha256"]))
    # the same builds everywhere
    assert len({json.dumps({b: s[b] for b in shas["vm"]}, sort_keys=True) for s in shas.values()}) == 1
    assert (tidy.loc[(tidy["unit"] != "Ry") & (tidy["metric"] != "retransmits"), "value"] > 0).all()      # energies are negative
    assert (tidy.loc[tidy["metric"] == "retransmits", "value"] >= 0).all()  # retransmissions may be none
    summary = pd.read_csv(res / "summary.csv")
    assert {"median", "ci_low", "ci_high", "ci_level", "n"} <= set(summary.columns)
    assert set(summary.loc[summary.metric == "bandwidth", "unit"]) == {"Gbit/s"}

    # raw outputs: protected, with provenance beside them, no environment dump
    raws = sorted((work / "data/raw" / campaign).rglob("rep-*.out"))
    assert sorted(str(p.relative_to(work)) for p in raws) == sorted(matrix.all_raw_paths(study))
    for raw in raws:
        assert not os.access(raw, os.W_OK) or os.geteuid() == 0 and not (raw.stat().st_mode & 0o222)
        prov = json.loads(raw.with_suffix(".json").read_text())
        assert prov["command"]["argv"] and prov["host"]["cpu"]["model"]
        assert prov["config_hash"].startswith("sha256:")
        assert "PATH" not in json.dumps(prov["command"]["env"])
        assert "HOME" not in json.dumps(prov)
        if prov["mpi"]:
            assert prov["mpi"]["version"]

    # a second run has nothing to do: nothing is re-measured or overwritten
    mtimes = {p: p.stat().st_mtime_ns for p in raws}
    res2 = snakemake(*PROFILE, "--configfile", *QUICK, "--config", f"campaign={campaign}", cwd=work)
    assert "Nothing to be done" in res2.stdout + res2.stderr
    assert mtimes == {p: p.stat().st_mtime_ns for p in raws}

    # an edited testbed file is refused for this campaign (its raw paths do not
    # encode the launcher flags), naming the file and the changed key
    for testbed in study["testbeds"]:
        assert json.loads((work / "data/raw" / campaign / testbed / "testbed.json").read_text())["testbed_hash"]
    local_yaml = work / "config/testbeds/local.yaml"
    original = local_yaml.read_text()
    edited = original.replace('--bind-to, "core:overload-allowed"', "--bind-to, none", 1)
    assert edited != original
    local_yaml.write_text(edited)
    res_edit = snakemake(*PROFILE, "-n", "--configfile", *QUICK, "--config", f"campaign={campaign}",
                         cwd=work, check=False)
    assert res_edit.returncode != 0
    msg = res_edit.stdout + res_edit.stderr
    assert "config/testbeds/local.yaml changed since campaign 'tiny-e2e'" in msg and "mpi.openmpi.launcher" in msg, msg
    local_yaml.write_text(original)

    # an interrupted campaign (one measurement missing, nothing downstream of
    # it built yet) resumes with exactly that measurement; finished ones are
    # not redone
    victim = next(p for p in raws if "/local/" in str(p))
    victim.chmod(0o644)
    victim.unlink()
    shutil.rmtree(res)
    for generated in ("paper/generated", "paper/figures", "paper/main.pdf"):
        shutil.rmtree(work / generated) if (work / generated).is_dir() else (work / generated).unlink()
    res3 = snakemake(
        *PROFILE, "-n", "--configfile", *QUICK, "--config", f"campaign={campaign}", cwd=work
    )
    assert re.search(r"^measure\s+1$", res3.stdout, re.M), res3.stdout
    assert str(victim.relative_to(work)) in res3.stdout


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A fresh clone (nothing under .hpcvirt/, no outputs) with the modification times a git
    checkout leaves, increasing in path order; shared by the dry-runs that only read it."""
    work = fresh_copy(tmp_path_factory.mktemp("checkout") / "repo")
    t0 = time.time_ns()
    for i, f in enumerate(sorted(p for p in work.rglob("*") if p.is_file() and ".git" not in p.parts)):
        os.utime(f, ns=(t0 + i * 1_000_000, t0 + i * 1_000_000))
    return work


@pytest.mark.parametrize("figure", ["pingpong", "datapaths", "placement", "containers", "richter"])
def test_figure_from_the_archive_measures_nothing(checkout, figure):
    """In a fresh clone, a figure of the committed archive is drawn from its raw outputs: no measurement
    and no job whose output would make a measurement look outdated (a dry-run: the clone stays as it is)."""
    res = snakemake(*PROFILE, "-n", f"paper/figures/{figure}.pdf", cwd=checkout)
    jobs = re.findall(r"^(\w+)\s+\d+$", res.stdout.split("Job stats:")[1].split("Reasons")[0], re.M)
    # (the views the figure draws; the companion campaigns' figures: their tables, rules containers and datapaths)
    assert set(jobs) <= {"parse", "aggregate", "views", "containers", "datapaths", f"figure_{figure}", "total"}, \
        res.stdout[-3000:]
    assert "measure" not in res.stdout.split("Job stats:")[1]


def test_make_figure_names_what_it_cannot_redraw_and_never_measures(tmp_path):
    """`make figure` measures nothing: an unknown name lists the figures, a campaign without results lists
    the campaigns that have them, and a campaign that lacks measurements of the study (an older one) is
    refused before any job (HPCVIRT_NO_MEASURE), instead of measuring them."""
    from hpcvirt.config import archived_campaign
    from hpcvirt.figures import check_target

    archive = archived_campaign()
    assert check_target("pingpong") is None and check_target("study-richter2015-table1-time") is None
    assert check_target("bogus").startswith("FIGURE=bogus: no such figure; the figures are pingpong, datapaths,")
    why = check_target("pingpong", "local-nonexistent")
    assert why.startswith("FROM=local-nonexistent: no data/results/local-nonexistent/summary.csv to redraw from")
    assert archive in why.split("the campaigns with one: ")[1].split(", ")
    assert "container_ratios.csv" in check_target("containers", archive)
    # FROM sets the key the figure reads: a companion campaign's figure only its own (not the campaign, whose
    # study it was not measured with); a name that is no campaign's sets nothing
    from hpcvirt.figures import from_config

    assert from_config("richter", "dp-1") == """--config 'paper={"datapaths_campaign": "dp-1"}'"""
    assert from_config("containers", "c-1") == """--config 'paper={"containers_campaign": "c-1"}'"""
    assert from_config("pingpong", "l-1") == """--config campaign=l-1 'paper={"datapaths_campaign": "l-1"}'"""
    assert from_config("pingpong", "l-1'; rm -rf x; '") == ""
    work = fresh_copy(tmp_path / "repo")
    older = sorted(p.parent.name for p in (work / "data/results").glob("local-*/summary.csv"))[0]
    res = snakemake(*PROFILE, "paper/figures/pingpong.pdf", "--config", f"campaign={older}",
                    cwd=work, check=False, env={**ENV, "HPCVIRT_NO_MEASURE": "1"})
    assert res.returncode != 0 and f"this command redraws from campaign {older}'s results and measures nothing, " \
        "but the campaign lacks" in res.stderr, res.stderr[-3000:]
    assert not list((work / "logs").glob("measure*")) and "rule measure" not in res.stdout
    # a redraw of a campaign measured with testbed files that changed since reads what it measured
    tb = work / "config/testbeds/local.yaml"
    assert "\nranks_per_node: 2\n" in tb.read_text()
    tb.write_text(tb.read_text().replace("\nranks_per_node: 2\n", "\nranks_per_node: 4\n"))
    (work / ".venv").symlink_to(ROOT / ".venv")
    res = subprocess.run(["make", "-o", "deps", "figure", "FIGURE=richter", f"FROM={archive}"], cwd=work,
                         capture_output=True, text=True, env={**ENV, "HPCVIRT_SOURCE_MIRROR": ""})
    assert res.returncode == 0 and "changed since campaign" not in res.stderr, res.stderr[-3000:]
    res = snakemake(*PROFILE, "-n", "paper/figures/pingpong.pdf", cwd=work, check=False)     # measuring: refused
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "config/testbeds/local.yaml changed since campaign" in out, out[-2000:]
    # a study layer that does not exist: named by make, before Snakemake (whose own message is a traceback)
    res = subprocess.run(["make", "-o", "deps", "figure", "FIGURE=pingpong", "LAYER=no-such-layer.yaml"], cwd=work,
                         capture_output=True, text=True)
    assert res.returncode == 2 and "make figure: LAYER=no-such-layer.yaml: no such file" in res.stderr, res.stderr
    assert "snakemake" not in res.stdout


def test_remeasuring_a_figure_plans_only_what_it_draws(tmp_path):
    """make remeasure FIGURE=pingpong: the study layer keeps the experiments of the benchmarks the figure
    draws (NetPIPE, qperf) on the testbeds of the kinds it draws (native: this host); the plan measures
    those and nothing else.  Without the layer the figure of a new campaign would measure the whole study.
    A companion campaign's figure names its own command."""
    from hpcvirt.config import load_study
    from hpcvirt.figures import FigureError, remeasure_overlay

    study, tbs = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    layer = remeasure_overlay("pingpong", study, tbs)
    assert layer["testbeds"] == ["local"] and layer["skip_unoffered"] is True
    assert {e for e, s in layer["experiments"].items() if s["enabled"]} == {"pingpong", "tcp"}
    assert set(layer["experiments"]) == set(study["experiments"])
    with pytest.raises(FigureError, match="make containers or make datapaths"):
        remeasure_overlay("containers", study, tbs)
    f = tmp_path / "layer.yaml"
    f.write_text(yaml.safe_dump(layer))
    res = snakemake(*PROFILE, "-n", "paper/figures/pingpong.pdf", "--configfile", str(f), "--config",
                    "campaign=remeasure-dry")
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", res.stdout.split("Job stats:")[1].split("Reasons")[0], re.M))
    assert stats["measure"] == "20" and "measure_round_vm_0" not in stats, stats
    planned = set(re.findall(r"data/raw/remeasure-dry/([^/]+)/([^/]+)/", res.stdout))
    assert planned == {("local", "netpipe"), ("local", "qperf")}, planned


def test_changed_library_code_derives_the_numbers_again_and_measures_nothing(tmp_path):
    """The profiles leave Snakemake's code trigger out (it would measure again), and that trigger sees only a
    rule's own lines anyway: the rules that derive from the tidy rows declare a digest of the library and the
    scripts (hpcvirt.paths.code_digest) instead.  Built once, the numbers are up to date; after a change of a
    library module they are derived again, from the same tidy tables, with no parse and no measurement."""
    work = fresh_copy(tmp_path / "repo")
    target = "paper/generated/numbers.csv"
    snakemake(*PROFILE, target, cwd=work)
    assert "Nothing to be done" in snakemake(*PROFILE, "-n", target, cwd=work).stdout
    labels = work / "workflow/lib/hpcvirt/labels.py"
    labels.write_text(labels.read_text() + "\n# a change of the code that formats the numbers\n")
    res = snakemake(*PROFILE, "-n", target, cwd=work)
    jobs = re.findall(r"^(\w+)\s+\d+$", res.stdout.split("Job stats:")[1].split("Reasons")[0], re.M)
    # (the archive's summary, where it is committed, was not derived here: no record of its code to compare)
    assert "numbers" in jobs and set(jobs) <= {"aggregate", "numbers", "total"}, res.stdout[-3000:]
    assert "params" in res.stdout.split("Reasons")[-1].lower(), res.stdout[-3000:]


def test_the_paper_graph_holds_the_jobs_of_the_archive_only():
    """The paper reads the study's other campaigns (the verdicts' stability) and the companions as
    committed records: no parse or measurement job of theirs is in the paper's graph (parsed by rule,
    every other campaign's raw outputs were jobs of it: about 3,000, 5 s of every build), only one
    ``verdicts`` job per other campaign, whose committed table is up to date."""
    from hpcvirt.config import archived_campaign

    others = [p.name for p in (ROOT / "data/results").iterdir()
              if p.name.startswith("local-") and p.name != archived_campaign()]
    assert len(others) >= 2, "the study's other archived campaigns are what this test is about"
    res = snakemake(*PROFILE, "--dag", "dot", "paper/main.pdf", cwd=ROOT)
    campaigns = set(re.findall(r"label = \"(?!verdicts\\n)[^\"]*campaign: ([A-Za-z0-9._-]+)", res.stdout))
    assert campaigns == {archived_campaign()}, sorted(campaigns)
    verdicts = re.findall(r"label = \"verdicts\\ncampaign: ([A-Za-z0-9._-]+)\", [^]]*style=\"([a-z,]+)\"", res.stdout)
    assert sorted(c for c, _ in verdicts) == sorted(others), verdicts
    assert all("dashed" in style for _, style in verdicts), "a committed verdict table would be made again"
    # one measurement job per raw output of the archive's plan, but on testbeds measured in rounds
    from hpcvirt.kinds import KINDS

    study = dict(load_study()[0], campaign=archived_campaign())
    alone = [p for p in matrix.all_raw_paths(study) if not KINDS[study["kinds"][Path(p).parts[3]]].boots_per_round]
    assert len(re.findall(r"label = \"measure\\n", res.stdout)) == len(alone) > 0


def test_a_run_without_the_profile_refuses_to_start(tmp_path):
    """Plain `snakemake` keeps Snakemake's default rerun triggers: in a
    checkout that has measured before, a changed measurement script would
    re-measure the archive (a checkout keeps no write protection).  The
    workflow refuses to start, names the fix, and touches no raw output; a
    dry run still works."""
    work = fresh_copy(tmp_path / "repo")
    raw = sorted((work / "data/raw").rglob("*"))
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in raw if p.is_file()}
    res = snakemake("--cores", "1", "paper/figures/pingpong.pdf", cwd=work, check=False)
    assert res.returncode != 0
    assert "--workflow-profile workflow/profiles/default" in res.stdout + res.stderr
    assert "rerun-triggers: [mtime, input, params, software-env]" in res.stdout + res.stderr
    after = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted((work / "data/raw").rglob("*")) if p.is_file()}
    assert after == before
    assert not (work / "logs/measure").exists()
    assert snakemake("-n", "paper/figures/pingpong.pdf", cwd=work, check=False).returncode == 0


@pytest.mark.e2e
@pytest.mark.no_measurement
def test_html_report_of_the_archive(archive_clone):
    """`make report`'s two steps in a clone: the paper from the archive (built
    once for this test and the bundle's), then Snakemake's report with every
    figure (caption: what, campaign, command; labels: testbeds,
    virtualization, VM accelerator), the tables and the paper."""
    from hpcvirt.figures import FIGURES

    work = archive_clone
    (work / "report").mkdir()
    snakemake(*PROFILE, "--report", "report/hpcvirt.html", cwd=work, timeout=300)
    html = (work / "report/hpcvirt.html").read_text()
    campaign = load_study(config_path=work / "config/config.yaml", testbed_dir=work / "config/testbeds")[0]["campaign"]
    for fig in FIGURES:
        assert f"make figure FIGURE={fig.name}" in html, fig.name
        assert fig.what[:40] in html, fig.name          # (non-ASCII is escaped in the page's data)
    assert "(software emulation) the VM numbers measure the emulator, not a hypervisor" in html
    assert "TCG (emulation)" in html and "qemu-tcg" in html and "netns-bridge" in html
    for label in ("tidy rows", "rejected outputs", "summary (medians, CIs)", "claims (verdicts)",
                  "claims (verdicts, CSV)"):
        assert label in html, label
    # the verdicts as a page the report shows (text/html), beside the CSV it offers to download
    page = (work / "paper/generated/claims.html").read_text()
    assert page.count("<tr>") > 40 and "<th>verdict</th>" in page and "does not hold" in page
    assert html.count(campaign) >= len(FIGURES)          # every caption names the campaign
    browser = shutil.which("chromium")
    if browser:
        # in a real browser 1400 px wide: every figure is shown (a PNG: a browser without a PDF viewer,
        # headless Chromium among them, showed an empty frame), and the figures' table of labels beside it
        # leaves it most of the window (too long a label once squeezed it to nothing)
        widths = report_figure_widths(browser, work / "report/hpcvirt.html", [f.name for f in FIGURES], 1400)
        assert set(widths) == {f.name for f in FIGURES}, widths
        assert all(natural >= 500 and shown >= min(natural, 600) for shown, natural in widths.values()), widths


REPORT_PROBE = """<script>
window.addEventListener("load", function () {
  setTimeout(function () { app.showCategory("Figures"); }, 200);
  var names = NAMES, widths = {}, i = 0;
  function next() {
    if (i == names.length) { document.title = "widths=" + JSON.stringify(widths); return; }
    var name = names[i++];
    var key = Object.keys(results).find(function (k) { return k.endsWith("/" + name + ".png"); });
    app.setView({content: "img", contentPath: results[key].data_uri, resultPath: key});
    setTimeout(function () {
      var img = document.querySelector("img[src^='data:image/png']");
      widths[name] = img ? [Math.round(img.getBoundingClientRect().width), img.naturalWidth] : [0, 0];
      next();
    }, 300);
  }
  setTimeout(next, 600);
});
</script>
"""


def report_figure_widths(browser: str, report: Path, names: list[str], width: int) -> dict[str, list[int]]:
    """Each figure's picture in the HTML report, with the figures' label table shown, in headless Chromium
    ``width`` pixels wide: [its width on the page, its own width once decoded (0: not shown)]."""
    page = report.resolve().with_name("probe.html")
    page.write_text(report.read_text() + REPORT_PROBE.replace("NAMES", json.dumps(names)))
    out = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},900",
                          "--virtual-time-budget=20000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=300).stdout
    m = re.search(r"<title>widths=(\{.*?\})</title>", out)
    assert m, out[:2000]
    return json.loads(m.group(1).replace("&quot;", '"'))


def test_slurm_dry_run_shows_site_resources():
    """`snakemake -n` with the Slurm profile shows what a real cluster's sbatch would receive: a bare-metal
    site and a VM cluster (example-cloud) in one campaign, each its own allocation with its own partition."""
    res = snakemake(
        "-n", "--workflow-profile", "workflow/profiles/slurm",
        "--config", "campaign=site-dry", "testbeds=[example-site,example-cloud]", "repetitions=1",
    )
    assert "Group job example-site.n2" in res.stdout and "Group job example-cloud.n2" in res.stdout
    per_site = [ln for ln in res.stdout.splitlines() if "slurm_partition=compute" in ln and "benchmark=1" in ln]
    per_cloud = [ln for ln in res.stdout.splitlines() if "slurm_partition=cloud" in ln and "benchmark=1" in ln]
    assert len(per_site) == len(per_cloud) > 20 and "constraint=vm" in per_cloud[0]
    # the measurements' resources (other jobs only show the profile's defaults)
    lines = per_site
    # 4 tasks per node: the placement experiment's intra-node run puts all 4 ranks on one node
    assert "advect" in res.stdout
    for needle in ("slurm_partition=compute", "slurm_account=myproject", "nodes=2", "tasks_per_node=4",
                   "qos=normal", "constraint=ethernet", "slurm_extra=--exclusive"):
        assert needle in lines[0], lines[0]
