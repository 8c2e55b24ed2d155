"""Selecting tidy rows and pairing them by round: the one way the claims,
the study redraws and the paper's tables pick a configuration's values.

A *selector* is a mapping of tidy columns to values (:data:`SELECT_KEYS`),
plus ``at`` for swept benchmarks: ``smallest`` (the smallest message size),
``peak`` (the maximum over the sizes), a size in bytes, or ``{knee: f}``
(:func:`knee`).  ``{ratio: [selector, selector]}`` stands for the per-round
ratio of two selectors.  Repetition r of every configuration of a campaign
ran in the same interleaved round, so values of one round are paired.
"""

from __future__ import annotations

import weakref

import numpy as np
import pandas as pd

from . import stats
from .labels import normalize_units

#: The tidy columns a selector may name, and ``at``.
SELECT_KEYS = {"testbed", "virtualization", "benchmark", "mpi", "interconnect", "variant", "ranks", "nodes",
               "placement", "metric", "at"}


class QueryError(ValueError):
    """A selector that does not pick one value per round."""


def select(tidy: pd.DataFrame, sel: dict) -> pd.DataFrame:
    """The rows whose columns equal the selector's values (compared as text).
    One mask, narrowed key by key, and one take at the end; each column is
    coded once per table (:func:`_coded`): the claims evaluate every campaign
    of a study on each paper build."""
    keep = np.ones(len(tidy), dtype=bool)
    for k, v in sel.items():
        if k == "at":
            continue
        if k not in tidy.columns:
            return tidy.iloc[:0]                       # a table without the column has no such rows
        codes, index = _coded(tidy, k)
        keep &= codes == index.get(str(v), -1)
    return tidy.iloc[np.flatnonzero(keep)]


_CODED: dict[int, dict[str, tuple]] = {}


def _coded(tidy: pd.DataFrame, column: str) -> tuple[np.ndarray, dict[str, int]]:
    """The column's values as codes of their text (``str`` of each value) and
    the code of each text; made once for as long as the table lives and the
    column is the same array (a column assigned anew is coded again; values
    changed in place within a column are not seen)."""
    key = id(tidy)
    if key not in _CODED:
        _CODED[key] = {}
        weakref.finalize(tidy, _CODED.pop, key, None)
    values = tidy[column].to_numpy()
    source, codes, index = _CODED[key].get(column, (None, None, None))
    if source is None or source.ctypes.data != values.ctypes.data or source.shape != values.shape:
        codes, uniques = pd.factorize(np.array([str(x) for x in values], dtype=object))
        index = {u: i for i, u in enumerate(uniques)}
        _CODED[key][column] = (values, codes, index)  # the source kept: its memory is not reused while cached
    return codes, index


def selector_error(sel, symbols: tuple[str, ...] = ()) -> str | None:
    """What is wrong with a selector (None when nothing): a mapping of
    :data:`SELECT_KEYS` with at least ``metric``, or ``{ratio: [selector,
    selector]}``; ``at`` is ``smallest``, ``peak``, a size in bytes,
    ``{knee: f}`` with 0 < f < 1, or one of ``symbols`` (a size the caller
    fills in, e.g. the paper's ``latency_bytes``)."""
    if isinstance(sel, dict) and set(sel) == {"ratio"}:
        if not (isinstance(sel["ratio"], list) and len(sel["ratio"]) == 2):
            return "a ratio selector is {ratio: [numerator, denominator]}"
        return next((e for e in (selector_error(x, symbols) for x in sel["ratio"]) if e), None)
    if not isinstance(sel, dict) or "metric" not in sel:
        return "a selector is a mapping of tidy columns with at least metric"
    unknown = set(sel) - SELECT_KEYS
    if unknown:
        return f"unknown selector keys {sorted(unknown)}; allowed: {', '.join(sorted(SELECT_KEYS))}"
    at = sel.get("at")
    knee = isinstance(at, dict) and set(at) == {"knee"} and isinstance(at["knee"], (int, float)) \
        and 0 < at["knee"] < 1
    if at is not None and at not in ("smallest", "peak", *symbols) and not (isinstance(at, int) and at >= 0) \
            and not knee:
        knee_or = "{knee: f} with 0 < f < 1"
        allowed = (f"a size in bytes, {knee_or} or {', '.join(symbols)}" if symbols
                   else f"a size in bytes or {knee_or}")
        return f"at {at!r}; allowed: smallest, peak, {allowed}"
    return None


def bind(sel: dict, **sizes: int) -> dict:
    """The selector with a symbolic ``at`` (e.g. ``latency_bytes``) replaced by its size, in ratios too."""
    if "ratio" in sel:
        return {"ratio": [bind(x, **sizes) for x in sel["ratio"]]}
    at = sel.get("at")
    return {**sel, "at": sizes[at]} if isinstance(at, str) and at in sizes else dict(sel)


def leaves(sels) -> list[dict]:
    """The plain selectors of a list of selectors, ratios taken apart."""
    return [leaf for s in sels for leaf in (leaves(s["ratio"]) if "ratio" in s else [s])]


