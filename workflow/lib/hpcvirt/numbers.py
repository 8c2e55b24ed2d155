"""The paper's numbers declared as data (``workflow/numbers.yaml``): each
declaration names its macro literally (so that ``grep -r hvOvhLatVmOpenmpiNet``
finds where it comes from) and the quantity in the selector language of the
claims (:mod:`hpcvirt.query`)::

    - macro: hvOvhLatVmOpenmpiNet
      difference: [{...subject...}, {...reference...}]   # per round: subject - reference
    - macro: hvOvhBwVmOpenmpiNet
      ratio: [{...}, {...}]                              # per round: subject / reference
    - macro: hvSomething
      value: {...}                                       # per round: the value
      scale: 100                                         # optional: times this (e.g. a share in %)

A selector's ``at`` may be ``latency_bytes``, the paper's message size
(config key ``paper.latency_bytes``).  Each declaration whose rows the
campaign has writes ``\\<macro>`` (the median over the interleaved rounds),
``\\<macro>Lo`` and ``\\<macro>Hi`` (its order-statistic CI), in the units of
:func:`hpcvirt.analysis.normalize_units` (µs, Gbit/s); one the campaign
lacks writes nothing, and the paper leaves out the part that needs it
(:func:`hpcvirt.paper.parts_tex`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import paths, stats, yamlio
from .analysis import normalize_units
from .labels import Macros, fmt
from .query import QueryError, bind, per_round, selector_error

KINDS = ("value", "ratio", "difference")
SYMBOLS = ("latency_bytes",)


class NumbersError(ValueError):
    """A declaration that does not declare a number."""


@dataclass(frozen=True)
class Number:
    macro: str
    kind: str                 # value, ratio or difference
    selectors: tuple          # one (value) or two (subject, reference)
    scale: float = 1.0        # the quantity times this (e.g. 100: a share in %)


def load(path: str | Path | None = None) -> list[Number]:
    """The declarations of ``workflow/numbers.yaml`` (or ``path``), checked:
    a literal macro name, exactly one quantity, valid selectors, no name twice."""
    path = Path(path) if path else paths.root() / "workflow" / "numbers.yaml"
    data = yamlio.load_file(path)
    if not isinstance(data, list):
        raise NumbersError(f"{path}: a list of declarations (macro and one of {', '.join(KINDS)})")
    out, seen = [], set()
    for i, d in enumerate(data):
        where = f"{path}: [{i}]"
        if not isinstance(d, dict) or not re.fullmatch(r"hv[A-Z][A-Za-z]*", str(d.get("macro", ""))):
            raise NumbersError(f"{where}: macro must be a macro name, hv and letters (e.g. hvOvhLatVmOpenmpiNet)")
        where = f"{where} {d['macro']}"
        kinds = [k for k in KINDS if k in d]
        if len(kinds) != 1 or set(d) - {"macro", "scale", *KINDS}:
            raise NumbersError(f"{where}: needs exactly one of {', '.join(KINDS)} (and scale); has {sorted(d)}")
        kind = kinds[0]
        sels = (d[kind],) if kind == "value" else d[kind]
        if kind != "value" and not (isinstance(sels, list) and len(sels) == 2):
            raise NumbersError(f"{where}: {kind} is [subject, reference]")
        for sel in sels:
            error = selector_error(sel, SYMBOLS)
            if error:
                raise NumbersError(f"{where}: {error}")
        scale = d.get("scale", 1)
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale <= 0:
            raise NumbersError(f"{where}: scale must be a positive number, not {scale!r}")
        if d["macro"] in seen:
            raise NumbersError(f"{where}: declared twice")
        seen.add(d["macro"])
        out.append(Number(d["macro"], kind, tuple(sels), float(scale)))
    return out


def per_round_values(tidy: pd.DataFrame, number: Number, *, latency_bytes: int) -> pd.Series:
    """The declared quantity, one value per round (empty when the campaign lacks its rows)."""
    series = [per_round(tidy, bind(s, latency_bytes=latency_bytes)) for s in number.selectors]
    if number.kind == "value":
        return series[0]
    num, ref = series
    both = num.index.intersection(ref.index)
    return (num[both] - ref[both]) if number.kind == "difference" else (num[both] / ref[both])


def macros(tidy: pd.DataFrame, numbers: list[Number], *, latency_bytes: int, level: float = 0.95,
           ambiguous=None) -> Macros:
    """``\\<macro>``, ``Lo``, ``Hi`` and ``N`` (its rounds) of every declaration the campaign has
    rows for.  A declaration whose selector picks several configurations of this campaign (another
    study's testbeds or variants) raises :class:`NumbersError`, or with ``ambiguous`` (a callable
    taking the message) is reported there and writes nothing, like a number the campaign lacks."""
    tidy = normalize_units(tidy)
    out = Macros()
    for n in numbers:
        try:
            values = per_round_values(tidy, n, latency_bytes=latency_bytes).to_numpy(dtype=float)
        except QueryError as exc:
            msg = f"workflow/numbers.yaml {n.macro}: {exc}"
            if ambiguous is None:
                raise NumbersError(msg) from None
            ambiguous(msg)
            continue
        values = values[np.isfinite(values)]
        if not len(values):
            continue
        ci = {k: v * n.scale for k, v in stats.median_ci(values, level).items() if k in ("median", "ci_low", "ci_high")}
        out[n.macro] = fmt(ci["median"])
        out[f"{n.macro}Lo"], out[f"{n.macro}Hi"] = fmt(ci["ci_low"]), fmt(ci["ci_high"])
        out[f"{n.macro}N"] = str(len(values))   # one round has no interval (\hvci, paper/main.tex)
    return out
