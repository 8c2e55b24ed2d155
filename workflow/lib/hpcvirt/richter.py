"""Richter et al.'s Table 1 (OpenFOAM damBreak from bare metal to guests on
several servers), reproduced from a campaign's tidy rows.

Richter et al. report, per set-up, the program's wall time T, the speed-up
S = T(1a) / T (1a: one core, bare metal) and the efficiency E = S / n (n the
cores or vCPUs); every measurement was repeated 50 times and the first run
discarded.  Here:

* T is the solver's wall time of OpenFOAM's damBreak at the report's mesh
  size (the input whose cell count is closest to the report's 7,700; a
  guest's own smaller input, see below), median and confidence interval over
  **every round**, as everywhere in the paper and in the claims that read the
  same runs (the report's first run is not left out: the rounds interleave
  the configurations, and each run stages its case afresh);
* S is paired by round: round r's T(1a) / T, with T(1a) the serial run on
  this host of the same input, median [CI]; E = S / n with n the set-up's
  ranks (cores here);
* each of this campaign's configurations is matched to the set-up it stands
  for by its tidy columns (:data:`SETUPS`); configurations the report has no
  set-up for (a link without the tunnel, the direct path) are listed after
  them; a set-up with no configuration here keeps the reason the
  reproduction map (``data/reference/reproduction.yaml``) gives.

The table is a data frame (:func:`richter_table`); the paper's LaTeX comes
from :func:`hpcvirt.companions.datapaths_tex`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from . import stats
from .kinds import NetnsBridge, Qemu
from .labels import datapath_label, for_accel, guests_accel
from .benchmarks import REGISTRY

#: The program Richter et al.'s set-ups ran, as its tidy rows name it (its declaration says it reproduces the study).
STUDY = "richter2015"
BENCHMARK = REGISTRY.reproducing(STUDY).row_name
#: The report's mesh: 7,700 grid points (2-D), 1 s of simulated time in about 1,000 steps.
REPORT_CELLS = 7700


def _tunnel(link: str) -> bool:
    return any(p.strip() in ("vxlan", "gretap") for p in link.split(","))


def _rate(link: str) -> str:
    return next((p.strip().removeprefix("rate ") for p in link.split(",") if p.strip().startswith("rate ")), "")


@dataclass(frozen=True)
class Setup:
    """One of the report's set-ups and which configurations here stand for it."""

    id: str
    ranks_note: str                      # how the report's n maps to ours
    match: Callable[[dict], bool] | None  # a configuration (dict of tidy columns) -> stands for this set-up


def _native(c: dict) -> bool:
    return str(c["virtualization"]) == "none"


def _servers(c: dict) -> bool:
    """Two namespace "servers" on the bridge, one rank each."""
    return c["kind"] == NetnsBridge.name and int(c["ranks_per_node"]) == 1 and int(c["nodes"]) > 1


#: The report's set-ups in its order.  5 and 7a/7b are its multi-server set-ups
#: (guests through TAP, Open vSwitch and a GRE tunnel, over 1 Gbit/s Ethernet
#: or 40 Gbit/s InfiniBand); here two namespace "servers" with one rank each,
#: through an overlay tunnel (VXLAN, or GRE where the kernel has it) over a link
#: limited to 1 Gbit/s, or over the unlimited link (the fast interconnect's
#: stand-in).  2a/2b: one guest with one and two ranks (its two vCPUs), on
#: the smaller input that guests under TCG emulation can run.  3, 4a/4b, 6
#: and 7b have no counterpart (see the map).
SETUPS: tuple[Setup, ...] = (
    Setup("1a", "1 core", lambda c: _native(c) and int(c["ranks"]) == 1),
    Setup("1b", "4 cores there, 2 here", lambda c: _native(c) and int(c["ranks"]) > 1 and c["interconnect"] == "shm"),
    Setup("2a", "1 vCPU there, 1 rank in a guest of 2 vCPUs here", lambda c: _guest(c) and int(c["ranks"]) == 1),
    Setup("2b", "4 vCPUs there, 2 here", lambda c: _guest(c) and int(c["ranks"]) > 1),
    Setup("3", "nested", None),
    Setup("4a", "1 vCPU", None),
    Setup("4b", "4 vCPUs", None),
    Setup("5", "4 servers x 1 vCPU there, 2 servers x 1 rank here",
          lambda c: _servers(c) and _tunnel(c["link"]) and _rate(c["link"]) == "1gbit"),
    Setup("6", "4 servers x 4 vCPUs", None),
    Setup("7a", "4 servers x 4 vCPUs there, 2 servers x 1 rank here",
          lambda c: _servers(c) and _tunnel(c["link"]) and not _rate(c["link"])),
    Setup("7b", "4 servers x 4 vCPUs, 4 KVMs", None),
)


def _guest(c: dict) -> bool:
    """One QEMU guest (any accelerator), its ranks inside it."""
    return c["kind"] == Qemu.name and int(c["nodes"]) == 1


