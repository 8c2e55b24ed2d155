"""Apptainer, the second container runtime: the installer's build (or the
site's), the --userns probe, the SIF of the offline root filesystem, a real
2-rank NetPIPE through `apptainer exec` in the hybrid model, and the
preflight refusing an image with another Open MPI.

Skipped (with the reason) only when no Apptainer is found: run
`workflow/scripts/install-deps.sh apptainer` first."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from studies import study_for

from hpcvirt import apptainer, preflight, runtime, sources, stack
from hpcvirt.config import ConfigError, load_schema, load_study, validate

ROOT = Path(__file__).resolve().parents[1]
OFFLINE_IMAGE = Path(os.environ.get("HPCVIRT_OFFLINE_IMAGE", ROOT / ".hpcvirt" / "images" / "offline.sqfs"))
MIRROR = os.environ.get(sources.MIRROR_ENV)

try:
    FOUND = apptainer.find()
    WHY = ""
except apptainer.ApptainerError as exc:
    FOUND, WHY = None, str(exc)
needs_apptainer = pytest.mark.skipif(FOUND is None, reason=f"no Apptainer: {WHY}")
needs_image = pytest.mark.skipif(
    FOUND is None or not OFFLINE_IMAGE.is_file() or shutil.which("mpirun") is None,
    reason=(f"no Apptainer: {WHY}" if FOUND is None else
            f"offline image {OFFLINE_IMAGE} not built (snakemake .hpcvirt/images/offline.sqfs)"
            if not OFFLINE_IMAGE.is_file() else "no mpirun"))



# --------------------------------------------------------------------------
# Installer
# --------------------------------------------------------------------------


@needs_apptainer
def test_installed_apptainer_is_found_and_reports_its_version():
    cp = subprocess.run([sys.executable, "-m", "hpcvirt.apptainer", "find"], capture_output=True, text=True,
                        env=dict(os.environ, PYTHONPATH=str(ROOT / "workflow/lib")), timeout=60)
    assert cp.returncode == 0, cp.stderr
    rec = json.loads(cp.stdout)
    out = subprocess.run([rec["exe"], "--version"], capture_output=True, text=True, timeout=60).stdout
    assert rec["version"] and rec["version"] in out, (rec, out)
    if rec["origin"] == "built from the pinned source":
        assert rec["version"] == sources.SOURCES["apptainer"].version
        assert (rec["source"]["file"], rec["source"]["sha256"], rec["source"]["copy"]) in \
            sources.SOURCES["apptainer"].files
        prefix = Path(rec["prefix"])
        assert not prefix.resolve().is_relative_to(ROOT.resolve())      # outside the clone: reused by clones
        assert prefix.name.endswith(rec["source"]["sha256"][:12])
        assert json.loads((prefix / apptainer.STAMP).read_text())["build_seconds"] > 0


@needs_apptainer
@pytest.mark.skipif(not MIRROR, reason=f"no source mirror ({sources.MIRROR_ENV} unset)")
def test_install_trusts_only_a_prefix_with_its_stamp(tmp_path, monkeypatch):
    """A prefix without the stamp (an interrupted or foreign install) is refused, never used; one with the
    stamp is reused without building."""
    monkeypatch.setenv(apptainer.OPT_ENV, str(tmp_path / "opt"))
    monkeypatch.setenv("HPCVIRT_WORKDIR", str(tmp_path / "work"))
    apptainer.find.cache_clear()
    try:
        half = apptainer.prefix()
        (half / "bin").mkdir(parents=True)
        with pytest.raises(apptainer.ApptainerError, match=f"{half} exists but has no {apptainer.STAMP}"):
            apptainer.install(mirror=MIRROR, force_build=True)
        (half / "bin" / "apptainer").write_text(f'#!/bin/sh\nexec {FOUND["exe"]} "$@"\n')
        (half / "bin" / "apptainer").chmod(0o755)
        (half / apptainer.STAMP).write_text(json.dumps(
            {"version": "1.4.5", "source": sources.fetch("apptainer", mirror=MIRROR), "go": "go", "build_seconds": 1}))
        rec = apptainer.install(mirror=MIRROR, force_build=True)
        assert rec["prefix"] == str(half) and rec["source"]["sha256"] == sources.SOURCES["apptainer"].files[0][1]
    finally:
        apptainer.find.cache_clear()


@pytest.mark.skipif(not MIRROR, reason=f"no source mirror ({sources.MIRROR_ENV} unset)")
def test_a_failed_build_leaves_no_prefix_and_clears_a_killed_one(tmp_path, monkeypatch):
    monkeypatch.setenv(apptainer.OPT_ENV, str(tmp_path / "opt"))
    monkeypatch.setenv("HPCVIRT_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setattr(apptainer, "GO_CANDIDATES", ("/nonexistent/go",))
    final = apptainer.prefix()
    final.parent.mkdir(parents=True)
    stale = final.parent / f".{final.name}.build.x1y2z3"         # a killed build's temporary tree
    (stale / "gopath").mkdir(parents=True)
    with pytest.raises(apptainer.ApptainerError, match="needs a Go toolchain"):
        apptainer.install(mirror=MIRROR, force_build=True)
    assert not stale.exists() and not final.exists()
    assert [p.name for p in final.parent.iterdir() if p.is_dir()] == []


def test_opt_root_must_be_a_plain_absolute_path(monkeypatch):
    for bad in ("relative/opt", "/opt/x y", "/opt/$(id)", "/opt/../etc"):
        monkeypatch.setenv(apptainer.OPT_ENV, bad)
        with pytest.raises(apptainer.ApptainerError, match=apptainer.OPT_ENV):
            apptainer.prefix()


# --------------------------------------------------------------------------
# The SIF of the offline root filesystem (rule build_offline_sif)
# --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sif(tmp_path_factory):
    if FOUND is None or not OFFLINE_IMAGE.is_file():
        pytest.skip(f"no Apptainer: {WHY}" if FOUND is None else f"offline image {OFFLINE_IMAGE} not built")
    out = tmp_path_factory.mktemp("sif") / "offline.sif"
    cp = subprocess.run([str(ROOT / "containers/offline/build-sif.sh"), str(OFFLINE_IMAGE), str(out)],
                        capture_output=True, text=True, timeout=600,
                        env=dict(os.environ, HPCVIRT_WORKDIR=str(out.parent)))
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert cp.stdout.strip().endswith(str(out))
    digest = cp.stdout.split()[0]
    assert (out.parent / "offline.sif.sha256").read_text().split()[0] == digest == stack.image_digest(out)
    return out


def test_userns_is_a_schema_choice():
    tb = yaml.safe_load((ROOT / "config/testbeds/local-apptainer.yaml").read_text())
    validate(tb, load_schema("testbed.schema.yaml"), "local-apptainer.yaml")
    tb["runtime"]["userns"] = "yes"
    with pytest.raises(ConfigError, match="userns"):
        validate(tb, load_schema("testbed.schema.yaml"), "local-apptainer.yaml")


@needs_image
def test_userns_probe_is_real_cached_and_recorded(sif, tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVIRT_WORKDIR", str(tmp_path))
    first = apptainer.userns_probe(FOUND["exe"], sif)
    assert first["cached"] is False and isinstance(first["userns"], bool) and first["reason"]
    # the decision holds: without --userns exec fails exactly when the probe said so
    plain = subprocess.run([FOUND["exe"], "exec", str(sif), "true"], capture_output=True, timeout=120)
    assert (plain.returncode != 0) == first["userns"], plain.stderr
    again = apptainer.userns_probe(FOUND["exe"], sif)
    assert again["cached"] is True and again["userns"] == first["userns"]
    saved = json.loads((tmp_path / apptainer.USERNS_CACHE).read_text())
    assert [r["reason"] for r in saved.values()] == [first["reason"]]
    # the prefix follows it, and the provenance of a run says which, why, and which Apptainer
    rt = {"kind": "apptainer", "image": str(sif)}
    assert ("--userns" in runtime.container_prefix(rt)) == first["userns"]
    prov = apptainer.provenance(rt)
    assert prov["userns"]["flag"] == first["userns"] and prov["userns"]["reason"] == first["reason"]
    assert prov["version"] == FOUND["version"]


# --------------------------------------------------------------------------
# Hybrid model: host mpirun, each rank in `apptainer exec`
# --------------------------------------------------------------------------


def _testbed(image: Path | str, mpis=("openmpi",), paths=("shm",)):
    cfg = study_for(["local-apptainer"])
    for name, exp in cfg["experiments"].items():
        if isinstance(exp, dict):
            exp["enabled"] = name == "pingpong"
    cfg["experiments"]["pingpong"].update(mpis=list(mpis), paths=list(paths))
    study, tbs = load_study(cfg, config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")
    tb = tbs["local-apptainer"]
    tb["runtime"] = dict(tb["runtime"], image=str(image))
    return study, tb


@needs_image
def test_two_rank_netpipe_through_apptainer_and_the_preflight(sif):
    """The testbed preflight as the workflow runs it: host vs image versions, then a 2-rank NetPIPE
    (Open MPI, shared memory) through the testbed's launcher and `apptainer exec`."""
    study, tb = _testbed(sif)
    rec = preflight.testbed_preflight(study, tb, timeout=180)
    assert rec["ok"] and rec["image_digest"] == stack.image_digest(sif)
    host, image = rec["stacks"]["openmpi"]["host"], rec["stacks"]["openmpi"]["container"]
    assert host == image and host["mpi_version"]
    (w,) = rec["wireup"]
    i = w["argv"].index(FOUND["exe"])
    assert w["argv"][i + 1:i + 3] == ["--quiet", "exec"] and w["argv"][0] == "mpirun" and str(sif) in w["argv"]
    assert w["max_bytes_reached"] == 64 and w["exit_code"] == 0
    assert rec["container_runtime"]["version"] == FOUND["version"]
    assert ("--userns" in w["argv"]) == rec["container_runtime"]["userns"]["flag"]


