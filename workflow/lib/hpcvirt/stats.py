"""Medians with nonparametric confidence intervals (Hoefler & Belli, SC15).

The CI of the median comes from order statistics: for n sorted samples, the
interval [x_(l), x_(u)] with l = n+1-u covers the true median with
probability P = 1 - 2 * BinomCDF(l-1; n, 1/2).  We take the narrowest such
symmetric interval whose coverage reaches the requested level.  With few
samples no interval can reach 95% (n <= 5); then the widest one [min, max]
is returned and the *achieved* coverage is reported, never the nominal one.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from .tidy import COLUMNS


def _binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2.0**n


def median_ci_ranks(n: int, level: float = 0.95) -> tuple[int, int, float]:
    """1-based ranks (l, u) of the CI of the median and its achieved coverage."""
    if n < 1:
        raise ValueError("need at least one sample")
    best = (1, n, 1.0 - 2.0 * _binom_cdf_half(0, n))
    # l from the middle outwards: the first that reaches the level is the narrowest.
    for l in range((n + 1) // 2, 0, -1):
        u = n + 1 - l
        coverage = 1.0 - 2.0 * _binom_cdf_half(l - 1, n)
        if coverage >= level:
            return l, u, coverage
    return best


def median_ci(values: Sequence[float], level: float = 0.95) -> dict:
    # NaN is no value; an infinity is one (a knee that is never reached), and order statistics take it
    x = np.sort(np.asarray(values, dtype=float))
    x = x[~np.isnan(x)]
    n = len(x)
    if n == 0:
        raise ValueError("no values")
    l, u, cov = median_ci_ranks(n, level)
    return {
        "n": n,
        "median": float(np.median(x)),
        "ci_low": float(x[l - 1]),
        "ci_high": float(x[u - 1]),
        "ci_level": cov,
        "min": float(x[0]),
        "max": float(x[-1]),
    }


# Columns that identify a configuration and a size: every tidy column but the value, the round and what
# describes one run (its hosts, counts, build and raw output).
PER_RUN_COLUMNS = {"image_digest", "spack_lock", "value", "rank_hosts", "host", "rep", "iteration_count", "warmup",
                   "verified", "suite_version", "source_sha256", "spack_hash", "started_at", "raw_path"}
GROUP_COLUMNS = [c for c in COLUMNS if c not in PER_RUN_COLUMNS]


def summarize(tidy: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """One row per configuration, metric and size: n, median, CI, min, max."""
    keys = [c for c in GROUP_COLUMNS if c in tidy.columns]
    rows = []
    for key, grp in tidy.groupby(keys, dropna=False, sort=True):
        rec = dict(zip(keys, key))
        rec.update(median_ci(grp["value"].to_numpy(), level))
        rec["reps"] = int(grp["rep"].nunique()) if "rep" in grp else rec["n"]
        rows.append(rec)
    return pd.DataFrame(rows)
