"""From raw outputs to tidy rows, and from tidy rows to the summary table.

Parsing is strict: an output that fails to parse (truncated, failed run,
failed verification) is *rejected* -- listed with its path and the reason --
and contributes no number.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from . import kinds, paths, stats
from .benchmarks import REGISTRY
from .query import per_round_at
from .labels import normalize_units, runtime_of
from .tidy import COLUMNS, ParseError, to_rows


def _parse_one(raw: Path, ctx: dict) -> list:
    """The declaration's parser, with what the launch expected (from the provenance)."""
    bench = ctx["run_id"].split("/")[2]
    if bench not in REGISTRY.benchmarks:
        raise ParseError(raw, f"no declared benchmark {bench!r} (declared: {REGISTRY.names()})")
    return REGISTRY[bench].read(raw, ctx.get("expected", {}))


def host_label(host: dict | None) -> str | None:
    """The tidy rows' ``host``: the measuring machine's host id from its
    provenance record (:func:`hpcvirt.provenance.host_id`), or its host name
    in records made before the id was recorded."""
    host = host or {}
    return host.get("host_id") or host.get("hostname") or None


def row_context(prov: dict) -> dict:
    """The columns of a run's tidy rows that its provenance record gives: its context, the start, the host
    (:func:`host_label`), the testbed kind, the VM accelerator (``kvm`` or ``tcg``, from the virtualization
    label the run recorded; empty when no VM ran) and the Spack DAG hash of the build it ran (empty for a
    build not made by Spack)."""
    ctx = prov["context"]
    build = (ctx.get("benchmark_binary") or {}).get("build") or {}
    return dict(ctx, started_at=prov.get("started_at"), host=host_label(prov.get("host")),
                kind=ctx.get("testbed_kind"), accel=kinds.guest_accel(ctx.get("virtualization")),
                spack_hash=(build.get("spack") or {}).get("hash"))


