"""The studies' figures redrawn: the values a study reports beside this
campaign's measurements of the same thing.

A figure entry of ``data/reference/reproduction.yaml`` may carry ``redraw``,
a list of drawings (each becomes ``paper/figures/study-<study>-<name>.pdf``)
in one of two layouts::

    redraw:
      - name: fig4                      # [a-z0-9-]+
        layout: sweep                   # latency and bandwidth over the message size
        title: network ping-pong
        rows:                           # one row of two panels per testbed pair
          - title: "EC2 (Xen HVM) | two QEMU guests"
            reference: ["Fig. 4 top"]   # figure_or_table values of the study's CSV
            ours: {testbed: vm, interconnect: tcp}   # a selector of tidy columns (no metric)
        benchmarks: [netpipe, imb, qperf]
      - name: netperf
        layout: bars                    # one value per bar, in the unit the study reports
        title: raw TCP bandwidth
        quantity: bandwidth             # the y axis: quantity [unit]
        unit: MiB/s
        groups:
          - label: native
            reference: [nanos2010-001]  # row_ids
            ours: [{label: bridge, testbed: bridge, benchmark: qperf, variant: tcp_bw, metric: bandwidth, at: peak}]

Reported values are drawn as grey dashed lines or hatched bars and say
"reported"; ours are medians over the campaign's rounds with their
order-statistic CIs (a ``bars`` selector has the ``at`` of hpcvirt.claims).
Inputs are tables only: the campaign's tidy rows and the study's CSV.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from . import stats, yamlio
from .analysis import normalize_units
from .benchmarks import REGISTRY
from .labels import COMPARATOR_TEX, COMPARATOR_TEXT, RAW_TCP, accel_text_error, fmt_axis, fmt_ci, tex
from .query import SELECT_KEYS, QueryError, leaves, per_round, select

LAYOUTS = ("sweep", "bars")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
SWEEP_METRICS = {"latency": ("latency_us", "µs"), "bandwidth": ("bandwidth_gbps", "Gbit/s")}
SWEEP_BENCHMARKS = tuple(REGISTRY.point_to_point_rows())     # the point-to-point benchmarks' rows
#: their latency metrics (shown as latency)
SWEEP_LATENCY = tuple(sorted({p.latency[2] for _, p in REGISTRY.point_to_point() if p.latency}))
# (our unit, the study's unit) -> factor
CONVERT = {("Gbit/s", "Gbit/s"): 1.0, ("Gbit/s", "MiB/s"): 1e9 / 8 / 2**20, ("Gbit/s", "MB/s"): 1e9 / 8 / 1e6,
           ("us", "µs"): 1.0, ("fraction", "%"): 100.0, ("s", "s"): 1.0, ("Mop/s", "Mop/s"): 1.0}
UNITS = {u for _, u in CONVERT} | {"×"}   # × (and %): ratio bars


class RedrawError(ValueError):
    """A redraw declaration that cannot be drawn."""


def validate(path, study: str, figure: str, spec, ref: pd.DataFrame) -> list[dict]:
    """The drawings of one figure entry, checked against the study's values."""
    where = f"{path}: {study}.figures[{figure!r}].redraw"

    def fail(msg):
        raise RedrawError(f"{where}: {msg}")

    if not isinstance(spec, list) or not spec:
        fail("must be a list of drawings")
    if why := accel_text_error(spec):
        fail(why)
    rows = ref[ref["study"] == study]
    out = []
    for i, d in enumerate(spec):
        w = f"[{i}]"
        if not isinstance(d, dict) or d.get("layout") not in LAYOUTS:
            fail(f"{w}: layout must be one of {', '.join(LAYOUTS)}")
        if not isinstance(d.get("name"), str) or not NAME_RE.match(d["name"]):
            fail(f"{w}: name must match {NAME_RE.pattern}")
        if not isinstance(d.get("title"), str):
            fail(f"{w}: title must say what is drawn")
        keys = {"sweep": {"name", "layout", "title", "rows", "benchmarks"},
                "bars": {"name", "layout", "title", "quantity", "unit", "groups"}}[d["layout"]]
        if set(d) != keys:
            fail(f"{w}: a {d['layout']} drawing needs exactly {', '.join(sorted(keys))}")
        if d["layout"] == "sweep":
            bad = set(d["benchmarks"]) - set(SWEEP_BENCHMARKS)
            if bad:
                fail(f"{w}.benchmarks: unknown {sorted(bad)}; allowed: {', '.join(SWEEP_BENCHMARKS)}")
            for j, r in enumerate(d["rows"]):
                if set(r) != {"title", "reference", "ours"}:
                    fail(f"{w}.rows[{j}]: needs exactly title, reference, ours")
                _selector(fail, f"{w}.rows[{j}].ours", r["ours"], metric=False)
                for f in r["reference"]:
                    if not (rows["figure_or_table"] == f).any():
                        fail(f"{w}.rows[{j}].reference: no value of {study} comes from {f!r}")
        else:
            if d["unit"] not in UNITS:
                fail(f"{w}.unit: {d['unit']!r}; allowed: {', '.join(sorted(UNITS))}")
            for j, g in enumerate(d["groups"]):
                if set(g) != {"label", "reference", "ours"}:
                    fail(f"{w}.groups[{j}]: needs exactly label, reference, ours")
                for rid in g["reference"]:
                    if not (rows["row_id"] == rid).any():
                        fail(f"{w}.groups[{j}].reference: {rid!r} is not a row of {study}")
                for k, s in enumerate(g["ours"]):
                    where = f"{w}.groups[{j}].ours[{k}]"
                    if not isinstance(s, dict) or not isinstance(s.get("label"), str):
                        fail(f"{where}: needs a label")
                    if "ratio" in s:
                        # a ratio of two configurations paired by round, times a factor, in the drawing's unit
                        if set(s) - {"label", "ratio", "times"} or not (isinstance(s["ratio"], list)
                                                                        and len(s["ratio"]) == 2):
                            fail(f"{where}: a ratio bar needs label, ratio [numerator, denominator] and an "
                                 "optional times")
                        if not isinstance(s.get("times", 1), (int, float)):
                            fail(f"{where}.times: must be a number")
                        for x in s["ratio"]:
                            _selector(fail, f"{where}.ratio", x, metric=True)
                    else:
                        _selector(fail, where, {x: v for x, v in s.items() if x != "label"}, metric=True)
        out.append(d)
    return out


