"""Generated LaTeX of the campaign: its facts (campaign, rounds, host,
versions, the suites' sources), the headline macros of every configuration
and which parts of the text the campaign has data for.

Macro names are letters only: ``\\hv`` + quantity + testbed + MPI + path,
e.g. ``\\hvLatLocalOpenmpiShm`` (median latency at the paper's message size,
us), with ``...Lo``/``...Hi`` for its confidence interval, and
``\\hvPeakLocalOpenmpiShm`` (peak bandwidth, Gbit/s) with ``...Lo``/``...Hi``
and ``\\hvPeakSize...`` (where the peak was reached).  The numbers the text
cites of single quantities are declared in ``workflow/numbers.yaml``
(:mod:`hpcvirt.numbers`); the tables are :mod:`hpcvirt.tables`, the
companion campaigns' sections :mod:`hpcvirt.companions`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd

from .benchmarks import REGISTRY
from .benchmarks.base import Application
from .benchmarks.parts import PinnedSource
from .analysis import headline
from .kinds import Qemu
from .labels import MACRO_USE, Macros, camel, count_text, fmt, fmt_bytes, latex_escape, path_key, rate_label

def config_key(row) -> str:
    # a benchmark below MPI (rows of mpi none: raw TCP) in the MPI's place
    mpi = camel(row["benchmark"] if row["mpi"] == "none" else row["mpi"])
    path = path_key(row["interconnect"])
    return camel(row["testbed"]) + mpi + path


#: The ping-pong benchmarks of the headline table and the paired overheads;
#: the other point-to-point benchmarks get macros with their name in front
#: (``\hvImbLat...``, ``\hvOsuPeak...``): the benchmarks declare which (PointToPoint).
HEADLINE_BENCHMARKS = tuple(REGISTRY.point_to_point_rows(headline=True))
#: Per tidy benchmark: (variant or None for any, latency metric) of its point-to-point rows.
POINT_TO_POINT = REGISTRY.point_to_point_rows()


def macro_prefix(benchmark: str) -> str:
    return "" if benchmark in HEADLINE_BENCHMARKS else camel(benchmark.split("_")[0])


def quick_look(quick: bool) -> Macros:
    """``\\hvQuickLook``: under the title, a boxed notice that a paper built by
    ``make quick`` is not the archived campaign (empty otherwise)."""
    if not quick:
        return Macros(hvQuickLook="")
    return Macros(hvQuickLook=(
        "\\begin{center}\\fbox{\\parbox{0.9\\linewidth}{\\textbf{Quick look --- not the archived campaign.} "
        "This paper was built by \\texttt{make quick} from campaign \\texttt{\\hvCampaign}: "
        "\\hvcount{\\hvReps}{repetition}{repetitions} of a reduced study (small message sizes, class~S "
        "kernels, short placement runs), to check that every part of the artifact works on this machine. Its "
        "numbers are not the study's results and its confidence intervals are not meaningful; the results are "
        "those of the archived campaign (\\texttt{make figure}, \\texttt{make report}) or of a full "
        "\\texttt{make}.}}\\end{center}"))


def campaign_numbers(summary: pd.DataFrame, tidy: pd.DataFrame, *, latency_bytes: int = 8,
                     hosts: dict | None = None, guest_shapes: Sequence[dict] = (), quick: bool = False,
                     host_records: int = 1, archive: str | None = None) -> Macros:
    """The campaign's facts and the headline macros of every configuration;
    ``guest_shapes``: the shapes the guests were booted in (``count``, ``vcpus``;
    :func:`hpcvirt.analysis.host_summary`), as ``\\hvGuestCount``,
    ``\\hvGuestVcpus`` and their product ``\\hvGuestVcpusTotal``, in words; ``host_records``: the most
    distinct host records of a testbed's runs (``\\hvHostRecords``: above 1, the host changed during the
    campaign, e.g. a kernel update before it was extended); ``archive``: the campaign
    ``config/config.yaml`` names (``\\hvArchive``; ``\\hvIsArchive`` 1 where it is this one, whose text
    then speaks of the archived campaign)."""
    m = quick_look(quick)
    reps = int(tidy["rep"].nunique())
    campaign = str(summary["campaign"].iloc[0])
    m["hvCampaign"] = latex_escape(campaign)
    m["hvArchive"] = latex_escape(archive or campaign)
    m["hvIsArchive"] = "1" if (archive or campaign) == campaign else "0"
    m["hvReps"] = str(reps)
    m["hvRuns"] = str(tidy["run_id"].nunique())
    m["hvLatBytes"] = fmt_bytes(latency_bytes)
    # the sizes of the headline ping-pong over MPI (PointToPoint.headline)
    pingpong = next((b for b, p in REGISTRY.point_to_point() if p.headline and b.mpi), None)
    sizes = tidy.loc[tidy["benchmark"].astype(str).map(pingpong.owns) if pingpong else [False] * len(tidy),
                     "msg_bytes"]
    if len(sizes):
        m["hvSizeMin"] = fmt_bytes(int(sizes.min()))
        m["hvSizeMax"] = fmt_bytes(int(sizes.max()))
    # the lowest coverage of an interval (a configuration of one round, e.g. in the guests, has none)
    levels = summary.loc[summary["n"] >= 2, "ci_level"] if (summary["n"] >= 2).any() else summary["ci_level"]
    m["hvCiLevel"] = fmt(100 * float(levels.min()), 3)
    # and the highest, with the rounds the intervals rest on (\hvcoverage in paper/main.tex: "75.0 to 93.8 %")
    m["hvCiLevelMax"] = fmt(100 * float(levels.max()), 3)
    ci_rounds = sorted({int(n) for n in summary.loc[levels.index, "n"]})
    m["hvCiRounds"] = " or ".join(map(str, ci_rounds)) + (" round" if ci_rounds == [1] else " rounds")
    guests = tidy["kind"] == Qemu.name
    if guests.any():
        rounds = int(tidy.loc[guests, "rep"].nunique())
        m["hvRepsGuests"] = str(rounds)
    if hosts:
        host = hosts["host"]
        m["hvCpuModel"] = latex_escape(host["cpu"].get("model") or "unknown")
        m["hvCores"] = str(host["cpu"]["lscpu"].get("CPU(s)", "?"))
        m["hvKernel"] = latex_escape(host["kernel"]["release"])
        m["hvHostRecords"] = str(int(host_records))
        pk = host.get("packages", {})
        # the MPIs' packages and those of the headline point-to-point benchmarks (their first)
        tools = [(camel(b.name), pkg) for b, pkg in REGISTRY.headline_packages()]
        for name, pkg in (("Openmpi", "openmpi-bin"), ("Mpich", "mpich"), *tools):
            m[f"hv{name}Version"] = latex_escape(pk.get(pkg, "not installed"))
        virt = host.get("virtualization", {})
        m["hvHostVm"] = latex_escape(str(virt.get("vm")))
        m["hvHostContainer"] = latex_escape(str(virt.get("container")))
        # whether the records say the host is itself a guest (or in a container): the text says so only then
        m["hvHostIsVm"] = "0" if str(virt.get("vm")) in ("none", "None", "") else "1"
        m["hvHostInContainer"] = "0" if str(virt.get("container")) in ("none", "None", "") else "1"
    # the accelerator of every VM testbed, printed beside its numbers
    accels = []
    for tb, accel in sorted(set(zip(summary["testbed"], summary["accel"].fillna("")))):
        if accel:
            label = {"kvm": "KVM", "tcg": "TCG emulation"}.get(accel, accel)
            m[f"hvAccel{camel(tb)}"] = label
            accels.append(f"{latex_escape(tb)}: {label}")
    m["hvVmAccels"] = "; ".join(accels) or "no VM testbed"
    # whether the guests ran emulated (TCG): the text says so only then (\hvifemulated in paper/main.tex);
    # a campaign without guests leaves it undefined (\hvifguests)
    if accels:
        m["hvEmulated"] = "1" if (summary["accel"].fillna("") == "tcg").any() else "0"
    # what the guests ran (where they would be emulated, a new campaign runs only what shows their paths work)
    ran = sorted(set(tidy.loc[guests, "benchmark"].astype(str)))
    m["hvGuestsRan"] = ", ".join(f"\\texttt{{{latex_escape(b)}}}" for b in ran) or "nothing"
    shapes = {(int(g["count"]), int(g["vcpus"])) for g in guest_shapes if g.get("count") and g.get("vcpus")}
    if shapes:
        def words(xs):
            return " or ".join(count_text(x) for x in sorted(set(xs)))
        m["hvGuestCount"] = words(n for n, _ in shapes)
        m["hvGuestVcpus"] = words(v for _, v in shapes)
        m["hvGuestVcpusTotal"] = words(n * v for n, v in shapes)
    # the most ranks the applications ran on one host
    bench = tidy["benchmark"].astype(str)
    owned = {n for n in bench.unique() if any(b.owns(n) for b in REGISTRY if isinstance(b, Application))}
    per_host = tidy.loc[bench.isin(owned), "ranks_per_node"].dropna() if "ranks_per_node" in tidy else []
    if len(per_host):
        m["hvAppRanksPerHost"] = count_text(int(per_host.max()))
    # the pinned suites (a pinned source of their own; not an application): version as printed, source
    # checksum (short), rounds
    suites = [b for b in REGISTRY if isinstance(b.build, PinnedSource) and b.build.suite == b.name
              and not isinstance(b, Application)]
    for b in suites:
        name, d = camel(b.name), tidy[bench.map(b.owns)]
        if d.empty:
            continue
        versions = sorted({str(v) for v in d["suite_version"].dropna()}) if "suite_version" in d else []
        shas = sorted({str(v) for v in d["source_sha256"].dropna()}) if "source_sha256" in d else []
        m[f"hv{name}Version"] = latex_escape(", ".join(versions) or "unknown")
        m[f"hv{name}Source"] = ", ".join(f"\\texttt{{{v[:12]}}}" for v in shas) or "a site build"
        m[f"hv{name}Reps"] = str(int(d["rep"].nunique()))
    # the applications in the guests: VM/native time ratio on the guests' input, and that input
    from .apps import app_vm_ratio

    vm_apps = app_vm_ratio(tidy)
    if len(vm_apps):
        m["hvAppVmRanks"] = " or ".join(count_text(n) for n in sorted(set(vm_apps["ranks"])))
    for _, r in vm_apps.iterrows():
        k = f"hvAppVm{camel(r['benchmark'])}{camel(r['testbed'])}"
        m[k] = fmt(r["ratio"])
        m[f"{k}Lo"] = fmt(r["ratio_lo"])
        m[f"{k}Hi"] = fmt(r["ratio_hi"])
        m[f"{k}N"] = str(int(r["n"]))
        m[f"{k}Input"] = latex_escape(str(r["variant"]))
        # LAMMPS' variant names its atoms; its steps are the iteration count of its loop time
        loop = tidy[(bench == r["benchmark"]) & (tidy["testbed"] == r["testbed"]) & (tidy["variant"] == r["variant"])
                    & (tidy["metric"] == "loop_time")]["iteration_count"].dropna()
        if loop.nunique() == 1:
            m[f"{k}Steps"] = str(int(loop.iloc[0]))
        m[f"{k}Accel"] = latex_escape(r["accelerator"])
    for _, r in headline(summary, latency_bytes, tuple(POINT_TO_POINT)).iterrows():
        pre, k = f"hv{macro_prefix(r['benchmark'])}", config_key(r)
        if "lat" in r and pd.notna(r.get("lat")):
            m[f"{pre}Lat{k}"] = fmt(r["lat"])
            m[f"{pre}Lat{k}Lo"] = fmt(r["lat_lo"])
            m[f"{pre}Lat{k}Hi"] = fmt(r["lat_hi"])
            m[f"{pre}Lat{k}N"] = str(int(r["lat_n"]))
        if "peak" in r and pd.notna(r.get("peak")):
            m[f"{pre}Peak{k}"] = fmt(r["peak"])
            m[f"{pre}Peak{k}Lo"] = fmt(r["peak_lo"])
            m[f"{pre}Peak{k}Hi"] = fmt(r["peak_hi"])
            m[f"{pre}Peak{k}N"] = str(int(r["peak_n"]))
            m[f"{pre}PeakSize{k}"] = fmt_bytes(int(r["peak_bytes"]))
    return m


def benchmark_numbers(tidy: pd.DataFrame) -> list[tuple[str, dict[str, str]]]:
    """What each benchmark says of its own rows (``Benchmark.numbers``, e.g. OpenFOAM's damBreak: version,
    mesh, steps, rounds), with where it is said: ``[(module.Class.numbers, {macro: text})]``."""
    bench = tidy["benchmark"].astype(str)
    out = []
    for b in REGISTRY:
        rows = tidy[bench.map(b.owns)]
        if not rows.empty:
            out.append((f"{type(b).__module__}.{type(b).__name__}.numbers", b.numbers(rows)))
    return out


# ------------------------------------------------------------------ parts
PART_CALL = re.compile(r"\\hvpart\{([a-z0-9-]+)\}")
FIGURE_USE = re.compile(r"\\includegraphics(?:\[[^\]]*\])?\{([^}.]+)(?:\.pdf)?\}|\\ref\{fig:([^}]+)\}")


#: A number a sentence can stand without (``\\hvvalue{\\hvRateBridgeTenG}`` prints "[not in this
#: campaign]" where the campaign lacks it, paper/main.tex): not a number the part needs.
OPTIONAL_USE = re.compile(r"\\hvvalue\{\\hv[A-Z][A-Za-z]*\}")


def part_needs(text: str) -> tuple[set[str], set[str]]:
    """(macros, figures) a part uses; a number in ``\\hvvalue{...}`` is not needed."""
    figures = {a or b for a, b in FIGURE_USE.findall(text)}
    return set(MACRO_USE.findall(OPTIONAL_USE.sub("", text))), figures


def parts_tex(parts: dict[str, str], defined: set[str], figures: set[str]) -> tuple[str, list[str], dict[str, str]]:
    """LaTeX that includes each part (``\\hvpart{name}``) whose macros and
    figures this campaign has, and lists the others (``\\hvOmittedParts``).

    ``parts``: name -> text of ``paper/sections/parts/<name>.tex``, whose first
    line is a comment ``% <title>: needs <what>``; ``defined``: the names of the
    campaign's numbers (``paper/generated/numbers.csv``).  Returns (tex,
    included, {omitted: why})."""
    included, omitted, missing = [], {}, {}
    lines = ["% Generated by workflow/scripts/parts.py: the parts of the paper this campaign has data for. "
             "Do not edit.\n", "\\makeatletter\n"]
    for name, text in sorted(parts.items()):
        macros, figs = part_needs(text)
        missing_m, missing_f = macros - defined, figs - figures
        if missing_m or missing_f:
            # parts with one title (the method's and the results' of one experiment): one entry
            head = text.splitlines()[0].lstrip("% ").strip() if text.startswith("%") else name
            m, f = missing.setdefault(head, (set(), set()))
            m |= missing_m
            f |= missing_f
            omitted[name] = head
            lines.append(f"\\@namedef{{hvpart@{name}}}{{}}\n")
        else:
            included.append(name)
            lines.append(f"\\@namedef{{hvpart@{name}}}{{\\input{{sections/parts/{name}}}}}\n")
    why = {}
    for head, (m, f) in missing.items():
        values = f"{len(m)} measured value{'s' * (len(m) > 1)}"
        what = [f"figure {x}" for x in sorted(f)] + ([f"{values}, e.g. \\texttt{{\\textbackslash {min(m)}}}"]
                                                      if m else [])
        why[head] = f"{latex_escape(head)} Missing here: {', '.join(what)}."
    omitted = {name: why[head] for name, head in omitted.items()}
    lines.append("\\makeatother\n")
    lines.append("\\newcommand{\\hvpart}[1]{\\ifcsname hvpart@#1\\endcsname\\csname hvpart@#1\\endcsname"
                 "\\else\\PackageError{hvpart}{no part #1 in sections/parts}{}\\fi}\n")
    if omitted:
        # one item per text: a part of the method and one of the results may need the same data
        items = "".join(f"  \\item {why}\n" for why in dict.fromkeys(omitted.values()))
        body = ("\\paragraph{Not in this campaign.} These parts of the paper need data that campaign "
                "\\texttt{\\hvCampaign} does not have, and are left out:\n\\begin{itemize}\n" + items + "\\end{itemize}")
    else:
        body = ""
    lines.append(f"\\newcommand{{\\hvOmittedParts}}{{{body}}}\n")
    return "".join(lines), included, omitted


def commprof_numbers(summary: pd.DataFrame) -> Macros:
    """Macros of the communication profiles: ``\\hvProfShare<Kernel><Testbed>``
    (percent of time in MPI, with Lo/Hi), ``\\hvProfMiB<Kernel><Testbed>``
    (MiB all ranks sent to other ranks), ``\\hvProfPairs<Kernel><Testbed>``
    (rank pairs that exchanged data, of ``\\hvProfRanks`` ranks) and
    ``\\hvProfReps``."""
    from .views import by_name

    shares, matrix = by_name("mpi_time_shares").compute(summary), by_name("bytes_per_pair").compute(summary)
    m = Macros()
    if shares.empty:
        return m
    m["hvProfReps"] = str(int(shares["n"].min()))
    m["hvProfRanks"] = ", ".join(str(r) for r in sorted(shares["ranks"].unique()))
    for _, r in shares.iterrows():
        k = f"{camel(r['kernel'])}{camel(r['testbed'])}"
        m[f"hvProfShare{k}"] = fmt(100 * r["median"], 3)
        m[f"hvProfShare{k}Lo"] = fmt(100 * r["ci_low"], 3)
        m[f"hvProfShare{k}Hi"] = fmt(100 * r["ci_high"], 3)
        m[f"hvProfShare{k}N"] = str(int(r["n"]))
    for (kernel, tb), g in matrix.groupby(["kernel", "testbed"]):
        k = f"{camel(kernel)}{camel(tb)}"
        other = g[g["src"] != g["dst"]]      # a rank's own block of an all-to-all never leaves it
        m[f"hvProfMiB{k}"] = fmt(other["median"].sum() / 2**20)
        m[f"hvProfPairs{k}"] = str(int((other["median"] > 0).sum()))
    return m


def streams_numbers(tidy: pd.DataFrame) -> Macros:
    """Macros of the streams experiment (Nanos et al.'s network benchmark):
    ``\\hvStreamsCount`` (concurrent streams) and ``\\hvStreamsPath<Testbed>``
    (the data path); the bandwidths and retransmissions the text cites are
    declared in ``workflow/numbers.yaml``."""
    from .views import by_name

    s = by_name("streams").compute(tidy)
    m = Macros()
    if s.empty:
        return m
    m["hvStreamsCount"] = str(int(s["streams"].max()))
    for _, r in s.iterrows():
        m[f"hvStreamsPath{camel(r['testbed'])}"] = latex_escape(r["path"])
    return m


def testbed_numbers(tidy: pd.DataFrame, descriptions: dict[str, str]) -> Macros:
    """The testbeds the campaign measured on, as the introduction lists them:
    ``\\hvTestbedCount`` (in words up to ten) and ``\\hvTestbedList`` (each
    testbed's ``description`` from its file, in the study's order, with its
    name; a testbed without one by its name); per testbed with a declared
    link, ``\\hvLink<Testbed>`` (its rows' ``link``: ``vxlan, rate 1gbit``)
    and, where it is limited to a rate, ``\\hvRate<Testbed>``
    (``1\\,Gbit/s``); ``\\hvMachines`` (``one machine``: the distinct hosts
    of its rows, the machines that ran its measurement jobs)."""
    m = Macros()
    if "link" in tidy:
        for tb, lk in sorted(set(zip(tidy["testbed"].astype(str), tidy["link"].fillna("").astype(str)))):
            if lk:
                m[f"hvLink{camel(tb)}"] = latex_escape(lk)
            rates = [p.strip() for p in lk.split(",") if p.strip().startswith("rate ")]
            if rates:
                m[f"hvRate{camel(tb)}"] = rate_label(rates[0]).replace(" ", "\\,")
    # the machines whose measurement jobs ran the campaign (the rows' host: an id, or a name in older records)
    hosts = tidy["host"].dropna().astype(str) if "host" in tidy else pd.Series(dtype=str)
    if hosts.nunique():
        m["hvMachines"] = f"{count_text(hosts.nunique())} machine{'s' if hosts.nunique() > 1 else ''}"
    ran = set(tidy["testbed"].astype(str))
    names = [tb for tb in descriptions if tb in ran]
    if names:
        m["hvTestbedCount"] = count_text(len(names))
        # a description begins a sentence in its file, here it follows a colon ("Two QEMU guests" -> "two ...")
        lower = [d[:1].lower() + d[1:] if d[1:2].islower() else d for d in (descriptions[tb] for tb in names)]
        m["hvTestbedList"] = "; ".join(f"{latex_escape(d)} (\\texttt{{{latex_escape(tb)}}})" if d
                                       else f"\\texttt{{{latex_escape(tb)}}}" for tb, d in zip(names, lower))
    return m
