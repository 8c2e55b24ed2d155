"""The paper's figures, declared once in ``workflow/figures.yaml`` (schema
``workflow/schemas/figures.schema.yaml``): each names its notebook, the
tables it reads, what it needs of the campaign and its caption.  The
workflow makes one rule per declaration (``workflow/rules/figures.smk``) and
builds a figure only when the campaign has a configuration it needs; the
paper includes the parts that show it only then
(:func:`hpcvirt.paper.parts_tex`)."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import paths
from .labels import ACCEL_LABEL


@dataclass(frozen=True)
class Figure:
    name: str                    # paper/figures/<name>.pdf, rule figure_<name>, LaTeX label fig:<name>
    notebook: str                # notebooks/<notebook>.ipynb
    reads: str                   # summary, container_ratios or richter_table; "" with views
    what: str                    # what it shows (the HTML report's caption)
    campaign: str = "main"       # main, or a companion campaign: containers, datapaths
    benchmark: str = ""          # a configuration of this benchmark is needed ...
    kinds: tuple[str, ...] = ()  # ... on a testbed of one of these kinds (empty: any)
    also: tuple[str, ...] = ()   # and configurations of these benchmarks (anywhere)
    params: tuple[str, ...] = ()  # latency_bytes, campaign, suite_labels, tests
    caption: str = "figure.rst"  # workflow/report/<caption>
    views: tuple[str, ...] = ()  # the views it draws (hpcvirt.views), instead of a table
    draws: tuple[str, ...] = ()  # the benchmarks whose rows it shows ...
    draws_kinds: tuple[str, ...] = ()  # ... on testbeds of these kinds (empty: any)

    def wanted(self, configurations, testbeds: dict) -> bool:
        have = {c.benchmark for c in configurations}
        return all(b in have for b in self.also) and any(
            c.benchmark == self.benchmark and (not self.kinds or testbeds[c.testbed]["kind"] in self.kinds)
            for c in configurations)


class FigureError(ValueError):
    """A figure declaration that does not describe a figure."""


@lru_cache(maxsize=4)
def load(path: str | os.PathLike | None = None) -> tuple[Figure, ...]:
    """The declarations of ``workflow/figures.yaml`` (or ``path``), validated."""
    from .benchmarks import REGISTRY
    from .config import ConfigError, _load_yaml, load_schema, validate
    from .views import VIEWS

    path = Path(path) if path else paths.root() / "workflow" / "figures.yaml"
    try:
        data = _load_yaml(path)
        validate(data, load_schema("figures.schema.yaml"), path)
    except ConfigError as exc:
        raise FigureError(str(exc)) from None
    known = {b.name for b in REGISTRY}
    out = []
    for i, d in enumerate(data):
        needs = d.get("needs") or {}
        campaign = d.get("campaign", "main")
        draws = d.get("draws") or {}
        if (campaign == "main") != bool(needs) or bool(needs) != bool(draws):
            raise FigureError(f"{path}: [{i}] {d['name']}: a figure of the main campaign declares needs "
                              "(benchmark, kinds, also) and draws (benchmarks, kinds); a companion campaign's "
                              "figure does not")
        unknown = sorted({needs.get("benchmark", ""), *needs.get("also", ()), *draws.get("benchmarks", ())}
                         - known - {""})
        if unknown:
            raise FigureError(f"{path}: [{i}] {d['name']}: needs unknown benchmarks {unknown}; "
                              f"declared: {sorted(known)}")
        unknown = sorted(set(d.get("views", ())) - {v.name for v in VIEWS})
        if unknown:
            raise FigureError(f"{path}: [{i}] {d['name']}: unknown views {unknown}; "
                              f"declared (hpcvirt.views): {[v.name for v in VIEWS]}")
        if ("views" in d) == ("reads" in d) or ("views" in d and campaign != "main"):
            raise FigureError(f"{path}: [{i}] {d['name']}: a figure reads either views (of the main campaign) "
                              "or one table (reads)")
        out.append(Figure(d["name"], d["notebook"], d.get("reads", ""), " ".join(d["what"].split()), campaign,
                          needs.get("benchmark", ""), tuple(needs.get("kinds", ())), tuple(needs.get("also", ())),
                          tuple(d.get("params", ())), d.get("caption", "figure.rst"), tuple(d.get("views", ())),
                          tuple(draws.get("benchmarks", ())), tuple(draws.get("kinds", ()))))
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        raise FigureError(f"{path}: figure names are not unique: {sorted({n for n in names if names.count(n) > 1})}")
    return tuple(out)


def __getattr__(name: str):
    if name == "FIGURES":            # hpcvirt.figures.FIGURES: the declarations of this checkout
        try:
            return load()
        except AttributeError as exc:  # not to be taken for a missing FIGURES
            raise RuntimeError(f"loading the figure declarations: {exc}") from exc
    raise AttributeError(name)


def for_campaign(configurations, testbeds: dict) -> list[Figure]:
    """The main campaign's figures it has data for."""
    return [f for f in load() if f.campaign == "main" and f.wanted(configurations, testbeds)]


