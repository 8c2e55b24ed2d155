"""The artifact appendix (SC Artifact Description / Evaluation), generated from
a campaign's provenance records and its claim verdicts.

Every ``rep-*.json`` record of ``data/raw/<campaign>/`` gives the host (CPU,
cores, kernel, packages, virtualization), the suite build (source checksum
and copy, compiler, flags), the exact command and the start and finish times
of one run.  :func:`artifact_tex` turns them into four tables: hardware and
software per testbed, the suites as built, the measured time per phase of
measurement (hpcvirt.progress.share: runs plus the job overhead before
them), and where each claim is checked.  Nothing here is typed by hand.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pandas as pd

from . import progress
from .benchmarks import REGISTRY
from .claims import STUDIES
from .labels import tex

ACCEL = {"qemu-tcg": "QEMU, TCG emulation", "qemu-kvm": "QEMU with KVM"}


def records(raw_dir: str | Path) -> pd.DataFrame:
    """One row per run of the campaign (failed runs included)."""
    rows = []
    for p in sorted(Path(raw_dir).glob("*/*/*/rep-*.json")):
        try:
            r = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        ctx, host = r.get("context") or {}, r.get("host") or {}
        build = ((ctx.get("benchmark_binary") or {}).get("build")) or {}
        lscpu = (host.get("cpu") or {}).get("lscpu") or {}
        rows.append({
            "path": str(p.relative_to(raw_dir)), "testbed": ctx.get("testbed", p.parts[-4]),
            "benchmark": p.parts[-3], "virtualization": ctx.get("virtualization", ""),
            "started": datetime.fromisoformat(r["started_at"]), "finished": datetime.fromisoformat(r["finished_at"]),
            "failed": bool(r.get("timed_out")) or (r.get("exit_code") or 0) != 0 or ".failed-" in p.name,
            "argv": (r.get("command") or {}).get("argv") or [],
            "cpu": (host.get("cpu") or {}).get("model", ""), "cpus": lscpu.get("CPU(s)", ""),
            "kernel": (host.get("kernel") or {}).get("release", ""), "packages": host.get("packages") or {},
            "hypervisor": (host.get("virtualization") or {}).get("vm", ""),
            "suite": build.get("suite", ""), "suite_version": (build.get("source") or {}).get("version", ""),
            "mpi": build.get("mpi", ctx.get("mpi", "")), "mpi_version": build.get("mpi_version", ""),
            "source_sha256": (build.get("source") or {}).get("sha256", ""),
            "source_copy": (build.get("source") or {}).get("copy", ""),
            "compiler": ((build.get("compilers") or {}).get("cc") or {}).get("version", ""),
            "flags": (build.get("recipe") or {}).get("flags", "") or _spack_build(build.get("spack") or {}),
            "commit": (r.get("git") or {}).get("commit", ""), "dirty": bool((r.get("git") or {}).get("dirty")),
        })
    if not rows:
        raise ValueError(f"{raw_dir}: no provenance records (rep-*.json)")
    return pd.DataFrame(rows)


def _spack_build(spack: dict) -> str:
    """A build by the project's Spack, in a table cell: its DAG hash and the lock's checksum."""
    if not spack.get("hash"):
        return ""
    return f"Spack {spack.get('version', '')} /{spack['hash'][:7]}, spack.lock sha256 {spack.get('lock_sha256', '')[:8]}"


def code_versions(rec: pd.DataFrame) -> str:
    """A sentence: the commits of this repository that measured the campaign's runs, as each run's record
    gives it (and whether the working tree had changes), with their runs and days.  From the records
    only, so that the paper reads the same wherever it is rebuilt (a clone, an unpacked bundle)."""
    parts = []
    for (commit, dirty), g in rec.groupby(["commit", "dirty"], sort=False):
        runs = f"{len(g)} run{'s' if len(g) != 1 else ''}"
        if not commit:
            parts.append(f"a commit its records do not name ({runs})")
            continue
        days = sorted({d.strftime("%d %b %Y") for d in g["started"]})
        parts.append(f"{'a modified working tree of ' if dirty else ''}commit \\texttt{{{commit[:8]}}} ({runs}, "
                     f"{' to '.join(dict.fromkeys([days[0], days[-1]]))})")
    return "The runs were measured by " + "; and by ".join(parts) + ", as each run's record gives it."


def _table(caption: str, label: str, spec: str, head: list[str], body: list[list[str]], size="\\small") -> str:
    lines = [f"\\begin{{center}}{size}\n\\begin{{longtable}}{{{spec}}}\n\\caption{{{caption}}}\\label{{{label}}}\\\\\n"
             "\\toprule " + " & ".join(head) + " \\\\ \\midrule\n\\endfirsthead\n\\toprule " + " & ".join(head)
             + " \\\\ \\midrule\n\\endhead\n"]
    lines += [" & ".join(r) + " \\\\\n" for r in body]
    lines.append("\\bottomrule\n\\end{longtable}\n\\end{center}\n\n")
    return "".join(lines)


#: The packages of each testbed's row: the MPIs, UCX, the compiler, the headline point-to-point benchmarks'.
PACKAGES = ("openmpi-bin", "mpich", "libucx0", "gcc", *(pkg for _, pkg in REGISTRY.headline_packages()), "hwloc")


def hardware_software(rec: pd.DataFrame) -> list[list[str]]:
    body = []
    for tb, g in rec.groupby("testbed", sort=True):
        last = g.sort_values("started").iloc[-1]
        virt = sorted(set(g["virtualization"]) - {"", "none"})
        pk = last["packages"]
        body.append([tex(tb), tex(f"{last['cpu']}, {last['cpus']} CPUs"), tex(last["kernel"]),
                     tex(", ".join(ACCEL.get(v.split("+")[0], v) for v in virt) or "none (the host itself)"),
                     tex("; ".join(f"{p} {pk[p]}" for p in PACKAGES if p in pk)),
                     str(len(g))])
    return body


def suites(rec: pd.DataFrame) -> list[list[str]]:
    b = rec[rec["suite"] != ""].drop_duplicates(["suite", "mpi", "source_sha256", "compiler", "flags"])
    # a commit (MILC's) by its first 8 digits, as Spack names its version
    version = lambda v: v[:8] if re.fullmatch(r"[0-9a-f]{40}", v) else v  # noqa: E731
    return [[tex(r.suite), tex(version(r.suite_version)), tex(f"{r.mpi} {r.mpi_version}"),
             f"\\texttt{{{r.source_sha256[:16]}}}",
             tex(r.source_copy), tex(r.compiler),
             tex(r.flags)] for r in b.sort_values(["suite", "mpi"]).itertuples()]


def phases(campaign: str, rec: pd.DataFrame, raw_root) -> tuple[list[list[str]], float]:
    """Per testbed and benchmark: runs, seconds of the runs, seconds with the
    job overhead before them; and a sentence on the whole: the sum in
    minutes, and the span of the records when measurements were added later."""
    share = progress.share(campaign, sorted(set(rec["benchmark"])), raw_root)["by"]
    body = []
    for (tb, bench), g in rec.groupby(["testbed", "benchmark"], sort=True):
        own = (g["finished"] - g["started"]).dt.total_seconds().sum()
        failed = int(g["failed"].sum())
        body.append([tex(tb), tex(bench), f"{len(g)}{f' ({failed} failed)' if failed else ''}", f"{own:.0f}",
                     f"{share.get(f'{tb}/{bench}', own):.0f}"])
    total = sum(share.get(f"{tb}/{bench}", (g["finished"] - g["started"]).dt.total_seconds().sum())
                for (tb, bench), g in rec.groupby(["testbed", "benchmark"])) / 60
    span = (rec["finished"].max() - rec["started"].min()).total_seconds() / 60
    days = sorted({str(d) for d in rec["started"].dt.date})
    whole = f"In all, {total:.0f} minutes of runs with their overhead"
    if span > 1.5 * total:
        whole += (f"; the records span {span / 60:.0f} hours ({', '.join(days)}) because measurements were added to "
                  "the campaign later (each record holds its own times)")
    return body, whole + "."


def _breakable(word: str) -> str:
    """A long word of a command line may break after / , = : (LaTeX)."""
    for ch in "/,=:":
        word = word.replace(ch, ch + "\\allowbreak{}")
    return word


def commands(rec: pd.DataFrame) -> list[str]:
    """One exact command per testbed and benchmark (the first run's)."""
    out = []
    for (tb, bench), g in rec.groupby(["testbed", "benchmark"], sort=True):
        argv = g.sort_values("started").iloc[0]["argv"]
        if argv:
            words = " ".join(_breakable(tex(a)) for a in argv)
            out.append(f"\\item[{tex(tb)}, {tex(bench)}] \\texttt{{{words}}}")
    return out


def claims_index(verdicts: pd.DataFrame) -> list[list[str]]:
    body = []
    for cid, g in verdicts.groupby("claim", sort=False):
        r = g.iloc[0]
        checks = g[g["check"] > 0]
        where = f"Table~\\ref{{tab:claims-{r['study']}}}" + (f", {len(checks)} check{'s' if len(checks) > 1 else ''}"
                                                           if len(checks) else "")
        body.append([tex(cid), tex(r["claim_verdict"]), where])
    return body


def artifact_tex(campaign: str, raw_root, verdicts: pd.DataFrame) -> str:
    rec = records(Path(raw_root) / campaign)
    phase_rows, whole = phases(campaign, rec, raw_root)
    order = {s: i for i, s in enumerate(STUDIES)}
    verdicts = verdicts.sort_values(["study", "claim", "check"], key=lambda c: c.map(order) if c.name == "study"
                                    else c.map(lambda x: (str(x).split("-")[0], int(str(x).split("-")[1]))
                                               if c.name == "claim" else x))
    out = ["% Generated by hpcvirt.artifact from the campaign's provenance records.  Do not edit.\n",
           _table(f"Hardware and software of campaign \\texttt{{{tex(campaign)}}}, from its {len(rec)} provenance "
                  "records (the host of each testbed's last run).", "tab:artifact-hw",
                  "@{}p{0.08\\linewidth}p{0.15\\linewidth}p{0.13\\linewidth}p{0.15\\linewidth}p{0.33\\linewidth}r@{}",
                  ["testbed", "CPU", "kernel", "virtualization", "packages", "runs"], hardware_software(rec),
                  "\\scriptsize"),
           f"\\paragraph{{The code that measured.}} {code_versions(rec)}\n\n",
           _table("The pinned suites as built for this campaign: source checksum (first 16 hex digits of its "
                  "sha256) and which verified copy was used, compiler, and flags or the Spack build (DAG hash, "
                  "checksum of the spack.lock); a commit's version is its first 8 hex digits.", "tab:artifact-suites",
                  "@{}lp{0.07\\linewidth}p{0.1\\linewidth}p{0.13\\linewidth}p{0.07\\linewidth}p{0.16\\linewidth}"
                  "p{0.24\\linewidth}@{}",
                  ["suite", "version", "MPI", "source sha256", "copy", "compiler", "flags or build"], suites(rec),
                  "\\scriptsize"),
           _table(f"Measured time per phase of measurement: the runs of each testbed and benchmark and the job "
                  f"overhead before them (a guest round's boot not counted). {whole}", "tab:artifact-phases",
                  "@{}llrrr@{}",
                  ["testbed", "benchmark", "runs", "run time [s]", "with overhead [s]"], phase_rows),
           "\\paragraph{The exact commands.} The first run of each testbed and benchmark, as its provenance "
           "record holds it (every run's record holds its own):\n\\begin{description}\\scriptsize\n"
           + "\n".join(commands(rec)) + "\n\\end{description}\n\n",
           _table("Where each claim of the five studies is checked (its verdict on this campaign).",
                  "tab:artifact-claims", "@{}lll@{}", ["claim", "verdict", "checked in"], claims_index(verdicts),
                  "\\scriptsize")]
    return "".join(out)
