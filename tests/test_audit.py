"""The audit of the studies' claims (data/reference/audit/): complete, well-formed, and quoting the studies."""

import copy
import os
from pathlib import Path

import pytest

from hpcvirt import audit

ROOT = Path(__file__).resolve().parents[1]
# the studies' text extracts (not part of the repository; .ci/run sets it where the machine has them)
SEEDS = Path(os.environ.get("HPCVIRT_SEEDS") or "/nonexistent")


def test_every_claim_is_audited_with_allowed_values():
    entries = audit.load()
    assert set(entries) == set(audit.STUDIES)
    assert audit.validate(entries) == []
    n = sum(len(v) for v in entries.values())
    assert n == 64


@pytest.mark.parametrize("spoil, message", [
    (lambda a: a["nanos2010"].pop(), "are not the study's claims in order"),
    (lambda a: a["atif2016"][0].update(statement="roughly"), "statement is 'roughly'; allowed: faithful, partly"),
    (lambda a: a["exposito2012"][0].update(statement="misstated", statement_note=""), "statement_note is needed"),
    (lambda a: a["richter2015"][0].update(action="fix-check", action_note=""), "action_note is needed"),
    (lambda a: a["exposito2012"][0]["seed"].update(quote="x" * 300), "seed.quote must be a verbatim snippet"),
    (lambda a: a["ramakrishnan2011"][0].update(verdict_basis="not_testable"), "claims.yaml makes it"),
])
def test_a_spoiled_audit_is_refused_naming_file_and_claim(spoil, message):
    entries = copy.deepcopy(audit.load())
    spoil(entries)
    errors = audit.validate(entries)
    assert any(message in e and e.startswith("data/reference/audit/") for e in errors), errors


@pytest.mark.skipif(not SEEDS.is_dir(), reason="HPCVIRT_SEEDS does not name the studies' text extracts")
def test_every_quote_occurs_in_its_study():
    entries = audit.load()
    assert audit.missing_quotes(entries, SEEDS) == []
    spoiled = copy.deepcopy(entries)
    spoiled["exposito2012"][0]["seed"]["quote"] = "a sentence no study wrote"
    assert len(audit.missing_quotes(spoiled, SEEDS)) == 1