@needs_image
@pytest.mark.e2e
def test_preflight_rejects_an_image_with_another_open_mpi(other_openmpi_image):
    study, tb = _testbed(other_openmpi_image)
    host = stack.mpi_identity((), "openmpi")["version"]
    with pytest.raises(stack.PreflightError, match=rf"MPI mismatch: host {host} .* container 5\."):
        preflight.testbed_preflight(study, tb, timeout=180)


# --------------------------------------------------------------------------
# The tiny study through apptainer exec, beside the bare host and ch-run
# --------------------------------------------------------------------------


@pytest.mark.e2e
@needs_image
def test_tiny_study_through_apptainer(tmp_path):
    """The workflow builds the SIF from the offline image, runs the preflight, and measures the tiny
    study's one-host part through apptainer exec in the hybrid model; every row names its runtime
    and image; nothing is rejected (Apptainer's INFO lines stay out of the outputs)."""
    import pandas as pd
    from test_container_workflow import PROFILE, _seed_image, snakemake
    from test_workflow import APP_BENCHMARKS, fresh_copy, suites_only

    work = fresh_copy(tmp_path / "repo")
    _seed_image(work)                     # the SquashFS image; the SIF is built from it by the workflow
    # the pinned suites' builds of this tree (keyed caches: the copy builds none twice, and a build
    # made here serves the later tests too)
    (ROOT / ".hpcvirt/suites").mkdir(parents=True, exist_ok=True)
    (work / ".hpcvirt").mkdir(exist_ok=True)
    (work / ".hpcvirt/suites").symlink_to(ROOT / ".hpcvirt/suites")
    campaign = "tiny-apptainer"
    # the suites only: the applications in an image are what the Charliecloud test measures
    # (tests/test_container_workflow.py); the runtime's path is the same for every benchmark
    snakemake(*PROFILE, f"data/results/{campaign}/summary.csv", "--configfile", "config/tiny.yaml",
              "config/one-host.yaml", suites_only(work), "--config", "testbeds=[local-apptainer]",
              "skip_unoffered=True", f"campaign={campaign}", cwd=work, timeout=1500)
    sif = work / ".hpcvirt/images/offline.sif"
    digest = (work / ".hpcvirt/images/offline.sif.sha256").read_text().split()[0]
    assert sif.is_file() and digest == stack.image_digest(sif)
    pf = json.loads((work / f"data/raw/{campaign}/local-apptainer/preflight.json").read_text())
    assert pf["ok"] and pf["image_digest"] == digest
    res = work / "data/results" / campaign
    tidy = {tb: pd.read_csv(res / tb / "tidy.csv") for tb in ("local-apptainer",)}
    for tb, t in tidy.items():
        assert pd.read_csv(res / tb / "rejected.csv").empty, tb
        assert t[t["benchmark"] == "netpipe"].groupby(["mpi", "interconnect"]).ngroups == 4, tb
    app = tidy["local-apptainer"]
    assert app["virtualization"].str.endswith("+apptainer").all()
    assert set(app["image_digest"]) == {digest}
    assert {"netpipe", "qperf", "imb", "osu_latency", "npb-ep"} <= set(app["benchmark"])
    assert not set(APP_BENCHMARKS) & set(app["benchmark"])
    for p in sorted((work / f"data/raw/{campaign}/local-apptainer/netpipe").glob("*/rep-1.json")):
        argv = json.loads(p.read_text())["command"]["argv"]
        i = next(i for i, a in enumerate(argv) if a.endswith("apptainer"))
        assert argv[i + 1:i + 3] == ["--quiet", "exec"] and ".hpcvirt/images/offline.sif" in argv[i + 3:]


