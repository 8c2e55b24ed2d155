"""One section per study: its testbeds and ours, every value it reports, what
became of each of its figures, and the verdicts of its claims.

Inputs are data only: ``data/reference/*.csv`` (the studies' values, testbeds
and figures), ``data/reference/reproduction.yaml`` (our counterpart of each
testbed and figure, or why there is none) and the claims' verdicts of the
campaign (hpcvirt.claims).  A testbed or a data figure of a study that the
map does not cover is an error, so a study cannot silently lose a figure.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import yaml

from . import redraw, yamlio
from .claims import STUDIES
from .claims_tex import tex_table
from .labels import COMPARATOR_TEX, accel_text_error, for_accel, guests_accel, latex_escape, tex

NAMES = {"exposito2012": "Exp\\'osito et al. (2012)", "nanos2010": "Nanos et al. (2010)",
         "atif2016": "Atif et al. (2016)", "ramakrishnan2011": "Ramakrishnan et al. (2011)",
         "richter2015": "Richter et al. (2015)"}
# metric name suffix -> unit as the study reports it
UNITS = {"_us": "µs", "_gbps": "Gbit/s", "_MiBps": "MiB/s", "_MBps": "MB/s", "_pct": "%", "_pctpts": "points",
         "_s": "s", "_processes": "processes", "_cores": "cores", "_factor": "×", "_ratio": "×"}


VALUES = "values in the table below"  # the kind of a figure the study reports values from


class StudyError(ValueError):
    """A reproduction map that does not cover a study."""


def load_map(path: str | Path, testbeds: pd.DataFrame) -> dict:
    path = Path(path)
    try:
        m = yamlio.load_file(path)
    except (OSError, yaml.YAMLError) as exc:
        raise StudyError(f"{path}: cannot read: {exc}") from None
    if not isinstance(m, dict) or set(m) != set(STUDIES):
        raise StudyError(f"{path}: top level must have exactly the studies {', '.join(STUDIES)}")
    for study, entry in m.items():
        if set(entry) != {"testbeds", "figures"}:
            raise StudyError(f"{path}: {study}: needs exactly testbeds and figures")
        want = set(testbeds.loc[testbeds["study"] == study, "testbed_id"])
        if set(entry["testbeds"]) != want:
            raise StudyError(f"{path}: {study}.testbeds: must name the testbeds of testbeds.csv: missing "
                             f"{sorted(want - set(entry['testbeds']))}, unknown {sorted(set(entry['testbeds']) - want)}")
        for fig, f in entry["figures"].items():
            if not isinstance(f, dict) or len({"ours", "not"} & set(f)) != 1 or set(f) - {"ours", "not", "note",
                                                                                             "redraw", "not_redrawn"}:
                raise StudyError(f"{path}: {study}.figures[{fig!r}]: needs ours (figure names) or not (the reason), "
                                 "an optional note, and redraw (hpcvirt.redraw) or not_redrawn (why its reported "
                                 "values are not drawn beside ours)")
            if "redraw" in f and "not_redrawn" in f:
                raise StudyError(f"{path}: {study}.figures[{fig!r}]: redraw or not_redrawn, not both")
            if "redraw" in f and "ours" not in f:
                raise StudyError(f"{path}: {study}.figures[{fig!r}]: redraw needs ours (the figures it stands beside)")
        for key in ("testbeds", "figures"):
            if why := accel_text_error(entry[key]):
                raise StudyError(f"{path}: {study}.{key}: {why}")
    return m


def unit_of(metric: str) -> tuple[str, str]:
    """(quantity, unit as reported) of a reference metric name such as latency_us."""
    for suffix in sorted(UNITS, key=len, reverse=True):
        if metric.endswith(suffix):
            return metric[: -len(suffix)].replace("_", " "), UNITS[suffix]
    return metric.replace("_", " "), ""


def _figure_name(figure_or_table: str) -> str:
    return re.sub(r"\s*\(col [^)]*\)$", "", figure_or_table)


def figures_of(study: str, ref: pd.DataFrame, figs: pd.DataFrame) -> list[tuple[str, str]]:
    """(figure, kind) of the study: its figures without data and the figures
    and tables its values come from.  A figure it reports values from is of
    kind VALUES even where it is also listed without data, so that its
    status says whether those values are drawn beside ours, or why not."""
    out = {r.figure: r.figure_type for r in figs[figs["study"] == study].itertuples()}
    for f in ref.loc[ref["study"] == study, "figure_or_table"]:
        out[_figure_name(f)] = VALUES
    return sorted(out.items())


def drawn_figures(study: str, rmap: dict, ref: pd.DataFrame) -> set[str]:
    """The study's figures and tables (named as :func:`figures_of` names them) whose values its redraws
    draw: a sweep's rows name figures, a bar's reference names rows of the study's values."""
    names, rows = set(), set()
    for f in rmap[study]["figures"].values():
        for d in f.get("redraw", ()):
            if d["layout"] == "sweep":
                names |= {x for r in d["rows"] for x in r["reference"]}
            else:
                rows |= {x for g in d["groups"] for x in g["reference"]}
    names |= set(ref.loc[(ref["study"] == study) & ref["row_id"].isin(rows), "figure_or_table"])
    return {_figure_name(n) for n in names}


