"""Generated LaTeX: every number in the paper comes from here.

Macro names are letters only: ``\\hv`` + quantity + testbed + MPI + path,
e.g. ``\\hvLatLocalOpenmpiShm`` (median latency at the paper's message size,
us), with ``...Lo``/``...Hi`` for its confidence interval, and
``\\hvPeakLocalOpenmpiShm`` (peak bandwidth, Gbit/s) with ``...Lo``/``...Hi``
and ``\\hvPeakSize...`` (where the peak was reached).
"""

from __future__ import annotations

import math
import re

import pandas as pd

from .reference import latex_escape

MPI_LABEL = {"openmpi": "Open MPI", "mpich": "MPICH", "none": "raw TCP (qperf)"}
PATH_LABEL = {"shm": "shared memory", "tcp-loopback": "TCP loopback", "tcp": "TCP"}


NUMBER_WORDS = {0: "Zero", 1: "One", 2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six", 7: "Seven", 8: "Eight",
                9: "Nine", 10: "Ten", 16: "Sixteen", 40: "Forty", 100: "Hundred"}


def camel(word: str) -> str:
    """A name as part of a LaTeX macro name: words capitalised, numbers in
    words (``bridge-10g`` -> ``BridgeTenG``)."""
    parts = re.findall(r"[A-Za-z]+|[0-9]+", str(word))
    parts = [NUMBER_WORDS.get(int(p), "".join(NUMBER_WORDS[int(d)] for d in p)) if p.isdigit() else p for p in parts]
    out = "".join(p[:1].upper() + p[1:].lower() for p in parts)
    if not re.fullmatch(r"[A-Za-z]+", out):
        raise ValueError(f"{word!r} cannot become part of a LaTeX macro name")
    return out


