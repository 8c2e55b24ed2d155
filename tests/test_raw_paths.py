"""Raw outputs stay in their campaign's directory: a raw directory or file
that is a symlink (which would put measurements outside the archive, or
pass a planted file off as a finished measurement) is refused with its
path, before anything is written or parsed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from hpcvirt import matrix, paths
from hpcvirt.analysis import parse_outputs
from hpcvirt.config import load_study
from hpcvirt.measure import MeasurementError, record_testbed, run_measurement
from studies import study_for

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = "local-20261126T144532Z"


@pytest.fixture
def measured_once(tmp_path, monkeypatch):
    """A copy of one archived raw output and its record, at its path under this test's data/raw/c/."""
    src = sorted((ROOT / "data/raw" / ARCHIVE / "local" / "netpipe").rglob("rep-1.out"))[0]
    rel = Path("data/raw/c") / src.relative_to(ROOT / "data/raw" / ARCHIVE)
    (tmp_path / rel).parent.mkdir(parents=True)
    for ext in (".out", ".json"):
        shutil.copy(src.with_suffix(ext), (tmp_path / rel).with_suffix(ext))
    monkeypatch.chdir(tmp_path)
    return rel


def test_a_raw_output_in_its_campaign_is_accepted(measured_once):
    assert paths.raw_output(measured_once) == measured_once
    assert paths.raw_output(Path.cwd() / measured_once) == measured_once
    paths.check_raw_tree("c")
    tidy, rejected = parse_outputs([str(measured_once)])
    assert len(tidy) and rejected.empty