def figure_status(study: str, figure: str, kind: str, rmap: dict, available: set[str],
                  drawn: set[str] | None = None) -> tuple[str, str]:
    """(status, what this paper shows of it) of one of the study's figures or tables; ``drawn``
    (:func:`drawn_figures`): the ones whose values a redraw draws (a figure whose panels it draws counts);
    a figure of a redrawn entry whose own values no redraw draws (a comparison of panels, a statement over
    all of them) is measured, its values not drawn."""
    rules = rmap[study]["figures"]
    for key in sorted(rules, key=len, reverse=True):
        if figure.startswith(key):
            r = rules[key]
            if "not" in r:
                return "not reproduced", r["not"]
            ours = [f for f in r["ours"] if f in available]
            note = f"{(': ' + latex_escape(r['note'])) if r.get('note') else ''}"
            refs = ", ".join(f"\\hvfigref{{{f}}}" for f in ours)
            if r.get("redraw"):
                redrawn = ", ".join(f"\\ref{{fig:{redraw.pdf_name(study, d)}}}" for d in r["redraw"])
                panels = drawn is None or figure in drawn or any(d.startswith(figure + " ") for d in drawn)
                if not panels:
                    return "measured, values not drawn", (f"Fig.~{redrawn} draws the values of its figure or "
                                                          f"table; these (compared, or stated over it) are not drawn"
                                                          f"{'; ours in ' + refs if refs else ''}{note}")
                return "redrawn", (f"Fig.~{redrawn}, its reported values beside ours"
                                   f"{'; in full in ' + refs if refs else ''}{note}")
            if not ours:
                return "not reproduced", f"{', '.join(r['ours'])} not measured in this campaign"
            if kind == VALUES:
                # the study reports values from it: they are drawn beside ours, or the map says why not
                if "not_redrawn" not in r:
                    raise StudyError(f"reproduction map: {study} figure {figure!r} reports values: its entry "
                                     f"{key!r} needs redraw or not_redrawn (why they are not drawn beside ours)")
                return "measured, values not drawn", f"{refs}{note}; its values: {latex_escape(r['not_redrawn'])}"
            return "counterpart", f"{refs}{note}"
    if kind == "schematic":
        return "schematic", "nothing to measure"
    raise StudyError(f"reproduction map: {study} figure {figure!r} ({kind}) has no entry")


def _value(r) -> str:
    v = latex_escape(r["value"])
    comp = COMPARATOR_TEX.get(r["comparator"], None)
    comp = latex_escape(r["comparator"]) if comp is None else comp
    return f"{comp} {v}".strip()