def knee(sweep: pd.DataFrame, drop: float) -> float:
    """The smallest message size from which the value stays below (1 - drop)
    times its maximum over all smaller sizes, to the end of the sweep
    (``inf`` when it never falls that far)."""
    d = sweep.dropna(subset=["msg_bytes"]).sort_values("msg_bytes")
    sizes, vals = d["msg_bytes"].to_numpy(dtype=float), d["value"].to_numpy(dtype=float)
    best_before = np.maximum.accumulate(np.concatenate([[-np.inf], vals[:-1]]))
    low = vals < (1 - drop) * best_before
    # from the end: the longest tail of sizes that are all below their threshold
    tail = len(low)
    while tail > 0 and low[tail - 1]:
        tail -= 1
    return float(sizes[tail]) if tail < len(low) else float("inf")


def per_round(tidy: pd.DataFrame, sel: dict) -> pd.Series:
    """One value per round (rep) of the one configuration the selector picks
    (or the per-round ratio of two); :class:`QueryError` when it picks several
    configurations or several rows per round."""
    if "ratio" in sel:
        num, den = (per_round(tidy, x) for x in sel["ratio"])
        both = num.index.intersection(den.index)
        return num[both] / den[both]
    d = select(tidy, sel)
    if d.empty:
        return pd.Series(dtype=float)
    configs = sorted(d["run_id"].str.rsplit("/", n=1).str[0].unique())
    if len(configs) > 1:
        raise QueryError(f"selector {sel} matches {len(configs)} configurations {configs}; narrow it")
    at = sel.get("at")
    if at == "smallest":
        d = d[d["msg_bytes"] == d["msg_bytes"].min()]
    elif at == "peak":
        return d.groupby("rep")["value"].max()
    elif isinstance(at, dict):
        return d.groupby("rep")[["msg_bytes", "value"]].apply(lambda g: knee(g, at["knee"]))
    elif at is not None:
        d = d[d["msg_bytes"] == at]
    if d.groupby("rep").size().max() > 1:
        raise QueryError(f"selector {sel} matches {d.groupby('rep').size().max()} rows per round; narrow it")
    return d.groupby("rep")["value"].first()


def per_round_at(d: pd.DataFrame, sel: dict, msg_bytes: int | None) -> pd.Series:
    """Per round, of rows of one metric: the median value at ``msg_bytes``, or
    with None the largest over the sizes (peak bandwidth).  Unlike
    :func:`per_round` it compares values as they are and takes the median of
    several rows of a round."""
    for k, v in sel.items():
        d = d[d[k] == v]
    if msg_bytes is not None:
        return d[d["msg_bytes"] == msg_bytes].groupby("rep")["value"].median()
    return d.groupby("rep")["value"].max()


def tool_agreement(tidy: pd.DataFrame, latency_bytes: int, tools: tuple[str, str], variant: str) -> pd.DataFrame:
    """Two ping-pong tools on the same testbed, MPI and path: latency at
    ``latency_bytes`` (us) and peak bandwidth (Gbit/s) of each, median [CI]
    over repetitions, and the ratio first/second paired by round (``variant``: the first tool's rows').
    The columns are named after the tools (``<tool>_lat``, ``<tool>_peak``, ...)."""
    df = normalize_units(tidy)
    a_name, b_name = tools
    sel_a = (df["benchmark"] == a_name) & (df["variant"].fillna("") == variant)
    d = df[(sel_a | (df["benchmark"] == b_name)) & df["metric"].isin(["latency", "bandwidth"])]
    if d.empty:
        return pd.DataFrame()
    rows = []
    for key, grp in d.groupby(["testbed", "virtualization", "mpi", "interconnect"], sort=True):
        if set(grp["benchmark"]) != {a_name, b_name}:
            continue
        rec = dict(zip(["testbed", "virtualization", "mpi", "interconnect"], key))
        per = {}
        for tool, g in grp.groupby("benchmark"):
            lat = g[(g["metric"] == "latency") & (g["msg_bytes"] == latency_bytes)].groupby("rep")["value"].median()
            peak = g[g["metric"] == "bandwidth"].groupby("rep")["value"].max()
            per[tool] = (lat, peak)
            for name, s in (("lat", lat), ("peak", peak)):
                if len(s):
                    ci = stats.median_ci(s.to_numpy())
                    rec.update({f"{tool}_{name}": ci["median"], f"{tool}_{name}_lo": ci["ci_low"],
                                f"{tool}_{name}_hi": ci["ci_high"], f"{tool}_n": ci["n"]})
        for i, name in enumerate(("lat", "peak")):
            a, b = per[a_name][i], per[b_name][i]
            both = a.index.intersection(b.index)
            if len(both):
                ci = stats.median_ci((a[both] / b[both]).to_numpy())
                rec.update({f"{name}_ratio": ci["median"], f"{name}_ratio_lo": ci["ci_low"],
                            f"{name}_ratio_hi": ci["ci_high"], "ci_level": ci["ci_level"]})
        rows.append(rec)
    return pd.DataFrame(rows)