def fmt(x: float, digits: int = 3) -> str:
    """Significant digits, no exponent for the ranges we report."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{decimals}f}"


def fmt_bytes(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}\\,{unit}"
    return f"{n}\\,B"


def macro(name: str, value: str) -> str:
    if not re.fullmatch(r"hv[A-Za-z]+", name):
        raise ValueError(f"bad macro name {name!r}")
    return f"\\newcommand{{\\{name}}}{{{value}}}\n"


def config_key(row) -> str:
    mpi = "Qperf" if row["benchmark"] == "qperf" else camel(row["mpi"])
    path = {"shm": "Shm", "tcp-loopback": "Tcp", "tcp": "Net"}.get(row["interconnect"], camel(row["interconnect"]))
    return camel(row["testbed"]) + mpi + path


#: The ping-pong benchmarks of the headline table and the paired overheads;
#: the other point-to-point benchmarks get macros with their name in front
#: (``\hvImbLat...``, ``\hvOsuPeak...``).
HEADLINE_BENCHMARKS = ("netpipe", "qperf")
#: Per benchmark: (variant, latency metric) of its headline rows.
POINT_TO_POINT = {"netpipe": ("", "latency"), "qperf": (None, "latency"), "imb": ("PingPong", "latency"),
                  "osu_latency": ("", "latency_avg"), "osu_bw": ("", None)}


def macro_prefix(benchmark: str) -> str:
    return "" if benchmark in HEADLINE_BENCHMARKS else camel(benchmark.split("_")[0])


def headline(summary: pd.DataFrame, latency_bytes: int, benchmarks=HEADLINE_BENCHMARKS) -> pd.DataFrame:
    """Per configuration: latency at ``latency_bytes`` and peak bandwidth, with CIs."""
    keys = ["testbed", "virtualization", "interconnect", *(["link"] if "link" in summary else []), "stack", "mpi",
            "benchmark"]
    out = []
    summary = summary[summary["benchmark"].isin(benchmarks)]
    for key, grp in summary.groupby(keys, dropna=False, sort=True):
        rec = dict(zip(keys, key))
        variant, lat_metric = POINT_TO_POINT.get(rec["benchmark"], (None, "latency"))
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


def quick_look_tex(quick: bool) -> str:
    """``\\hvQuickLook``: under the title, a boxed notice that a paper built by
    ``make quick`` is not the archived campaign (empty otherwise)."""
    if not quick:
        return macro("hvQuickLook", "")
    return macro("hvQuickLook", (
        "\\begin{center}\\fbox{\\parbox{0.9\\linewidth}{\\textbf{Quick look --- not the archived campaign.} "
        "This paper was built by \\texttt{make quick} from campaign \\texttt{\\hvCampaign}: \\hvReps{} "
        "repetition(s) of a reduced study (small message sizes, class~S kernels, short placement runs), to check "
        "that every part of the artifact works on this machine. Its numbers are not the study's results and its "
        "confidence intervals are not meaningful; the results are those of the archived campaign "
        "(\\texttt{make figure}, \\texttt{make report}) or of a full \\texttt{make}.}}\\end{center}"))


def numbers_tex(summary: pd.DataFrame, tidy: pd.DataFrame, *, latency_bytes: int = 8, hosts: dict | None = None,
                quick_look: bool = False) -> str:
    lines = ["% Generated by workflow/scripts/numbers.py from the aggregated results. Do not edit.\n"]
    reps = int(tidy["rep"].nunique())
    lines.append(quick_look_tex(quick_look))
    lines.append(macro("hvCampaign", latex_escape(str(summary["campaign"].iloc[0]))))
    lines.append(macro("hvReps", str(reps)))
    lines.append(macro("hvRuns", str(tidy["run_id"].nunique())))
    lines.append(macro("hvLatBytes", fmt_bytes(latency_bytes)))
    sizes = tidy.loc[tidy["benchmark"] == "netpipe", "msg_bytes"]
    if len(sizes):
        lines.append(macro("hvSizeMin", fmt_bytes(int(sizes.min()))))
        lines.append(macro("hvSizeMax", fmt_bytes(int(sizes.max()))))
    levels = summary["ci_level"]
    lines.append(macro("hvCiLevel", fmt(100 * float(levels.min()), 3)))
    if hosts:
        host = hosts["host"]
        lines.append(macro("hvCpuModel", latex_escape(host["cpu"].get("model") or "unknown")))
        lines.append(macro("hvCores", str(host["cpu"]["lscpu"].get("CPU(s)", "?"))))
        lines.append(macro("hvKernel", latex_escape(host["kernel"]["release"])))
        pk = host.get("packages", {})
        for name, pkg in (("Openmpi", "openmpi-bin"), ("Mpich", "mpich"), ("Netpipe", "netpipe-openmpi"),
                          ("Qperf", "qperf")):
            lines.append(macro(f"hv{name}Version", latex_escape(pk.get(pkg, "not installed"))))
        virt = host.get("virtualization", {})
        lines.append(macro("hvHostVm", latex_escape(str(virt.get("vm")))))
        lines.append(macro("hvHostContainer", latex_escape(str(virt.get("container")))))
    # the accelerator of every VM testbed, printed beside its numbers
    accels = []
    for tb, virt in sorted(set(zip(summary["testbed"], summary["virtualization"]))):
        if str(virt).startswith("qemu-"):
            accel = str(virt).split("-", 1)[1].split("+")[0]
            label = {"kvm": "KVM", "tcg": "TCG emulation"}.get(accel, accel)
            lines.append(macro(f"hvAccel{camel(tb)}", label))
            accels.append(f"{latex_escape(tb)}: {label}")
    lines.append(macro("hvVmAccels", "; ".join(accels) or "no VM testbed"))
    # the pinned suites: version as printed, source checksum (short), rounds
    bench = tidy["benchmark"].astype(str)
    for name, sel in (("Npb", bench.str.startswith("npb-")), ("Imb", bench == "imb"), ("Osu", bench.str.startswith("osu_"))):
        d = tidy[sel]
        if d.empty:
            continue
        versions = sorted({str(v) for v in d["suite_version"].dropna()}) if "suite_version" in d else []
        shas = sorted({str(v) for v in d["source_sha256"].dropna()}) if "source_sha256" in d else []
        lines.append(macro(f"hv{name}Version", latex_escape(", ".join(versions) or "unknown")))
        lines.append(macro(f"hv{name}Source", ", ".join(f"\\texttt{{{v[:12]}}}" for v in shas) or "a site build"))
        lines.append(macro(f"hv{name}Reps", str(int(d["rep"].nunique()))))
    # OpenFOAM's damBreak: package version, mesh sizes, steps, rounds; the link settings
    of = tidy[bench == "openfoam-dambreak"]
    if not of.empty:
        cells = sorted({int(v) for v in of.loc[of["metric"] == "cells", "value"]})
        # the steps at the largest mesh, of its longest simulated time ("7800 cells" is 1 s, "7800 cells, 0.5 s")
        big_runs = of[(of["metric"] == "steps") & of["variant"].astype(str).str.startswith(f"{cells[-1]} cells")]
        from .benchmarks.openfoam import end_time_of

        longest = max(big_runs["variant"].astype(str).unique(), key=end_time_of)
        big = big_runs[big_runs["variant"] == longest]["value"]
        lines.append(macro("hvOpenfoamEndTime", f"{end_time_of(longest):g}"))
        versions = sorted({str(v) for v in of["suite_version"].dropna() if v}) if "suite_version" in of else []
        lines.append(macro("hvOpenfoamVersion", latex_escape(", ".join(versions) or "unknown")))
        lines.append(macro("hvOpenfoamCells", " and ".join(f"{c:,}".replace(",", "{,}") for c in cells)))
        lines.append(macro("hvOpenfoamSteps", f"{int(big.min())}--{int(big.max())}" if big.nunique() > 1
                           else str(int(big.min()))))
        lines.append(macro("hvOpenfoamReps", str(int(of["rep"].nunique()))))
    # the applications in the guests: VM/native time ratio on the guests' input, and that input
    from .analysis import app_vm_ratio

    for _, r in app_vm_ratio(tidy).iterrows():
        k = f"hvAppVm{camel(r['benchmark'])}{camel(r['testbed'])}"
        lines.append(macro(k, fmt(r["ratio"])))
        lines.append(macro(f"{k}Lo", fmt(r["ratio_lo"])))
        lines.append(macro(f"{k}Hi", fmt(r["ratio_hi"])))
        lines.append(macro(f"{k}Input", latex_escape(str(r["variant"]))))
        # LAMMPS' variant names its atoms; its steps are the iteration count of its loop time
        loop = tidy[(bench == r["benchmark"]) & (tidy["testbed"] == r["testbed"]) & (tidy["variant"] == r["variant"])
                    & (tidy["metric"] == "loop_time")]["iteration_count"].dropna()
        if loop.nunique() == 1:
            lines.append(macro(f"{k}Steps", str(int(loop.iloc[0]))))
        lines.append(macro(f"{k}Accel", latex_escape(r["accelerator"])))
    if "link" in tidy:
        for tb, lk in sorted(set(zip(tidy["testbed"], tidy["link"].fillna("")))):
            if lk:
                lines.append(macro(f"hvLink{camel(tb)}", latex_escape(lk)))
    for _, r in headline(summary, latency_bytes, tuple(POINT_TO_POINT)).iterrows():
        pre, k = f"hv{macro_prefix(r['benchmark'])}", config_key(r)
        if "lat" in r and pd.notna(r.get("lat")):
            lines.append(macro(f"{pre}Lat{k}", fmt(r["lat"])))
            lines.append(macro(f"{pre}Lat{k}Lo", fmt(r["lat_lo"])))
            lines.append(macro(f"{pre}Lat{k}Hi", fmt(r["lat_hi"])))
        if "peak" in r and pd.notna(r.get("peak")):
            lines.append(macro(f"{pre}Peak{k}", fmt(r["peak"])))
            lines.append(macro(f"{pre}Peak{k}Lo", fmt(r["peak_lo"])))
            lines.append(macro(f"{pre}Peak{k}Hi", fmt(r["peak_hi"])))
            lines.append(macro(f"{pre}PeakSize{k}", fmt_bytes(int(r["peak_bytes"]))))
    return "".join(lines)


def results_table_tex(summary: pd.DataFrame, *, latency_bytes: int = 8) -> str:
    h = headline(summary, latency_bytes)
    body = []
    for _, r in h.iterrows():
        label = f"{MPI_LABEL.get(r['mpi'], r['mpi'])}, {PATH_LABEL.get(r['interconnect'], r['interconnect'])}"
        lat = (f"{fmt(r['lat'])} [{fmt(r['lat_lo'])}, {fmt(r['lat_hi'])}]"
               if pd.notna(r.get("lat", float("nan"))) else "--")
        peak = (f"{fmt(r['peak'])} [{fmt(r['peak_lo'])}, {fmt(r['peak_hi'])}] at {fmt_bytes(int(r['peak_bytes']))}"
                if pd.notna(r.get("peak", float("nan"))) else "--")
        n = int(r.get("lat_n", r.get("peak_n", 0)) if pd.notna(r.get("lat_n", float("nan"))) else r.get("peak_n", 0))
        body.append(f"{latex_escape(testbed_label(r['testbed'], r['virtualization']))} & {latex_escape(label)} & "
                    f"{lat} & {peak} & {n} \\\\")
    return (
        "% Generated by workflow/scripts/numbers.py. Do not edit.\n"
        "\\begin{table}[t]\n\\centering\\small\n"
        f"\\caption{{Latency at {fmt_bytes(latency_bytes)} (\\textmu s) and peak bandwidth (Gbit/s): "
        "median [nonparametric CI] over $n$ repetitions; the CI's achieved coverage is "
        "\\hvCiLevel\\,\\% or more.}\n"
        "\\label{tab:results}\n"
        "\\begin{tabular}{llllr}\n\\toprule\n"
        "Testbed & MPI, path & Latency & Peak bandwidth & $n$ \\\\\n\\midrule\n"
        + "\n".join(body)
        + "\n\\bottomrule\n\\end{tabular}\n\\end{table}\n"
    )


def testbed_label(testbed: str, virtualization: str | None) -> str:
    """The testbed name, with its virtualization (for VMs: the accelerator)."""
    if virtualization and virtualization != "none":
        return f"{testbed} ({virtualization})"
    return testbed


def _label(sel: dict) -> str:
    tb = testbed_label(sel["testbed"], sel.get("virtualization"))
    if sel["benchmark"] == "qperf":
        return f"{tb}: raw TCP (qperf)"
    return f"{tb}: {MPI_LABEL.get(sel['mpi'], sel['mpi'])}, {PATH_LABEL.get(sel['interconnect'], sel['interconnect'])}"


def overheads(tidy: pd.DataFrame, latency_bytes: int = 8) -> list[dict]:
    from .analysis import comparisons, paired_overhead

    out = []
    for kind, subject, reference in comparisons(tidy):
        res = paired_overhead(tidy, subject, reference, latency_bytes=latency_bytes)
        if res:
            out.append(dict(kind=kind, subject=subject, reference=reference, **res))
    return out


def overheads_tex(tidy: pd.DataFrame, *, latency_bytes: int = 8) -> tuple[str, str]:
    """(macros, table) of paired overheads: latency difference at
    ``latency_bytes`` and peak-bandwidth ratio, median and CI over rounds."""
    macros, rows = [], []
    for o in overheads(tidy, latency_bytes):
        k = config_key(pd.Series(o["subject"]))
        cells = []
        for key, name in (("lat_diff", "Lat"), ("bw_ratio", "Bw")):
            d = o.get(key)
            if d is None:
                cells.append("--")
                continue
            macros += [macro(f"hvOvh{name}{k}", fmt(d["median"])), macro(f"hvOvh{name}{k}Lo", fmt(d["ci_low"])),
                       macro(f"hvOvh{name}{k}Hi", fmt(d["ci_high"]))]
            cells.append(f"{fmt(d['median'])} [{fmt(d['ci_low'])}, {fmt(d['ci_high'])}]")
        n = (o.get("lat_diff") or o.get("bw_ratio"))["n"]
        rows.append(f"{latex_escape(_label(o['subject']))} & {latex_escape(_label(o['reference']))} & "
                    f"{cells[0]} & {cells[1]} & {n} \\\\")
    table = (
        "% Generated by workflow/scripts/numbers.py. Do not edit.\n"
        "\\begin{table}[t]\n\\centering\\small\n"
        f"\\caption{{Paired overheads: latency difference at {fmt_bytes(latency_bytes)} (subject $-$ reference, "
        "\\textmu s) and peak-bandwidth ratio (subject / reference), median [CI] over $n$ interleaved rounds, "
        "each round pairing the two configurations measured back to back.}\n"
        "\\label{tab:overheads}\n\\resizebox{\\linewidth}{!}{%\n"
        "\\begin{tabular}{llllr}\n\\toprule\n"
        "Subject & Reference & $\\Delta$ latency & Bandwidth ratio & $n$ \\\\\n\\midrule\n"
        + ("\n".join(rows) if rows else "\\multicolumn{5}{c}{no pairs in this campaign} \\\\")
        + "\n\\bottomrule\n\\end{tabular}}\n\\end{table}\n"
    )
    return "".join(macros), table


PLACEMENT_LABEL = {"intra-node": "intra-node", "mixed": "mixed", "inter-node": "inter-node"}
_DIGITS = ("Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine")


def _number_word(n: int) -> str:
    return "".join(_DIGITS[int(c)] for c in str(int(n)))


def _placement_keys(ps: pd.DataFrame) -> dict:
    """Macro key part per (placement, block): the placement's name, plus the
    block size in words when one placement has several block sizes."""
    blocks = ps.groupby("placement")["block"].nunique()
    return {(p, b): camel(p) + (("Block" + _number_word(b)) if blocks[p] > 1 else "")
            for p, b in zip(ps["placement"], ps["block"])}


def placement_tex(summary: pd.DataFrame, tidy: pd.DataFrame) -> tuple[str, str]:
    """(macros, table) of the placement experiment: per testbed and placement
    the measured share of messages across the network, time and
    communication time per step, and for VM testbeds the paired ratio of
    their time per step to the non-VM testbed's."""
    from .analysis import placement_pairs, placement_summary

    ps = placement_summary(summary)
    if ps.empty:
        return "", ("% Generated by workflow/scripts/numbers.py. Do not edit.\n"
                    "% (no placement runs in this campaign)\n")
    pk = _placement_keys(ps)
    adv = tidy[tidy["benchmark"] == "advect"]
    macros = [macro("hvPlaceRanks", str(int(ps["ranks"].iloc[0]))),
              macro("hvPlaceSteps", str(int(adv["iteration_count"].iloc[0]))),
              macro("hvPlaceHalo", fmt_bytes(int(adv["msg_bytes"].iloc[0])))]
    pairs = {(o["subject"], o["mpi"], o["variant"]): o for o in placement_pairs(tidy)}
    rows = []
    for _, r in ps.iterrows():
        k = camel(r["testbed"]) + camel(r["mpi"]) + pk[(r["placement"], r["block"])]
        share = 100 * r["network_share"]
        comm_pct = 100 * r["comm_per_step"] / r["time_per_step"]
        macros += [macro(f"hvPlaceShare{k}", fmt(share)),
                   macro(f"hvPlaceStep{k}", fmt(r["time_per_step"])),
                   macro(f"hvPlaceStep{k}Lo", fmt(r["time_per_step_lo"])),
                   macro(f"hvPlaceStep{k}Hi", fmt(r["time_per_step_hi"])),
                   macro(f"hvPlaceComm{k}", fmt(r["comm_per_step"])),
                   macro(f"hvPlaceCommPct{k}", fmt(comm_pct, 2))]
        ratio = "--"
        o = pairs.get((r["testbed"], r["mpi"], r["variant"]))
        if o:
            d = o["ratio"]
            rk = k + "Vs" + camel(o["reference"])
            macros += [macro(f"hvPlaceRatio{rk}", fmt(d["median"])), macro(f"hvPlaceRatio{rk}Lo", fmt(d["ci_low"])),
                       macro(f"hvPlaceRatio{rk}Hi", fmt(d["ci_high"]))]
            ratio = f"{fmt(d['median'])} [{fmt(d['ci_low'])}, {fmt(d['ci_high'])}] vs {latex_escape(o['reference'])}"
        rows.append(
            f"{latex_escape(testbed_label(r['testbed'], r['virtualization']))} & "
            f"{PLACEMENT_LABEL.get(r['placement'], r['placement'])} ({int(r['block'])}) & {fmt(share)} & "
            f"{fmt(r['time_per_step'])} [{fmt(r['time_per_step_lo'])}, {fmt(r['time_per_step_hi'])}] & "
            f"{fmt(r['comm_per_step'])} [{fmt(r['comm_per_step_lo'])}, {fmt(r['comm_per_step_hi'])}] & "
            f"{ratio} & {int(r['n'])} \\\\")
    table = (
        "% Generated by workflow/scripts/numbers.py. Do not edit.\n"
        "\\begin{table}[t]\n\\centering\\small\n"
        "\\caption{Process placement: \\hvPlaceRanks{} ranks of the stencil in blocks of $b$ consecutive ranks per "
        "host or guest. Share of the halo messages that crossed the network (counted by the benchmark), time and "
        "communication time per step (\\textmu s, slowest rank), and for VMs the ratio of their time per step to "
        "the non-VM testbed's, paired by interleaved round: median [CI] over $n$ repetitions.}\n"
        "\\label{tab:placement}\n\\resizebox{\\linewidth}{!}{%\n"
        "\\begin{tabular}{llrlllr}\n\\toprule\n"
        "Testbed & Placement ($b$) & Network \\% & Time/step & Comm./step & VM ratio & $n$ \\\\\n\\midrule\n"
        + "\n".join(rows)
        + "\n\\bottomrule\n\\end{tabular}}\n\\end{table}\n"
    )
    return "".join(macros), table