def companions(campaigns: dict[str, str]) -> list[Figure]:
    """The companion campaigns' figures, of those ``campaigns`` names (``{"containers": "<campaign>"}``)."""
    return [f for f in load() if f.campaign != "main" and campaigns.get(f.campaign)]


def by_name(name: str) -> Figure:
    return next(f for f in load() if f.name == name)


def report_labels(fig: Figure, tables, campaign: str, kinds: dict[str, str] | None = None) -> dict[str, str]:
    """The HTML report's labels of a figure, from its input tables (read when
    the report is made): how many testbeds its data come from (those with a
    benchmark it draws, of the testbed kinds it draws only; ``kinds``: testbed
    -> kind), their virtualization and the accelerator of its guests.  Short, so that the
    report's label table leaves the figure its width (the table is as wide as
    its widest row); the campaign, its testbeds and what TCG means are in the
    caption."""
    import pandas as pd

    cols = {"testbed", "virtualization", "benchmark", "runtime"}
    df = pd.concat([pd.read_csv(t, usecols=lambda c: c in cols) for t in tables])
    if "virtualization" not in df:            # the container table: the runtime is the testbed's wrapper
        df["virtualization"] = "none+" + df.get("runtime", pd.Series("", index=df.index)).astype(str)
        df.loc[df["virtualization"] == "none+none", "virtualization"] = "none"
    if fig.draws and "benchmark" in df:
        xs = fig.draws
        df = df[df["benchmark"].map(lambda b: b in xs or str(b).startswith(tuple(f"{x}{s}" for x in xs for s in "-_")))]
    if fig.draws_kinds and kinds:
        df = df[df["testbed"].map(lambda t: kinds.get(t) in fig.draws_kinds)]
    df = df.dropna(subset=["testbed", "virtualization"])       # a set-up of a study without a counterpart here
    virts = sorted(set(df["virtualization"].astype(str)))
    accels = sorted({ACCEL_LABEL.get(v.split("+")[0], "") for v in virts} - {""})
    return {
        "figure": fig.name,
        "testbeds": str(df["testbed"].nunique()),
        "virtualization": ", ".join(virts),
        "guests": ", ".join(accels) or "none",
    }


def partial(pdf) -> str:
    """Where a figure is drawn before :func:`publish` puts it in place (beside it, hidden, still a PDF)."""
    return str(Path(pdf).with_name(f".{Path(pdf).stem}.partial.pdf"))


def publish(drawn, pdf, png=None) -> None:
    """A drawn figure (``drawn``: its :func:`partial`) put in place: first its PNG for the HTML report,
    rendered from the PDF (pdftoppm, 110 dpi: every browser shows it, not only one with a PDF viewer), then
    the PDF, each renamed over its output, so that neither is ever half written."""
    import subprocess

    if png:
        tmp = Path(png).with_name(f".{Path(png).stem}.partial")
        subprocess.run(["pdftoppm", "-png", "-r", "110", "-singlefile", str(drawn), str(tmp)], check=True)
        os.replace(f"{tmp}.png", png)
    os.replace(drawn, pdf)


