"""Parser for NAS Parallel Benchmarks (NPB-MPI 3.3.x and 3.4.x) output.

Only the result summary that rank 0 prints at the end of a run is read::

     CG Benchmark Completed.
     Class           =                        S
     Size            =                     1400
     Iterations      =                       15
     Time in seconds =                     0.03
     Total processes =                        2
     Active processes=                        2      <- 3.4 only
     Compiled procs  =                        2      <- 3.3 only
     Mop/s total     =                  2645.08
     Mop/s/process   =                  1322.54
     ...
     Verification    =               SUCCESSFUL
     Version         =                    3.4.1

Emitted measurements, all with benchmark ``npb-<kernel>`` (``npb-cg``,
``npb-ep``, ...), ``variant`` = class letter, ``verified=True``:

* ``mops_total``        Mop/s  ("Mop/s total")
* ``mops_per_process``  Mop/s  ("Mop/s/process", as printed)
* ``time``              s      ("Time in seconds"), omitted when printed as
  0.00: the run took under 5 ms and the value carries no information (IS.S,
  MG.S).  The Mop/s figures of such runs are still emitted but are noise.

``iteration_count`` is the summary's Iterations (None for EP, which prints 0).
``extra`` holds ``suite_version``, ``class``, ``size``, ``total_processes``,
``active_processes`` and, for 3.3, ``compiled_procs``.

Active processes < total processes (3.4 with ``NPB_NPROCS_STRICT=off``, e.g.
3 ranks of which 2 work): the run did complete and verify, so it is parsed.
``ranks`` is the *active* count, the processes that did the work; the total
is kept in ``extra["total_processes"]``.  NPB computes "Mop/s/process" over
the *total* count, and the value is kept as printed, so for such runs
``mops_per_process`` is not ``mops_total / ranks``.  3.3 prints no active
count; there active = total.

:class:`~hpcvirt.tidy.ParseError` is raised when there is no result summary
(run cut, killed, interrupted, wrong process count, MPI_Abort), a summary
field is missing or not a number, Verification is not SUCCESSFUL, the class
is ``U`` (unverifiable, non-standard input), a field it reads is printed
twice, or the file contains any MPI /
launcher / benchmark error text, even next to a complete summary.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..tidy import Measurement, ParseError
from .common import check_no_mpi_error, error_re, ranks_text
from .base import Benchmark, Job
from .parts import Choices, Counterpart, Ints, Mpis, Paths, PinnedSource, View

COMPLETED_RE = re.compile(r"^\s*(?P<name>[A-Z][A-Z0-9-]*) Benchmark Completed\.?\s*$", re.MULTILINE)
FIELD_RE = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z /]*?)\s*=\s*(?P<value>.*?)\s*$")
INT_RE = re.compile(r"^\d+$")
NUMBER_RE = re.compile(r"^\d+(?:\.\d+)?$")
CLASS_RE = re.compile(r"^[A-Z]$")

# Text that only appears when the MPI library, the launcher or the benchmark
# itself reports a failure.
ERROR_RE = error_re(r"^\s*\*\*\* ERROR", r"^\s*Error:")

REQUIRED = (
    "Class",
    "Size",
    "Iterations",
    "Time in seconds",
    "Total processes",
    "Mop/s total",
    "Mop/s/process",
    "Verification",
    "Version",
)
# the fields the rows are made of: one of them printed twice is refused
READ = (*REQUIRED, "Active processes", "Compiled procs")


def _number(path: Path, fields: dict[str, str], key: str, pattern: re.Pattern[str]) -> str:
    value = fields[key]
    if not pattern.match(value):
        raise ParseError(path, f"summary field {key!r} is not a number: {value!r}")
    return value


def parse(path) -> list[Measurement]:
    """Parse one NPB output file into measurements (see module docstring)."""
    path = Path(path)
    content = path.read_text(errors="replace")

    check_no_mpi_error(path, content, ERROR_RE)

    completed = list(COMPLETED_RE.finditer(content))
    if not completed:
        raise ParseError(path, "no result summary ('<NAME> Benchmark Completed.'): run did not finish")
    if len(completed) > 1:
        raise ParseError(path, f"{len(completed)} result summaries, expected one")
    name = completed[0].group("name")

    fields: dict[str, str] = {}
    for line in content[completed[0].end() :].splitlines():
        m = FIELD_RE.match(line)
        if m:
            key = m.group("key")
            if key in fields and key in READ:
                raise ParseError(path, f"summary field {key!r} appears twice ({fields[key]!r}, then "
                                       f"{m.group('value')!r}): a garbled summary")
            fields.setdefault(key, m.group("value"))
    missing = [key for key in REQUIRED if key not in fields]
    if missing:
        raise ParseError(path, f"result summary lacks {', '.join(missing)} (output cut?)")

    klass = fields["Class"]
    if klass == "U":
        raise ParseError(path, "class U (non-standard input, no reference values)")
    if fields["Verification"] != "SUCCESSFUL":
        raise ParseError(path, f"Verification = {fields['Verification']}")
    if not CLASS_RE.match(klass):
        raise ParseError(path, f"unexpected class {klass!r}")

    total = int(_number(path, fields, "Total processes", INT_RE))
    active = int(_number(path, fields, "Active processes", INT_RE)) if "Active processes" in fields else total
    iterations = int(_number(path, fields, "Iterations", INT_RE))
    time_s = float(_number(path, fields, "Time in seconds", NUMBER_RE))
    mops_total = float(_number(path, fields, "Mop/s total", NUMBER_RE))
    mops_per_process = float(_number(path, fields, "Mop/s/process", NUMBER_RE))
    if active < 1 or active > total:
        raise ParseError(path, f"active processes {active} not in 1..{total}")
    if mops_total <= 0 or mops_per_process <= 0:
        raise ParseError(path, "Mop/s is zero")

    extra = {
        "suite_version": fields["Version"],
        "class": klass,
        "size": fields["Size"],
        "total_processes": str(total),
        "active_processes": str(active),
    }
    if "Compiled procs" in fields:
        extra["compiled_procs"] = fields["Compiled procs"]

    values = [("mops_total", "Mop/s", mops_total), ("mops_per_process", "Mop/s", mops_per_process)]
    if time_s > 0:
        values.append(("time", "s", time_s))
    return [
        Measurement(
            benchmark=f"npb-{name.lower()}",
            metric=metric,
            unit=unit,
            value=value,
            iteration_count=iterations or None,
            ranks=active,
            variant=klass,
            verified=True,
            extra=dict(extra),
        )
        for metric, unit, value in values
    ]


# ------------------------------------------------------------- declaration

KERNELS = ("cg", "ep", "ft", "is", "lu", "mg")
CLASSES = ("S", "W", "A", "B", "C")
#: The classes the project's build has (they fit a laptop).
BUILT_CLASSES = ("S", "W", "A")


def nprocs_problem(exp: dict) -> str | None:
    """NPB 3.4.1 aborts CG, FT, IS, LU and MG on a process count that is not
    a power of two ("Expecting a power-of-two number of processes",
    tests/fixtures/npb/*invalid-nprocs*): such a study is refused before any
    job runs."""
    bad = [r for r in exp.get("ranks", []) if r & (r - 1)]
    kernels = [k for k in exp.get("kernels", []) if k != "ep"]
    if bad and kernels:
        return (f"ranks {bad}: NPB 3.4.1 runs {', '.join(kernels)} on a power-of-two number of processes only "
                f"(EP runs on any); e.g. [1, 2, 4, 8]")
    return None


#: One tidy row name per kernel: npb-<kernel>.
ROW_PREFIX = "npb-"


# ------------------------------------------------------------------- views
def npb_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per testbed, MPI, NPB kernel, class and rank count: Mop/s
    (total) and time (s), median [CI] over repetitions."""
    import pandas as pd

    d = summary[summary["benchmark"].astype(str).str.startswith(ROW_PREFIX)
                & summary["metric"].isin(["mops_total", "time"])]
    if d.empty:
        return pd.DataFrame()
    keys = ["testbed", "virtualization", "interconnect", "mpi", "benchmark", "variant", "ranks", "nodes"]
    rows = []
    for key, grp in d.groupby(keys, sort=True, dropna=False):
        rec = dict(zip(keys, key))
        for _, r in grp.iterrows():
            m = {"mops_total": "mops", "time": "time"}[r["metric"]]
            rec.update({m: r["median"], f"{m}_lo": r["ci_low"], f"{m}_hi": r["ci_high"], "n": int(r["n"]),
                        "ci_level": r["ci_level"]})
        rows.append(rec)
    out = pd.DataFrame(rows).rename(columns={"variant": "klass"})
    out["kernel"] = out["benchmark"].str.removeprefix(ROW_PREFIX).str.upper()
    return out.sort_values(["kernel", "klass", "testbed", "mpi", "ranks"]).reset_index(drop=True)


def npb_ratios(tidy: pd.DataFrame, metric: str = "time") -> pd.DataFrame:
    """Every testbed's NPB ``metric`` over the native testbed's (virtualization
    none, no container) for the same kernel, class, MPI and ranks, paired by
    interleaved round: median [CI] of the per-round ratios.  A ``time`` ratio
    is the native Mop/s over this one's: for one kernel and class the time is
    the operation count over the rate, and NPB prints its time to 0.01 s (a
    class W kernel takes a few hundredths of a second: IS's ratios came out as
    1, 1.5, 2), its Mop/s from the timer's full resolution."""
    import pandas as pd

    from .. import stats

    invert = metric == "time"
    d = tidy[tidy["benchmark"].astype(str).str.startswith(ROW_PREFIX)
             & (tidy["metric"] == ("mops_total" if invert else metric))]
    if d.empty:
        return pd.DataFrame()
    keys = ["benchmark", "variant", "mpi", "ranks"]
    per = d.groupby(["testbed", "virtualization", "interconnect", *keys, "rep"])["value"].median().reset_index()
    native = per[per["virtualization"] == "none"]
    rows = []
    for key, s in per.groupby(["testbed", "virtualization", "interconnect", *keys], sort=True):
        tb, virt, ic, bench, klass, mpi, ranks = key
        ref = native[(native["benchmark"] == bench) & (native["variant"] == klass) & (native["mpi"] == mpi)
                     & (native["ranks"] == ranks)]
        if (ref["interconnect"] == ic).any():   # the same path of a native testbed (a bare-metal cluster's)
            ref = ref[ref["interconnect"] == ic]
        for (rtb, _), r in ref.groupby(["testbed", "interconnect"], sort=True):
            a, b = s.set_index("rep")["value"], r.set_index("rep")["value"]
            both = a.index.intersection(b.index)
            if len(both):
                ci = stats.median_ci(((b[both] / a[both]) if invert else (a[both] / b[both])).to_numpy())
                rows.append(dict(testbed=tb, virtualization=virt, interconnect=ic, reference=rtb, mpi=mpi,
                                 kernel=bench.removeprefix(ROW_PREFIX).upper(), klass=klass, ranks=int(ranks),
                                 ratio=ci["median"], ratio_lo=ci["ci_low"], ratio_hi=ci["ci_high"], n=ci["n"],
                                 ci_level=ci["ci_level"]))
    return pd.DataFrame(rows)


def npb_macros(summary, tidy) -> dict[str, str]:
    """The classes of each testbed's NPB runs (``\\hvNpbClassesLocal``); the kernels' numbers the text
    cites are declared in ``workflow/numbers.yaml``."""
    from ..labels import camel

    ns = npb_summary(summary)
    return {f"hvNpbClasses{camel(tb)}": ", ".join(sorted(set(g["klass"]))) for tb, g in ns.groupby("testbed")}


def npb_tex(summary, tidy) -> str:
    """The table of the NPB kernels at each testbed's largest rank count:
    Mop/s median [CI] and the time ratio to the native testbed (same kernel,
    class, MPI and ranks, paired by round)."""
    import pandas as pd

    from ..labels import ONE_ROUND, emulated_note, empty_table, fmt_ci, latex_escape, testbed_label

    ns = npb_summary(summary)
    if ns.empty:
        return empty_table("NPB runs")
    ratios = npb_ratios(tidy)
    rows = []
    top = ns[ns["ranks"] == ns.groupby("testbed")["ranks"].transform("max")]
    for _, r in top.iterrows():
        ratio = "--"
        if not ratios.empty:
            m = ratios[(ratios["testbed"] == r["testbed"]) & (ratios["kernel"] == r["kernel"])
                       & (ratios["klass"] == r["klass"]) & (ratios["mpi"] == r["mpi"]) & (ratios["ranks"] == r["ranks"])
                       & (ratios["interconnect"] == r["interconnect"]) & (ratios["reference"] != r["testbed"])]
            if len(m):
                o = m.iloc[0]
                ratio = f"{fmt_ci(o['ratio'], o['ratio_lo'], o['ratio_hi'], o['n'])} vs {latex_escape(o['reference'])}"
        time = fmt_ci(r["time"], r["time_lo"], r["time_hi"], r["n"]) if pd.notna(r.get("time")) else "$<$0.005"
        rows.append(f"{r['kernel']} & {r['klass']} & {latex_escape(testbed_label(r['testbed'], r['virtualization']))} & "
                    f"{int(r['ranks'])} & {fmt_ci(r['mops'], r['mops_lo'], r['mops_hi'], r['n'])} & {time} & "
                    f"{ratio} & {int(r['n'])} \\\\")
    table = (
        "% Generated by workflow/scripts/numbers.py. Do not edit.\n"
        "\\begin{table}[t]\n\\centering\\small\n"
        "\\caption{NPB 3.4.1 kernels at each testbed's largest rank count: total Mop/s and time (s), median [CI] "
        "over $n$ repetitions, and the time relative to the native testbed for the same kernel, class and ranks, "
        "paired by interleaved round (above 1: slower), as the native Mop/s over this one's (NPB prints its time "
        f"to 0.01\\,s). Every run verified its result.{ONE_ROUND}{emulated_note(top['virtualization'])}}}\n"
        "\\label{tab:npb}\n\\resizebox{\\linewidth}{!}{%\n"
        "\\begin{tabular}{llllllll}\n\\toprule\n"
        "Kernel & Class & Testbed & Ranks & Mop/s & Time (s) & Time vs native & $n$ \\\\\n\\midrule\n"
        + "\n".join(rows)
        + "\n\\bottomrule\n\\end{tabular}}\n\\end{table}\n"
    )
    return table


class NPB(Benchmark):
    name = "npb"
    row_prefix = ROW_PREFIX
    experiment = "npb"
    title = "NAS Parallel Benchmarks 3.4.1 (MPI) kernels: Mop/s and time, verified (Expósito et al., Atif et al.)"
    params = {
        "mpis": Mpis(),
        "kernels": Choices(KERNELS, "Kernels; each binary is `<binary>/<kernel>.<class>.x`.", sweep="kernel"),
        "classes": Choices(CLASSES, "Problem classes (the project builds S, W and A; a site's build may add B, C).",
                           ["W"], sweep="klass"),
        "ranks": Ints("Process counts; one configuration each.", [1, 2], minimum=1, maximum=4096, sweep="ranks"),
        "paths": Paths("Data paths; `net` spreads the ranks over two hosts.", ["shm"]),
    }
    raw_template = "{mpi}-{path}_{kernel}.{klass}_n{ranks}"
    # the project's build: every kernel in the classes that fit a laptop (a site builds B/C with Spack
    # and names them in its testbed file)
    build = PinnedSource(
        "NPB", "3.4.1", suite="npb", spack_package="npb", binary_dir="bin",
        targets=tuple(f"{k}.{c}" for c in BUILT_CLASSES for k in KERNELS),
        urls=("https://www.nas.nasa.gov/assets/npb/NPB3.4.1.tar.gz",),
        files=(("NPB3.4.1.tar.gz", "f3a43467da6e84a829ea869156d3ea86c17932136bb413a4b6dab23018a28881", "official archive"),
               ("NPB3.4.1.tar.gz", "96aed4c0ef25991526943b30c8ef8ff9ce7e00fff301783e80cf591fa321818e", "mirror copy")))
    metrics = {"mops_total": "Mop/s", "mops_per_process": "Mop/s", "time": "s"}
    counterparts = (Counterpart(r"NPB \hvNpbKernels", r"\citet{exposito2012} Fig.~6, \citet{atif2016} Fig.~2",
                                r"class \hvNpbClasses; \hvNpbRanksOneHost{} processes"),)
    success = "one result summary with every field, Verification = SUCCESSFUL, no error text"
    views = (View("kernels", "summary", npb_summary, "Per testbed, NPB kernel, class and process count: Mop/s and "
                  "time of verified runs.", tex=npb_tex, macros=npb_macros),
             View("kernel_ratios", "tidy", npb_ratios, "Per kernel and process count: each testbed's NPB time over "
                  "the native testbed's, paired by round."))

    def numbers(self, rows) -> dict[str, str]:
        """What the method section says the campaign ran: the kernels, and those it ran in guests ("none"),
        in the declared order; the problem classes; the process counts on one host or guest (shared memory)
        and spread over two (``none`` where it ran none), and whether hosts, guests or both ran each."""
        from ..kinds import guest_accel
        from ..labels import and_list

        def kernels(d) -> str:
            return and_list(k.upper() for k in KERNELS if (d["benchmark"] == f"{ROW_PREFIX}{k}").any()) or "none"

        one_host = rows["interconnect"] == "shm"
        guest = rows["virtualization"].map(guest_accel) != ""

        def where(sel, one: str, many: str) -> str:      # whether hosts, guests or both ran them
            kinds = [w for w, ran in ((one, (sel & ~guest).any()), (many, (sel & guest).any())) if ran]
            return " or ".join(kinds) or one

        return {"hvNpbOneHostWhere": where(one_host, "host", "guest"),
                "hvNpbSpreadWhere": where(~one_host, "hosts", "guests"),
                "hvNpbKernels": kernels(rows),
                "hvNpbGuestKernels": kernels(rows[guest]),
                "hvNpbClasses": and_list(c for c in CLASSES if (rows["variant"] == c).any()),
                "hvNpbRanksOneHost": ranks_text(rows[one_host]),
                "hvNpbRanksSpread": ranks_text(rows[~one_host])}

    def check(self, exp: dict) -> str | None:
        return nprocs_problem(exp)

    def job(self, s: dict, entry: dict) -> Job:
        ranks = s["ranks"]
        return Job([f"{entry['binary']}/{s['kernel']}.{s['klass']}.x"], mpi=s["mpi"], ranks=ranks,
                   block=-(-ranks // 2) if s["path"] == "net" else ranks, path=s["path"])

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        return {"kernel": s["kernel"], "class": s["klass"], "ranks": s["ranks"]}

    def parse(self, raw, expected: dict) -> list[Measurement]:
        rows = parse(raw)
        got = (rows[0].benchmark, rows[0].variant, rows[0].ranks)
        want = (f"npb-{expected.get('kernel', got[0][4:])}", expected.get("class", got[1]),
                expected.get("ranks", got[2]))
        if got != want:
            raise ParseError(raw, f"the output is {got[0]} class {got[1]} on {got[2]} processes, but "
                                  f"{want[0]} class {want[1]} on {want[2]} was run")
        return rows


BENCHMARK = NPB()
