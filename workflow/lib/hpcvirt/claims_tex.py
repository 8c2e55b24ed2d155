"""The claims' verdicts as LaTeX (macros, the claims table, the counts
table), and every ``\\claimsays{ID}{verdict}`` of the paper's text checked
against them (:mod:`hpcvirt.claims` computes the verdicts)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from .claims import AUTHORS, LACKS, MIN_COVERAGE, STUDIES, VERDICTS, counts, deciding, stability_text
from .labels import fmt_ci, fmt_g, fmt_measured, one_round, tex


# ------------------------------------------------------------------ LaTeX
def value_text(r, unit=tex) -> str:
    """A check's median [CI] and unit; a check of one round, its median, unit and "one round": one round
    has no interval.  ``unit`` writes the unit (LaTeX; ``str`` for plain text)."""
    one = one_round(r.get("n"))
    u = r["unit"] if isinstance(r["unit"], str) else ""
    # a multiple of a size ("x L3/4") reads as one in LaTeX ("$\\times$ L3/4")
    written = "$\\times$ " + unit(u[2:]) if unit is tex and u.startswith("x ") else unit(u)
    return (f"{fmt_ci(r['median'], r['ci_low'], r['ci_high'], r.get('n'), fmt_measured)}"
            f"{(' ' + written) if u else ''}{' (one round)' if one else ''}")


def with_audit(verdicts: pd.DataFrame, audit: dict[str, list[dict]]) -> pd.DataFrame:
    """The verdicts with the audit's judgement of each check's quantity (column ``audit_quantity``: ``own``,
    ``weaker`` or ``different`` than the claim's; "" for a claim not testable).  ``audit``:
    :func:`hpcvirt.audit.load`, each check judged against its study's text."""
    q = {(e["id"], j): chk["quantity"] for entries in audit.values() for e in entries
         for j, chk in enumerate(e.get("checks") or [], 1)}
    out = verdicts.copy()
    out["audit_quantity"] = [q.get((c, int(k)), "") for c, k in zip(out["claim"], out["check"])]
    return out


def lesser_quantity(verdicts: pd.DataFrame, claim: str) -> str:
    """``different`` or ``weaker`` when the verdict of ``claim`` rests on a check of such a quantity (the
    audit, :func:`with_audit`), else "".  A claim holds when every check holds: any check of a weaker or
    different quantity counts.  It does not hold when a check fails, and a check of a weaker quantity (a
    necessary part of the claim) that fails refutes it as well as its own: only a failing check of a
    different quantity counts."""
    if "audit_quantity" not in verdicts.columns:
        return ""
    rows = verdicts[(verdicts["claim"] == claim) & verdicts["median"].notna()]
    lesser = ("different", "weaker")
    if len(rows) and rows["claim_verdict"].iloc[0] == "does not hold":
        rows, lesser = rows[rows["verdict"] == "does not hold"], ("different",)
    found = set(rows["audit_quantity"])
    return next((x for x in lesser if x in found), "")


def verdict_note(row, verdicts: pd.DataFrame) -> str:
    """What a decided verdict carries where the text states it: how many of the campaigns that decide the
    claim give it (``4/4``, ``unstable: 8/11``; ``alone`` when no other campaign decides it), the lowest
    coverage of its checks' intervals (``, 93.8\\,\\%``; none when every check has one round) and, where
    the audit finds a check's quantity weaker than the claim's or different, that (``; a weaker quantity``)."""
    if row["decided"] >= 2:
        agree = f"{'' if row['stable'] else 'unstable: '}{int(row['agree'])}/{int(row['decided'])}"
    else:
        agree = "alone"
    checks = verdicts[(verdicts["claim"] == row["claim"]) & verdicts["median"].notna() & (verdicts["n"] >= 2)]
    lesser = lesser_quantity(verdicts, row["claim"])
    return (agree + (f", {fmt_g(100 * checks['ci_level'].min())}\\,\\%" if len(checks) else "")
            + (f"; a {lesser} quantity" if lesser else ""))


def rule_macros(entries) -> str:
    """The settings of the claims' rules the text explains, from ``claims.yaml`` (``entries``:
    :func:`hpcvirt.claims.load`): for a check that places a knee, ``\\claimknee{ID}{check}`` (how far
    below its best so far the curve must fall, in percent) and ``\\claimreach{ID}{check}`` (where
    the sweep must reach: the rule's upper bound, in the check's unit); for each of
    :data:`hpcvirt.claims.LACKS`, ``\\claimcount{lacks-hardware}`` (…): how many claims cannot be
    tested here for want of it."""
    import numpy as np

    out = ["\\makeatletter\n"]
    for what in LACKS:
        out.append(f"\\@namedef{{hvclaimcount@lacks-{what}}}{{{sum(c.lacks == what for c in entries)}}}\n")
    for c in entries:
        for j, chk in enumerate(c.checks, 1):
            at = chk["selectors"][0].get("at") if chk["selectors"] else None
            if isinstance(at, dict) and "knee" in at:
                unit = tex(str(chk["unit"]).removeprefix("x "))
                out += [f"\\@namedef{{hvclaimknee@{c.id}@{j}}}{{{fmt_g(100 * at['knee'])}\\,\\%}}\n",
                        f"\\@namedef{{hvclaimreach@{c.id}@{j}}}{{{fmt_g(float(np.max(chk['bound'])))}$\\times$ "
                        f"{unit}}}\n"]
    return "".join(out) + "\\makeatother\n"


def tex_macros(verdicts: pd.DataFrame) -> str:
    """\\claimverdict{ID}, \\claimvalue{ID}{check} (median [CI]) and
    \\claimthreshold{ID}{check} (the verdict rule's threshold) for every claim."""
    out = ["% Generated by hpcvirt.claims: the verdict of every claim.  Do not edit.\n",
           "\\makeatletter\n"]
    for cid, g in verdicts.groupby("claim", sort=False):
        out.append(f"\\@namedef{{hvclaim@{cid}}}{{{g['claim_verdict'].iloc[0]}}}\n")
        for _, r in g.iterrows():
            if isinstance(r.get("threshold"), str):
                thr = r["threshold"].replace("<", "$<$").replace(">", "$>$")
                out.append(f"\\@namedef{{hvclaimthr@{cid}@{int(r['check'])}}}{{{thr}}}\n")
            if pd.notna(r.get("median")):
                out.append(f"\\@namedef{{hvclaimval@{cid}@{int(r['check'])}}}{{{value_text(r)}}}\n")
    counts_t = counts(verdicts)
    for v in VERDICTS:
        n = int(counts_t[v].sum()) if v in counts_t else 0
        out.append(f"\\@namedef{{hvclaimcount@{v}}}{{{n}}}\n")
    out.append(f"\\@namedef{{hvclaimcount@all}}{{{verdicts['claim'].nunique()}}}\n")
    # the claims not testable here because a check's rows come from guests under TCG (with KVM, none)
    guests = verdicts.loc[(verdicts["claim_verdict"] == "not testable") & (verdicts["check"] > 0), "claim"]
    out.append(f"\\@namedef{{hvclaimcount@not testable-tcg}}{{{guests.nunique()}}}\n")
    holding = verdicts.loc[verdicts["claim_verdict"] == "holds", "claim"].unique()
    # the claims that hold on a check of a weaker or different quantity than the claim's (the audit)
    out.append(f"\\@namedef{{hvclaimcount@holds-lesser}}"
               f"{{{sum(bool(lesser_quantity(verdicts, c)) for c in holding)}}}\n")
    if "stable" in verdicts.columns:
        mine = deciding(verdicts)
        for _, r in verdicts.drop_duplicates("claim").iterrows():
            if stability_text(r):
                out.append(f"\\@namedef{{hvclaimstab@{r['claim']}}}{{{stability_text(r)}}}\n")
            if mine.get(r["claim"], False):
                # a verdict of this campaign carries, where the text states it (\claimsays, \claimverdict),
                # whether the other campaigns that decide the claim agree and its intervals' coverage; a claim
                # this campaign does not decide has no such verdict
                out.append(f"\\@namedef{{hvclaimnote@{r['claim']}}}{{{verdict_note(r, verdicts)}}}\n")
        # the claims that hold or do not hold here (an inconclusive verdict decides nothing, whatever its
        # coverage): those whose verdict every other campaign that decides them (its intervals reach the
        # coverage) shares, those another campaign decides otherwise, and those no other campaign decides
        first = verdicts.drop_duplicates("claim").set_index("claim")
        decided = (deciding(verdicts).reindex(first.index, fill_value=False)
                   & first["claim_verdict"].isin(["holds", "does not hold"]))
        stable, others = first["stable"].astype(bool), first["decided"].astype(int) >= 2
        for name, n in (("stable", decided & stable), ("unstable", decided & others & ~stable),
                        ("single", decided & ~others), ("decided", decided)):
            out.append(f"\\@namedef{{hvclaimcount@{name}}}{{{int(n.sum())}}}\n")
    out.append(f"\\def\\hvClaimMinCoverage{{{fmt_g(100 * MIN_COVERAGE)}}}\n")
    out.append("\\makeatother\n")
    return "".join(out)


def campaign_hosts_tex(records) -> str:
    """``\\hvClaimCampaignHosts``: the machines the study's other campaigns ran on, by CPU model and count
    with the campaigns of each (``AMD EPYC, 2 CPUs (10) and Intel Xeon Processor, 2 CPUs (1)``), from one host
    record (``provenance.json``) per campaign; "none" without other campaigns."""
    import json

    from .labels import and_list, latex_escape

    kinds: dict[str, int] = {}
    for p in records:
        cpu = (json.loads(Path(p).read_text()).get("host") or {}).get("cpu") or {}
        n = (cpu.get("lscpu") or {}).get("CPU(s)")
        key = ", ".join(x for x in (cpu.get("model") or "an unrecorded CPU", f"{n} CPUs" if n else "") if x)
        kinds[key] = kinds.get(key, 0) + 1
    text = and_list([f"{latex_escape(k)} ({n})" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))])
    return f"\\def\\hvClaimCampaignHosts{{{text or 'none'}}}\n"