def _ci(v, lo, hi) -> str:
    return f"{fmt(v)} [{fmt(lo)}, {fmt(hi)}]"


def _empty(what: str) -> str:
    return f"% Generated by workflow/scripts/numbers.py. Do not edit.\n% (no {what} in this campaign)\n"


def npb_tex(summary: pd.DataFrame, tidy: pd.DataFrame) -> tuple[str, str]:
    """(macros, table) of the NPB kernels at each testbed's largest rank
    count: Mop/s median [CI] and the time ratio to the native testbed (same
    kernel, class, MPI and ranks, paired by round).  Macros
    ``\\hvNpb<Kernel><Class><Testbed><Mpi><Ranks>`` (Mop/s; ranks in words,
    e.g. ``\\hvNpbCgWLocalOpenmpiFour``) with Lo/Hi, and
    ``\\hvNpbRatio...`` for the time ratios."""
    from .analysis import npb_ratios, npb_summary

    ns = npb_summary(summary)
    if ns.empty:
        return "", _empty("NPB runs")
    ratios = npb_ratios(tidy)
    macros, rows = [], []
    classes = {tb: ", ".join(sorted(set(g["klass"]))) for tb, g in ns.groupby("testbed")}
    for tb, cl in classes.items():
        macros.append(macro(f"hvNpbClasses{camel(tb)}", cl))
    ranks_num = {0: "Zero", 1: "One", 2: "Two", 4: "Four", 8: "Eight", 16: "Sixteen"}
    for _, r in ns.iterrows():
        if r["ranks"] not in ranks_num:
            continue
        k = f"{camel(r['kernel'])}{r['klass']}{camel(r['testbed'])}{camel(r['mpi'])}{ranks_num[r['ranks']]}"
        macros += [macro(f"hvNpb{k}", fmt(r["mops"])), macro(f"hvNpb{k}Lo", fmt(r["mops_lo"])),
                   macro(f"hvNpb{k}Hi", fmt(r["mops_hi"]))]
    top = ns[ns["ranks"] == ns.groupby("testbed")["ranks"].transform("max")]
    for _, r in top.iterrows():
        ratio = "--"
        if not ratios.empty:
            m = ratios[(ratios["testbed"] == r["testbed"]) & (ratios["kernel"] == r["kernel"])
                       & (ratios["klass"] == r["klass"]) & (ratios["mpi"] == r["mpi"]) & (ratios["ranks"] == r["ranks"])
                       & (ratios["reference"] != r["testbed"])]
            if len(m):
                o = m.iloc[0]
                ratio = f"{_ci(o['ratio'], o['ratio_lo'], o['ratio_hi'])} vs {latex_escape(o['reference'])}"
                if r["ranks"] in ranks_num:
                    k = f"{camel(r['kernel'])}{r['klass']}{camel(r['testbed'])}{camel(r['mpi'])}{ranks_num[r['ranks']]}"
                    macros += [macro(f"hvNpbRatio{k}", fmt(o["ratio"])), macro(f"hvNpbRatio{k}Lo", fmt(o["ratio_lo"])),
                               macro(f"hvNpbRatio{k}Hi", fmt(o["ratio_hi"]))]
        time = _ci(r["time"], r["time_lo"], r["time_hi"]) if pd.notna(r.get("time")) else "$<$0.005"
        rows.append(f"{r['kernel']} & {r['klass']} & {latex_escape(testbed_label(r['testbed'], r['virtualization']))} & "
                    f"{int(r['ranks'])} & {_ci(r['mops'], r['mops_lo'], r['mops_hi'])} & {time} & {ratio} & "
                    f"{int(r['n'])} \\\\")
    table = (
        "% Generated by workflow/scripts/numbers.py. Do not edit.\n"
        "\\begin{table}[t]\n\\centering\\small\n"
        "\\caption{NPB 3.4.1 kernels at each testbed's largest rank count: total Mop/s and time (s), median [CI] "
        "over $n$ repetitions, and the time relative to the native testbed for the same kernel, class and ranks, "
        "paired by interleaved round (above 1: slower). Every run verified its result.}\n"
        "\\label{tab:npb}\n\\resizebox{\\linewidth}{!}{%\n"
        "\\begin{tabular}{llllllll}\n\\toprule\n"
        "Kernel & Class & Testbed & Ranks & Mop/s & Time (s) & Time vs native & $n$ \\\\\n\\midrule\n"
        + "\n".join(rows)
        + "\n\\bottomrule\n\\end{tabular}}\n\\end{table}\n"
    )
    return "".join(macros), table