# --------------------------------------------------------------------------
# The site stacks' definition files, as far as Apptainer goes without a registry
# --------------------------------------------------------------------------

DEFS = sorted((ROOT / "containers").glob("*.def"))


def _registry_reachable() -> bool:
    import socket
    try:
        socket.getaddrinfo("index.docker.io", 443)
        return True
    except OSError:
        return False


def _build_def(exe: str, definition: Path, tmp_path: Path) -> str:
    """`apptainer build` of a definition file into a scratch SIF; returns its output.
    (--userns: root here lacks a capability the setuid-less starter asks for.)"""
    tmp_path.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, APPTAINER_CACHEDIR=str(tmp_path / "cache"), APPTAINER_TMPDIR=str(tmp_path))
    cp = subprocess.run([exe, "build", "--userns", str(tmp_path / "out.sif"), str(definition)],
                        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert cp.returncode != 0, "built without a registry?"
    assert not (tmp_path / "out.sif").exists()
    return cp.stdout + cp.stderr


@needs_apptainer
@pytest.mark.skipif(_registry_reachable(), reason="a registry is reachable here: build the .def files for real "
                                                  "(containers/README.md), a parse check says less")
@pytest.mark.parametrize("definition", DEFS, ids=[d.name for d in DEFS])
def test_each_def_parses_with_apptainer_and_stops_at_its_base_image(definition, tmp_path):
    """Apptainer's own parser accepts every stage of the file (a parse error
    stops the build before anything is fetched), and the build goes on to
    fetch the pinned base image, which needs the registry this machine has
    not.  A copy with a misspelt section is refused by the parser."""
    out = _build_def(FOUND["exe"], definition, tmp_path / "good")
    assert "while parsing definition" not in out, out
    assert "Fetching OCI image" in out and "index.docker.io" in out, out
    bad = tmp_path / definition.name
    text = definition.read_text()
    assert "\n%post\n" in text
    bad.write_text(text.replace("\n%post\n", "\n%postt\n", 1))
    out = _build_def(FOUND["exe"], bad, tmp_path / "bad")
    assert "while parsing definition" in out and "invalid section(s) specified: postt" in out, out