def study_tex(study: str, ref: pd.DataFrame, testbeds: pd.DataFrame, figs: pd.DataFrame, verdicts: pd.DataFrame,
              rmap: dict, available: set[str], tidy: pd.DataFrame | None = None) -> str:
    """The LaTeX of one study's section; the map's texts as the campaign (``tidy``) says them: parts
    said under one accelerator only where its guests ran so (:func:`hpcvirt.labels.for_accel`)."""
    rmap = for_accel(rmap, guests_accel(tidy) if tidy is not None else None)
    out = [f"% Generated by hpcvirt.studies for {study}.  Do not edit.\n",
           f"\\subsection{{{NAMES[study]}}}\\label{{sec:study-{study}}}\n\n"]
    # testbeds
    tb = testbeds[testbeds["study"] == study]
    out.append("\\begin{center}\\small\n\\begin{longtable}{@{}p{0.2\\linewidth}p{0.17\\linewidth}"
               "p{0.12\\linewidth}p{0.43\\linewidth}@{}}\n"
               f"\\caption{{{NAMES[study]}: its testbeds and the ones of this artifact that stand in for "
               f"them.}}\\label{{tab:testbeds-{study}}}\\\\\n"
               "\\toprule its testbed & virtualization & interconnect & our counterpart \\\\ \\midrule\n")
    for r in tb.itertuples():
        out.append(f"{tex(r.testbed_name_as_in_paper)} & {tex(r.virtualization)} & {tex(r.interconnect)} & "
                   f"{tex(rmap[study]['testbeds'][r.testbed_id])} \\\\\n")
    out.append("\\bottomrule\n\\end{longtable}\n\\end{center}\n\n")
    # figures
    out.append("\\begin{center}\\small\n\\begin{longtable}{@{}p{0.3\\linewidth}p{0.14\\linewidth}"
               "p{0.5\\linewidth}@{}}\n"
               f"\\caption{{{NAMES[study]}: its figures and tables, and what this paper shows of each.}}"
               f"\\label{{tab:figures-{study}}}\\\\\n"
               "\\toprule its figure or table & status & ours \\\\ \\midrule\n")
    drawn = drawn_figures(study, rmap, ref)
    for fig, kind in figures_of(study, ref, figs):
        status, text = figure_status(study, fig, kind, rmap, available, drawn)
        out.append(f"{tex(fig)} & {status} & {text} \\\\\n")
    out.append("\\bottomrule\n\\end{longtable}\n\\end{center}\n\n")
    # its figures redrawn with the values it reports
    for fig, d in ((k, d) for k, f in rmap[study]["figures"].items() for d in f.get("redraw", ())):
        name = redraw.pdf_name(study, d)
        tcg = (" Our guests ran under TCG software emulation: their numbers measure the emulator, not a "
               "hypervisor." if tidy is not None and redraw.uses_tcg(d, tidy) else "")
        span = (" A reported start-up latency is drawn over the smallest sizes, a peak bandwidth over the upper "
                "ones." if d["layout"] == "sweep" else "")
        out.append("\\begin{figure}[tbp]\n\\centering\n"
                   f"\\includegraphics[width=\\linewidth]{{{name}.pdf}}\n"
                   f"\\caption{{{NAMES[study]}, {tex(fig)} redrawn: {tex(d['title'])}. Grey (dashed lines, "
                   f"shaded ranges, hatched bars, marked \\emph{{reported}}): the values the study reports "
                   f"(\\texttt{{data/reference/{study}.csv}}); in colour: this campaign's medians over its rounds "
                   f"with their confidence intervals.{span}{tcg} Redraw: \\texttt{{make figure FIGURE={name}\\hvifarchive{{}}{{ FROM=\\hvCampaign}}}}.}}"
                   f"\\label{{fig:{name}}}\n\\end{{figure}}\n\n")
        if d["layout"] == "bars" and tidy is not None:
            out.append(redraw.bars_table_tex(
                redraw.bar_values(tidy, ref, d), d, f"tab:{name}",
                f"{NAMES[study]}, {tex(fig)}: the numbers of Fig.~\\ref{{fig:{name}}} (ours: median and "
                f"confidence interval over the rounds; ratios paired by round)."))
    # every value it reports
    rows = ref[ref["study"] == study]
    out.append("\\begin{center}\\scriptsize\n\\begin{longtable}{@{}p{0.1\\linewidth}p{0.13\\linewidth}"
               "p{0.26\\linewidth}p{0.2\\linewidth}p{0.08\\linewidth}p{0.15\\linewidth}@{}}\n"
               f"\\caption{{{NAMES[study]}: every value it reports ({len(rows)} rows of "
               f"\\texttt{{data/reference/{study}.csv}}), with the unit it uses.}}\\label{{tab:values-{study}}}\\\\\n"
               "\\toprule row & figure/table & testbed & quantity [unit] & size, procs & value \\\\ \\midrule\n"
               "\\endfirsthead\n\\toprule row & figure/table & testbed & quantity [unit] & size, procs & value "
               "\\\\ \\midrule\n\\endhead\n")
    for _, r in rows.iterrows():
        q, unit = unit_of(r["metric"])
        where = ", ".join(x for x in (f"{r['message_size_bytes']} B" if r["message_size_bytes"] else "",
                                      r["processes_or_cores"]) if x)
        out.append(f"{tex(r['row_id'].rsplit('-', 1)[-1])} & {tex(r['figure_or_table'])} & {tex(r['testbed'])} & "
                   f"{tex(q)}{(' [' + tex(unit) + ']') if unit else ''} & {tex(where)} & {_value(r)} \\\\\n")
    out.append("\\bottomrule\n\\end{longtable}\n\\end{center}\n\n")
    # its claims
    out.append(tex_table(verdicts[verdicts["study"] == study], label=f"tab:claims-{study}",
                         caption=f"{NAMES[study]}: its claims checked on this campaign."))
    return "".join(out)


def all_tex(ref: pd.DataFrame, testbeds: pd.DataFrame, figs: pd.DataFrame, verdicts: pd.DataFrame, rmap: dict,
            available: set[str], tidy: pd.DataFrame | None = None) -> str:
    return "".join(study_tex(s, ref, testbeds, figs, verdicts, rmap, available, tidy) + "\\clearpage\n"
                   for s in STUDIES)
