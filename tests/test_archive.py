"""The committed archive is reproducible from its raw outputs: re-parsing
them with today's declarations gives exactly the archived tidy rows and
summary (as row sets), and every archived row satisfies the tidy schema."""

from __future__ import annotations

import math
import re
import os
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
import yaml

from hpcvirt.analysis import host_summary, parse_outputs, summarize_tidy
from hpcvirt.tidy import COLUMNS, UNITS

ROOT = Path(__file__).resolve().parents[1]
STUDY = yaml.safe_load((ROOT / "config/config.yaml").read_text())
CAMPAIGN = STUDY["campaign"]
RESULTS = ROOT / "data/results" / CAMPAIGN
TIDY_SCHEMA = yaml.safe_load((ROOT / "workflow/schemas/tidy.schema.yaml").read_text())


def _rows(df: pd.DataFrame, tmp: Path) -> set[str]:
    df.to_csv(tmp, index=False)
    return set(tmp.read_text().splitlines())


@pytest.fixture(scope="module")
def reparsed(tmp_path_factory):
    tidy = {}
    for tb in STUDY["testbeds"]:
        raws = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "data/raw" / CAMPAIGN / tb).rglob("rep-*.out")
                      if ".failed-" not in p.name)
        cwd = os.getcwd()
        os.chdir(ROOT)                    # raw paths in the rows are relative to the checkout
        try:
            tidy[tb], rejected = parse_outputs(raws)
        finally:
            os.chdir(cwd)
        assert rejected.empty, rejected.to_string()
    return tidy


def test_tidy_rows_are_reproduced(reparsed, tmp_path):
    for tb, df in reparsed.items():
        archived = pd.read_csv(RESULTS / tb / "tidy.csv")
        assert _rows(df, tmp_path / "new.csv") == _rows(archived, tmp_path / "old.csv"), tb


def test_summary_is_reproduced(reparsed, tmp_path):
    summary = summarize_tidy(pd.concat(list(reparsed.values()), ignore_index=True))
    archived = pd.read_csv(RESULTS / "summary.csv")
    assert _rows(summary, tmp_path / "new.csv") == _rows(archived, tmp_path / "old.csv")


def test_every_archived_provenance_is_reproduced_with_the_guests_it_booted():
    """Each testbed's provenance.json is what today's code makes of its runs' records; a testbed whose
    ranks ran in guests records the shape they were booted in (the paper's count of guests and vCPUs)."""
    import json

    for tb in STUDY["testbeds"]:
        records = sorted(str(p) for p in (ROOT / "data/raw" / CAMPAIGN / tb).rglob("rep-*.json")
                         if re.fullmatch(r"rep-[0-9]+\.json", p.name))
        made = json.loads(json.dumps(host_summary(records), default=str))
        assert made == json.loads((RESULTS / tb / "provenance.json").read_text()), tb
        bed = yaml.safe_load((ROOT / "config/testbeds" / f"{tb}.yaml").read_text())
        if "vm" in bed:
            assert made["guests"] == [{"count": bed["nodes"], "vcpus": bed["vm"]["vcpus"],
                                       "memory_mb": bed["vm"]["memory_mb"]}], tb
        else:
            assert "guests" not in made, tb


def test_every_committed_verdict_table_is_what_the_claims_engine_makes_today():
    """The verdicts of the study's other campaigns are read, not re-evaluated, by every paper build (rule
    verdicts): each committed table must be what today's claims and engine make of its campaign."""
    from hpcvirt import claims

    entries = claims.load(ROOT / "data/reference/claims.yaml", ROOT / "data/reference/claims.md")
    tables = sorted((ROOT / "data/results").glob("*/verdicts.csv"))
    assert {t.parent.name for t in tables} >= {CAMPAIGN} and len(tables) >= 10
    for table in tables:
        res = table.parent
        _, made = claims.evaluate_campaign(entries, sorted(res.glob("*/tidy.csv")),
                                           sorted(res.glob("*/provenance.json")), res.name)
        assert made.to_csv(index=False) == table.read_text(), f"{table}: rebuild it (rule verdicts)"


def test_tidy_schema_matches_the_code_and_the_archive():
    assert list(TIDY_SCHEMA["properties"]) == list(COLUMNS)
    assert set(TIDY_SCHEMA["properties"]["unit"]["enum"]) == set(UNITS)
    validator = jsonschema.Draft202012Validator(TIDY_SCHEMA)
    integer = [c for c, s in TIDY_SCHEMA["properties"].items() if "integer" in str(s.get("type"))]
    for tb in STUDY["testbeds"]:
        df = pd.read_csv(RESULTS / tb / "tidy.csv", keep_default_na=False, na_values=[""])
        for rec in df.to_dict("records"):
            row = {k: (None if isinstance(v, float) and math.isnan(v) else
                       int(v) if k in integer and isinstance(v, float) else v) for k, v in rec.items()}
            errors = [e.message for e in validator.iter_errors(row)]
            assert not errors, (tb, rec["run_id"], errors)


def test_every_committed_table_has_the_schema_columns():
    """A column added to the schema reaches every committed table (workflow/scripts/reparse-tables.py
    re-parses them and rewrites a table only if its old columns come out the same)."""
    tables = sorted((ROOT / "data/results").glob("*/*/tidy.csv"))
    assert len(tables) > 20
    for table in tables:
        with open(table) as fh:
            assert fh.readline().rstrip("\n").split(",") == list(COLUMNS), table
