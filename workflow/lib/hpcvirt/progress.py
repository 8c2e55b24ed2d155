"""Progress a person can follow: how many measurements of a campaign are
done, and how long the missing ones took in the archived campaign.

The estimate comes from the archived campaign's provenance: every raw output
has a JSON record with ``started_at`` and ``finished_at``.  The *slot* of a
run is its own duration, plus the median gap before a run of its testbed
(the job overhead), plus, on a qemu testbed, its share of the median boot of
a round (the gap before a run that does not follow a run of the same round;
the guests boot once per round).  Medians, because an archive extended in
pieces has pauses between its runs, and the time of a run that failed and
was measured again sits in a gap too: the slots of a campaign measured in
one piece add up to about its wall time, those of one extended later do not
count its pauses.  A missing
measurement is estimated by the slot of the same configuration and round in
the archive, else by the median slot of its testbed and benchmark, else of
its testbed.  The archive was measured on another machine (hosts of one
kind differ up to 2-3 times in speed): once this campaign has run enough of
the archive's configurations (:data:`CALIBRATE_AFTER_S` of the archive's
time), the estimate is scaled by how long they took here, their slots
computed the same way, against the archive's, and the line says both.

Slots are cached per archived campaign in ``.hpcvirt/progress/<campaign>.json``
(an archive is immutable).

``python -m hpcvirt.progress share CAMPAIGN BENCHMARK...`` says what some
benchmarks (or ``<testbed>/<benchmark>`` patterns) added to the wall time of
the campaign's ``make``: the time from
the end of the run before each of their runs to its end (job overhead
included).  The gap before the first run of each testbed and repetition
is replaced by the testbed's median gap between runs: before a VM round's
first run it holds the guests' boot, which happens once per round whatever
runs in it.  The builds of the suites come before the campaign and are not in its
records: add them from the build log.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import statistics
import sys
from datetime import datetime
from pathlib import Path

from . import paths
from .atomic import write_json
from .config import archived_campaign
from .kinds import KINDS
from .matrix import RAW_ROOT, all_raw_paths

#: How slots are computed (a cache made another way is made again).
SLOT_METHOD = "run+median-overhead+boot-share"

# A gap longer than this beyond the run's own duration is a pause, not overhead.
PAUSE_S = 600


def _key(raw_path: str, campaign: str) -> str:
    """``<testbed>/<benchmark>/<params>/rep-N`` of a raw path of ``campaign``."""
    rel = str(raw_path).split(f"{RAW_ROOT}/{campaign}/", 1)[-1]
    return rel.rsplit(".", 1)[0]


#: The archive's seconds of the configurations this campaign has run before its own pace scales the estimate.
CALIBRATE_AFTER_S = 120.0


def archive_slots(campaign: str, raw_root: str | Path = RAW_ROOT) -> dict:
    """{"cpu": model, "slots": {key: seconds}} of an archived campaign (cached)."""
    root = paths.resolve(raw_root) / campaign
    records = sorted(p for p in root.glob("*/*/*/rep-*.json") if ".failed-" not in p.name)
    cache = paths.workdir() / "progress" / f"{campaign}.json"
    try:
        cached = json.loads(cache.read_text())
        if cached.get("records") == len(records) and cached.get("method") == SLOT_METHOD:
            return cached
    except (OSError, ValueError):
        pass
    out = campaign_slots(campaign, records, root)
    if out["slots"]:
        write_json(cache, out)
    return out


def campaign_slots(campaign: str, records: list[Path], root: Path) -> dict:
    """{"cpu": model, "slots": {key: seconds}} of the runs whose records are ``records`` (not cached)."""
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
    slots = _slots(runs, {tb.parent.name for tb in root.glob("*/testbed.json") if _boots_per_round(tb)})
    return {"campaign": campaign, "cpu": cpu, "records": len(records), "method": SLOT_METHOD, "slots": slots}


def pace(campaign: str, archive: dict, raw_root: str | Path = RAW_ROOT) -> float | None:
    """How much longer this campaign's runs took than the same configurations and rounds in the archive
    (their slots' sums), once the archive's time for them reaches :data:`CALIBRATE_AFTER_S`; else None."""
    root = paths.resolve(raw_root) / campaign
    records = sorted(p for p in root.glob("*/*/*/rep-*.json") if ".failed-" not in p.name)
    here = campaign_slots(campaign, records, root)["slots"]
    both = [k for k in here if k in archive["slots"]]
    there = sum(archive["slots"][k] for k in both)
    if there < CALIBRATE_AFTER_S:
        return None
    return sum(here[k] for k in both) / there


def _boots_per_round(testbed_json: Path) -> bool:
    try:
        return KINDS[json.loads(testbed_json.read_text())["testbed"]["kind"]].boots_per_round
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _slots(runs: list[tuple[datetime, datetime, str]], rounds: set[str]) -> dict[str, float]:
    """Slot of every run (``runs`` in time order; ``rounds``: testbeds whose
    runs go in rounds that boot guests first)."""
    overhead: dict[str, list[float]] = {}
    boots: dict[str, list[float]] = {}
    per_round: dict[tuple[str, str], int] = {}
    for i, (start, end, key) in enumerate(runs):
        testbed, rep = key.split("/")[0], key.rsplit("rep-", 1)[1]
        per_round[(testbed, rep)] = per_round.get((testbed, rep), 0) + 1
        if i == 0:
            continue
        gap = max(0.0, (start - runs[i - 1][1]).total_seconds())
        prev = runs[i - 1][2]
        same_round = prev.split("/")[0] == testbed and prev.rsplit("rep-", 1)[1] == rep
        (boots if testbed in rounds and not same_round else overhead).setdefault(testbed, []).append(gap)
    slots = {}
    for start, end, key in runs:
        testbed, rep = key.split("/")[0], key.rsplit("rep-", 1)[1]
        seconds = (end - start).total_seconds() + statistics.median(overhead.get(testbed) or [0.0])
        if testbed in rounds:
            seconds += statistics.median(boots.get(testbed) or [0.0]) / per_round[(testbed, rep)]
        slots[key] = round(seconds, 3)
    return slots


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
    raw, root = all_raw_paths(study), paths.root()
    missing = [p for p in raw if not (root / p).exists()]
    if not missing:
        return None
    line = f"{len(raw) - len(missing)} of {len(raw)} measurements of campaign {study['campaign']} done"
    if not archive or archive == study["campaign"]:
        return line
    arch = archive_slots(archive)
    if not arch["slots"]:
        return line
    seconds, unknown = estimate([_key(p, study["campaign"]) for p in missing], arch["slots"])
    by_archive = f"the archived campaign {archive} ({arch['cpu'] or 'unknown CPU'})"
    if unknown == len(missing):      # testbeds the archive has no times of (a site's): nothing to estimate from
        return line + (f"; no estimate of the other {len(missing)}: the archived campaign {archive} did not measure "
                       "their testbeds")
    ratio = pace(study["campaign"], arch)
    if ratio is None:
        line += f"; the other {len(missing)}: about {_minutes(seconds)} to go, by the times of {by_archive}"
    else:
        line += (f"; the other {len(missing)}: about {_minutes(seconds * ratio)} to go at this machine's pace so "
                 f"far ({ratio:.2f} times the times of {by_archive}, which give {_minutes(seconds)})")
    if unknown:
        line += f", {unknown} of them on testbeds it did not measure (not counted)"
    return line


def report(study: dict, file=None) -> None:
    """Print the status line for the person at the terminal (default stdout)."""
    line = status(study, archived_campaign())
    if line:
        print(f"hpcvirt: {line}", file=file or sys.stdout, flush=True)


def _records(root: Path) -> list[tuple[datetime, datetime, str]]:
    runs = []
    for p in sorted(root.glob("*/*/*/rep-*.json")):
        try:
            rec = json.loads(p.read_text())
            start, end = (datetime.fromisoformat(rec[k]) for k in ("started_at", "finished_at"))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        runs.append((start, end, str(p.relative_to(root).with_suffix(""))))
    return sorted(runs)


def share(campaign: str, benchmarks: list[str], raw_root: str | Path = RAW_ROOT) -> dict:
    """{"seconds", "run_seconds", "runs", "by": {"<testbed>/<benchmark>": seconds}} that
    the runs of ``benchmarks`` added to the campaign's timeline; failed runs count
    too (a rerun is part of the cost).  A benchmark is a directory name
    (``openfoam``: on every testbed) or ``<testbed>/<benchmark>`` with shell
    wildcards (``bridge-vxlan*/*``: everything on the tunnels)."""
    runs = _records(paths.resolve(raw_root) / campaign)
    if not runs:
        raise ValueError(f"no provenance records under {paths.resolve(raw_root) / campaign}")
    slot: dict[int, float] = {}
    first_in_round: set[int] = set()
    seen_rounds: set[tuple[str, str]] = set()
    gaps: dict[str, list[float]] = {}
    for i, (start, end, key) in enumerate(runs):
        testbed, rep = key.split("/")[0], key.rsplit("rep-", 1)[1].split(".")[0]
        prev_end = runs[i - 1][1] if i else start
        gap = max(0.0, (start - prev_end).total_seconds())
        # a qemu testbed's runs are one round job per repetition (its rounds do not interleave)
        if (testbed, rep) not in seen_rounds or i == 0:
            first_in_round.add(i)
        else:
            gaps.setdefault(testbed, []).append(gap)
        seen_rounds.add((testbed, rep))
        slot[i] = gap
    by: dict[str, float] = {}
    total = own = 0.0
    n = 0
    for i, (start, end, key) in enumerate(runs):
        testbed, bench = key.split("/")[:2]
        if not any(fnmatch.fnmatchcase(f"{testbed}/{bench}", b) if "/" in b else bench == b for b in benchmarks):
            continue
        gap = slot[i]
        if i in first_in_round or gap > PAUSE_S:
            gap = statistics.median(gaps.get(testbed) or [0.0])
        seconds = (end - start).total_seconds() + gap
        by[f"{testbed}/{bench}"] = round(by.get(f"{testbed}/{bench}", 0.0) + seconds, 1)
        total += seconds
        own += (end - start).total_seconds()
        n += 1
    return {"campaign": campaign, "seconds": round(total, 1), "run_seconds": round(own, 1), "runs": n, "by": by}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hpcvirt.progress",
                                 description="what some benchmarks added to a campaign's wall time")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sh = sub.add_parser("share", help="the wall time the runs of some benchmarks added to a campaign")
    sh.add_argument("campaign")
    sh.add_argument("benchmarks", nargs="+", help="benchmark directory names (those under data/raw/<campaign>/"
                                                  "<testbed>/), or <testbed>/<benchmark> with wildcards (e.g. "
                                                  "'bridge-vxlan*/*')")
    sh.add_argument("--builds-s", type=float, default=0.0, help="wall time of their builds, added to the total")
    sh.add_argument("--budget-s", type=float, default=None, help="print whether the total is within this budget")
    args = ap.parse_args(argv)
    try:
        out = share(args.campaign, args.benchmarks)
    except ValueError as exc:
        print(f"hpcvirt.progress: {exc}", file=sys.stderr)
        return 1
    for k, v in sorted(out["by"].items()):
        print(f"  {k:24s} {v:8.1f} s")
    total = out["seconds"] + args.builds_s
    line = (f"{' + '.join(args.benchmarks)} in {args.campaign}: {out['runs']} runs, {out['run_seconds']:.0f} s "
            f"running, {out['seconds']:.0f} s with their job overhead")
    if args.builds_s:
        line += f", {total:.0f} s ({_minutes(total)}) with the builds"
    if args.budget_s is not None:
        line += f"; budget {args.budget_s:.0f} s: {'within' if total <= args.budget_s else 'OVER'}"
    print(line)
    return 0 if args.budget_s is None or total <= args.budget_s else 3


if __name__ == "__main__":
    sys.exit(main())