def _selector(fail, where, sel, metric: bool):
    if not isinstance(sel, dict):
        fail(f"{where}: must be a mapping of tidy columns")
    allowed = SELECT_KEYS if metric else SELECT_KEYS - {"metric", "at"}
    bad = set(sel) - allowed
    if bad:
        fail(f"{where}: unknown keys {sorted(bad)}; allowed: {', '.join(sorted(allowed))}")
    if metric and "metric" not in sel:
        fail(f"{where}: needs metric")


def drawings(rmap: dict, ref: pd.DataFrame, path="reproduction.yaml") -> list[tuple[str, str, dict]]:
    """(study, figure key, drawing) of every redraw of the map, validated."""
    out = []
    for study, entry in rmap.items():
        for fig, f in entry["figures"].items():
            for d in validate(path, study, fig, f["redraw"], ref) if "redraw" in f else ():
                out.append((study, fig, d))
    return out


def pdf_name(study: str, drawing: dict) -> str:
    return f"study-{study}-{drawing['name']}"


def load(directory) -> tuple[pd.DataFrame, list[tuple[str, str, dict]]]:
    """The studies' values and every redraw of ``<directory>/reproduction.yaml``."""
    import yaml

    from .reference import load_reference

    path = Path(directory) / "reproduction.yaml"
    try:
        rmap = yamlio.load_file(path)
    except (OSError, yaml.YAMLError) as exc:
        raise RedrawError(f"{path}: cannot read: {exc}") from None
    ref = load_reference(directory)
    return ref, drawings(rmap, ref, path)


def pdf_names(directory) -> list[str]:
    return [pdf_name(s, d) for s, _, d in load(directory)[1]]


# ------------------------------------------------------------------ data
def _tcg(tidy: pd.DataFrame, sels) -> bool:
    """Whether the rows of these selectors (ratios: their parts) include guests under TCG."""
    return any((select(tidy, x)["accel"] == "tcg").any() for x in leaves(sels))


def _bar_selector(s: dict) -> dict:
    """A bar's selector as hpcvirt.claims reads it (a ratio bar: a ratio selector)."""
    return {"ratio": s["ratio"]} if "ratio" in s else {k: v for k, v in s.items() if k != "label"}


def uses_tcg(drawing: dict, tidy: pd.DataFrame) -> bool:
    """Whether the campaign's rows this drawing shows include guests under TCG."""
    sels = ([r["ours"] for r in drawing["rows"]] if drawing["layout"] == "sweep" else
            [_bar_selector(s) for g in drawing["groups"] for s in g["ours"]])
    return _tcg(tidy, sels)


