#!/usr/bin/env python3
"""Re-parse the committed tidy tables from their raw outputs when the tidy
schema gains a column, and rewrite a table only if every column it already
had comes out the same.

A table's raw outputs are those of its manifest (``manifest.json``, the
outputs it was parsed from, hpcvirt.manifest), or for a table written
before manifests existed, the outputs its rows and its ``rejected.csv``
name.  Re-parsing them with today's declarations must give the archived
rows again, column for column, as row sets; the table is then rewritten
(atomically) with the new columns.  A table whose old columns would change
is left as it is and named, and the script exits 1: a schema migration
never changes a measured value.  Raw outputs are only read.

    python workflow/scripts/reparse-tables.py [--check] [data/results]

Each campaign's ``summary.csv`` is then summarized again from its tables
and rewritten the same way, when the new columns are ones it groups by.

``--check`` rewrites nothing and exits 1 if a table or a summary lacks a
column.  ``--verify`` rewrites nothing and re-parses every table, current or
not: it exits 1 if a table's rows or its rejected outputs would change (run
it after any parser change: a stricter parser must not drop an archived
measurement it accepted before).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the library instead of this script's directory, whose numbers.py would shadow the standard module
sys.path[0] = str(ROOT / "workflow/lib")

import pandas as pd  # noqa: E402

from hpcvirt.analysis import parse_outputs, summarize_tidy  # noqa: E402
from hpcvirt.atomic import write_csv  # noqa: E402
from hpcvirt.tidy import COLUMNS  # noqa: E402


def raw_outputs(table: Path, old: pd.DataFrame) -> list[str]:
    manifest = table.with_name("manifest.json")
    if manifest.is_file():
        return sorted(json.loads(manifest.read_text())["raw_outputs"])
    named = set(old["raw_path"].dropna())
    rejected = table.with_name("rejected.csv")
    if rejected.is_file() and rejected.stat().st_size:
        named |= set(pd.read_csv(rejected)["raw_path"].dropna())
    return sorted(named)


def as_csv(df: pd.DataFrame) -> pd.DataFrame:
    """The table as its CSV reads back (pandas writes 8.0, True, empty): compared through one round trip in
    memory."""
    return pd.read_csv(io.StringIO(df.to_csv(index=False)), dtype=str, keep_default_na=False)


def as_rows(df: pd.DataFrame, columns: list[str]) -> set[tuple]:
    return set(df[columns].itertuples(index=False, name=None))


def migrate(table: Path, check: bool) -> str:
    old = pd.read_csv(table, dtype=str, keep_default_na=False)
    if list(old.columns) == list(COLUMNS):
        return "current"
    if check:
        return "stale"
    new, _rejected = parse_outputs(raw_outputs(table, old))
    kept = [c for c in old.columns if c in COLUMNS]
    again = as_csv(new)
    if len(again) != len(old) or as_rows(again, kept) != as_rows(old, kept):
        return "differs"
    # the rows in the table's own order (a parse follows its input's order), so that a diff shows the new column
    where = {row: i for i, row in enumerate(old[kept].itertuples(index=False, name=None))}
    order = [where[row] for row in again[kept].itertuples(index=False, name=None)]
    if len(set(order)) == len(order):
        new = new.iloc[sorted(range(len(order)), key=order.__getitem__)]
    write_csv(table, new)
    return "rewritten"


def verify(table: Path) -> str:
    """``same`` when today's parsers give the table's rows and its rejected outputs again, else what differs."""
    old = pd.read_csv(table, dtype=str, keep_default_na=False)
    new, rejected = parse_outputs(raw_outputs(table, old))
    again = as_csv(new)
    kept = [c for c in old.columns if c in again.columns]
    before = table.with_name("rejected.csv")
    was = set(pd.read_csv(before)["raw_path"]) if before.is_file() and before.stat().st_size else set()
    now = set(rejected["raw_path"]) if not rejected.empty else set()
    if len(again) != len(old) or as_rows(again, kept) != as_rows(old, kept):
        return f"differs   {len(old)} rows, now {len(again)}"
    if was != now:
        return (f"differs   rejected now: {', '.join(sorted(now - was)) or 'none'}; "
                f"accepted now: {', '.join(sorted(was - now)) or 'none'}")
    return "same"


def migrate_summary(summary: Path, check: bool) -> str:
    """A campaign's summary.csv, summarized again from its (migrated) tidy tables when the schema gained a
    column it groups by; rewritten only if every column it had comes out the same."""
    old = pd.read_csv(summary, dtype=str, keep_default_na=False)
    new = summarize_tidy(pd.concat([pd.read_csv(t) for t in sorted(summary.parent.glob("*/tidy.csv"))],
                                   ignore_index=True))
    if list(old.columns) == list(new.columns):
        return "current"
    if check:
        return "stale"
    kept = [c for c in old.columns if c in new.columns]
    again = as_csv(new)
    if len(again) != len(old) or as_rows(again, kept) != as_rows(old, kept):
        return "differs"
    write_csv(summary, new)
    return "rewritten"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--verify", action="store_true", help="re-parse every table; rewrite nothing")
    ap.add_argument("root", nargs="?", default="data/results")
    args = ap.parse_args()
    os.chdir(ROOT)                     # raw paths in the rows are relative to the checkout
    bad = 0
    if args.verify:
        for table in sorted(Path(args.root).glob("*/*/tidy.csv")):
            status = verify(table)
            print(f"{status:9} {table}")
            bad += status != "same"
        return 1 if bad else 0
    for table in sorted(Path(args.root).glob("*/*/tidy.csv")):
        status = migrate(table, args.check)
        print(f"{status:9} {table}")
        bad += status in ("stale", "differs")
    for summary in sorted(Path(args.root).glob("*/summary.csv")):
        status = migrate_summary(summary, args.check)
        print(f"{status:9} {summary}")
        bad += status in ("stale", "differs")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