def tex_table(verdicts: pd.DataFrame, label: str = "tab:claims", caption: str | None = None) -> str:
    """A longtable: per study, every claim with its checks and verdict."""
    caption = caption or "Every claim of the five studies, checked on this campaign."
    lines = ["% Generated by hpcvirt.claims.  Do not edit.\n",
             "\\begin{longtable}{@{}p{0.07\\linewidth}p{0.43\\linewidth}p{0.33\\linewidth}p{0.11\\linewidth}@{}}\n",
             f"\\caption{{{caption} Per claim: the quantity we compute, its "
             "median [CI] over the rounds, the threshold from the claim's verdict rule, and the verdict. "
             "$\\dagger$: measured in guests under TCG software emulation: the numbers measure the emulator, so the check is not testable on this host."
             + (" $\\ddagger$: a quantity weaker than the claim's own or different from it (the audit of each "
                "check against its study's text, \\texttt{data/reference/audit/})."
                if "audit_quantity" in verdicts.columns else "")
             + (" In parentheses: of the campaigns of this study (the archived ones and this one) whose intervals "
                "for the claim reach the coverage, how many give this verdict; unstable when they differ." if "decided" in verdicts.columns else "")
             + "}"
             f"\\label{{{label}}}\\\\\n",
             "\\toprule claim & statement (reported) & check: median [CI] vs threshold & verdict \\\\ \\midrule\n"
             "\\endfirsthead\n\\toprule claim & statement (reported) & check & verdict \\\\ \\midrule\n\\endhead\n"]
    several = verdicts["study"].nunique() > 1
    for study in STUDIES:
        g = verdicts[verdicts["study"] == study]
        if g.empty:
            continue
        if several:
            lines.append(f"\\multicolumn{{4}}{{@{{}}l}}{{\\textbf{{{AUTHORS[study]}}}}} \\\\\n")
        for cid, c in g.groupby("claim", sort=False):
            first = c.iloc[0]
            if first["check"] == 0:             # not testable by its declaration
                check = f"\\emph{{{tex(first['reason'])}}}"
            else:
                parts = []
                for _, r in c.iterrows():
                    if pd.notna(r["median"]):
                        lesser = r.get("audit_quantity") in ("weaker", "different")
                        parts.append(f"{tex(r['quantity'])}{DDAGGER if lesser else ''}: {value_text(r)} "
                                     f"{tex(r['threshold'])}{DAGGER if r['tcg'] else ''}: {r['verdict']}")
                    else:
                        parts.append(f"{tex(r['quantity'])}: \\emph{{{tex(r['reason'])}}}")
                check = "; ".join(parts)
            stab = stability_text(first) if "decided" in c.columns else ""
            lines.append(f"{cid} & {tex(first['statement'])} ({tex(first['reported'])}) & {check} & "
                         f"\\textbf{{{first['claim_verdict']}}}{f' ({stab})' if stab else ''} \\\\\n")
        if several:
            lines.append("\\midrule\n")
    lines.append("\\bottomrule\n\\end{longtable}\n")
    return "".join(lines)


