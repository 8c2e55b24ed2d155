"""The studies' claims as data, and their verdicts for a campaign.

``data/reference/claims.yaml`` holds one entry per claim of
``data/reference/claims.md`` (same ids).  An entry either says why the claim
cannot be tested on this project's testbeds (``not_testable``, with what it
lacks: ``lacks``, one of :data:`LACKS`), or lists
``checks``: each check computes one quantity from the campaign's tidy rows
and compares it with a threshold::

    - quantity: words for the table
      value: {testbed: vm, benchmark: imb, interconnect: shm, metric: latency, at: smallest}
      below: 0.5                      # or above: x, or within: [lo, hi]
    - ratio: [{...subject...}, {...reference...}]       # subject / reference, paired by round
      within: [1.2, 2.0]
    - difference: [{...}, {...}]                        # subject - reference, paired by round
    - spread: {...}                   # per configuration: std/mean over the rounds; the median and
                                      # CI are then over the configurations (each one value), not rounds

A selector names tidy columns (``testbed``, ``benchmark``, ``mpi``,
``interconnect``, ``variant``, ``ranks``, ``placement``, ...), the ``metric``
and ``at``: ``smallest`` (the smallest message size of the sweep), ``peak``
(the maximum over sizes), a size in bytes, or ``{knee: f}``: the message
size where the metric falls below (1 - f) times its maximum over all smaller
sizes and stays there up to the end of the sweep (infinite when it never
does); without ``at`` the metric must have one value per round.  A check
with ``per: {cache: L3, times: 0.25}`` divides its quantity by that share of
the testbed's cache (one instance, from the campaign's provenance); a knee
check needs a sweep that reaches past the largest size its threshold allows,
or the knee could hide beyond the sweep.  ``{ratio: [selector, selector]}`` stands for the
per-round ratio of two configurations (e.g. a speed-up) wherever a selector
may.  The quantity's median and order-statistic CI over
the rounds decide the check: *holds* when the whole CI meets the threshold,
*does not hold* when none of it does, *inconclusive* when the CI straddles
it, when there is a single value (hence no CI), or when the rounds are too
few for the CI to reach :data:`MIN_COVERAGE` (three rounds give [min, max]
at 75 %, five at 93.75 %): a verdict rests only on an interval that covers
the median with at least that probability.  A check on rows of guests
under TCG software emulation is *not testable* on that host (its value is
kept and shown: it measures the emulator, not a hypervisor; with KVM the
same check decides).  A claim holds when all its checks hold and does not
hold when one does not, whatever the others; otherwise a check whose rows
are not in the campaign makes the claim *not tested* (the reason names the
missing rows), then it is not testable when one check is, and inconclusive
when one check is.
A ``mapping`` or ``not_testable`` text may say a part only where the
campaign's guests ran under one accelerator, ``{tcg: ...}`` or ``{kvm: ...}``
(:func:`hpcvirt.labels.for_accel`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from . import provenance, stats, yamlio
from .labels import accel_text_error, fmt_g, for_accel, guests_accel
from .query import QueryError, leaves, per_round, select, selector_error
from .analysis import normalize_units

VERDICTS = ("holds", "does not hold", "inconclusive", "not tested", "not testable")
#: The reason of a check whose rows come from guests under TCG software emulation.
TCG_REASON = "not testable on this host: guests emulated (TCG), the value measures the emulator"
#: The reason of a check whose rows would come from guests that ran emulated without its experiment.
TCG_LEFT_OUT_REASON = ("not testable on this host: guests emulated (TCG), where the campaign ran only the "
                       "experiments that show their paths work (config key emulated_guests)")
#: The least achieved coverage of a check's interval that may decide it (five rounds give 93.75 %).
MIN_COVERAGE = 0.9
STUDIES = ("exposito2012", "nanos2010", "atif2016", "ramakrishnan2011", "richter2015")
#: How the paper names each study's authors (LaTeX).
AUTHORS = {"exposito2012": "Exp\\'osito et al.", "nanos2010": "Nanos et al.", "atif2016": "Atif et al.",
           "ramakrishnan2011": "Ramakrishnan et al.", "richter2015": "Richter et al."}
CHECK_KINDS = ("value", "ratio", "difference", "spread")
#: What a claim that cannot be tested here lacks (``lacks``, beside ``not_testable``): hardware or
#: scale one small host does not have (cores, nodes, RDMA, KVM, a cloud stack), software the artifact
#: does not include, or a measurement (the study states or cites it without measuring it).
LACKS = ("hardware", "software", "measurement")
CACHES = ("L1d", "L2", "L3")
ID_RE = re.compile(r"^\| ((?:EXP|NAN|ATI|RAM|RIC)-\d+) \|", re.M)


class ClaimError(ValueError):
    """A claims file that does not describe the claims."""


@dataclass(frozen=True)
class Claim:
    id: str
    study: str
    statement: str
    reported: str
    mapping: str
    checks: tuple
    not_testable: str | None
    lacks: str | None = None


def _fail(path, where: str, msg: str):
    raise ClaimError(f"{path}: {where}: {msg}")


def load(path: str | Path, claims_md: str | Path | None = None) -> list[Claim]:
    """Validated claims; with ``claims_md``, every id of that file must have exactly one entry."""
    path = Path(path)
    try:
        raw = yamlio.load_file(path)
    except (OSError, yaml.YAMLError) as exc:
        raise ClaimError(f"{path}: cannot read: {exc}") from None
    if not isinstance(raw, list):
        _fail(path, "top level", "must be a list of claims")
    out, seen = [], set()
    for i, e in enumerate(raw):
        where = f"entry {i + 1}"
        if not isinstance(e, dict):
            _fail(path, where, "must be a mapping")
        cid = e.get("id")
        if not isinstance(cid, str) or not re.fullmatch(r"(EXP|NAN|ATI|RAM|RIC)-\d+", cid):
            _fail(path, where, f"id {cid!r} must look like EXP-1 (EXP, NAN, ATI, RAM or RIC)")
        where = f"claim {cid}"
        if cid in seen:
            _fail(path, where, "duplicate id")
        seen.add(cid)
        unknown = set(e) - {"id", "study", "statement", "reported", "mapping", "checks", "not_testable", "lacks"}
        if unknown:
            _fail(path, where, f"unknown keys {sorted(unknown)}; allowed: id, study, statement, reported, mapping, "
                               "checks, not_testable, lacks")
        if e.get("study") not in STUDIES:
            _fail(path, where, f"study {e.get('study')!r}; allowed: {', '.join(STUDIES)}")
        for k in ("statement", "reported"):
            if not isinstance(e.get(k), str) or not e[k].strip():
                _fail(path, where, f"{k} must be a non-empty string")
        has_checks, nt = bool(e.get("checks")), e.get("not_testable")
        if has_checks == bool(nt):
            _fail(path, where, "needs exactly one of checks (a list) or not_testable (the reason)")
        if nt is not None and not isinstance(nt, str):
            _fail(path, where, "not_testable must be the reason, a string")
        if (nt is None) != ("lacks" not in e) or (nt is not None and e["lacks"] not in LACKS):
            _fail(path, where, f"lacks {e.get('lacks')!r}: a claim with not_testable needs lacks, one of "
                               f"{', '.join(LACKS)} (and a claim with checks has none)")
        checks = tuple(_check(path, f"{where}, check {j + 1}", c) for j, c in enumerate(e.get("checks") or []))
        if has_checks and not isinstance(e.get("mapping"), str):
            _fail(path, where, "a tested claim needs mapping: which of our testbeds stand for the study's")
        for k in ("mapping", "not_testable"):
            if why := accel_text_error(e.get(k)):
                _fail(path, where, f"{k}: {why}")
        out.append(Claim(cid, e["study"], e["statement"].strip(), e["reported"].strip(),
                         (e.get("mapping") or "").strip(), checks, nt, e.get("lacks")))
    if claims_md is not None:
        ids = set(ID_RE.findall(Path(claims_md).read_text()))
        missing, extra = sorted(ids - seen, key=_order), sorted(seen - ids, key=_order)
        if missing or extra:
            _fail(path, "ids", f"must match {claims_md}: missing {missing}, not in it {extra}")
    return sorted(out, key=lambda c: _order(c.id))


def _order(cid: str) -> tuple:
    prefix, n = cid.split("-")
    return ("EXP", "NAN", "ATI", "RAM", "RIC").index(prefix), int(n)


def _selector(path, where: str, sel) -> dict:
    error = selector_error(sel)
    if error:
        _fail(path, where, error)
    return {"ratio": [dict(x) for x in sel["ratio"]]} if "ratio" in sel else dict(sel)


def _check(path, where: str, c) -> dict:
    if not isinstance(c, dict):
        _fail(path, where, "must be a mapping")
    kinds = [k for k in CHECK_KINDS if k in c]
    if len(kinds) != 1:
        _fail(path, where, f"needs exactly one of {', '.join(CHECK_KINDS)}")
    kind = kinds[0]
    tests = [k for k in ("below", "above", "within") if k in c]
    if len(tests) != 1:
        _fail(path, where, "needs exactly one of below, above, within")
    unknown = set(c) - {kind, *tests, "quantity", "unit", "per"}
    if unknown:
        _fail(path, where, f"unknown keys {sorted(unknown)}")
    per = c.get("per")
    if per is not None and not (isinstance(per, dict) and set(per) == {"cache", "times"}
                                and per["cache"] in CACHES and isinstance(per["times"], (int, float))
                                and per["times"] > 0):
        _fail(path, where, f"per must be {{cache: <{', '.join(CACHES)}>, times: <a positive number>}}")
    if not isinstance(c.get("quantity"), str):
        _fail(path, where, "quantity must say in words what is computed")
    bound = c[tests[0]]
    if tests[0] == "within":
        if not (isinstance(bound, list) and len(bound) == 2 and all(isinstance(b, (int, float)) for b in bound)
                and bound[0] < bound[1]):
            _fail(path, where, "within must be [low, high] with low < high")
    elif not isinstance(bound, (int, float)):
        _fail(path, where, f"{tests[0]} must be a number")
    if kind in ("ratio", "difference"):
        if not (isinstance(c[kind], list) and len(c[kind]) == 2):
            _fail(path, where, f"{kind} must be [subject, reference]")
        sels = tuple(_selector(path, where, s) for s in c[kind])
    else:
        sels = (_selector(path, where, c[kind]),)
    return {"kind": kind, "selectors": sels, "test": tests[0], "bound": bound, "quantity": c["quantity"],
            "unit": c.get("unit", ""), "per": per}


# ------------------------------------------------------------------ evaluation
def _sweep_end(tidy: pd.DataFrame, sel: dict) -> float:
    d = select(tidy, sel)
    return float(d["msg_bytes"].max()) if len(d) else float("nan")


def _quantity(tidy: pd.DataFrame, check: dict, caches: dict | None = None
              ) -> tuple[np.ndarray | None, str | None, set]:
    """(values over rounds, why missing, virtualizations involved)."""
    values, missing, virt = _raw_quantity(tidy, check)
    if values is None:
        return values, missing, virt
    per, ref, unit = check.get("per"), 1.0, "B"
    if per:
        testbeds = sorted({str(t) for sel in leaves(check["selectors"]) for t in select(tidy, sel)["testbed"]})
        sizes = {(caches or {}).get(t, {}).get(per["cache"]) for t in testbeds}
        if len(sizes) != 1 or None in sizes:
            return None, (f"the campaign's provenance gives no single {per['cache']} size for testbed(s) "
                          f"{', '.join(testbeds)}"), virt
        ref, unit = sizes.pop() * per["times"], f"x {per['times']:g} {per['cache']}"
    top = float(np.max(check["bound"]))
    for sel in leaves(check["selectors"]):
        end = _sweep_end(tidy, sel)
        if isinstance(sel.get("at"), dict) and not end >= top * ref:
            # a knee beyond the sweep would look like no knee at all
            return None, (f"the sweep ends at {end:.0f} B, below {fmt_g(top)} {unit} = {top * ref:.0f} B, "
                          "where the knee could still be"), virt
    return values / ref, None, virt


def _emulated_testbeds(tidy: pd.DataFrame, check: dict) -> list[str]:
    """The testbeds where a check finds none of its rows and every row of the campaign comes from guests
    under TCG: its experiment was left out of emulated guests (hpcvirt.config.emulated).  None where a
    missing row is another's, e.g. of a testbed the campaign did not measure at all: then the check is
    not tested, whatever the guests did (with KVM it would still lack that row)."""
    out = set()
    for sel in leaves(check["selectors"]):
        tb = sel.get("testbed")
        if select(tidy, sel).empty:
            if not (isinstance(tb, str)
                    and set(tidy.loc[tidy["testbed"] == tb, "virtualization"].astype(str)) == {"qemu-tcg"}):
                return []
            out.add(tb)
    return sorted(out)


def _raw_quantity(tidy: pd.DataFrame, check: dict) -> tuple[np.ndarray | None, str | None, set]:
    virt = set()
    for sel in leaves(check["selectors"]):
        virt |= set(select(tidy, sel)["virtualization"].astype(str))
    if check["kind"] == "spread":
        d = select(tidy, check["selectors"][0])
        if check["selectors"][0].get("at") == "smallest":
            d = d[d["msg_bytes"] == d["msg_bytes"].min()]
        if d.empty:
            return None, f"no rows for {check['selectors'][0]}", virt
        key = d["run_id"].str.rsplit("/", n=1).str[0] + "|" + d["msg_bytes"].fillna(-1).map("{:g}".format)
        g = d.groupby(key)["value"]
        cv = (g.std(ddof=1) / g.mean()).dropna()
        return (cv.to_numpy() if len(cv) else None), (None if len(cv) else "fewer than two rounds"), virt
    series = [per_round(tidy, s) for s in check["selectors"]]
    empty = [f"no rows for {sel}" for s, sel in zip(series, check["selectors"]) if s.empty]
    if empty:
        return None, "; ".join(empty), virt
    if check["kind"] == "value":
        return series[0].to_numpy(dtype=float), None, virt
    both = series[0].index.intersection(series[1].index)
    if not len(both):
        return None, "no round has both configurations", virt
    a, b = series[0][both].to_numpy(dtype=float), series[1][both].to_numpy(dtype=float)
    return (a / b if check["kind"] == "ratio" else a - b), None, virt


def _undecided(ci: dict) -> str:
    """Why an interval cannot decide a check ('' when it can)."""
    if ci["n"] < 2:
        return "one value: no confidence interval"
    if ci["ci_level"] < MIN_COVERAGE:
        return (f"too few rounds: {ci['n']} values give an interval of {100 * ci['ci_level']:.4g} % coverage, "
                f"below {100 * MIN_COVERAGE:.4g} %")
    return ""


def _decide(ci: dict, test: str, bound) -> str:
    lo, hi = ci["ci_low"], ci["ci_high"]
    if test == "below":
        return "holds" if hi < bound else "does not hold" if lo >= bound else "inconclusive"
    if test == "above":
        return "holds" if lo > bound else "does not hold" if hi <= bound else "inconclusive"
    a, b = bound
    if a <= lo and hi <= b:
        return "holds"
    return "does not hold" if hi < a or lo > b else "inconclusive"


def threshold_text(test: str, bound) -> str:
    if test == "within":
        return f"in [{fmt_g(bound[0])}, {fmt_g(bound[1])}]"
    return f"{'<' if test == 'below' else '>'} {fmt_g(bound)}"


def evaluate_campaign(claims: list[Claim], tidy_paths, host_paths, campaign: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(tidy, verdicts) of a campaign from its testbeds' tables and host records
    (``provenance.json``: their caches, :func:`provenance.testbed_caches`)."""
    tidy = pd.concat([pd.read_csv(p) for p in tidy_paths], ignore_index=True)
    return tidy, evaluate(claims, tidy, campaign, caches=provenance.testbed_caches(host_paths))