def agreement_tex(tidy: pd.DataFrame, *, latency_bytes: int = 8) -> tuple[str, str]:
    """(macros, table) of the method check: IMB PingPong against NetPIPE on
    the same path.  Macros ``\\hvAgreeLat<config>`` / ``\\hvAgreePeak<config>``
    (IMB/NetPIPE ratio, paired by round) with Lo/Hi."""
    from .analysis import tool_agreement

    ag = tool_agreement(tidy, latency_bytes)
    if ag.empty:
        return "", _empty("runs of both IMB and NetPIPE on one path")
    macros, rows = [], []
    for _, r in ag.iterrows():
        k = config_key(pd.Series({**r.to_dict(), "benchmark": "imb"}))
        cells = []
        for name, label in (("lat", "Lat"), ("peak", "Peak")):
            if pd.notna(r.get(f"{name}_ratio")):
                macros += [macro(f"hvAgree{label}{k}", fmt(r[f"{name}_ratio"])),
                           macro(f"hvAgree{label}{k}Lo", fmt(r[f"{name}_ratio_lo"])),
                           macro(f"hvAgree{label}{k}Hi", fmt(r[f"{name}_ratio_hi"]))]
            for tool in ("imb", "netpipe"):
                v = r.get(f"{tool}_{name}")
                cells.append(_ci(v, r[f"{tool}_{name}_lo"], r[f"{tool}_{name}_hi"]) if pd.notna(v) else "--")
            cells.append(_ci(r[f"{name}_ratio"], r[f"{name}_ratio_lo"], r[f"{name}_ratio_hi"])
                         if pd.notna(r.get(f"{name}_ratio")) else "--")
        label = f"{MPI_LABEL.get(r['mpi'], r['mpi'])}, {PATH_LABEL.get(r['interconnect'], r['interconnect'])}"
        rows.append(f"{latex_escape(testbed_label(r['testbed'], r['virtualization']))} & {latex_escape(label)} & "
                    + " & ".join(cells) + " \\\\")
    table = (
        "% Generated by workflow/scripts/numbers.py. Do not edit.\n"
        "\\begin{table}[t]\n\\centering\\small\n"
        f"\\caption{{Method check: IMB PingPong and NetPIPE on the same path. Latency at {fmt_bytes(latency_bytes)} "
        "(\\textmu s; IMB: half the round trip averaged over its repetitions, NetPIPE: half the round trip of its "
        "best trial) and peak bandwidth (Gbit/s), median [CI] over the repetitions, and the ratio IMB/NetPIPE "
        "paired by interleaved round.}\n"
        "\\label{tab:agreement}\n\\resizebox{\\linewidth}{!}{%\n"
        "\\begin{tabular}{llllllll}\n\\toprule\n"
        "Testbed & MPI, path & Lat.\\ IMB & Lat.\\ NetPIPE & Ratio & Peak IMB & Peak NetPIPE & Ratio "
        "\\\\\n\\midrule\n"
        + "\n".join(rows)
        + "\n\\bottomrule\n\\end{tabular}}\n\\end{table}\n"
    )
    return "".join(macros), table


