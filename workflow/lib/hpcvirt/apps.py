"""The applications' comparisons: each application input's performance
relative to its reference run (Ramakrishnan et al.'s Fig. 1), and the
guests' time against the namespace hosts' on the same input, both paired by
interleaved round, median [CI]."""

from __future__ import annotations

import pandas as pd

from . import stats
from .benchmarks import REGISTRY, Application
from .kinds import NetnsBridge, Qemu
from .labels import interconnect_class


#: The applications (their rows' benchmark) and the time metric each is
#: compared by (Ramakrishnan et al.'s Fig. 1: performance relative to the
#: fastest interconnect at the lowest core count), from their declarations.
APP_TIMES = {b.row_name: b.time_metric for b in REGISTRY if isinstance(b, Application)}

def _app_times(tidy: pd.DataFrame, times: dict[str, str]) -> pd.DataFrame:
    """The applications' time per (benchmark, variant, mpi, configuration, round)."""
    d = tidy[tidy["benchmark"].isin(list(times))]
    d = d[d["metric"] == d["benchmark"].map(times)]
    if d.empty:
        return pd.DataFrame()
    d = d.assign(link=d["link"].fillna("") if "link" in d else "", accel=d["accel"].astype(object).fillna(""))
    keys = ["benchmark", "variant", "mpi", "testbed", "kind", "virtualization", "accel", "interconnect", "link",
            "ranks", "rep"]
    return d.groupby(keys, dropna=False)["value"].median().reset_index()


def _app_reference(g: pd.DataFrame) -> tuple[pd.DataFrame, str] | None:
    """The reference runs of one application input: the native shared-memory
    run at the lowest rank count (the fastest class at the lowest count, as
    in Ramakrishnan et al.); for an input that ran only across hosts (the
    guests' small input), the namespace hosts over the unlimited bridge at
    their lowest rank count.  With a description; None without either."""
    for sel, what in (((g["virtualization"] == "none") & (g["interconnect"] == "shm"), "shared memory"),
                      ((g["kind"] == NetnsBridge.name) & (g["link"] == ""), "unlimited bridge")):
        ref = g[sel]
        if ref.empty:
            continue
        low = ref["ranks"].min()
        ref = ref[ref["ranks"] == low]
        tb = sorted(ref["testbed"].unique())[0]
        return ref[ref["testbed"] == tb], f"{tb}, {what}, {int(low)} rank{'s' if low > 1 else ''}"
    return None


def app_scaling(tidy: pd.DataFrame, times: dict[str, str] = APP_TIMES) -> pd.DataFrame:
    """Per application (benchmark, input variant, MPI) and configuration
    (testbed, interconnect class, ranks): performance relative to the
    reference (:func:`_app_reference`), T(reference) / T, paired by
    interleaved round, median [CI]."""
    per = _app_times(tidy, times)
    if per.empty:
        return pd.DataFrame()
    keys = ["benchmark", "variant", "mpi"]
    cfg = ["testbed", "virtualization", "interconnect", "link", "ranks"]
    rows = []
    for (bench, variant, mpi), g in per.groupby(keys, sort=True):
        found = _app_reference(g)
        if found is None:
            continue
        ref, reference = found
        low, ref_tb = int(ref["ranks"].iloc[0]), ref["testbed"].iloc[0]
        ref = ref.set_index("rep")["value"]
        for key, s in g.groupby(cfg, sort=True, dropna=False):
            t = s.set_index("rep")["value"]
            both = t.index.intersection(ref.index)
            if not len(both):
                continue
            ci = stats.median_ci((ref[both] / t[both]).to_numpy())
            tci = stats.median_ci(t.to_numpy())
            tb, virt, ic, link, ranks = key
            rows.append(dict(benchmark=bench, variant=variant, mpi=mpi, testbed=tb, virtualization=virt,
                             interconnect=ic, link=link if isinstance(link, str) else "",
                             klass=interconnect_class(virt, ic, link), ranks=int(ranks), time=tci["median"],
                             time_lo=tci["ci_low"], time_hi=tci["ci_high"], perf=ci["median"], perf_lo=ci["ci_low"],
                             perf_hi=ci["ci_high"], n=ci["n"], ci_level=ci["ci_level"],
                             reference=reference, ref_testbed=ref_tb, ref_ranks=low))
    return pd.DataFrame(rows)