@pytest.mark.parametrize("path,needle", [
    ("elsewhere/rep-1.out", "must be under data/raw/<campaign>/"),
    ("data/raw/c/../d/local/x/rep-1.out", "must be under data/raw/<campaign>/"),
    ("data/raw/c", "must be under data/raw/<campaign>/"),
    ("/tmp/rep-1.out", "must be under"),
])
def test_a_raw_output_outside_a_campaign_is_refused(path, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(paths.RawPathError, match=needle):
        paths.raw_output(path)


def _link_dir(rel: Path, target: Path) -> None:
    """Move the directory ``rel`` to ``target`` and leave a symlink to it."""
    shutil.move(rel, target)
    rel.symlink_to(target)


@pytest.mark.parametrize("level", [2, 3, 4, 5])   # the testbed, benchmark, params directory; the file itself
def test_a_symlink_on_the_way_is_refused_by_the_parse(measured_once, tmp_path, level):
    link = Path(*measured_once.parts[:level + 1])
    if link == measured_once:
        target = tmp_path / "planted.out"
        shutil.move(link, target)
        link.symlink_to(target)
    else:
        _link_dir(link, tmp_path / f"outside-{level}")
    with pytest.raises(paths.RawPathError) as exc:
        parse_outputs([str(measured_once)])
    assert f"{link}: a symlink (to {tmp_path}" in str(exc.value)
    with pytest.raises(paths.RawPathError, match=f"{link}: a symlink"):
        paths.check_raw_tree("c")


def test_a_symlinked_campaign_is_refused(measured_once, tmp_path):
    _link_dir(Path("data/raw/c"), tmp_path / "elsewhere")
    with pytest.raises(paths.RawPathError, match="data/raw/c: a symlink"):
        paths.check_raw_tree("c")
    with pytest.raises(paths.RawPathError, match="data/raw/c: a symlink"):
        paths.raw_output(measured_once)


def test_a_measurement_is_not_written_through_a_symlink(tmp_path, monkeypatch):
    study, testbeds = load_study(
        study_for(["local"], pingpong={"mpis": ["openmpi"], "paths": ["shm"], "min_bytes": 1, "max_bytes": 64}),
        testbed_dir=ROOT / "config/testbeds")
    monkeypatch.chdir(tmp_path)
    study = dict(study, campaign="c")
    c = next(c for c in matrix.configurations(study) if c.benchmark == "netpipe")
    raw, prov = matrix.raw_path("c", c, 1), matrix.raw_path("c", c, 1, "json")
    outside = tmp_path / "outside"
    outside.mkdir()
    Path("data/raw/c").mkdir(parents=True)
    Path("data/raw/c/local").symlink_to(outside)
    with pytest.raises(MeasurementError, match="data/raw/c/local: a symlink"):
        run_measurement(study, testbeds["local"], c, 1, raw, prov)
    with pytest.raises(paths.RawPathError, match="data/raw/c/local: a symlink"):
        record_testbed("c", testbeds["local"])
    assert list(outside.iterdir()) == []            # nothing written
    assert sorted(os.listdir("data/raw/c")) == ["local"]


def _local_netpipe(tmp_path, monkeypatch, campaign: str):
    study, testbeds = load_study(
        study_for(["local"], pingpong={"mpis": ["openmpi"], "paths": ["shm"], "min_bytes": 1, "max_bytes": 64}),
        testbed_dir=ROOT / "config/testbeds")
    (tmp_path / "workflow").symlink_to(ROOT / "workflow")      # the launch runs workflow/scripts/ from here
    monkeypatch.chdir(tmp_path)
    study = dict(study, campaign=campaign)
    c = next(c for c in matrix.configurations(study) if c.benchmark == "netpipe")
    return study, testbeds["local"], c


@pytest.mark.e2e                # real NetPIPE runs: with the machine to itself
def test_a_campaign_is_extended_only_on_the_host_that_measured_it(tmp_path, monkeypatch):
    """Rep 1 measured here; its record then says another host id (what a copy of the archive on another
    machine has): rep 2 is refused before it runs, unless the study asks for it explicitly."""
    from hpcvirt.measure import recorded_host

    study, tb, c = _local_netpipe(tmp_path, monkeypatch, "hosts")
    raw1, prov1 = matrix.raw_path("hosts", c, 1), matrix.raw_path("hosts", c, 1, "json")
    run_measurement(study, tb, c, 1, raw1, prov1)
    here = recorded_host("hosts")[0]
    assert here["hostname"] and (here["host_id"] or here["cpu"])
    raw2, prov2 = matrix.raw_path("hosts", c, 2), matrix.raw_path("hosts", c, 2, "json")
    run_measurement(study, tb, c, 2, raw2, prov2)                  # the same host: accepted
    for raw in (raw2, prov2):
        os.chmod(raw, 0o644)
        os.unlink(raw)
    rec = json.loads(Path(prov1).read_text())
    rec["host"]["host_id"] = "0123456789abcdef"
    os.chmod(prov1, 0o644)
    Path(prov1).write_text(json.dumps(rec))
    with pytest.raises(MeasurementError) as exc:
        run_measurement(study, tb, c, 2, raw2, prov2)
    assert "campaign 'hosts' was measured on host" in str(exc.value) and "0123456789abcdef" in str(exc.value)
    assert "extend_on_other_host=True" in str(exc.value) and prov1 in str(exc.value)
    assert sorted(p.name for p in Path(raw2).parent.iterdir()) == ["rep-1.json", "rep-1.out"]   # nothing written
    run_measurement(dict(study, extend_on_other_host=True), tb, c, 2, raw2, prov2)
    assert Path(raw2).exists()
    # the rows say which host measured each
    tidy, rejected = parse_outputs([raw1, raw2])
    assert rejected.empty
    assert dict(tidy.groupby("rep")["host"].unique().map(list)) == {1: ["0123456789abcdef"], 2: [here["host_id"] or here["hostname"]]}
    # records without a host id (the archive's): name and CPU model tell the hosts apart
    del rec["host"]["host_id"]
    rec["host"]["hostname"] = "elsewhere"
    Path(prov1).write_text(json.dumps(rec))
    assert recorded_host("hosts")[0]["hostname"] == "elsewhere"
    with pytest.raises(MeasurementError, match="'hostname': 'elsewhere'"):
        run_measurement(study, tb, c, 3, matrix.raw_path("hosts", c, 3), matrix.raw_path("hosts", c, 3, "json"))


def test_hosts_that_share_a_machine_id_are_told_apart_by_their_cores_and_caches():
    """Machines cloned from one image share /etc/machine-id: the archive and a later campaign here
    recorded the same host id on processors with other caches; the topology tells them apart (its memory
    size does not: a guest's memory may be resized)."""
    from hpcvirt.measure import host_identity, same_host

    def host(l2, memory=17140240384, host_id="0035969ec53f6e7f"):
        return host_identity({"host_id": host_id, "hostname": "vm", "cpu": {"model": "AMD EPYC", "hwloc_synthetic": (
            f"Package:1 [NUMANode(memory={memory})] L3Cache:1(size=33554432) L2Cache:2(size={l2}) "
            "L1dCache:1(size=32768) L1iCache:1(size=32768) Core:1 PU:1")}})

    assert same_host(host(524288), host(524288, memory=22508949504))
    assert not same_host(host(524288), host(1048576))
    assert not same_host(host(524288), host(524288, host_id="0123456789abcdef"))
    # records without a topology: the host id alone, as before
    assert same_host(dict(host(524288), topology=None), host(1048576))