# ------------------------------------------------------------------ parts
PART_CALL = re.compile(r"\\hvpart\{([a-z0-9-]+)\}")
MACRO_USE = re.compile(r"\\(hv[A-Z][A-Za-z]*)")
MACRO_DEF = re.compile(r"\\newcommand\{\\(hv[A-Za-z]+)\}")
FIGURE_USE = re.compile(r"\\includegraphics(?:\[[^\]]*\])?\{([^}.]+)(?:\.pdf)?\}|\\ref\{fig:([^}]+)\}")


def part_needs(text: str) -> tuple[set[str], set[str]]:
    """(macros, figures) a part uses."""
    figures = {a or b for a, b in FIGURE_USE.findall(text)}
    return set(MACRO_USE.findall(text)), figures


def parts_tex(parts: dict[str, str], numbers: str, figures: set[str]) -> tuple[str, list[str], dict[str, str]]:
    """LaTeX that includes each part (``\\hvpart{name}``) whose macros and
    figures this campaign has, and lists the others (``\\hvOmittedParts``).

    ``parts``: name -> text of ``paper/sections/parts/<name>.tex``, whose first
    line is a comment ``% <title>: needs <what>``.  Returns (tex, included,
    {omitted: why})."""
    defined = set(MACRO_DEF.findall(numbers))
    included, omitted = [], {}
    lines = ["% Generated by workflow/scripts/parts.py: the parts of the paper this campaign has data for. "
             "Do not edit.\n", "\\makeatletter\n"]
    for name, text in sorted(parts.items()):
        macros, figs = part_needs(text)
        missing_m, missing_f = sorted(macros - defined), sorted(figs - figures)
        if missing_m or missing_f:
            head = text.splitlines()[0].lstrip("% ").strip() if text.startswith("%") else name
            what = [f"figure {f}" for f in missing_f] + ([f"{len(missing_m)} measured values, e.g. "
                                                          f"\\texttt{{\\textbackslash {missing_m[0]}}}"]
                                                         if missing_m else [])
            omitted[name] = f"{latex_escape(head)} Missing here: {', '.join(what)}."
            lines.append(f"\\@namedef{{hvpart@{name}}}{{}}\n")
        else:
            included.append(name)
            lines.append(f"\\@namedef{{hvpart@{name}}}{{\\input{{sections/parts/{name}}}}}\n")
    lines.append("\\makeatother\n")
    lines.append("\\newcommand{\\hvpart}[1]{\\ifcsname hvpart@#1\\endcsname\\csname hvpart@#1\\endcsname"
                 "\\else\\PackageError{hvpart}{no part #1 in sections/parts}{}\\fi}\n")
    if omitted:
        items = "".join(f"  \\item {why}\n" for why in omitted.values())
        body = ("\\paragraph{Not in this campaign.} These parts of the paper need data that campaign "
                "\\texttt{\\hvCampaign} does not have, and are left out:\n\\begin{itemize}\n" + items + "\\end{itemize}")
    else:
        body = ""
    lines.append(f"\\newcommand{{\\hvOmittedParts}}{{{body}}}\n")
    return "".join(lines), included, omitted


def commprof_tex(summary: pd.DataFrame) -> str:
    """Macros of the communication profiles: ``\\hvProfShare<Kernel><Testbed>``
    (percent of time in MPI, with Lo/Hi), ``\\hvProfMiB<Kernel><Testbed>``
    (MiB sent by all ranks together), ``\\hvProfPairs<Kernel><Testbed>``
    (rank pairs that exchanged data, of ``\\hvProfRanks`` ranks) and
    ``\\hvProfReps``."""
    from .analysis import commprof_summary

    shares, matrix = commprof_summary(summary)
    if shares.empty:
        return ""
    out = [macro("hvProfReps", str(int(shares["n"].min()))),
           macro("hvProfRanks", ", ".join(str(r) for r in sorted(shares["ranks"].unique())))]
    for _, r in shares.iterrows():
        k = f"{camel(r['kernel'])}{camel(r['testbed'])}"
        out += [macro(f"hvProfShare{k}", fmt(100 * r["median"], 2)), macro(f"hvProfShare{k}Lo", fmt(100 * r["ci_low"], 2)),
                macro(f"hvProfShare{k}Hi", fmt(100 * r["ci_high"], 2))]
    for (kernel, tb), g in matrix.groupby(["kernel", "testbed"]):
        k = f"{camel(kernel)}{camel(tb)}"
        out += [macro(f"hvProfMiB{k}", fmt(g["median"].sum() / 2**20)),
                macro(f"hvProfPairs{k}", str(int(((g["src"] != g["dst"]) & (g["median"] > 0)).sum())))]
    return "".join(out)


APP_NAMES = {"lammps": "LAMMPS, Lennard-Jones melt (NAMD's stand-in)", "milc": "MILC",
             "qe-pw": "Quantum ESPRESSO pw.x (PARATEC's stand-in)", "openfoam-dambreak": "OpenFOAM damBreak"}