def app_speedup(tidy: pd.DataFrame, times: dict[str, str] = APP_TIMES) -> pd.DataFrame:
    """The rows of :func:`app_scaling` that are a speed-up S(n) = T(1) / T(n): inputs whose reference is
    their one-rank shared-memory run, natively and across the unlimited bridge (the transports; the link
    limits are another question)."""
    r = app_scaling(tidy, times)
    if r.empty:
        return r
    keep = (r["reference"].str.contains("shared memory") & (r["ref_ranks"] == 1) & (r["link"] == "")
            & r["virtualization"].map(lambda v: v == "none" or v == NetnsBridge.name))
    return r[keep].reset_index(drop=True)


def app_panels(tidy: pd.DataFrame, times: dict[str, str] = APP_TIMES) -> pd.DataFrame:
    """The rows of :func:`app_scaling` that the applications' figure draws, with their ``panel``:
    ``scaling``, per application the input against the native shared-memory run that the most testbeds ran
    (then the most configurations; the first by name on a tie), over the rank count; ``guests``, the inputs
    against the unlimited bridge (the guests' small inputs) that another testbed ran too.  A campaign
    without native shared-memory runs draws every application's input against its own reference."""
    r = app_scaling(tidy, times)
    if r.empty:
        return r.assign(panel=pd.Series(dtype=str))
    native = r["reference"].str.contains("shared memory")
    small = r[r["reference"].str.contains("unlimited bridge")] if native.any() else r.iloc[0:0]
    small = small[small.groupby(["benchmark", "variant"])["testbed"].transform("nunique") > 1]
    return pd.concat([_one_input(r[native] if native.any() else r).assign(panel="scaling"),
                      _one_input(small).assign(panel="guests")], ignore_index=True)


def _one_input(r: pd.DataFrame) -> pd.DataFrame:
    """Per application, the rows of the input the most testbeds ran (then the most rows; the first by name)."""
    if r.empty:
        return r
    size = r.groupby(["benchmark", "variant"]).agg(testbeds=("testbed", "nunique"), rows=("testbed", "size"))
    size = size.reset_index().sort_values(["benchmark", "testbeds", "rows", "variant"],
                                          ascending=[True, False, False, True])
    chosen = set(size.drop_duplicates("benchmark")[["benchmark", "variant"]].itertuples(index=False, name=None))
    return r[[k in chosen for k in r[["benchmark", "variant"]].itertuples(index=False, name=None)]]


def app_vm_ratio(tidy: pd.DataFrame, times: dict[str, str] = APP_TIMES) -> pd.DataFrame:
    """Per application input and guest configuration: the VM/native time
    ratio T(guests) / T(namespace hosts over the unlimited bridge) on the same
    input, rank count and placement (one block of ranks per host or guest),
    paired by interleaved round, median [CI], with the guests' accelerator
    (``qemu-tcg``: software emulation, the ratio measures the emulator)."""
    per = _app_times(tidy, times)
    if per.empty:
        return pd.DataFrame()
    rows = []
    for (bench, variant, mpi), g in per.groupby(["benchmark", "variant", "mpi"], sort=True):
        native = g[(g["kind"] == NetnsBridge.name) & (g["link"] == "")]
        for (tb, virt, accel, ranks), v in g[g["kind"] == Qemu.name].groupby(
                ["testbed", "virtualization", "accel", "ranks"], sort=True):
            ref = native[native["ranks"] == ranks]
            if ref.empty:
                continue
            ref_tb = sorted(ref["testbed"].unique())[0]
            ref = ref[ref["testbed"] == ref_tb].set_index("rep")["value"]
            t = v.set_index("rep")["value"]
            both = t.index.intersection(ref.index)
            if not len(both):
                continue
            ci = stats.median_ci((t[both] / ref[both]).to_numpy())
            rows.append(dict(benchmark=bench, variant=variant, mpi=mpi, testbed=tb, virtualization=virt,
                             accelerator=str(accel).upper(), ranks=int(ranks),
                             native_testbed=ref_tb, ratio=ci["median"], ratio_lo=ci["ci_low"],
                             ratio_hi=ci["ci_high"], n=ci["n"], ci_level=ci["ci_level"]))
    return pd.DataFrame(rows)