def counts_tex(verdicts: pd.DataFrame) -> str:
    """A table: claims per study and verdict."""
    t = counts(verdicts)
    cols = [v for v in VERDICTS if v in t.columns]
    out = ["% Generated by hpcvirt.claims.  Do not edit.\n\\begin{table}[t]\\centering\\small\n",
           "\\caption{The claims of each study by verdict on this campaign (Section~\\ref{sec:per-study} gives "
           "each claim with its numbers).}\\label{tab:claimcounts}\n",
           "\\begin{tabular}{@{}l" + "r" * (len(cols) + 1) + "@{}}\\toprule\n",
           "study & " + " & ".join(cols) + " & all \\\\ \\midrule\n"]
    for study, row in t.iterrows():
        out.append(f"{AUTHORS[study]} & " + " & ".join(str(int(row[c])) for c in cols) + f" & {int(row.sum())} \\\\\n")
    out.append("\\midrule all & " + " & ".join(str(int(t[c].sum())) for c in cols) + f" & {int(t.values.sum())} "
               "\\\\ \\bottomrule\n\\end{tabular}\n\\end{table}\n")
    return "".join(out)


# ------------------------------------------------------------------ sentences
DAGGER = "$^\\dagger$"
DDAGGER = "$^\\ddagger$"
SAYS_RE = re.compile(r"\\claimsays\{([A-Z]+-\d+)\}\{([^}]*)\}")


