"""Views: the tables the figures draw, declared once and computed by one
rule (``views``, ``workflow/rules/figures.smk``) into
``data/results/<campaign>/views/<name>.csv``.  A figure's notebook reads its
views (``workflow/figures.yaml``, key ``views``) and computes nothing: what
it draws is a file that can be read, diffed and checked.

Each view (:class:`hpcvirt.benchmarks.View`) names the table it is computed
from (``summary``: medians and CIs per configuration; ``tidy``: one row per
value and round, for pairing by round), the function that computes it, the
parameters it takes and what it holds.  Every row of a view is one plotted
element.  A benchmark declares the views of its own rows; this module the
views of rows of several benchmarks alike.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import analysis, apps
from .atomic import write_csv
from .benchmarks import REGISTRY, View


#: The views of rows of several benchmarks alike; each benchmark declares the views of its own rows
#: (``views`` of its declaration, :class:`hpcvirt.benchmarks.View`).
GENERIC: tuple[View, ...] = (
    View("headline", "summary", analysis.headline, "Per configuration of the ping-pong benchmarks: latency at the paper's "
         "message size and peak bandwidth, medians with CIs.", ("latency_bytes",)),
    View("app_scaling", "tidy", apps.app_scaling, "Per application, input, interconnect class and rank count: "
         "time, and performance relative to its reference, paired by round."),
    View("app_speedup", "tidy", apps.app_speedup, "The rows of app_scaling that are a speed-up over the input's "
         "one-rank shared-memory run, natively and across the unlimited bridge."),
    View("app_panels", "tidy", apps.app_panels, "The rows of app_scaling the applications' figure draws: per "
         "application the input most testbeds ran against the native shared-memory run, and the guests' inputs."),
)
VIEWS: tuple[View, ...] = GENERIC + tuple(REGISTRY.views())


def by_name(name: str) -> View:
    for v in VIEWS:
        if v.name == name:
            return v
    raise KeyError(f"no view {name!r}; declared: {[v.name for v in VIEWS]}")


def compute(view: View, summary: pd.DataFrame, tidy: pd.DataFrame, **params) -> pd.DataFrame:
    table = summary if view.reads == "summary" else tidy
    return view.compute(table, **{p: params[p] for p in view.params})


def _text_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]


def read(path) -> pd.DataFrame:
    """A view (or a table a rule wrote) as its notebook reads it: numbers as numbers, a missing number as
    NaN, an empty text cell as ``""``.  A view keeps the difference in its file (:func:`write`: a missing
    number is ``nan``, an empty text cell an empty field), so a column empty on every row (no link limit
    in a campaign) is still read as text; in a table written otherwise an empty cell among numbers is a
    missing number, as before."""
    df = pd.read_csv(path, keep_default_na=False, na_values=["nan"])
    for c in df.columns:
        if c in _text_columns(df):
            given = df.loc[df[c] != "", c]
            if len(given) and pd.to_numeric(given, errors="coerce").notna().all():
                df[c] = pd.to_numeric(df[c].where(df[c] != ""))
    return df.fillna({c: "" for c in _text_columns(df)})


def write(path, df: pd.DataFrame) -> None:
    """Write a view atomically so that :func:`read` gets back the types it was computed with."""
    write_csv(path, df.fillna({c: "" for c in _text_columns(df)}), na_rep="nan")


def read_tables(summary_path, tidy_paths) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The campaign's summary and its tidy tables, read as the figures read them."""
    summary = pd.read_csv(summary_path, keep_default_na=False, na_values=[""])
    tidy = pd.concat([pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in tidy_paths], ignore_index=True)
    return summary, tidy


def write_all(summary_path, tidy_paths, outputs: dict[str, str | Path], **params) -> None:
    """Compute every view of ``outputs`` (name -> path) and write each atomically."""
    summary, tidy = read_tables(summary_path, tidy_paths)
    for name, path in outputs.items():
        write(path, compute(by_name(name), summary, tidy, **params))