def evaluate(claims: list[Claim], tidy: pd.DataFrame, campaign: str, level: float = 0.95,
             caches: dict[str, dict[str, int]] | None = None) -> pd.DataFrame:
    """The verdict table: one row per check (claims without checks: one row).
    ``caches``: per testbed, the cache sizes of its host
    (``provenance.cache_sizes``), for checks relative to a cache."""
    tidy = normalize_units(tidy).reset_index(drop=True)
    # text columns as one block of objects: a selection takes its rows once, not
    # once per column (pandas keeps each column of strings in a block of its own)
    tidy = tidy.astype({c: object for c in tidy.columns if pd.api.types.is_string_dtype(tidy[c])}).copy()
    rows, accel = [], guests_accel(tidy)
    for c in claims:
        base = {"campaign": campaign, "claim": c.id, "study": c.study, "statement": c.statement,
                "reported": c.reported, "mapping": for_accel(c.mapping, accel)}
        if c.not_testable:
            rows.append(dict(base, check=0, verdict="not testable", claim_verdict="not testable",
                             reason=for_accel(c.not_testable, accel)))
            continue
        part = []
        for j, chk in enumerate(c.checks, 1):
            try:
                values, missing, virt = _quantity(tidy, chk, caches)
            except (ClaimError, QueryError) as exc:
                raise ClaimError(f"claim {c.id}, check {j}: {exc}") from None
            row = dict(base, check=j, quantity=chk["quantity"], unit=chk["unit"],
                       threshold=threshold_text(chk["test"], chk["bound"]),
                       tcg="qemu-tcg" in virt)
            if values is None and _emulated_testbeds(tidy, chk):
                row.update(verdict="not testable", reason=TCG_LEFT_OUT_REASON, tcg=True)
            elif values is None:
                # nothing was measured, so nothing measured the emulator either
                row.update(verdict="not tested", reason=f"not measured in this campaign: {missing}", tcg=False)
            else:
                ci = stats.median_ci(values, level)
                row.update(n=ci["n"], median=ci["median"], ci_low=ci["ci_low"], ci_high=ci["ci_high"],
                           ci_level=ci["ci_level"], verdict="inconclusive", reason=_undecided(ci))
                if not row["reason"]:
                    row["verdict"] = _decide(ci, chk["test"], chk["bound"])
                if row["tcg"]:
                    # the value is kept (the table shows it), but it measures the emulator, not a hypervisor
                    row.update(verdict="not testable", reason=TCG_REASON)
            part.append(row)
        verdicts = {r["verdict"] for r in part}
        # a claim is the conjunction of its checks: one that does not hold refutes it; one that cannot
        # be tested on this host (guests emulated) leaves it undecided here, whatever the others say
        overall = ("does not hold" if "does not hold" in verdicts else "not tested" if "not tested" in verdicts
                   else "not testable" if "not testable" in verdicts
                   else "inconclusive" if "inconclusive" in verdicts else "holds")
        for r in part:
            r["claim_verdict"] = overall
        rows.extend(part)
    cols = ["campaign", "study", "claim", "check", "claim_verdict", "verdict", "quantity", "n", "median", "ci_low",
            "ci_high", "ci_level", "unit", "threshold", "tcg", "statement", "reported", "mapping", "reason"]
    df = pd.DataFrame(rows)
    for col in cols:
        if col not in df:
            df[col] = np.nan
    return df[cols]


