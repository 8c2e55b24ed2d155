"""The artifact appendix generated from the campaign's provenance records
(hpcvirt.artifact)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from hpcvirt import artifact, claims
from hpcvirt.config import load_study

ROOT = Path(__file__).resolve().parents[1]
CAMPAIGN = load_study(config_path=ROOT / "config/config.yaml", testbed_dir=ROOT / "config/testbeds")[0]["campaign"]
RAW = ROOT / "data/raw"


@pytest.fixture(scope="module")
def tex():
    verdicts = pd.read_csv(ROOT / "data/results" / CAMPAIGN / "claims.csv")
    return artifact.artifact_tex(CAMPAIGN, RAW, verdicts)


def test_records_are_every_run_of_the_campaign():
    files = sorted((RAW / CAMPAIGN).glob("*/*/*/rep-*.json"))
    rec = artifact.records(RAW / CAMPAIGN)
    assert len(rec) == len(files) > 100
    own = sum((datetime.fromisoformat(json.loads(p.read_text())["finished_at"])
               - datetime.fromisoformat(json.loads(p.read_text())["started_at"])).total_seconds() for p in files)
    assert (rec["finished"] - rec["started"]).dt.total_seconds().sum() == pytest.approx(own)


def test_hardware_suites_and_phases_come_from_the_records(tex):
    tidy = pd.concat([pd.read_csv(p) for p in (ROOT / "data/results" / CAMPAIGN).glob("*/tidy.csv")])
    for tb in tidy["testbed"].unique():
        assert re.search(rf"\n{tb} & .* & \d+ \\\\", tex), tb
    for sha in tidy["source_sha256"].dropna().unique():
        assert f"\\texttt{{{sha[:16]}}}" in tex
    # per testbed and benchmark, the run count of the records
    rec = artifact.records(RAW / CAMPAIGN)
    for (tb, bench), g in rec.groupby(["testbed", "benchmark"]):
        assert re.search(rf"\n{tb} & {bench} & {len(g)}( \(\d+ failed\))? & \d+ & \d+ \\\\", tex), (tb, bench)
        assert f"\\item[{tb}, {bench}] \\texttt{{" in tex
    # the sum of the phases (with overhead), and the span only as the reason they differ
    rows = re.findall(r"\n[\w-]+ & [\w-]+ & \d+(?: \(\d+ failed\))? & \d+ & (\d+) \\\\", tex)
    total = float(re.search(r"In all, (\d+) minutes of runs with their overhead", tex).group(1))
    assert sum(map(int, rows)) / 60 == pytest.approx(total, abs=0.5 + len(rows) / 120)
    span = (rec["finished"].max() - rec["started"].min()).total_seconds() / 60
    assert (f"the records span {span / 60:.0f} hours" in tex) == (span > 1.5 * total)
    # a run killed at its time limit (a hung NetPIPE) is counted, as failed; and only then
    for (tb, bench), g in rec.groupby(["testbed", "benchmark"]):
        failed = len(list((RAW / CAMPAIGN / tb / bench).glob("*/rep-*.failed-*.out")))
        assert bool(re.search(rf"\n{tb} & {bench} & \d+ \({failed} failed\)", tex)) == (failed > 0), (tb, bench)


def test_every_claim_says_where_it_is_checked(tex):
    for c in claims.load(ROOT / "data/reference/claims.yaml"):
        assert re.search(rf"\n{c.id} & [a-z ]+ & Table~\\ref\{{tab:claims-{c.study}\}}", tex), c.id


def test_no_records_is_an_error_naming_the_directory(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path}: no provenance records"):
        artifact.records(tmp_path)


def test_the_appendix_names_the_commits_that_measured_from_the_records_only():
    """Each run's record names its commit and whether the tree was modified: the appendix says which commits
    measured how many runs on which days, from the records alone (the same text in a clone and a bundle)."""
    day = datetime(2026, 11, 27, 10)
    rec = pd.DataFrame({"commit": ["a" * 40, "a" * 40, "f" * 40], "dirty": [False, False, True],
                        "started": [day, day, datetime(2026, 11, 29, 8)]})
    assert artifact.code_versions(rec) == (
        "The runs were measured by commit \\texttt{aaaaaaaa} (2 runs, 27 Nov 2026); and by a modified working tree "
        "of commit \\texttt{ffffffff} (1 run, 29 Nov 2026), as each run's record gives it.")