def _is_campaign_name(source: str) -> bool:
    """Whether ``source`` is a campaign's name as the study's schema allows it (``campaign``)."""
    from .config import load_schema

    pattern = load_schema("config.schema.yaml")["properties"]["campaign"]["pattern"]
    return re.fullmatch(pattern.removeprefix("^").removesuffix("$"), source or "") is not None


def check_target(name: str, source: str = "") -> str | None:
    """Why ``make figure FIGURE=<name> FROM=<source>`` cannot redraw (None: it can): a name that is no
    figure (the names listed), or a campaign without the results it draws from (the campaigns listed)."""
    from . import redraw

    names = [f.name for f in load()] + redraw.pdf_names(paths.root() / "data/reference")
    if name not in names:
        return f"FIGURE={name}: no such figure; the figures are {', '.join(names)}"
    if source and not _is_campaign_name(source):
        return f"FROM={source}: not a campaign's name (a directory name of data/results/, e.g. local-<UTC time>)"
    table = next((f"{f.reads}.csv" for f in load() if f.name == name and f.campaign == "containers"), "summary.csv")
    results = paths.root() / "data/results"
    if source and not (results / source / table).is_file():
        have = sorted(p.parent.name for p in results.glob(f"*/{table}"))
        return (f"FROM={source}: no data/results/{source}/{table} to redraw from (make figure measures nothing); "
                f"the campaigns with one: {', '.join(have)}")
    return None


def from_config(name: str, source: str) -> str:
    """The ``--config`` words by which a redraw of figure ``name`` reads campaign ``source`` (``make figure
    FROM=``), for a shell: a companion campaign's figure sets only its key (``paper.containers_campaign``,
    ``paper.datapaths_campaign``); any other sets the campaign, and the data paths' with it (the default
    study draws both from one campaign).  Empty for a source that is not a campaign's name."""
    if not _is_campaign_name(source):
        return ""
    fig = next((f for f in load() if f.name == name), None)
    if fig is not None and fig.campaign != "main":
        return f"""--config 'paper={{"{fig.campaign}_campaign": "{source}"}}'"""
    return f"""--config campaign={source} 'paper={{"datapaths_campaign": "{source}"}}'"""


def remeasure_overlay(name: str, study: dict, testbeds: dict[str, dict]) -> dict:
    """A study layer (``--configfile``) that measures only what figure ``name`` draws: the experiments of
    the benchmarks it draws, on the study's testbeds of the kinds it draws (``make remeasure``)."""
    from .benchmarks import REGISTRY

    fig = next((f for f in load() if f.name == name), None)
    if fig is None or fig.campaign != "main":
        raise FigureError(f"FIGURE={name}: " + (
            "a figure of a companion campaign: make containers or make datapaths measures a new one"
            if fig else "not a figure of the campaign's own (a study's redraw draws from the whole campaign: make)"))
    wanted = {REGISTRY[b].experiment for b in fig.draws}
    beds = [t for t in study["testbeds"] if not fig.draws_kinds or testbeds[t]["kind"] in fig.draws_kinds]
    return {"testbeds": beds, "skip_unoffered": True,
            "experiments": {e: {"enabled": e in wanted} for e in study["experiments"]}}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--remeasure"]:      # the layer of make remeasure, as YAML on standard output
        import yaml

        from .config import load_study
        try:
            print(yaml.safe_dump(remeasure_overlay(sys.argv[2], *load_study()), sort_keys=False), end="")
        except FigureError as exc:
            sys.exit(f"hpcvirt: {exc}")
        sys.exit(0)
    if sys.argv[1:2] == ["--from-config"]:    # make figure FROM=: the words of its --config
        print(from_config(*sys.argv[2:4]))
        sys.exit(0)
    problem = check_target(*sys.argv[1:3])
    if problem:
        sys.exit(f"hpcvirt: {problem}")
