"""The hidden files beside a raw output (``<dir>/.rep-N.out...``), which
are never raw outputs themselves: a run's partial output
(``.rep-N.out.<random>.partial``, published at the raw path only when the run
succeeded), the directory where its ranks record their hosts (the partial's
name + ``.ranks``), and a round's journal links (``.rep-N.out.kept`` beside
the raw output and its provenance: :func:`hpcvirt.measure.run_round`); and
the guards that keep the records of a campaign as they are (no record made
again, no testbed changed under a campaign that has measured on it)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path


def new_partial(raw: Path) -> str:
    """A new, empty partial output for a run of ``raw``, beside it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{raw.name}.", suffix=".partial", dir=raw.parent)
    os.close(fd)
    return tmp


def clear_partials(raw: Path) -> list[Path]:
    """Remove what runs of this measurement left when they were killed
    before they could clean up (``.rep-N.out.*.partial``: never parsed, never
    a raw output, and its ``.partial.ranks`` directory), saying so; return
    what was removed."""
    stale = sorted(raw.parent.glob(f".{raw.name}.*.partial"))
    for p in stale:
        print(f"removed {p}: the partial output of an earlier run that was interrupted", file=sys.stderr)
        p.unlink(missing_ok=True)
    for d in sorted(raw.parent.glob(f".{raw.name}.*.partial{RANKS_SUFFIX}")):
        shutil.rmtree(d, ignore_errors=True)
        stale.append(d)
    return stale


#: The directory beside a run's partial output where its ranks record their hosts.
RANKS_SUFFIX = ".ranks"


def read_rank_hosts(directory: Path, ranks: int) -> str | None:
    """The host of every rank in rank order, comma-separated (the tidy
    column ``rank_hosts``), from the files the ranks' wrapper
    (``workflow/scripts/rank0-stdout``) wrote: ``<directory>/<rank>`` holds
    the rank's host.  A rank without a file shows as ``?``; None when no rank
    wrote one (ranks the wrapper does not reach, e.g. in guests, which do not
    share this file system)."""
    hosts = {}
    for f in directory.iterdir():
        if f.name.isdigit() and int(f.name) < ranks:
            hosts[int(f.name)] = f.read_text().strip() or "?"
    if not hosts:
        return None
    return ",".join(hosts.get(r, "?") for r in range(ranks))


def _kept(path: str) -> Path:
    p = Path(path)
    return p.with_name(f".{p.name}.kept")


def kept(raw: str, prov: str) -> bool:
    """True if a measurement's journal links are there (left only by an
    attempt of its round that did not end)."""
    return _kept(raw).exists() and _kept(prov).exists()


def keep(raw: str, prov: str) -> None:
    """Journal a finished measurement of a round (a second hard link of its
    raw output and provenance), so an interrupted round keeps it."""
    for path in (prov, raw):
        k = _kept(path)
        k.unlink(missing_ok=True)
        os.link(path, k)


def restore_kept(raw: str, prov: str) -> bool:
    """True if the measurement is already complete: its raw output is at
    its path, or its journal links are there and are linked back (the same
    files: nothing is copied or rewritten)."""
    if Path(raw).exists() and Path(prov).exists():
        return True
    kraw, kprov = _kept(raw), _kept(prov)
    if not (kraw.exists() and kprov.exists()):
        return False
    for path, kept in ((raw, kraw), (prov, kprov)):
        if not Path(path).exists():
            os.link(kept, path)
    return True


def drop_kept(items) -> None:
    for _, raw, prov in items:
        for path in (raw, prov):
            _kept(path).unlink(missing_ok=True)


def replaced_records(outputs) -> str | None:
    """Why a run must not start (None: it may): among the ``outputs`` of the jobs it would run, records under
    ``data/raw/`` that exist (raw outputs, their provenance, a testbed's preflight record), which the
    workflow manager would delete before making them again.  ``protected()`` makes raw outputs read-only,
    but a process of root may write any file, so Snakemake takes none of them for protected (and a git
    checkout does not keep the mode): ``--forceall``, ``--forcerun``/``-R`` of a measurement, ``--force``
    of a raw output, or an input newer than a record would replace them."""
    have = sorted({str(f) for f in outputs if str(f).startswith("data/raw/") and Path(f).exists()})
    if not have:
        return None
    return (f"hpcvirt: this run would delete {len(have)} record{'s' if len(have) > 1 else ''} the campaign "
            f"has under data/raw/ and make {'them' if len(have) > 1 else 'it'} again ({', '.join(have[:2])}"
            + (f" and {len(have) - 2} more" if len(have) > 2 else "") + "): raw outputs and their records are "
            "never replaced. Measure into a new campaign (--config campaign=<name>), or force only a later step "
            "(--forcerun parse aggregate numbers); to measure one output again, delete it and its .json first.")


def _differences(old, new, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new)):
            out += _differences(old.get(k), new.get(k), f"{prefix}.{k}" if prefix else str(k))
        return out
    return [] if old == new else [f"{prefix}: {old!r} -> {new!r}"]


def _is_new_offer(difference: str) -> bool:
    """A difference that only adds a benchmark entry (``mpi.<mpi>.<bench>`` or
    ``<bench>``) the campaign's record did not have."""
    key, _, change = difference.partition(": ")
    parts = key.split(".")
    where_ok = len(parts) == 1 or (len(parts) == 3 and parts[0] == "mpi")
    from .benchmarks import REGISTRY

    return where_ok and parts[-1] in {b.name for b in REGISTRY} and change.startswith("None -> ")


def check_campaign_testbeds(campaign: str, testbeds: dict[str, dict], raw_root: str = "data/raw") -> None:
    """Refuse to add measurements made with edited testbed settings to a
    campaign that already has some: raw-output paths encode the benchmark
    parameters, not the testbed's launcher, flags or environment, so an
    edited testbed file would otherwise be silently mixed with (or hidden
    behind) the old outputs.  Adding a benchmark the record did not offer
    changes no earlier output and is accepted (each run's provenance has its
    own testbed hash).  A campaign measured before testbed records
    existed has none, and is accepted as it is."""
    import json

    from .config import ConfigError, testbed_hash

    for name, tb in testbeds.items():
        record = Path(raw_root) / campaign / name / "testbed.json"
        try:
            old = json.loads(record.read_text())
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{record}: unreadable testbed record of campaign {campaign!r}: {exc}") from None
        if old.get("testbed_hash") != testbed_hash(tb):
            diff = [d for d in _differences(old.get("testbed", {}), tb) if not d.startswith("description:")]
            if all(_is_new_offer(d) for d in diff):
                continue  # only benchmarks added: no earlier output was measured with other settings
            raise ConfigError(
                f"config/testbeds/{name}.yaml changed since campaign {campaign!r} measured on it "
                f"({record} records {old.get('testbed_hash')}, the file now gives {testbed_hash(tb)}):\n    "
                + "\n    ".join(diff[:10] or ["(settings differ)"])
                + f"\n  Measure a new campaign (--config campaign=<new name>), or restore the file; the raw outputs "
                f"of {campaign!r} stay as they are."
            )