def parse_outputs(raw_paths: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Parse raw outputs (each with its provenance .json beside it).

    Returns (tidy rows, rejected outputs with the reason).  A path outside
    its campaign's directory or through a symlink stops the parse before any
    output is read (:func:`hpcvirt.paths.raw_output`)."""
    for p in raw_paths:
        paths.raw_output(p)
        paths.raw_output(Path(p).with_suffix(".json"))
    rows, rejected = [], []
    for p in raw_paths:
        raw = Path(p)
        prov_path = raw.with_suffix(".json")
        try:
            prov = json.loads(prov_path.read_text())
        except (OSError, ValueError) as exc:
            rejected.append({"raw_path": str(raw), "reason": f"no readable provenance {prov_path}: {exc}"})
            continue
        ctx = row_context(prov)
        try:
            measurements = _parse_one(raw, ctx)
        except ParseError as exc:
            rejected.append({"raw_path": str(raw), "reason": exc.reason})
            continue
        rows += to_rows(measurements, ctx)
    tidy = pd.DataFrame(rows, columns=list(COLUMNS))
    return tidy, pd.DataFrame(rejected, columns=["raw_path", "reason"])


def summarize_tidy(tidy: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    df = normalize_units(tidy)
    df["run_id"] = df["run_id"].str.split("/").str[0]  # campaign: one group per configuration
    df["variant"] = df["variant"].fillna("")
    return stats.summarize(df, level).rename(columns={"run_id": "campaign"})


def host_summary(prov_paths: list[str]) -> dict:
    """The facts shared by a testbed's runs (for the paper and the archive).
    ``host`` is the host of the testbed's earliest run: a campaign extended
    later (on another machine, or the same one rebooted) keeps the facts of
    the machine it was measured on; ``distinct_host_records`` counts how many
    host records its runs have.  A testbed whose ranks ran in guests adds
    ``guests``: each distinct shape its runs booted (how many guests, their
    vCPUs and memory, from the run's ``testbed_info``)."""
    recs = [json.loads(Path(p).read_text()) for p in prov_paths]
    hosts = {json.dumps(r["host"], sort_keys=True) for r in recs}
    first = min(recs, key=lambda r: r.get("started_at") or "")
    infos = [(r.get("context") or {}).get("testbed_info") or {} for r in recs]
    shapes = sorted({(i.get("guests"), i["vcpus"], i.get("memory_mb")) for i in infos if "vcpus" in i}, key=repr)
    guests = {"guests": [dict(count=n, vcpus=v, memory_mb=mb) for n, v, mb in shapes]} if shapes else {}
    return {
        "runs": len(recs),
        "distinct_host_records": len(hosts),
        "host": first["host"],
        "mpi": {r["mpi"]["name"]: r["mpi"] for r in recs if r.get("mpi")},
        "git": sorted({json.dumps(r["git"], sort_keys=True) for r in recs}),
        "first_started_at": min(r["started_at"] for r in recs if r.get("started_at")),
        "last_finished_at": max(r["finished_at"] for r in recs if r.get("finished_at")),
        **guests,
    }


def headline(summary: pd.DataFrame, latency_bytes: int, benchmarks: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Per configuration of the point-to-point benchmarks (``benchmarks``: their tidy rows; by default the
    headline ones, as they declare it): latency at ``latency_bytes`` and peak bandwidth, with CIs."""
    point_to_point = REGISTRY.point_to_point_rows()
    if benchmarks is None:
        benchmarks = tuple(REGISTRY.point_to_point_rows(headline=True))
    keys = ["testbed", "virtualization", "interconnect", *(["link"] if "link" in summary else []), "stack", "mpi",
            "benchmark"]
    out = []
    summary = summary[summary["benchmark"].isin(benchmarks)]
    for key, grp in summary.groupby(keys, dropna=False, sort=True):
        rec = dict(zip(keys, key))
        variant, lat_metric = point_to_point.get(rec["benchmark"], (None, "latency"))
        if variant is not None:
            grp = grp[grp["variant"].fillna("") == variant]
        lat = grp[(grp["metric"] == lat_metric) & (grp["msg_bytes"] == latency_bytes)]
        bw = grp[grp["metric"] == "bandwidth"]
        if lat.empty and bw.empty:
            continue
        if not lat.empty:
            r = lat.iloc[0]
            rec.update(lat=r["median"], lat_lo=r["ci_low"], lat_hi=r["ci_high"], lat_n=int(r["n"]),
                       lat_level=r["ci_level"])
        if not bw.empty:
            r = bw.loc[bw["median"].idxmax()]
            rec.update(peak=r["median"], peak_lo=r["ci_low"], peak_hi=r["ci_high"], peak_bytes=int(r["msg_bytes"]),
                       peak_n=int(r["n"]), peak_level=r["ci_level"])
        out.append(rec)
    return pd.DataFrame(out)


def latency_size_problem(summary: pd.DataFrame, latency_bytes: int) -> str | None:
    """Why the paper's latency size (config key ``paper.latency_bytes``) gives it no latency (None: it does):
    a size none of the headline point-to-point configurations measured, with the sizes every one of them
    measured."""
    h = headline(summary, latency_bytes)
    if h.empty or ("lat" in h and h["lat"].notna().any()):
        return None
    point_to_point = REGISTRY.point_to_point_rows()
    d = summary[summary["benchmark"].isin(list(REGISTRY.point_to_point_rows(headline=True)))]
    d = d[d["metric"] == d["benchmark"].map(lambda b: point_to_point.get(b, (None, "latency"))[1])]
    sets = [set(g["msg_bytes"].dropna().astype(int)) for _, g in d.groupby(["testbed", "benchmark", "mpi"])]
    common = sorted(set.intersection(*sets)) if sets else []
    return (f"paper.latency_bytes: {latency_bytes} B is a size no headline point-to-point run measured, so the paper "
            f"would have no latency; sizes every one measured: {', '.join(map(str, common[:12])) or 'none'}")


def paired_overhead(tidy: pd.DataFrame, subject: dict, reference: dict, *, latency_bytes: int = 8,
                    level: float = 0.95) -> dict | None:
    """Overhead of ``subject`` over ``reference`` from repetitions paired by round.

    Latency: subject - reference at ``latency_bytes`` (us).  Bandwidth: peak
    subject / peak reference.  Repetition r of both ran in the same
    interleaved round, so the pairs share the machine's state of that moment.
    Median and order-statistic CI over the rounds.
    """
    df = normalize_units(tidy)
    out = {}
    lat, bw = df[df["metric"] == "latency"], df[df["metric"] == "bandwidth"]
    lat_s, lat_r = per_round_at(lat, subject, latency_bytes), per_round_at(lat, reference, latency_bytes)
    both = lat_s.index.intersection(lat_r.index)
    if len(both):
        out["lat_diff"] = stats.median_ci((lat_s[both] - lat_r[both]).to_numpy(), level)
    bw_s, bw_r = per_round_at(bw, subject, None), per_round_at(bw, reference, None)
    both = bw_s.index.intersection(bw_r.index)
    if len(both):
        out["bw_ratio"] = stats.median_ci((bw_s[both] / bw_r[both]).to_numpy(), level)
    return out or None


def comparisons(tidy: pd.DataFrame) -> list[tuple[str, dict, dict]]:
    """The pairs the paper reports (the headline point-to-point benchmarks: NetPIPE and qperf): every
    virtualized testbed against the native one on the same benchmark, MPI and path (a VM cluster's path
    between nodes against a bare-metal cluster's, over the same fabric; where the campaign has no native
    path between nodes at all, this host's TCP loopback); on each testbed, TCP loopback against shared
    memory per MPI; MPI over TCP against raw TCP.  Of several native testbeds, a cluster (one with a path
    between nodes) is the reference of a testbed that has such a path too, a single host of one that
    has none; then the first by name."""
    out = []
    tidy = tidy[tidy["benchmark"].isin(list(REGISTRY.point_to_point_rows(headline=True)))]
    cfgs = tidy[["testbed", "virtualization", "benchmark", "mpi", "interconnect"]].drop_duplicates()
    native = cfgs[cfgs["virtualization"] == "none"]
    inside = {"shm", "tcp-loopback"}      # paths inside one host; any other is between nodes (a cluster's)
    clusters = set(cfgs.loc[~cfgs["interconnect"].isin(inside), "testbed"])
    native_cluster = bool(clusters & set(native["testbed"]))
    for _, c in cfgs.iterrows():
        sel = dict(testbed=c.testbed, virtualization=c.virtualization, benchmark=c.benchmark, mpi=c.mpi,
                   interconnect=c.interconnect)
        if c.virtualization == "none":
            if c.mpi != "none" and c.interconnect == "tcp-loopback":     # an MPI's (raw TCP has no shm)
                ref = dict(sel, interconnect="shm")
                if ((native.testbed == c.testbed) & (native.mpi == c.mpi) & (native.interconnect == "shm")).any():
                    out.append(("tcp-vs-shm", sel, ref))
            continue
        base = native[(native.benchmark == c.benchmark) & (native.mpi == c.mpi)]
        same = base[base.interconnect == c.interconnect]   # e.g. a bare-metal cluster's path between its nodes
        if not len(same) and c.interconnect not in inside and native_cluster:
            continue        # a native cluster over another fabric: TCP against InfiniBand is no overhead
        kind = "shm" if c.interconnect == "shm" else "tcp-loopback"   # else this host's, without a network
        base = same if len(same) else base[base.interconnect == kind]
        if len(base):
            like = base.testbed.isin(clusters) == (c.testbed in clusters)     # cluster with cluster
            b = base.assign(like=like).sort_values(["like", "testbed"], ascending=[False, True]).iloc[0]
            out.append(("virt-vs-native", sel, dict(testbed=b.testbed, virtualization=b.virtualization,
                                                     benchmark=b.benchmark, mpi=b.mpi, interconnect=b.interconnect)))
    return out


# ------------------------------------------------------------------ containers
#: Point-to-point benchmarks of the container comparison (the MPI ones: a container wraps MPI ranks):
#: name, then the (benchmark, variant, metric) of its latency rows and of its bandwidth rows
#: (variant None = any), as each declares them (PointToPoint).
CONTAINER_P2P = tuple((b.name, p.latency, p.bandwidth) for b, p in REGISTRY.point_to_point() if b.mpi)


def container_ratios(tidy: pd.DataFrame, *, latency_bytes: int = 8, level: float = 0.95) -> pd.DataFrame:
    """Every container testbed against the bare host (virtualization ``none``)
    on the same benchmark, MPI and path, paired by interleaved round (rep r of
    both ran in the same round): latency at ``latency_bytes`` container /
    bare host, peak bandwidth container / bare host, and for NPB the time
    container / bare host; median and order-statistic CI of the per-round
    ratios, with the achieved coverage.  One row per (runtime, benchmark,
    variant, MPI, path, ranks, metric)."""
    df = normalize_units(tidy)
    df = df[df["virtualization"].astype(str).str.startswith("none")].copy()
    if df.empty:
        return pd.DataFrame()
    df["runtime"] = df["virtualization"].map(runtime_of)
    rows = []

    def add(sub, ref, **key):
        both = sub.index.intersection(ref.index)
        if not len(both):
            return
        ci = stats.median_ci((sub[both] / ref[both]).to_numpy(), level)
        rows.append(dict(key, n=ci["n"], ratio=ci["median"], ratio_lo=ci["ci_low"], ratio_hi=ci["ci_high"],
                         ci_level=ci["ci_level"]))

    for name, *sources in CONTAINER_P2P:
        for kind, (bench, variant, metric), size in zip(("latency", "bandwidth"), sources, (latency_bytes, None)):
            d = df[(df["benchmark"] == bench) & (df["metric"] == metric)]
            sel = {} if variant is None else {"variant": variant}
            for (mpi, path), g in d.groupby(["mpi", "interconnect"], sort=True):
                bare = g[g["runtime"] == "none"]
                if bare["testbed"].nunique() != 1:
                    continue
                for (rt, tb), c in g[g["runtime"] != "none"].groupby(["runtime", "testbed"], sort=True):
                    add(per_round_at(c, sel, size), per_round_at(bare, sel, size),
                        runtime=rt, testbed=tb, reference=bare["testbed"].iloc[0], benchmark=name,
                        variant=variant or "", mpi=mpi, interconnect=path, ranks=2,
                        metric="latency" if kind == "latency" else "peak_bandwidth",
                        msg_bytes=size if size is not None else "")
    # the suites that time their runs (a `time` metric in seconds: NPB's kernels)
    timed = [b for b in REGISTRY if b.metrics.get("time") == "s" and b.point_to_point is None]
    d = df[df["benchmark"].map(lambda row: any(b.owns(row) for b in timed)) & (df["metric"] == "time")]
    for (bench, variant, mpi, path, ranks), g in d.groupby(["benchmark", "variant", "mpi", "interconnect", "ranks"],
                                                            sort=True):
        bare = g[g["runtime"] == "none"]
        if bare["testbed"].nunique() != 1:
            continue
        ref = bare.groupby("rep")["value"].median()
        for (rt, tb), c in g[g["runtime"] != "none"].groupby(["runtime", "testbed"], sort=True):
            add(c.groupby("rep")["value"].median(), ref, runtime=rt, testbed=tb, reference=bare["testbed"].iloc[0],
                benchmark=bench, variant=variant, mpi=mpi, interconnect=path, ranks=int(ranks), metric="time",
                msg_bytes="")
    cols = ["runtime", "testbed", "reference", "benchmark", "variant", "mpi", "interconnect", "ranks", "metric",
            "msg_bytes", "n", "ratio", "ratio_lo", "ratio_hi", "ci_level"]
    return pd.DataFrame(rows, columns=cols)


def bare_host_peaks(tidy: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Per data path, the smallest and largest peak bandwidth (Gbit/s) of a
    single run of the headline MPI ping-pong (as the benchmarks declare it:
    NetPIPE) on the bare host (virtualization ``none``), over both MPIs and
    all rounds: how far the machine itself moves between runs."""
    bench, variant, metric = next(p.bandwidth for b, p in REGISTRY.point_to_point() if p.headline and b.mpi)
    df = normalize_units(tidy)
    d = df[(df["benchmark"] == bench) & (df["metric"] == metric) & (df["virtualization"] == "none")]
    d = d if variant is None else d[d["variant"] == variant]
    out = {}
    for path, g in d.groupby("interconnect", sort=True):
        peaks = g.groupby(["testbed", "mpi", "rep"])["value"].max()
        out[str(path)] = (float(peaks.min()), float(peaks.max()))
    return out