def sweep_rows(summary: pd.DataFrame, ours: dict, benchmarks) -> pd.DataFrame:
    """Our curves of one sweep row: median and CI per size, series and metric."""
    d = select(summary, ours)
    d = d[d["benchmark"].isin(benchmarks) & d["metric"].isin([*SWEEP_LATENCY, "bandwidth"])].copy()
    d["metric"] = d["metric"].replace({m: "latency" for m in SWEEP_LATENCY})
    # a benchmark below MPI (its rows' mpi: none) is raw TCP, drawn as points, not a curve
    d["series"] = [(f"{b} {RAW_TCP}" if m == "none" else f"{b} {m}") + (f" ({i})" if len(set(d["interconnect"])) > 1
                                                                        else "")
                   for b, m, i in zip(d["benchmark"], d["mpi"], d["interconnect"])]
    return d.sort_values(["series", "msg_bytes"])


def reference_lines(ref: pd.DataFrame, study: str, figures) -> pd.DataFrame:
    """The study's values of these figures that a sweep draws: one row per
    (what, metric), with low/high (equal unless the study gives a range)."""
    d = ref[(ref["study"] == study) & ref["figure_or_table"].isin(figures)]
    rows = []
    for metric, (name, unit) in SWEEP_METRICS.items():
        m = d[d["metric"] == name]
        for what, g in m.groupby("transport_middleware", sort=False):
            vals = g["value"].astype(float)
            kinds = set(g["value_kind"])
            comp = "" if "approximate_range_low" in kinds else g["comparator"].iloc[0]
            rows.append({"metric": metric, "unit": unit, "what": what, "low": vals.min(), "high": vals.max(),
                         "comparator": comp, "rows": ", ".join(g["row_id"])})
    return pd.DataFrame(rows, columns=["metric", "unit", "what", "low", "high", "comparator", "rows"])


def bar_values(tidy: pd.DataFrame, ref: pd.DataFrame, drawing: dict, level: float = 0.95) -> pd.DataFrame:
    """One row per bar: group, label, reported or ours, value (and CI), in the drawing's unit."""
    tidy = normalize_units(tidy).reset_index(drop=True)
    unit = drawing["unit"]
    out = []
    for g in drawing["groups"]:
        for rid in g["reference"]:
            r = ref[ref["row_id"] == rid].iloc[0]
            out.append({"group": g["label"], "label": f"reported: {r['testbed']}", "source": "reported",
                        "value": float(r["value"]), "ci_low": np.nan, "ci_high": np.nan, "n": np.nan,
                        "comparator": r["comparator"], "tcg": False, "missing": ""})
        for s in g["ours"]:
            base = {"group": g["label"], "label": s["label"], "source": "ours", "comparator": "="}
            sel = _bar_selector(s)
            try:
                per_rep = per_round(tidy, sel)
            except QueryError as exc:
                raise RedrawError(f"{drawing['name']}: {exc}") from None
            if per_rep.empty:
                out.append(dict(base, value=np.nan, ci_low=np.nan, ci_high=np.nan, n=0, tcg=False,
                                missing="not measured in this campaign"))
                continue
            if "ratio" in s:                       # a ratio is shown in the drawing's unit, times the factor
                factor = float(s.get("times", 1))
            else:
                ours_unit = select(tidy, sel)["unit"].iloc[0]
                factor = CONVERT.get((ours_unit, unit))
                if factor is None:
                    raise RedrawError(f"{drawing['name']}: {s['label']}: our unit {ours_unit} cannot be shown in "
                                      f"{unit}")
            ci = stats.median_ci(per_rep.to_numpy(dtype=float) * factor, level)
            out.append(dict(base, value=ci["median"], ci_low=ci["ci_low"], ci_high=ci["ci_high"], n=ci["n"],
                            tcg=_tcg(tidy, [sel]), missing=""))
    return pd.DataFrame(out)