DECIDED = ("holds", "does not hold", "inconclusive")


def deciding(verdicts: pd.DataFrame) -> pd.Series:
    """Per claim, whether the campaign's verdict rests on intervals that may decide: *holds* or *does not
    hold*, or *inconclusive* because an interval of enough coverage straddles the threshold (not because
    the rounds were too few, see :data:`MIN_COVERAGE`)."""
    reason = verdicts["reason"].fillna("").astype(str) if "reason" in verdicts else pd.Series("", verdicts.index)
    straddles = (verdicts["verdict"] == "inconclusive") & reason.eq("")
    out = {}
    for cid, g in verdicts.groupby("claim", sort=False):
        v = g["claim_verdict"].iloc[0]
        out[cid] = v in ("holds", "does not hold") or (v == "inconclusive" and bool(straddles[g.index].any()))
    return pd.Series(out, dtype=bool)


def stability(verdicts: pd.DataFrame, others: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per claim, how its verdict on this campaign fares on the other campaigns of the study
    (``others``: campaign -> its verdict table, evaluated with the same engine): ``decided``, the
    campaigns (this one included) that decide it (:func:`deciding`: a campaign whose rounds are too few
    for an interval of :data:`MIN_COVERAGE` decides nothing); ``agree``, those with this campaign's
    verdict; ``stable``, whether this campaign decides it and every campaign that decides the claim
    agrees (at least two).  A verdict that flips between campaigns of the same study is noise, not a
    finding; one that a single campaign decides is not known to be stable."""
    tables = [verdicts, *others.values()]
    seen = [(t.drop_duplicates("claim").set_index("claim")["claim_verdict"], deciding(t)) for t in tables]
    rows = []
    for cid in seen[0][0].index:
        here = seen[0][0][cid] if seen[0][1].get(cid, False) else None
        decided = [v[cid] for v, d in seen if cid in v.index and d.get(cid, False)]
        agree = sum(v == here for v in decided) if here is not None else 0
        rows.append(dict(claim=cid, decided=len(decided), agree=agree,
                         stable=here is not None and len(decided) >= 2 and agree == len(decided)))
    return pd.DataFrame(rows, columns=["claim", "decided", "agree", "stable"])


def stability_text(row) -> str:
    """``4 of 6 campaigns agree`` (or empty when fewer than two campaigns decide the claim)."""
    if row is None or row["decided"] < 2 or not row["agree"]:
        return ""
    return f"{int(row['agree'])} of {int(row['decided'])} campaigns agree" + ("" if row["stable"] else ": unstable")


def counts(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Claims per study and verdict."""
    per_claim = verdicts.drop_duplicates("claim")
    t = pd.crosstab(per_claim["study"], per_claim["claim_verdict"])
    return t.reindex(index=[s for s in STUDIES if s in t.index], columns=[v for v in VERDICTS if v in t.columns],
                     fill_value=0)
