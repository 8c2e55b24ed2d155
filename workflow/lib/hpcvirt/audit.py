"""The audit of the studies' claims, as data: ``data/reference/audit/<study>.yaml``.

For every claim of ``data/reference/claims.yaml`` (same ids, same order) one
entry says what it rests on and whether the project tests it fairly:

* ``seed``: a short verbatim ``quote`` of the study's text and ``where`` it is;
* ``statement``: ``faithful``, ``partly`` or ``misstated`` (with a note unless
  faithful): is the claim's statement what the study says?
* ``verdict_basis``: ``evaluated`` (the claim has checks) or ``not_testable``;
* for an evaluated claim, per check (``checks``, in order): ``quantity`` (``own``,
  ``weaker`` or ``different``: is it the claim's own quantity?), ``tool``
  (``study``, ``stand-in`` or ``other``: the study's own benchmark, a named
  stand-in, or another tool although the study's is in the campaign),
  ``stand_in`` (``consistent`` or ``inconsistent`` with ``reproduction.yaml``)
  and a ``note``;
* for a claim not testable: ``reason`` (``holds``, or ``contradicted`` by a
  testbed or experiment of the project, named in ``reason_note``);
* ``action``: what the audit asks for (``none``, ``fix-statement``,
  ``fix-check``, ``make-testable``, ``reword-reason``) and ``action_note``.

``python -m hpcvirt.audit [SEEDS_DIR]`` checks the files against the claims
and, given the directory of the studies' text extracts (``000_*.txt`` ...
``004_*.txt``, in the order of ``hpcvirt.claims.STUDIES``), that every quote
occurs in its study's text (whitespace collapsed); it prints what the audit
asks for, per action.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

from . import paths, yamlio
from .claims import STUDIES
from .claims import load as load_claims

STATEMENT = ("faithful", "partly", "misstated")
QUANTITY = ("own", "weaker", "different")
TOOL = ("study", "stand-in", "other")
STAND_IN = ("consistent", "inconsistent")
REASON = ("holds", "contradicted")
ACTIONS = ("none", "fix-statement", "fix-check", "make-testable", "reword-reason")
MAX_QUOTE = 240


class AuditError(ValueError):
    pass


def audit_dir() -> Path:
    return paths.root() / "data/reference/audit"


def load(directory: Path | None = None) -> dict[str, list[dict]]:
    """study -> its audit entries (the studies that have a file)."""
    directory = Path(directory or audit_dir())
    out = {}
    for study in STUDIES:
        f = directory / f"{study}.yaml"
        if f.exists():
            data = yamlio.load_file(f)
            if not isinstance(data, list):
                raise AuditError(f"{f}: a list of entries, one per claim")
            out[study] = data
    return out


def _one_of(errors: list, where: str, key: str, value, allowed) -> None:
    if value not in allowed:
        errors.append(f"{where}: {key} is {value!r}; allowed: {', '.join(allowed)}")


def validate(audit: dict[str, list[dict]], claims_path: Path | None = None) -> list[str]:
    """Every claim has one entry, in order, with allowed values and the notes they need."""
    claims = load_claims(claims_path or paths.root() / "data/reference/claims.yaml")
    errors: list[str] = []
    for study in STUDIES:
        want = [c for c in claims if c.study == study]
        entries = audit.get(study)
        where_file = f"data/reference/audit/{study}.yaml"
        if entries is None:
            errors.append(f"{where_file}: missing ({len(want)} claims unaudited)")
            continue
        ids = [e.get("id") if isinstance(e, dict) else None for e in entries]
        if ids != [c.id for c in want]:
            errors.append(f"{where_file}: ids {ids} are not the study's claims in order {[c.id for c in want]}")
            continue
        for c, e in zip(want, entries):
            w = f"{where_file}: {c.id}"
            seed = e.get("seed") or {}
            quote = seed.get("quote") if isinstance(seed, dict) else None
            if not isinstance(quote, str) or not quote.strip() or len(quote) > MAX_QUOTE:
                errors.append(f"{w}: seed.quote must be a verbatim snippet of at most {MAX_QUOTE} characters")
            if not (isinstance(seed, dict) and seed.get("where")):
                errors.append(f"{w}: seed.where is missing")
            _one_of(errors, w, "statement", e.get("statement"), STATEMENT)
            if e.get("statement") != "faithful" and not e.get("statement_note"):
                errors.append(f"{w}: statement_note is needed unless the statement is faithful")
            basis = "not_testable" if c.not_testable else "evaluated"
            if e.get("verdict_basis") != basis:
                errors.append(f"{w}: verdict_basis is {e.get('verdict_basis')!r}; claims.yaml makes it {basis!r}")
            if basis == "evaluated":
                checks = e.get("checks") or []
                if len(checks) != len(c.checks):
                    errors.append(f"{w}: {len(checks)} audited checks for the claim's {len(c.checks)}")
                for j, chk in enumerate(checks, 1):
                    _one_of(errors, f"{w} check {j}", "quantity", chk.get("quantity"), QUANTITY)
                    _one_of(errors, f"{w} check {j}", "tool", chk.get("tool"), TOOL)
                    _one_of(errors, f"{w} check {j}", "stand_in", chk.get("stand_in"), STAND_IN)
                    if not chk.get("note"):
                        errors.append(f"{w} check {j}: note is missing")
            else:
                _one_of(errors, w, "reason", e.get("reason"), REASON)
                if e.get("reason") == "contradicted" and not e.get("reason_note"):
                    errors.append(f"{w}: reason_note must name what contradicts the reason")
            _one_of(errors, w, "action", e.get("action"), ACTIONS)
            if e.get("action") != "none" and not e.get("action_note"):
                errors.append(f"{w}: action_note is needed for action {e.get('action')!r}")
    return errors


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def seed_texts(seeds: Path) -> dict[str, str]:
    """study -> its text extract (``NNN_*.txt``, NNN the study's index in STUDIES)."""
    out = {}
    for i, study in enumerate(STUDIES):
        found = sorted(Path(seeds).glob(f"{i:03d}_*.txt"))
        if len(found) != 1:
            raise AuditError(f"{seeds}: expected one {i:03d}_*.txt for {study}, found {len(found)}")
        out[study] = _collapse(found[0].read_text(encoding="utf-8", errors="replace"))
    return out


def missing_quotes(audit: dict[str, list[dict]], seeds: Path) -> list[str]:
    """Quotes that do not occur in their study's text (whitespace collapsed)."""
    texts = seed_texts(seeds)
    return [f"data/reference/audit/{study}.yaml: {e['id']}: quote not in the study's text: {e['seed']['quote']!r}"
            for study, entries in audit.items() for e in entries
            if _collapse(e["seed"]["quote"]) not in texts[study]]


def summary(audit: dict[str, list[dict]]) -> dict[str, Counter]:
    """Counts per aspect: statements, check quantities and tools, reasons, actions."""
    out = {k: Counter() for k in ("statement", "quantity", "tool", "stand_in", "reason", "action")}
    for entries in audit.values():
        for e in entries:
            out["statement"][e["statement"]] += 1
            out["action"][e["action"]] += 1
            if e["verdict_basis"] == "not_testable":
                out["reason"][e["reason"]] += 1
            for chk in e.get("checks") or []:
                for k in ("quantity", "tool", "stand_in"):
                    out[k][chk[k]] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    audit = load()
    errors = validate(audit)
    if argv and not errors:
        errors = missing_quotes(audit, Path(argv[0]))
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        return 1
    for aspect, counts in summary(audit).items():
        print(f"{aspect}: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    for study, entries in audit.items():
        for e in entries:
            if e["action"] != "none":
                print(f"{e['id']} {e['action']}: {e['action_note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