def apps_tex(tidy: pd.DataFrame) -> str:
    """The table of the applications over the interconnect classes: per
    application, input, class and rank count, the run time and the
    performance relative to native shared memory at the lowest rank count
    (paired by round), medians [CI]."""
    from .analysis import app_scaling

    r = app_scaling(tidy)
    if r.empty:
        return _empty("application runs")
    order = {b: i for i, b in enumerate(APP_NAMES)}
    # per application: the inputs with a shared-memory reference first, then the guests' inputs
    r = r.assign(o=r["benchmark"].map(order).fillna(len(order)),
                 guests_input=~r["reference"].str.contains("shared memory"))
    r = r.sort_values(["o", "guests_input", "variant", "virtualization", "link", "interconnect", "ranks"])
    level = r["ci_level"].min()
    lines = ["% Generated by workflow/scripts/numbers.py (hpcvirt.paper.apps_tex). Do not edit.\n",
             "\\begin{table}[t]\\centering\\small\n",
             "\\caption{The applications over the interconnect classes (after Ramakrishnan et al.'s Fig.~1): run "
             "time and performance relative to the native shared-memory run at the lowest rank count, "
             "$T_{\\mathrm{ref}}/T$ paired by interleaved round, medians [CI, at least "
             f"{fmt(100 * level, 3)}\\,\\% coverage]. Classes: shared memory stands in for InfiniBand, TCP loopback "
             "for TCP over InfiniBand, the bridge limited to 10 and 1\\,Gbit/s for 10G and 1G Ethernet, the guests "
             "for 10G VMs. The guests run a small input (under TCG emulation they measure the emulator); it runs "
             "only across two hosts, so its reference is the unlimited bridge at two ranks.}"
             "\\label{tab:apps}\n",
             "\\begin{tabular}{@{}llrrr@{}}\\toprule\n",
             "input & class & ranks & time [s] & relative performance \\\\ \\midrule\n"]
    for bench, g in r.groupby("o", sort=True):
        first = g.iloc[0]
        lines.append(f"\\multicolumn{{5}}{{@{{}}l}}{{\\emph{{{latex_escape(APP_NAMES.get(first['benchmark'], first['benchmark']))}}}}} \\\\\n")
        for _, x in g.iterrows():
            lines.append(f"{latex_escape(str(x['variant']))} & {latex_escape(x['klass'])} & {int(x['ranks'])} & "
                         f"{_ci(x['time'], x['time_lo'], x['time_hi'])} & {_ci(x['perf'], x['perf_lo'], x['perf_hi'])} \\\\\n")
    lines.append("\\bottomrule\n\\end{tabular}\n\\end{table}\n")
    return "".join(lines)


CONTAINER_BENCH_LABEL = {"netpipe": "NetPIPE", "imb": "IMB PingPong", "osu": "OSU"}
CONTAINER_RUNTIMES = ("charliecloud", "apptainer")


def containers_tex(ratios: pd.DataFrame | None, *, campaign: str, latency_bytes: int = 8,
                   versions: dict[str, str] | None = None,
                   bare_peaks: dict[str, tuple[float, float]] | None = None) -> str:
    """Macros and table of the container-versus-bare-host campaign (a
    companion campaign of the paper, see config key paper.containers_campaign).

    Macros: ``\\hvCtrCampaign``; per runtime, benchmark, MPI and path
    ``\\hvCtr<Runtime><Bench><Mpi><Path>Lat`` (latency ratio at
    ``latency_bytes``) and ``...Bw`` (peak-bandwidth ratio), each with Lo/Hi;
    ``\\hvCtr<Runtime>NpbMin``/``Max`` (the range of the NPB time ratios'
    medians); ``\\hvCtrRounds<Bench>`` and ``\\hvCtrCoverage<Bench>`` (rounds and
    achieved CI coverage in percent); ``\\hvCtrVersion<Runtime>``;
    ``\\hvCtrBarePeak<Path>Min``/``Max`` (the bare host's NetPIPE peak
    bandwidth of single runs, Gbit/s, from ``bare_peaks``)."""
    from .analysis import RUNTIME_LABEL

    head = ("% Generated by workflow/scripts/containers.py (hpcvirt.paper.containers_tex). Do not edit.\n"
            "\\newif\\ifhvcontainers\n")
    if ratios is None:
        return head + "\\hvcontainersfalse\n"
    out = [head, "\\hvcontainerstrue\n", macro("hvCtrCampaign", latex_escape(campaign)),
           macro("hvCtrLatencyBytes", fmt_bytes(latency_bytes))]
    for rt, v in sorted((versions or {}).items()):
        out.append(macro(f"hvCtrVersion{camel(rt)}", latex_escape(v)))
    for path, (lo, hi) in sorted((bare_peaks or {}).items()):
        key = {"shm": "Shm", "tcp-loopback": "Tcp"}.get(path, camel(path))
        out += [macro(f"hvCtrBarePeak{key}Min", fmt(lo)), macro(f"hvCtrBarePeak{key}Max", fmt(hi))]
    if ratios.empty:
        out.append("\\newcommand{\\hvCtrTable}{(no container runs in this campaign)}\n")
        return "".join(out)
    p2p = ratios[ratios["metric"].isin(["latency", "peak_bandwidth"])]
    for bench, g in p2p.groupby("benchmark", sort=True):
        out += [macro(f"hvCtrRounds{camel(bench)}", str(int(g["n"].min()))),
                macro(f"hvCtrCoverage{camel(bench)}", fmt(100 * g["ci_level"].min(), 3))]
    for _, r in p2p.iterrows():
        path = {"shm": "Shm", "tcp-loopback": "Tcp"}.get(r["interconnect"], camel(r["interconnect"]))
        k = f"hvCtr{camel(r['runtime'])}{camel(r['benchmark'])}{camel(r['mpi'])}{path}" + (
            "Lat" if r["metric"] == "latency" else "Bw")
        out += [macro(k, fmt(r["ratio"])), macro(k + "Lo", fmt(r["ratio_lo"])), macro(k + "Hi", fmt(r["ratio_hi"]))]
    with_one = ((p2p["ratio_lo"] <= 1) & (p2p["ratio_hi"] >= 1)).sum()
    out += [macro("hvCtrPairs", str(len(p2p))), macro("hvCtrPairsWithOne", str(int(with_one)))]

    def case(r) -> str:
        path = {"shm": "shared memory", "tcp-loopback": "TCP loopback"}.get(r["interconnect"], r["interconnect"])
        return latex_escape(f"{RUNTIME_LABEL.get(r['runtime'], r['runtime'])}, "
                            f"{CONTAINER_BENCH_LABEL.get(r['benchmark'], r['benchmark'])}, "
                            f"{MPI_LABEL.get(r['mpi'], r['mpi'])}, {path}")

    for metric, name, pick in (("latency", "MaxLat", "idxmax"), ("peak_bandwidth", "MinBw", "idxmin")):
        m = p2p[p2p["metric"] == metric]
        if len(m):
            r = m.loc[getattr(m["ratio"], pick)()]
            out += [macro(f"hvCtr{name}", fmt(r["ratio"])), macro(f"hvCtr{name}Case", case(r))]
    npb = ratios[ratios["metric"] == "time"]
    for rt, g in npb.groupby("runtime", sort=True):
        out += [macro(f"hvCtr{camel(rt)}NpbMin", fmt(g["ratio"].min())),
                macro(f"hvCtr{camel(rt)}NpbMax", fmt(g["ratio"].max())),
                macro(f"hvCtr{camel(rt)}NpbRuns", str(len(g)))]
    if len(npb):
        out += [macro("hvCtrNpbRounds", str(int(npb["n"].min()))),
                macro("hvCtrNpbClasses", latex_escape(", ".join(sorted(set(npb["variant"].astype(str))))))]
    runtimes = [rt for rt in CONTAINER_RUNTIMES if rt in set(p2p["runtime"])] + sorted(
        set(p2p["runtime"]) - set(CONTAINER_RUNTIMES))
    order = {b: i for i, b in enumerate(CONTAINER_BENCH_LABEL)}
    rows = []
    keys = ["benchmark", "mpi", "interconnect"]
    p2p = p2p.assign(o=p2p["benchmark"].map(order).fillna(len(order)))
    for (_, bench, mpi, path), g in p2p.groupby(["o", *keys], sort=True):
        cells = []
        for metric in ("latency", "peak_bandwidth"):
            for rt in runtimes:
                m = g[(g["runtime"] == rt) & (g["metric"] == metric)]
                cells.append(_ci(m.iloc[0]["ratio"], m.iloc[0]["ratio_lo"], m.iloc[0]["ratio_hi"]) if len(m) else "--")
        rows.append(f"{CONTAINER_BENCH_LABEL.get(bench, latex_escape(bench))} & {MPI_LABEL.get(mpi, latex_escape(mpi))} & "
                    f"{PATH_LABEL.get(path, latex_escape(path))} & " + " & ".join(cells) + f" & {int(g['n'].min())} \\\\")
    names = [RUNTIME_LABEL.get(rt, latex_escape(rt)) for rt in runtimes]
    ncol = len(runtimes)
    level = p2p["ci_level"].min()
    table = (
        "\\begin{table}[t]\n\\centering\\small\n"
        f"\\caption{{Containers against the bare host (campaign \\texttt{{{latex_escape(campaign)}}}): "
        f"latency at {fmt_bytes(latency_bytes)} and peak bandwidth, container / bare host, "
        "paired by interleaved round (each round ran the three configurations back to back), "
        f"median [CI] over $n$ rounds (achieved coverage at least {fmt(100 * level, 3)}\\,\\%; "
        "with 3 rounds the CI is the range). Latency above 1 and bandwidth below 1 are costs of the container. "
        "Two ranks on one 2-core host, the same Debian MPI inside and outside the image (hybrid model).}\n"
        "\\label{tab:containers}\n\\resizebox{\\linewidth}{!}{%\n"
        f"\\begin{{tabular}}{{lll{'l' * (2 * ncol)}r}}\n\\toprule\n"
        f" & & & \\multicolumn{{{ncol}}}{{c}}{{Latency ratio}} & \\multicolumn{{{ncol}}}{{c}}{{Bandwidth ratio}} & \\\\\n"
        "Benchmark & MPI & Path & " + " & ".join(names * 2) + " & $n$ \\\\\n\\midrule\n"
        + "\n".join(rows)
        + "\n\\bottomrule\n\\end{tabular}}\n\\end{table}\n"
    )
    out.append("\\newcommand{\\hvCtrTable}{%\n" + table + "}\n")
    return "".join(out)