def bars_table_tex(bars: pd.DataFrame, drawing: dict, label: str, caption: str) -> str:
    """The numbers of a bar drawing as a LaTeX table: per group, the reported
    values and ours (median and CI, n rounds)."""
    lines = ["\\begin{center}\\small\n\\begin{longtable}{@{}p{0.3\\linewidth}p{0.42\\linewidth}r@{}}\n",
             f"\\caption{{{caption}}}\\label{{{label}}}\\\\\n",
             f"\\toprule set-up or group & reported by the study / ours & value [{tex(drawing['unit'])}] \\\\ "
             "\\midrule\n\\endfirsthead\n\\toprule set-up or group & reported / ours & value \\\\ \\midrule\n\\endhead\n"]
    for g, rows in bars.groupby("group", sort=False):
        for i, r in enumerate(rows.itertuples()):
            name = tex(g) if i == 0 else ""
            if r.source == "reported":
                what = f"reported: {tex(r.label.removeprefix('reported: '))}"
                val = f"{COMPARATOR_TEX.get(r.comparator, '')} {fmt_axis(r.value)}".lstrip()
            elif r.missing:
                what, val = f"ours: {tex(r.label)}", tex(r.missing)
            else:
                what = f"ours: {tex(r.label)}"
                val = f"{fmt_ci(r.value, r.ci_low, r.ci_high, r.n, fmt_axis)}, n={int(r.n)}"
            lines.append(f"{name} & {what} & {val} \\\\\n")
        if not (rows["source"] == "ours").any():
            lines.append(" & ours: no counterpart on this machine & -- \\\\\n")
    lines.append("\\bottomrule\n\\end{longtable}\n\\end{center}\n\n")
    return "".join(lines)


# ------------------------------------------------------------------ drawing
REF_COLOR = "0.35"
#: what a study's value of a sweep is, and the part of the size axis (axes fractions) it is drawn over
REPORTED_SPAN = {"latency": ("start-up", (0.0, 0.3)), "bandwidth": ("peak", (0.65, 1.0))}


def draw_sweep(ax_pair, summary: pd.DataFrame, ref: pd.DataFrame, study: str, row: dict, benchmarks, palette):
    ours = sweep_rows(summary, row["ours"], benchmarks)
    lines = reference_lines(ref, study, row["reference"])
    tcg = bool((ours["accel"] == "tcg").any()) if len(ours) else False
    for ax, metric in zip(ax_pair, SWEEP_METRICS):
        unit = SWEEP_METRICS[metric][1]
        d = ours[ours["metric"] == metric]
        for series, s in d.groupby("series", sort=True):
            c = palette[series]
            if s["msg_bytes"].nunique() > 1 and f" {RAW_TCP}" not in series:
                ax.plot(s["msg_bytes"], s["median"], color=c, lw=1.1, label=series)
                ax.fill_between(s["msg_bytes"], s["ci_low"], s["ci_high"], color=c, alpha=0.2, lw=0)
            else:
                ax.errorbar(s["msg_bytes"], s["median"], yerr=[s["median"] - s["ci_low"], s["ci_high"] - s["median"]],
                            fmt="o", ms=3, color=c, lw=0.8, label=series)
        if d.empty:
            ax.text(0.5, 0.5, "not measured in this campaign", transform=ax.transAxes, ha="center", fontsize=7)
        ls = lines[lines["metric"] == metric]
        styles = ["--", ":", "-.", (0, (5, 1, 1, 1))]
        ref_handles = []
        # the studies report a start-up latency (the smallest messages) and a peak bandwidth (long messages):
        # each is drawn over that end of the sizes only, not as a curve across all of them
        what, (x0, x1) = REPORTED_SPAN[metric]
        for k, (_, r) in enumerate(ls.iterrows()):
            comp = {"~": "≈ ", "<": "< ", "up_to": "up to ", ">=": "≥ ", "=": ""}.get(r["comparator"], "")
            val = f"{fmt_axis(r['low'])}–{fmt_axis(r['high'])}" if r["high"] > r["low"] else fmt_axis(r["low"])
            label = f"reported {what}, {r['what']}: {comp}{val} {unit}"
            if r["high"] > r["low"]:
                ref_handles.append(ax.axhspan(r["low"], r["high"], x0, x1, facecolor="0.6", alpha=0.35,
                                              hatch="////", edgecolor=REF_COLOR, lw=0, label=label))
            else:
                ref_handles.append(ax.axhline(r["low"], x0, x1, color=REF_COLOR, ls=styles[k % len(styles)],
                                              lw=1.2, label=label))
        if ref_handles:
            ax.add_artist(ax.legend(handles=ref_handles, fontsize=5, loc="upper left" if metric == "latency"
                                    else "lower right", framealpha=0.85))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size [bytes]")
        ax.set_ylabel(f"{metric} [{unit}]")
    title = row["title"] + ("\nTCG: our guest numbers measure the emulator, not a hypervisor" if tcg else "")
    return title, tcg


