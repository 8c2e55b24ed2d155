"""The raw outputs a tidy table was parsed from, with their checksums.

The parse writes ``data/results/<campaign>/<testbed>/manifest.json`` beside
the tidy table: every raw output it read (``rep-<n>.out``) and its sha256.
Before any job, the workflow compares the manifests of the campaigns it
uses with the raw outputs on disk (:func:`check_campaign`): a raw output
the table was parsed from that is missing or changed, or one on disk the
table was not parsed from, means the table no longer says what the raw
outputs say, and the run stops naming each path (rather than draw figures
from a table that keeps a deleted file's rows, or that lacks a new one's).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .atomic import write_json
from .paths import RAW_ROOT
from .sources import sha256_of

RESULTS_ROOT = "data/results"
NAME = "manifest.json"
_REP = re.compile(r"rep-[0-9]+\.out")


class ManifestError(ValueError):
    """Raw outputs that differ from those their tables were parsed from."""


def write(path: str | Path, raw_paths: list[str]) -> None:
    """The manifest of a table parsed from ``raw_paths``."""
    write_json(path, {"raw_outputs": {str(p): sha256_of(p) for p in sorted(map(str, raw_paths))}})


def on_disk(campaign: str, testbed: str) -> list[str]:
    """The raw outputs of a campaign's testbed (finished runs: ``rep-<n>.out``)."""
    return sorted(str(p) for p in Path(RAW_ROOT, campaign, testbed).glob("*/*/rep-*.out") if _REP.fullmatch(p.name))


def differences(manifest: str | Path, planned: set[str] | None = None) -> dict[str, list[str]]:
    """Missing, changed and extra raw outputs of one table's manifest.  Extra
    are those on disk that the table was not parsed from; with ``planned``
    (the raw outputs the study plans for the campaign it measures), only
    those of them that the study plans (a smaller study leaves others out)."""
    manifest = Path(manifest)
    recorded = json.loads(manifest.read_text())["raw_outputs"]
    campaign, testbed = manifest.parent.parent.name, manifest.parent.name
    disk = set(on_disk(campaign, testbed))
    return {
        "missing": sorted(p for p in recorded if not Path(p).is_file()),
        "changed": sorted(p for p in recorded if Path(p).is_file() and sha256_of(p) != recorded[p]),
        "extra": sorted((disk if planned is None else disk & planned) - set(recorded)),
    }


def check_campaign(campaign: str, planned: set[str] | None = None) -> None:
    """Raise :class:`ManifestError` if a table of ``campaign`` was parsed from
    other raw outputs than those on disk (:func:`differences`), naming each
    (up to 10 per kind).  A table without a manifest is not checked."""
    lines, tables = [], []
    for manifest in sorted(Path(RESULTS_ROOT, campaign).glob(f"*/{NAME}")):
        try:
            diff = differences(manifest, planned)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ManifestError(f"{manifest}: unreadable manifest of its table: {exc}") from None
        if any(diff.values()):
            tables.append(str(manifest.parent))
        for kind, found in diff.items():
            lines += [f"{kind}: {p}" for p in found[:10]]
            if len(found) > 10:
                lines.append(f"{kind}: ... and {len(found) - 10} more of {manifest.parent}")
    if lines:
        raise ManifestError(
            f"the raw outputs of campaign {campaign!r} are not those its tables in {RESULTS_ROOT}/{campaign}/ were "
            "parsed from (their manifest.json):\n    " + "\n    ".join(lines)
            + f"\n  Restore the raw outputs (git checkout -- {RAW_ROOT}/{campaign}), or rebuild the tables from "
            f"the raw outputs as they are: remove {' '.join(tables)} (the next run parses them again, and measures "
            "again a missing measurement of the campaign it measures).")