def streams_tex(tidy: pd.DataFrame) -> str:
    """Macros of the streams experiment (Nanos et al.'s network benchmark):
    ``\\hvStreams<Testbed>`` (aggregate Gbit/s, median) with Lo/Hi,
    ``\\hvStreamsCount`` (concurrent streams), ``\\hvStreamsRetrans<Testbed>``
    (retransmissions, median) and ``\\hvStreamsPath<Testbed>`` (the data path)."""
    from .analysis import streams_summary

    s = streams_summary(tidy)
    if s.empty:
        return ""
    out = [macro("hvStreamsCount", str(int(s["streams"].max())))]
    for _, r in s.iterrows():
        k = camel(r["testbed"])
        out += [macro(f"hvStreams{k}", fmt(r["gbits"])), macro(f"hvStreams{k}Lo", fmt(r["gbits_lo"])),
                macro(f"hvStreams{k}Hi", fmt(r["gbits_hi"])), macro(f"hvStreamsRetrans{k}", fmt(r["retransmits"])),
                macro(f"hvStreamsPath{k}", latex_escape(r["path"]))]
    return "".join(out)


def _num(x) -> str:
    """A reported number as written (``"NA"`` and empty as a dash)."""
    s = str(x).strip()
    return "--" if s in ("", "NA", "nan") else latex_escape(s)


def _ci_or_dash(r, key: str) -> str:
    """``_ci`` of a row's ``key`` (with ``_lo``/``_hi``), or a dash where the row has none."""
    v = r.get(key) if hasattr(r, "get") else None
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "--"
    return _ci(v, r[key + "_lo"], r[key + "_hi"])


def _richter_config(r) -> str:
    """A row's configuration: testbed and ranks, and its input when it is not the report's mesh."""
    out = f"{latex_escape(r['testbed'])}, {int(r['ranks'])} rank{'s' if r['ranks'] > 1 else ''}"
    if "report_variant" in r and pd.notna(r.get("report_variant")) and r["variant"] != r["report_variant"]:
        out += f" ({latex_escape(str(r['variant']))})"
    return out


