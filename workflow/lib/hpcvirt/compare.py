"""A new campaign against the archived one: did it reproduce?

Per headline metric of every configuration both campaigns measured (latency
at the paper's size, peak bandwidth, NPB Mop/s, the stencil's time per
step), the two medians with their CIs over the rounds and whether the CIs
overlap; per claim, the two verdicts.  The archive was measured on another
machine: a difference says how far this machine is from that one, not
that either is wrong.
"""

from __future__ import annotations

import pandas as pd

from . import stats
from .analysis import normalize_units
from .labels import fmt_ci, fmt_g, latex_escape, unit_tex

HEAD = "\\toprule testbed & benchmark & MPI, path & ranks & metric & archive & this campaign & agree \\\\ \\midrule\n"
CONFIG = ["testbed", "benchmark", "variant", "mpi", "interconnect", "ranks", "placement"]


def headline(tidy: pd.DataFrame, latency_bytes: int = 8) -> pd.DataFrame:
    """One value per configuration, metric and round."""
    df = normalize_units(tidy).reset_index(drop=True)
    df[CONFIG] = df[CONFIG].fillna("").astype(str)
    parts = []
    lat = df[df["metric"].isin(["latency", "latency_avg"]) & (df["msg_bytes"] == latency_bytes)]
    parts.append(lat.assign(what=f"latency at {latency_bytes} B"))
    bw = df[df["metric"] == "bandwidth"]
    parts.append(bw.groupby(CONFIG + ["metric", "unit", "rep"], as_index=False)["value"].max()
                 .assign(what="peak bandwidth"))
    parts.append(df[df["metric"] == "mops_total"].assign(what="Mop/s"))
    parts.append(df[df["metric"] == "time_per_step"].assign(what="time per step"))
    out = pd.concat(parts, ignore_index=True)
    return out[CONFIG + ["what", "unit", "rep", "value"]]


def compare(new: pd.DataFrame, archive: pd.DataFrame, latency_bytes: int = 8, level: float = 0.95) -> pd.DataFrame:
    a, b = headline(archive, latency_bytes), headline(new, latency_bytes)
    rows = []
    for key, ga in a.groupby(CONFIG + ["what", "unit"], sort=True):
        gb = b[(b[CONFIG + ["what", "unit"]] == pd.Series(key, index=CONFIG + ["what", "unit"])).all(axis=1)]
        if gb.empty:
            continue
        ca, cb = stats.median_ci(ga["value"], level), stats.median_ci(gb["value"], level)
        overlap = ca["ci_low"] <= cb["ci_high"] and cb["ci_low"] <= ca["ci_high"]
        rows.append(dict(zip(CONFIG + ["what", "unit"], key), archive=ca["median"], archive_lo=ca["ci_low"],
                         archive_hi=ca["ci_high"], archive_n=ca["n"], new=cb["median"], new_lo=cb["ci_low"],
                         new_hi=cb["ci_high"], new_n=cb["n"],
                         ratio=cb["median"] / ca["median"] if ca["median"] else float("nan"), agree=overlap))
    return pd.DataFrame(rows)


def tex(metrics: pd.DataFrame, verdicts_new: pd.DataFrame, verdicts_archive: pd.DataFrame, new: str,
        archive: str, sentences: list[str] | None = None) -> str:
    """The section; empty when the campaign is the archive.  ``sentences``:
    the paper's sentences this campaign contradicts (hpcvirt.claims_tex.check_sentences)."""
    if new == archive:
        return "% The campaign is the archived one: nothing to compare.\n"
    out = [f"\\section{{This Campaign Against the Archive}}\\label{{sec:vs-archive}}\n\n"
           f"This paper was built from campaign \\texttt{{{latex_escape(new)}}}. The committed archive, "
           f"\\texttt{{{latex_escape(archive)}}}, was measured in another campaign, perhaps on another machine; "
           "this section says what of it this campaign reproduced. Two medians agree when their confidence intervals overlap "
           "(a value of one round has no interval: it agrees when the other's interval holds it).\n\n"]
    if not metrics.empty:
        agree = int(metrics["agree"].sum())
        out.append(f"Of {len(metrics)} headline metrics both campaigns measured, {agree} agree.\n\n")
        out.append("\\begin{center}\\scriptsize\n\\begin{longtable}{@{}p{0.06\\linewidth}p{0.16\\linewidth}"
                   "p{0.13\\linewidth}p{0.04\\linewidth}p{0.15\\linewidth}p{0.16\\linewidth}p{0.16\\linewidth}"
                   "p{0.05\\linewidth}@{}}\n"
                   "\\caption{Headline metrics: the archive against this campaign (median [CI]; one round: the median "
                   "alone).}"
                   "\\label{tab:vs-archive}\\\\\n" + HEAD + "\\endfirsthead\n" + HEAD + "\\endhead\n")
        for r in metrics.itertuples():
            out.append(f"{latex_escape(r.testbed)} & {latex_escape(r.benchmark)} {latex_escape(r.variant)} & "
                       f"{latex_escape(r.mpi)} {latex_escape(r.interconnect)} & {latex_escape(r.ranks)} & "
                       f"{latex_escape(r.what)} [{unit_tex(r.unit)}] & "
                       f"{fmt_ci(r.archive, r.archive_lo, r.archive_hi, r.archive_n, fmt_g)} & "
                       f"{fmt_ci(r.new, r.new_lo, r.new_hi, r.new_n, fmt_g)} & "
                       f"{'yes' if r.agree else 'no'} \\\\\n")
        out.append("\\bottomrule\n\\end{longtable}\n\\end{center}\n\n")
    va = verdicts_archive.drop_duplicates("claim").set_index("claim")["claim_verdict"]
    vn = verdicts_new.drop_duplicates("claim").set_index("claim")["claim_verdict"]
    tested = [c for c in vn.index if va.get(c) not in (None, "not testable")]
    same = [c for c in tested if vn[c] == va[c]]
    out.append(f"Of the {len(tested)} claims the archive could test, {len(same)} have the same verdict on this "
               "campaign.")
    changed = [c for c in tested if vn[c] != va[c]]
    if changed:
        out.append(" Changed: " + "; ".join(f"{c} ({va[c]} $\\to$ {vn[c]})" for c in changed) + ".")
    # a claim the archive's host could not test (its guests emulated) that this campaign decides
    decided = [c for c in vn.index if va.get(c) == "not testable" and vn[c] in ("holds", "does not hold", "inconclusive")]
    if decided:
        out.append(" Decided on this campaign, not testable on the archive's host: "
                   + "; ".join(f"{c} ({vn[c]})" for c in decided) + ".")
    out.append("\n")
    if sentences:
        out.append("\n\\paragraph{Sentences written for the archive.} The text of this paper was written for the "
                   "archived campaign. On this campaign the verdicts these sentences cite differ (boxed in the "
                   "text):\n\\begin{itemize}\n")
        for p in sentences:
            out.append(f"\\item \\texttt{{{latex_escape(p.split(': ', 1)[0])}}}: "
                       f"{latex_escape(p.split(' says ', 1)[-1].split(': rewrite', 1)[0])}\n")
        out.append("\\end{itemize}\n")
    return "".join(out)
