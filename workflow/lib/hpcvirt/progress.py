"""Progress a person can follow: how many measurements of a campaign are
done, and how long the missing ones took in the archived campaign.

The estimate comes from the archived campaign's provenance: every raw output
has a JSON record with ``started_at`` and ``finished_at``.  The *slot* of a
run is the time from its start to the start of the next run of the campaign
(whatever the testbed), so it includes the job overhead and the guests' boot
before a VM round; a gap far longer than the run itself (the campaign was
paused or extended later) counts as the run's own duration only.  A missing
measurement is estimated by the slot of the same configuration and round in
the archive, else by the median slot of its testbed and benchmark, else of
its testbed.  The archive was measured on another machine: the estimate says
which CPU it was measured on.

Slots are cached per archived campaign in ``.hpcvirt/progress/<campaign>.json``
(an archive is immutable).
"""

from __future__ import annotations

import json
import statistics
import sys
from datetime import datetime
from pathlib import Path

from . import paths
from .atomic import write_json
from .config import archived_campaign
from .matrix import RAW_ROOT, all_raw_paths

# A gap longer than this beyond the run's own duration is a pause, not overhead.
PAUSE_S = 600


def _key(raw_path: str, campaign: str) -> str:
    """``<testbed>/<benchmark>/<params>/rep-N`` of a raw path of ``campaign``."""
    rel = str(raw_path).split(f"{RAW_ROOT}/{campaign}/", 1)[-1]
    return rel.rsplit(".", 1)[0]


def archive_slots(campaign: str, raw_root: str | Path = RAW_ROOT) -> dict:
    """{"cpu": model, "slots": {key: seconds}} of an archived campaign (cached)."""
    root = paths.resolve(raw_root) / campaign
    records = sorted(p for p in root.glob("*/*/*/rep-*.json") if ".failed-" not in p.name)
    cache = paths.workdir() / "progress" / f"{campaign}.json"
    try:
        cached = json.loads(cache.read_text())
        if cached.get("records") == len(records):
            return cached
    except (OSError, ValueError):
        pass
    runs, cpu = [], None
    for p in records:
        try:
            rec = json.loads(p.read_text())
            start, end = (datetime.fromisoformat(rec[k]) for k in ("started_at", "finished_at"))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if cpu is None and (host_cpu := (rec.get("host") or {}).get("cpu")):
            cpu = f"{host_cpu.get('model')}, {host_cpu.get('lscpu', {}).get('CPU(s)', '?')} CPUs"
        runs.append((start, end, str(p.relative_to(root).with_suffix(""))))
    runs.sort()
    slots = {}
    for i, (start, end, key) in enumerate(runs):
        own = (end - start).total_seconds()
        gap = (runs[i + 1][0] - start).total_seconds() if i + 1 < len(runs) else own
        slots[key] = round(gap if gap <= own + PAUSE_S else own, 3)
    out = {"campaign": campaign, "cpu": cpu, "records": len(records), "slots": slots}
    if slots:
        write_json(cache, out)
    return out


def estimate(keys: list[str], slots: dict[str, float]) -> tuple[float, int]:
    """(seconds, how many keys had no estimate at all)."""
    by_bench: dict[str, list[float]] = {}
    by_testbed: dict[str, list[float]] = {}
    for key, s in slots.items():
        testbed, bench = key.split("/")[:2]
        by_bench.setdefault(f"{testbed}/{bench}", []).append(s)
        by_testbed.setdefault(testbed, []).append(s)
    total, unknown = 0.0, 0
    for key in keys:
        testbed, bench = key.split("/")[:2]
        if key in slots:
            total += slots[key]
        elif f"{testbed}/{bench}" in by_bench:
            total += statistics.median(by_bench[f"{testbed}/{bench}"])
        elif testbed in by_testbed:
            total += statistics.median(by_testbed[testbed])
        else:
            unknown += 1
    return total, unknown


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def status(study: dict, archive: str | None) -> str | None:
    """One line: measurements done of the campaign, and the expected time of
    the rest from the archived campaign ``archive``; None when all are done."""
    raw = all_raw_paths(study)
    missing = [p for p in raw if not paths.resolve(p).exists()]
    if not missing:
        return None
    line = f"{len(raw) - len(missing)} of {len(raw)} measurements of campaign {study['campaign']} done"
    if not archive or archive == study["campaign"]:
        return line
    arch = archive_slots(archive)
    if not arch["slots"]:
        return line
    seconds, unknown = estimate([_key(p, study["campaign"]) for p in missing], arch["slots"])
    line += (f"; the other {len(missing)}: about {_minutes(seconds)} to go, by the times of the archived campaign "
             f"{archive} ({arch['cpu'] or 'unknown CPU'})")
    if unknown:
        line += f", {unknown} of them on testbeds it did not measure (not counted)"
    return line


def report(study: dict, file=None) -> None:
    """Print the status line for the person at the terminal (default stdout)."""
    line = status(study, archived_campaign())
    if line:
        print(f"hpcvirt: {line}", file=file or sys.stdout, flush=True)