def report_cells(tidy: pd.DataFrame) -> str | None:
    """The input variant whose cell count is closest to the report's mesh
    (of two with the same mesh, the longer simulated time: fewer rows name it)."""
    cells = tidy[(tidy["benchmark"] == BENCHMARK) & (tidy["metric"] == "cells")]
    if cells.empty:
        return None
    per = cells.groupby("variant")["value"].median()
    off = (per - REPORT_CELLS).abs()
    best = off[off == off.min()].index
    span = REGISTRY.reproducing(STUDY).span
    return str(max(best, key=lambda v: (span(v), v)))   # "7800 cells" (1 s) before "7800 cells, 0.5 s"


def _reported(reference: pd.DataFrame) -> dict[str, dict]:
    """Set-up id -> the report's description, T, S and E (strings as written; "NA" when not run)."""
    ref = reference[(reference["study"] == STUDY) & (reference["figure_or_table"] == "Table 1")]
    out: dict[str, dict] = {}
    for _, r in ref.iterrows():
        label = str(r["testbed"])                          # "Set-up 1a: 1 core, bare metal"
        sid, _, desc = label.removeprefix("Set-up ").partition(":")
        d = out.setdefault(sid.strip(), {"description": desc.strip(), "T": "NA", "S": "NA", "E": "NA", "n": ""})
        key = {"wall_time_s": "T", "speedup": "S", "efficiency_pct": "E"}.get(str(r["metric"]))
        if key:
            d[key] = str(r["value"])
        d["n"] = str(r["processes_or_cores"])
    return out


def _cells(variant: str) -> float:
    try:
        return float(str(variant).split()[0].replace(",", ""))
    except ValueError:
        return float("inf")


def richter_table(tidy: pd.DataFrame, reference: pd.DataFrame, reasons: dict[str, str] | None = None,
                  *, level: float = 0.95) -> pd.DataFrame:
    """One row per (report set-up, configuration here): the report's T, S, E
    beside ours (median and CI), ``kind`` ``setup`` (a configuration that
    stands for the set-up), ``none`` (no configuration here: ``why`` from
    ``reasons``, the map's ``setup-<id>`` entries) or ``extra`` (a
    configuration the report has no set-up for, after the set-ups).

    Every configuration runs the report's mesh (:func:`report_cells`) but the
    guests, which under TCG emulation run a smaller input: a guest's rows are
    of its input closest to the report's mesh, and S pairs every row with the
    serial run on this host of the **same input** (and MPI library); that
    serial run is then listed too (an ``extra`` row).  ``variant`` names each
    row's input, ``report_variant`` the report's mesh."""
    reported = _reported(reference)
    # the map's texts as this campaign says them ({tcg:...} only where its guests ran emulated)
    reasons = for_accel(reasons or {}, guests_accel(tidy))
    variant = report_cells(tidy)
    runs = pd.DataFrame()
    if variant is not None:
        foam = tidy[tidy["benchmark"] == BENCHMARK]
        d = foam[foam["metric"] == "wall_time"]
        d = d.assign(link=d["link"].fillna("").astype(str), accel=d["accel"].astype(object).fillna("").astype(str))
        steps = foam[foam["metric"] == "steps"]
        runs = d.assign(steps=d["run_id"].map(steps.set_index("run_id")["value"]))   # the solver's steps
    cfg_cols = ["testbed", "kind", "mpi", "virtualization", "accel", "interconnect", "link", "ranks", "nodes",
                "ranks_per_node", "variant"]
    every = [dict(zip(cfg_cols, k)) | {"t": g.groupby("rep")["value"].median(), "steps": g["steps"].median()}
             for k, g in runs.groupby(cfg_cols, sort=True)] if len(runs) else []
    # the inputs shown: the report's mesh; a guest's own input nearest to it
    guest_input = {}
    for c in every:
        if _guest(c):
            best = guest_input.get(c["testbed"])
            if best is None or abs(_cells(c["variant"]) - REPORT_CELLS) < abs(_cells(best) - REPORT_CELLS):
                guest_input[c["testbed"]] = c["variant"]
    configs = [c for c in every if c["variant"] == (guest_input.get(c["testbed"], variant) if _guest(c)
                                                     else variant)]
    serial = [c for c in every if SETUPS[0].match(c)]
    # this host's serial runs of the guests' inputs (the baselines of their S): listed as extras
    baselines = [c for c in serial if c["variant"] != variant and c["variant"] in guest_input.values()]
    rows, used = [], set()

    def measured(c: dict, setup: str, kind: str, rep: dict) -> dict:
        t = c["t"]
        # the serial run of the same input and MPI library (of the same input, any library, if that one has none)
        same = [b for b in serial if b["variant"] == c["variant"]]
        base = next((b for b in same if b["mpi"] == c["mpi"]), same[0] if same else None)
        tci = stats.median_ci(t.to_numpy(), level)
        row = dict(setup=setup, kind=kind, report_description=rep.get("description", ""),
                   report_t=rep.get("T", ""), report_s=rep.get("S", ""), report_e=rep.get("E", ""),
                   report_n=rep.get("n", ""), testbed=c["testbed"], mpi=c["mpi"], virtualization=c["virtualization"],
                   interconnect=c["interconnect"], link=c["link"], ranks=int(c["ranks"]), nodes=int(c["nodes"]),
                   path=_path(c), variant=c["variant"], report_variant=variant, steps=c["steps"], rounds=tci["n"],
                   t=tci["median"], t_lo=tci["ci_low"], t_hi=tci["ci_high"], ci_level=tci["ci_level"], why="")
        if base is not None:
            both = t.index.intersection(base["t"].index)
            if len(both):
                s = stats.median_ci((base["t"][both] / t[both]).to_numpy(), level)
                n = int(c["ranks"])
                row.update(s=s["median"], s_lo=s["ci_low"], s_hi=s["ci_high"], e=100 * s["median"] / n,
                           e_lo=100 * s["ci_low"] / n, e_hi=100 * s["ci_high"] / n, pairs=s["n"])
        return row

    for setup in SETUPS:
        rep = reported.get(setup.id, {})
        mine = [c for c in configs if setup.match and setup.match(c)]
        for c in mine:
            used.add(id(c))
            rows.append(measured(c, setup.id, "setup", rep))
        if not mine:
            why = (reasons or {}).get(f"setup-{setup.id}", "")
            if not why.startswith("none:"):      # a set-up with a counterpart, not in this campaign
                why = "not in this campaign" + (f" (here: {why})" if why else "")
            rows.append(dict(setup=setup.id, kind="none", report_description=rep.get("description", ""),
                             report_t=rep.get("T", ""), report_s=rep.get("S", ""), report_e=rep.get("E", ""),
                             report_n=rep.get("n", ""), variant=variant, report_variant=variant,
                             why=why.removeprefix("none:").strip()))
    for c in configs + baselines:
        if id(c) not in used:
            rows.append(measured(c, "", "extra", {}))
    out = pd.DataFrame(rows)
    return out


