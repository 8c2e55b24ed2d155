"""From raw outputs to tidy rows, and from tidy rows to the summary table.

Parsing is strict: an output that fails to parse (truncated, failed run,
failed verification) is *rejected* -- listed with its path and the reason --
and contributes no number.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from . import stats
from .parsers import netpipe, qperf
from .tidy import COLUMNS, ParseError, to_rows

# Bandwidths are compared in Gbit/s (the unit of Exposito et al.), latencies in us.
TO_GBITS = {"Mbit/s": 1e-3, "MB/s": 8e-3, "Gbit/s": 1.0}


def _parse_one(raw: Path, ctx: dict) -> list:
    expected = ctx.get("expected", {})
    bench = ctx["run_id"].split("/")[2]
    if bench == "netpipe":
        return netpipe.parse(raw, expected_max_bytes=expected.get("max_bytes"))
    if bench == "qperf":
        return qperf.parse(raw, expected_sizes=expected.get("sizes"))
    raise ParseError(raw, f"no parser for benchmark {bench!r}")


def parse_outputs(raw_paths: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Parse raw outputs (each with its provenance .json beside it).

    Returns (tidy rows, rejected outputs with the reason)."""
    rows, rejected = [], []
    for p in raw_paths:
        raw = Path(p)
        prov_path = raw.with_suffix(".json")
        try:
            prov = json.loads(prov_path.read_text())
        except (OSError, ValueError) as exc:
            rejected.append({"raw_path": str(raw), "reason": f"no readable provenance {prov_path}: {exc}"})
            continue
        ctx = dict(prov["context"], started_at=prov.get("started_at"))
        try:
            measurements = _parse_one(raw, ctx)
        except ParseError as exc:
            rejected.append({"raw_path": str(raw), "reason": exc.reason})
            continue
        rows += to_rows(measurements, ctx)
    tidy = pd.DataFrame(rows, columns=list(COLUMNS))
    return tidy, pd.DataFrame(rejected, columns=["raw_path", "reason"])


def normalize_units(tidy: pd.DataFrame) -> pd.DataFrame:
    """Bandwidth in Gbit/s, latency in us."""
    df = tidy.copy()
    bw = df["metric"] == "bandwidth"
    factor = df.loc[bw, "unit"].map(TO_GBITS)
    if factor.isna().any():
        raise ValueError(f"unknown bandwidth units: {sorted(df.loc[bw, 'unit'][factor.isna()].unique())}")
    df.loc[bw, "value"] = df.loc[bw, "value"] * factor
    df.loc[bw, "unit"] = "Gbit/s"
    return df


def summarize_tidy(tidy: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    df = normalize_units(tidy)
    df["run_id"] = df["run_id"].str.split("/").str[0]  # campaign: one group per configuration
    df["variant"] = df["variant"].fillna("")
    return stats.summarize(df, level).rename(columns={"run_id": "campaign"})


def host_summary(prov_paths: list[str]) -> dict:
    """The facts shared by a testbed's runs (for the paper and the archive)."""
    recs = [json.loads(Path(p).read_text()) for p in prov_paths]
    hosts = {json.dumps(r["host"], sort_keys=True) for r in recs}
    first = recs[0]
    return {
        "runs": len(recs),
        "distinct_host_records": len(hosts),
        "host": first["host"],
        "mpi": {r["mpi"]["name"]: r["mpi"] for r in recs if r.get("mpi")},
        "git": sorted({json.dumps(r["git"], sort_keys=True) for r in recs}),
        "first_started_at": min(r["started_at"] for r in recs if r.get("started_at")),
        "last_finished_at": max(r["finished_at"] for r in recs if r.get("finished_at")),
    }