def check_sentences(tex_files: list[str | Path], verdicts: pd.DataFrame, archived: bool = False) -> list[str]:
    """Every ``\\claimsays{ID}{verdict}`` of the paper's text against the
    campaign's verdicts: one message per sentence that no longer matches
    (file:line, the sentence, the claim, what the text says, what the data say).
    A claim the campaign has no data for (*not tested*, e.g. a quick look)
    contradicts nothing; the text then prints that verdict.  On the
    ``archived`` campaign, the one the text is written for, it does: a check
    that finds none of its rows there names rows the archive lacks (e.g. a
    variant renamed since)."""
    by_claim = dict(zip(verdicts["claim"], verdicts["claim_verdict"]))
    problems = []
    for f in tex_files:
        text = Path(f).read_text()
        for m in SAYS_RE.finditer(text):
            cid, said = m.group(1), m.group(2).strip()
            line = text.count("\n", 0, m.start()) + 1
            start = max(text.rfind(". ", 0, m.start()), text.rfind("\n\n", 0, m.start()))
            end = text.find(". ", m.end())
            sentence = " ".join(text[start + 1:end + 1 if end > 0 else None].split())
            if said not in VERDICTS:
                problems.append(f"{f}:{line}: \\claimsays{{{cid}}}{{{said}}}: '{said}' is not a verdict "
                                f"({', '.join(VERDICTS)})")
            elif cid not in by_claim:
                problems.append(f"{f}:{line}: claim {cid} has no verdict (not in the claims file)")
            elif by_claim[cid] == "not tested" and archived:
                why = "; ".join(r for r in verdicts.loc[verdicts["claim"] == cid, "reason"].fillna("").astype(str) if r)
                problems.append(f"{f}:{line}: the sentence \"{sentence}\" says claim {cid} {said}, but the "
                                f"archived campaign does not test it ({why}): the claims file's checks name "
                                f"rows the archive lacks")
            elif by_claim[cid] == "not tested":
                continue          # this campaign has no data for it (e.g. make quick): nothing contradicts the text
            elif by_claim[cid] != said:
                problems.append(f"{f}:{line}: the sentence \"{sentence}\" says claim {cid} {said}, but this "
                                f"campaign's verdict is '{by_claim[cid]}': rewrite the sentence")
    return problems


def verdicts_html(verdicts: pd.DataFrame, campaign: str) -> str:
    """The verdicts as a page the HTML report shows (a CSV file it only offers to download): per claim
    and check, the study's statement and reported value, the quantity, its median [CI], the interval's
    coverage and the threshold, the verdict and why, how many of the study's campaigns that decide the
    claim agree, and (with :func:`with_audit`) whether the audit finds the quantity the claim's own."""
    import html

    if verdicts.empty:
        return f"<p>No claims were checked on campaign {html.escape(campaign)}.</p>\n"
    show = pd.DataFrame({
        "study": verdicts["study"], "claim": verdicts["claim"], "check": verdicts["check"],
        "verdict": verdicts["verdict"], "statement": verdicts["statement"], "reported": verdicts["reported"],
        "quantity": verdicts["quantity"],
        "value": ["" if pd.isna(r["median"]) else value_text(r, str) for _, r in verdicts.iterrows()],
        "CI coverage": [f"{fmt_g(100 * r['ci_level'])} %" if pd.notna(r.get("ci_level")) and r.get("n", 0) >= 2
                        else "" for _, r in verdicts.iterrows()],
        "threshold": verdicts["threshold"], "why": verdicts["reason"].fillna(""),
        "campaigns that agree": [stability_text(r) if "decided" in verdicts else "" for _, r in verdicts.iterrows()],
    })
    if "audit_quantity" in verdicts.columns:
        show.insert(show.columns.get_loc("quantity") + 1, "quantity vs the claim's (audit)", verdicts["audit_quantity"])
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Claims of campaign "
            f"{html.escape(campaign)}</title><style>body{{font:13px sans-serif}}table{{border-collapse:collapse}}"
            "td,th{border:1px solid #ccc;padding:3px 5px;vertical-align:top;text-align:left}</style></head><body>\n"
            f"<h3>The studies' claims checked on campaign {html.escape(campaign)}</h3>\n"
            + show.to_html(index=False, escape=True, na_rep="") + "\n</body></html>\n")