def draw(drawing: dict, study: str, summary: pd.DataFrame, tidy: pd.DataFrame, ref: pd.DataFrame, pdf_path):
    """Draw one redraw declaration to pdf_path; returns whether guests under TCG are in it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    matplotlib.rcParams["pdf.fonttype"] = 42
    sns.set_theme(context="paper", style="whitegrid")
    summary = summary.copy()
    summary["variant"] = summary["variant"].fillna("")
    if drawing["layout"] == "sweep":
        n = len(drawing["rows"])
        fig = plt.figure(figsize=(7.0, 2.6 * n + 0.5), layout="constrained")
        subfigs = fig.subfigures(n, 1, squeeze=False)[:, 0]
        series = sorted(set().union(*(set(sweep_rows(summary, r["ours"], drawing["benchmarks"])["series"])
                                      for r in drawing["rows"])))
        palette = dict(zip(series, sns.color_palette("colorblind", max(1, len(series)))))
        tcg_any, handles = False, {}
        for sub, row in zip(subfigs, drawing["rows"]):
            ax_pair = sub.subplots(1, 2)
            title, tcg = draw_sweep(ax_pair, summary, ref, study, row, drawing["benchmarks"], palette)
            tcg_any |= tcg
            sub.suptitle(title, fontsize=7.5)
            for ax in ax_pair:
                for h, lab in zip(*ax.get_legend_handles_labels()):
                    if not lab.startswith("reported"):
                        handles.setdefault(lab, h)
        if handles:
            fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=min(5, len(handles)),
                       fontsize=6.5, title="this campaign: median over its rounds, shaded: CI (grey: reported "
                       "by the study)", title_fontsize=6.5)
    else:
        bars = bar_values(tidy, ref, drawing)
        tcg_any = bool(bars["tcg"].any())
        groups = list(dict.fromkeys(bars["group"]))
        fig, ax = plt.subplots(figsize=(7.0, 2.9), constrained_layout=True)
        ours_labels = list(dict.fromkeys(bars.loc[bars["source"] == "ours", "label"]))
        palette = dict(zip(ours_labels, sns.color_palette("colorblind", max(1, len(ours_labels)))))
        ticks, ticklabels, seen = [], [], set()
        x = 0.0
        for g in groups:
            b = bars[bars["group"] == g]
            start = x
            for _, r in b.iterrows():
                if r["source"] == "reported":
                    ax.bar(x, r["value"], 0.8, color="white", edgecolor=REF_COLOR, hatch="///",
                           label="reported by the study" if "rep" not in seen else None)
                    seen.add("rep")
                    text = COMPARATOR_TEXT.get(r["comparator"], "") + fmt_axis(r["value"])
                elif r["missing"]:
                    ax.text(x, 0, "not\nmeasured", ha="center", va="bottom", fontsize=5.5, color="0.3")
                    text = ""
                else:
                    c = palette[r["label"]]
                    ax.bar(x, r["value"], 0.8, color=c, label=f"ours: {r['label']}" if r["label"] not in seen else None)
                    seen.add(r["label"])
                    ax.errorbar(x, r["value"], yerr=[[r["value"] - r["ci_low"]], [r["ci_high"] - r["value"]]],
                                color="black", lw=0.8, capsize=2)
                    text = fmt_axis(r["value"])
                if text:
                    top = r["ci_high"] if r["source"] == "ours" else r["value"]
                    ax.annotate(text, (x, top), xytext=(0, 2), textcoords="offset points", ha="center",
                                fontsize=5.5)
                x += 1
            ticks.append((start + x - 1) / 2)
            ticklabels.append(g)
            x += 0.8
        width = max(12, int(60 / max(1, len(groups))))       # characters per line of a group's label
        ax.set_xticks(ticks, [textwrap.fill(t, width) for t in ticklabels], fontsize=7 if len(groups) < 5 else 6)
        ax.set_ylabel(f"{drawing['quantity']} [{drawing['unit']}]")
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="ours: this campaign's\nmedian and CI",
                  title_fontsize=6)
        ax.margins(y=0.15)
        ax.set_title(textwrap.fill(drawing["title"], 110) + ("\nTCG: our guest numbers measure the emulator, not a "
                                                             "hypervisor" if tcg_any else ""), loc="left", fontsize=7)
    fig.savefig(pdf_path)
    plt.close(fig)
    return bool(tcg_any)