def _path(c: dict) -> str:
    if str(c["virtualization"]) == "none":
        return "this host"
    if c["kind"] == Qemu.name:
        return f"one guest ({str(c['accel']).upper()})"
    return datapath_label(c["virtualization"], c["link"])


def datapath_table(tidy: pd.DataFrame, *, latency_bytes: int = 8, level: float = 0.95) -> pd.DataFrame:
    """Per testbed of a data-path campaign: what each path costs MPI and TCP.
    The latency at ``latency_bytes`` (us) and peak bandwidth (Gbit/s) per MPI
    of each point-to-point benchmark that declares a column here
    (``PointToPoint.datapath``), over the network (shared memory left out),
    and the concurrent TCP streams' aggregate (Gbit/s; over loopback
    on this host): median and CI over the rounds, with the path's label."""
    from .analysis import normalize_units
    from .views import by_name
    from .query import per_round_at

    df = normalize_units(tidy)
    rows = []
    for (tb, virt), g in df.groupby(["testbed", "virtualization"], sort=True):
        link = g["link"].dropna().astype(str).iloc[0] if g["link"].notna().any() else ""
        row = dict(testbed=tb, virtualization=virt, link=link,
                   path="loopback" if str(virt) == "none" else datapath_label(virt, link))

        def put(key: str, s: pd.Series, scale: float = 1.0) -> None:
            if len(s):
                ci = stats.median_ci((s * scale).to_numpy(), level)
                row.update({key: ci["median"], f"{key}_lo": ci["ci_low"], f"{key}_hi": ci["ci_high"],
                            f"{key}_n": ci["n"]})

        # the point-to-point benchmarks that declare a data-path column (PointToPoint.datapath), across the path
        for _, p2p in REGISTRY.point_to_point():
            if p2p.datapath is None:
                continue
            sides = [(side, suffix) for side, suffix in ((p2p.latency, "lat"), (p2p.bandwidth, "bw")) if side]
            mine = g[g["benchmark"].isin({side[0] for side, _ in sides}) & (g["interconnect"] != "shm")]
            for mpi, m in mine.groupby("mpi", sort=True):
                stem = p2p.datapath if mpi == "none" else f"{p2p.datapath}_{mpi}"
                for (bench, variant, metric), suffix in sides:
                    d = m[(m["benchmark"] == bench) & (m["metric"] == metric)]
                    d = d if variant is None else d[d["variant"] == variant]
                    put(f"{stem}_{suffix}", per_round_at(d, {}, latency_bytes if suffix == "lat" else None))
        rows.append(row)
    out = pd.DataFrame(rows)
    st = by_name("streams").compute(tidy, level)
    if len(st) and len(out):
        out = out.merge(st[["testbed", "gbits", "gbits_lo", "gbits_hi", "n"]].rename(
            columns={"gbits": "streams", "gbits_lo": "streams_lo", "gbits_hi": "streams_hi", "n": "streams_n"}),
            on="testbed", how="left")
    return out