def datapaths_tex(table: pd.DataFrame | None, paths: pd.DataFrame | None = None, *, campaign: str,
                  latency_bytes: int = 8, own: bool = False) -> str:
    """Macros and tables of the data-path campaign (a companion campaign of
    the paper, config key paper.datapaths_campaign): Richter et al.'s Table 1
    beside ours (``table``: :func:`hpcvirt.richter.richter_table`) and what
    each data path costs (``paths``: :func:`hpcvirt.richter.datapath_table`).

    ``own``: the campaign is the paper's own (``make`` sets the key to the
    campaign it measures), not a companion.

    Macros: ``\\hvDpCampaign``, ``\\hvDpSource`` (which campaign, in words);
    ``\\hvRichterCells`` (the mesh), ``\\hvRichterSteps`` (the solver's time
    steps, median over the set-ups), ``\\hvRichterRounds``
    (rounds kept, the first left out), ``\\hvRichterCoverage`` (the CIs' coverage in
    percent); per set-up measured here ``\\hvRichter<Setup>T``/``S``/``E`` (median)
    with Lo/Hi and ``...Testbed``; per data path ``\\hvDp<Testbed>Streams``,
    ``...QperfBw``, ``...QperfLat``, ``...NetpipeLat`` (Open MPI) with Lo/Hi;
    ``\\hvRichterTable`` and ``\\hvDpTable``."""
    head = ("% Generated by workflow/scripts/datapaths.py (hpcvirt.paper.datapaths_tex). Do not edit.\n"
            "\\newif\\ifhvdatapaths\n")
    if table is None:
        return head + "\\hvdatapathsfalse\n"
    where = ("this paper's own campaign \\texttt{" + latex_escape(campaign) + "} (the default study, "
             "\\cmd{config/config.yaml}, which \\cmd{make} measured)" if own else
             "the paper's second companion campaign \\texttt{" + latex_escape(campaign) + "} "
             "(\\cmd{config/datapaths.yaml}; config key \\cmd{paper.datapaths\\_campaign})")
    out = [head, "\\hvdatapathstrue\n", macro("hvDpCampaign", latex_escape(campaign)), macro("hvDpSource", where)]
    mine = table[table["kind"] != "none"] if len(table) else table
    at_mesh = mine[mine["variant"] == mine["report_variant"]] if "report_variant" in mine else mine
    steps = at_mesh["steps"].median() if "steps" in at_mesh and at_mesh["steps"].notna().any() else None
    out.append(macro("hvRichterSteps", "--" if steps is None else f"{int(round(steps)):,}".replace(",", "{,}")))
    if len(mine):
        cells = str((at_mesh if len(at_mesh) else mine)["variant"].dropna().iloc[0]).split()[0].replace(",", "")
        out += [macro("hvRichterCells", f"{int(cells):,}".replace(",", "{,}") if cells.isdigit() else latex_escape(cells)),
                macro("hvRichterRounds", str(int(mine["rounds"].min()))),
                macro("hvRichterCoverage", fmt(100 * mine["ci_level"].min(), 3))]
    for _, r in mine[mine["kind"] == "setup"].iterrows():
        k = f"hvRichter{camel(r['setup'])}"
        out.append(macro(f"{k}Testbed", latex_escape(r["testbed"])))
        for key, name in (("t", "T"), ("s", "S"), ("e", "E")):
            if key in r and pd.notna(r[key]):
                out += [macro(f"{k}{name}", fmt(r[key])), macro(f"{k}{name}Lo", fmt(r[f"{key}_lo"])),
                        macro(f"{k}{name}Hi", fmt(r[f"{key}_hi"]))]

    rows = []
    for _, r in table.iterrows():
        if r["kind"] == "extra":
            continue
        rep = (f"{latex_escape(r['setup'])} & {latex_escape(r['report_description'])} & {_num(r['report_t'])} & "
               f"{_num(r['report_s'])} & {_num(r['report_e'])}")
        if r["kind"] == "none":
            rows.append(f"{rep} & \\multicolumn{{4}}{{p{{5.2cm}}}}{{\\emph{{{latex_escape(r['why'])}}}}} \\\\")
        else:
            rows.append(f"{rep} & {_richter_config(r)} & "
                        f"{_ci_or_dash(r, 't')} & {_ci_or_dash(r, 's')} & {_ci_or_dash(r, 'e')} \\\\")
    extra = table[table["kind"] == "extra"]
    if len(extra):
        rows.append("\\midrule")
        for _, r in extra.iterrows():
            what = ("the serial run of the guests' input" if r["path"] == "this host"
                    else f"no set-up in the report: {latex_escape(r['path'])}")
            rows.append(f"\\multicolumn{{5}}{{l}}{{\\emph{{{what}}}}} & {_richter_config(r)} & "
                        f"{_ci_or_dash(r, 't')} & {_ci_or_dash(r, 's')} & {_ci_or_dash(r, 'e')} \\\\")
    out.append(
        "\\newcommand{\\hvRichterTable}{%\n"
        "\\begin{table*}[!tbp]\n\\centering\\scriptsize\n"
        f"\\caption{{\\citet{{richter2015}}'s Table~1 (OpenFOAM damBreak; left: as reported, wall time $T$, "
        f"speed-up $S = T(\\mathrm{{1a}})/T$, efficiency $E = S/n$) beside this host's counterparts (right; "
        f"campaign \\texttt{{{latex_escape(campaign)}}}): the solver's wall time at the report's mesh size "
        f"(\\hvRichterSteps{{}} time steps; the report: 1\\,s of simulated time in about 1{{,}}000), "
        f"median [CI] over the rounds after the first (left out as the report left out its first run); "
        f"$S$ paired by round with the serial run on this host of the same input; $n$ the ranks. Two network "
        f"namespaces stand for two servers, a VXLAN tunnel for Open vSwitch's GRE tunnel, the unlimited link for "
        f"InfiniBand; a QEMU guest of two vCPUs for the KVM guest, on a smaller input (in brackets) when it runs "
        f"under TCG emulation, whose $T$, $S$ and $E$ then measure the emulator. "
        f"Source: rule \\texttt{{datapaths}}, \\texttt{{hpcvirt.richter}}.}}\n"
        "\\label{tab:richter}\n"
        "\\resizebox{\\textwidth}{!}{%\n"
        "\\begin{tabular}{@{}l p{4.2cm} r r r l l l l@{}}\n\\toprule\n"
        "\\multicolumn{5}{c}{as reported} & \\multicolumn{4}{c}{here} \\\\\n"
        "\\cmidrule(lr){1-5}\\cmidrule(l){6-9}\n"
        "set-up & description & $T$ (s) & $S$ & $E$ (\\%) & configuration & $T$ (s) & $S$ & $E$ (\\%) \\\\\n\\midrule\n"
        + "\n".join(rows) + "\n\\bottomrule\n\\end{tabular}}\n\\end{table*}}\n")

    if paths is not None and len(paths):
        prow = []
        order = {"loopback": 0, "bridge": 1}
        paths = paths.assign(o=paths["path"].map(lambda p: order.get(p, 2)), lim=paths["path"].str.contains(","))
        for _, r in paths.sort_values(["o", "lim", "path"]).iterrows():
            k = f"hvDp{camel(r['testbed'])}"
            for key, name in (("streams", "Streams"), ("qperf_bw", "QperfBw"), ("qperf_lat", "QperfLat"),
                              ("netpipe_openmpi_lat", "NetpipeLat"), ("netpipe_openmpi_bw", "NetpipeBw")):
                if key in r and pd.notna(r[key]):
                    out += [macro(f"{k}{name}", fmt(r[key])), macro(f"{k}{name}Lo", fmt(r[f"{key}_lo"])),
                            macro(f"{k}{name}Hi", fmt(r[f"{key}_hi"]))]
            prow.append(f"{latex_escape(r['path'])} & {latex_escape(r['testbed'])} & "
                        f"{_ci_or_dash(r, 'netpipe_openmpi_lat')} & {_ci_or_dash(r, 'netpipe_openmpi_bw')} & "
                        f"{_ci_or_dash(r, 'qperf_bw')} & {_ci_or_dash(r, 'streams')} \\\\")
        out.append(
            "\\newcommand{\\hvDpTable}{%\n"
            "\\begin{table}[!tbp]\n\\centering\\scriptsize\n"
            f"\\caption{{What each data path costs (campaign \\texttt{{{latex_escape(campaign)}}}): NetPIPE (Open MPI, "
            f"one rank per host) latency at {fmt_bytes(latency_bytes)} ($\\mu$s) and peak bandwidth (Gbit/s), "
            f"raw TCP bandwidth (qperf, Gbit/s) and the aggregate of four concurrent TCP streams (iperf3, "
            f"Gbit/s), median [CI] over the rounds. Loopback: this host, no network. NetPIPE's peak over a "
            f"limited link is above the limit: the token bucket's burst lets a message of a few kilobytes pass at "
            f"the bridge's speed. --: not measured on that path in this campaign (the study's "
            f"\\texttt{{skip\\_testbeds}}, or what the testbed offers). Source: rule \\texttt{{datapaths}}.}}\n"
            "\\label{tab:datapaths}\n"
            "\\begin{tabular}{@{}l l l l l l@{}}\n\\toprule\n"
            "path & testbed & latency & bandwidth & TCP & 4 streams \\\\\n\\midrule\n"
            + "\n".join(prow) + "\n\\bottomrule\n\\end{tabular}\n\\end{table}}\n")
    return "".join(out)
