"""The manifest of a tidy table (the raw outputs it was parsed from, with
their sha256) against the raw outputs on disk: a missing, changed or extra
raw output is named by path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hpcvirt import manifest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def table(tmp_path, monkeypatch):
    """A table of campaign c parsed from two raw outputs (copies of archived ones)."""
    monkeypatch.chdir(tmp_path)
    src = sorted((ROOT / "data/raw/local-20261126T144532Z/local/netpipe").glob("*/rep-[12].out"))[:2]
    raws = []
    for s in src:
        dst = Path("data/raw/c/local/netpipe", s.parent.name, s.name)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(s, dst)
        raws.append(str(dst))
    Path("data/results/c/local").mkdir(parents=True)
    manifest.write("data/results/c/local/manifest.json", raws)
    return raws


def test_a_table_parsed_from_the_raw_outputs_on_disk_passes(table):
    assert manifest.differences("data/results/c/local/manifest.json") == {"missing": [], "changed": [], "extra": []}
    manifest.check_campaign("c")


def test_missing_changed_and_extra_raw_outputs_are_named(table):
    os.chmod(table[0], 0o644)
    os.unlink(table[0])
    with open(table[1], "r+b") as fh:       # one byte
        fh.seek(10)
        b = fh.read(1)
        fh.seek(10)
        fh.write(bytes([b[0] ^ 1]))
    extra = Path(table[1]).with_name("rep-7.out")
    shutil.copy(table[1], extra)
    with pytest.raises(manifest.ManifestError) as exc:
        manifest.check_campaign("c")
    msg = str(exc.value)
    assert f"missing: {table[0]}" in msg and f"changed: {table[1]}" in msg and f"extra: {extra}" in msg
    assert "remove data/results/c/local" in msg
    # the campaign being measured: an output on disk that the study does not plan is not the table's business
    assert manifest.differences("data/results/c/local/manifest.json", planned=set(table))["extra"] == []


def test_every_committed_manifest_matches_the_raw_outputs():
    tables = sorted((ROOT / "data/results").glob("*/*/tidy.csv"))
    assert [t for t in tables if not t.with_name("manifest.json").is_file()] == []     # every table has one
    found = sorted({p.parent.parent.name for p in (ROOT / "data/results").glob("*/*/manifest.json")})
    assert "local-20261126T144532Z" in found
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for campaign in found:
            manifest.check_campaign(campaign)
    finally:
        os.chdir(cwd)
