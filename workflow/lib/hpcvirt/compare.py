"""A new campaign against the archived one: did it reproduce?

Per headline metric of every configuration both campaigns measured (latency
at the paper's size, peak bandwidth, NPB Mop/s, the stencil's time per
step), the two medians with their CIs over the rounds and whether the CIs
overlap; per claim, the two verdicts.  The archive was measured on another
machine: a difference says how far this machine is from that one, not
that either is wrong.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from . import provenance, stats
from .analysis import normalize_units
from .labels import fmt_ci, fmt_g, fmt_measured, latex_escape, unit_tex

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


def host_line(records) -> str:
    """The host of a campaign's first testbed record (``provenance.json``) as the comparison names it:
    CPU model and count, the L2 and L3 of one instance (:func:`hpcvirt.provenance.cache_sizes`), memory,
    kernel; empty without records."""
    host = next((json.loads(Path(p).read_text()).get("host") or {} for p in records), {})
    cpu = host.get("cpu") or {}
    ls = cpu.get("lscpu") or {}
    caches = provenance.cache_sizes(host)
    mem = re.search(r"memory=(\d+)", cpu.get("hwloc_synthetic") or "")
    parts = [cpu.get("model") or "", f"{ls['CPU(s)']} CPUs" if ls.get("CPU(s)") else "",
             *(f"{k} {caches[k] / 2**20:g} MiB" if caches[k] >= 2**20 else f"{k} {caches[k] // 1024} KiB"
               for k in ("L2", "L3") if k in caches),
             f"{int(mem.group(1)) / 2**30:.1f} GiB" if mem else "",
             f"kernel {(host.get('kernel') or {}).get('release')}" if (host.get("kernel") or {}).get("release") else ""]
    return latex_escape(", ".join(p for p in parts if p))


def shifts(metrics: pd.DataFrame) -> str:
    """Per kind of headline metric, the median of this campaign's medians over the archive's: the two
    machines' difference in speed where most move together."""
    parts = []
    for what, g in metrics.dropna(subset=["ratio"]).groupby("what", sort=True):
        up = int((g["ratio"] > 1).sum())
        parts.append(f"{latex_escape(what)} {fmt_g(g['ratio'].median())} times ({max(up, len(g) - up)} of "
                     f"{len(g)} {'higher' if up >= len(g) - up else 'lower'})")
    return "; ".join(parts)


def checks_agree(verdicts_new: pd.DataFrame, verdicts_archive: pd.DataFrame) -> tuple[int, int]:
    """(checks both campaigns computed a value of outside emulated guests, of those whose intervals overlap):
    the claims' quantities are ratios and differences of configurations measured on one machine."""
    cols = ["claim", "check", "median", "ci_low", "ci_high", "tcg"]
    if not all(set(cols) <= set(v.columns) for v in (verdicts_new, verdicts_archive)):
        return 0, 0
    m = verdicts_new[cols].merge(verdicts_archive[cols], on=["claim", "check"], suffixes=("_n", "_a"))
    m = m[m["median_n"].notna() & m["median_a"].notna()
          & ~m["tcg_n"].astype(str).eq("True") & ~m["tcg_a"].astype(str).eq("True")]
    overlap = (m["ci_low_n"] <= m["ci_high_a"]) & (m["ci_low_a"] <= m["ci_high_n"])
    return len(m), int(overlap.sum())


def tex(metrics: pd.DataFrame, verdicts_new: pd.DataFrame, verdicts_archive: pd.DataFrame, new: str,
        archive: str, sentences: list[str] | None = None, hosts: tuple[str, str] = ("", ""),
        quick: bool = False) -> str:
    """The section; empty when the campaign is the archive.  ``sentences``:
    the paper's sentences this campaign contradicts (hpcvirt.claims_tex.check_sentences); ``hosts``:
    (the archive's, this campaign's) as :func:`host_line` names them; ``quick``: a quick look, whose
    reduced study (smaller sizes and inputs, one round) differs from the archive's by design."""
    if new == archive:
        return "% The campaign is the archived one: nothing to compare.\n"
    where = (f" The archive's host: {hosts[0]}; this campaign's: {hosts[1]}." if all(hosts) and hosts[0] != hosts[1]
             else f" Both hosts: {hosts[1]}." if all(hosts) else "")
    out = [f"\\section{{This Campaign Against the Archive}}\\label{{sec:vs-archive}}\n\n"
           f"This paper was built from campaign \\texttt{{{latex_escape(new)}}}. The committed archive, "
           f"\\texttt{{{latex_escape(archive)}}}, was measured in another campaign, perhaps on another machine."
           f"{where} This section says what of it this campaign reproduced. Two medians agree when their confidence "
           "intervals overlap (a value of one round has no interval: it agrees when the other's interval holds it, "
           "and two single rounds agree only when equal).\n\n"]
    if not metrics.empty:
        agree = int(metrics["agree"].sum())
        single = int(((metrics["archive_n"] == 1) & (metrics["new_n"] == 1)).sum())
        n_checks, same_checks = checks_agree(verdicts_new, verdicts_archive)
        out.append(f"Of {len(metrics)} headline metrics both campaigns measured, {agree} agree"
                   f"{f' ({single} compare two single rounds)' if single else ''}. This campaign's medians over the "
                   f"archive's, the median per kind of metric: {shifts(metrics)}. "
                   + ("This is a quick look: its reduced study (smaller message sizes and inputs, one round) "
                      "differs from the archive's by design, so its medians are no test of the archive's."
                      if quick else "Where most metrics of a kind move together, the two machines differ in speed, "
                      "and absolute values do not carry over from one to the other.")
                   + (" The claims' quantities compare configurations measured on one machine (ratios and "
                      f"differences): of the {n_checks} checks both campaigns computed outside emulated guests, "
                      f"{same_checks} have overlapping intervals." if n_checks else "") + "\n\n")
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
                       f"{fmt_ci(r.archive, r.archive_lo, r.archive_hi, r.archive_n, fmt_measured)} & "
                       f"{fmt_ci(r.new, r.new_lo, r.new_hi, r.new_n, fmt_measured)} & "
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
