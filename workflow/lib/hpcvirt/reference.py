"""The published ("reported") side of reported-vs-reproduced.

:func:`load_reference` reads the five per-study CSVs of ``data/reference/``
into one table (all columns kept, every cell as the string written in the
CSV, so ``"205.00"`` keeps its trailing zeros and ``"NA"`` stays ``"NA"``).

:func:`reference_table_tex` turns the point-to-point figures the studies
*measured and reported* (absolute latency and bandwidth values; no ratios, no
cited results, nothing read off a figure) into a booktabs LaTeX table for the
paper (``paper/generated/reference_table.tex``), so that no published number
is ever typed into the text by hand.  The table needs the LaTeX packages
booktabs, array and natbib.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from .labels import latex_escape

#: The five studies, in the order the paper introduces them.  The file
#: ``<study>.csv`` holds the study's rows; the key is also its BibTeX key.
STUDIES: tuple[str, ...] = (
    "exposito2012",
    "nanos2010",
    "atif2016",
    "ramakrishnan2011",
    "richter2015",
)

#: Metrics that are absolute point-to-point figures and go into the table.
POINT_TO_POINT_METRICS: frozenset[str] = frozenset({"latency_us", "bandwidth_gbps"})

#: The transport of raw TCP stream rows (no MPI: the tools' own streams), whose bandwidth tables
#: (nanos2010) go into the table, named with their tool.
RAW_TCP_TRANSPORT = "TCP-raw"

_METRIC_LABELS: dict[str, str] = {
    "latency_us": r"lat.\ ($\mu$s)",
    "bandwidth_gbps": "bw (Gbit/s)",
    "bandwidth_MiBps": "bw (MiB/s)",
}

# Short display names of testbeds whose name in the paper is long (the id used
# in testbeds.csv / experiments.md).  Anything else: the name without a
# trailing parenthesis, which the virtualization column repeats.
_TESTBED_LABELS: dict[str, str] = {
    "Amazon EC2 cluster compute instances (Xen HVM)": "EC2 CC",
}

_VIRT_LABELS: dict[str, str] = {
    "native": "none",
    "xen-hvm": "Xen HVM",
    "xen-pv-passthrough": "Xen PV, passthrough",
    "xen-bridged": "Xen, bridged",
    "xen-iov": "Xen, IOV",
    "kvm-sriov": "KVM, SR-IOV",
    "kvm": "KVM",
}

# The transport (tcp, sm, niodev, smpdev) follows from the link column.
_TRANSPORT_LABELS: dict[str, str] = {
    "MPICH2": "MPICH2",
    "OpenMPI-tcp": "Open MPI",
    "OpenMPI-sm": "Open MPI",
    "FastMPJ-niodev": "FastMPJ",
    "FastMPJ-smpdev": "FastMPJ",
    "Hpcbench-TCP": "Hpcbench",
    "TCP-raw": "TCP",
}

_INTERCONNECT_LABELS: dict[str, str] = {
    "shm": "shm",
    "ethernet-unstated": "Ethernet",
}

_COMPARATOR_PREFIX: dict[str, str] = {
    "=": "",
    "": "",
    "~": r"\textasciitilde{}",
    "<": r"$<$\,",
    "<=": r"$\le$\,",
    ">": r"$>$\,",
    ">=": r"$\ge$\,",
    "up_to": "up to ",
}

# "Netperf table (col node3)" -> base "Netperf table", column "node3"
_COL_RE = re.compile(r"^(?P<base>.*?)\s*\(col (?P<col>[^)]*)\)\s*$")


def load_reference(directory: str | Path) -> pd.DataFrame:
    """Concatenate the five per-study CSVs found in ``directory``.

    All columns are kept and every cell is read as a string (empty cells are
    empty strings).  Raises :class:`FileNotFoundError` naming a missing file
    and :class:`ValueError` if a file holds rows of another study or the
    ``row_id`` values are not unique.
    """
    directory = Path(directory)
    frames = []
    for study in STUDIES:
        path = directory / f"{study}.csv"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: reference CSV of study {study!r} not found")
        df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
        if "study" not in df.columns:
            raise ValueError(f"{path}: no 'study' column")
        other = sorted(set(df["study"]) - {study})
        if other:
            raise ValueError(f"{path}: rows of other studies {other}")
        frames.append(df)
    out = pd.concat(frames, ignore_index=True, sort=False).fillna("")
    if "row_id" in out.columns:
        dup = out.loc[out["row_id"].duplicated(keep=False), "row_id"]
        if not dup.empty:
            raise ValueError(f"{directory}: duplicate row_id {sorted(set(dup))}")
    return out


def _select_point_to_point(df: pd.DataFrame) -> pd.DataFrame:
    measured = df["origin"] == "measured"
    p2p = df["metric"].isin(POINT_TO_POINT_METRICS)
    streams = (
        (df["study"] == "nanos2010")
        & (df["transport_middleware"] == RAW_TCP_TRANSPORT)
        & df["metric"].str.startswith("bandwidth_")
    )
    return df.loc[measured & (p2p | streams)].copy()


def _label(mapping: dict[str, str], value: str, sep: str = "+") -> str:
    """Readable, escaped label; ``A+B`` becomes ``A, B`` (duplicates dropped)."""
    labels = [mapping.get(p, p) for p in str(value).split(sep) if p != ""]
    return ", ".join(latex_escape(x) for x in dict.fromkeys(labels))


def _testbed_label(testbed: str) -> str:
    # The virtualization column already says what the trailing "(...)" says.
    if testbed in _TESTBED_LABELS:
        return latex_escape(_TESTBED_LABELS[testbed])
    short = re.sub(r"\s*\([^()]*\)\s*$", "", str(testbed)).strip() or str(testbed)
    return latex_escape(short)


def _transport_label(row: pd.Series) -> str:
    label = _label(_TRANSPORT_LABELS, row["transport_middleware"])
    if row["transport_middleware"] == RAW_TCP_TRANSPORT:
        label += f" ({latex_escape(row['benchmark'])})"
    link = _label(_INTERCONNECT_LABELS, row["interconnect"])
    return f"{label} / {link}" if link else label


def _value_cell(group: pd.DataFrame) -> list[str]:
    """One or more value cells for rows that describe the same quantity."""
    comparator = group["comparator"].iloc[0]
    prefix = _COMPARATOR_PREFIX.get(comparator, latex_escape(comparator) + " ")
    kinds = set(group["value_kind"])
    if kinds == {"approximate_range_low", "approximate_range_high"} and len(group) == 2:
        lo = group.loc[group["value_kind"] == "approximate_range_low", "value"].iloc[0]
        hi = group.loc[group["value_kind"] == "approximate_range_high", "value"].iloc[0]
        return [f"{prefix}{latex_escape(lo)}--{latex_escape(hi)}"]
    cols = group["_col"]
    if len(group) > 1 and (cols == "total").sum() == 1 and (cols != "").all():
        total = group.loc[cols == "total", "value"].iloc[0]
        parts = group.loc[cols != "total"]
        values = sorted(parts["value"], key=float)
        cell = f"{prefix}{latex_escape(total)} total"
        if values:
            cell += f" ({latex_escape(values[0])}--{latex_escape(values[-1])} per node)"
        return [cell]
    if len(group) == 1 and cols.iloc[0] == "total":
        return [f"{prefix}{latex_escape(group['value'].iloc[0])} total"]
    return [f"{prefix}{latex_escape(v)}" for v in group["value"]]


def reference_table_tex(df: pd.DataFrame) -> str:
    """Booktabs table of the point-to-point figures the studies reported.

    Rows: ``origin == "measured"`` with metric ``latency_us`` or
    ``bandwidth_gbps``, plus the netperf/iperf bandwidth tables of nanos2010.
    A range stated by the authors (``approximate_range_low``/``_high``) is
    merged into one cell, and a per-node/total stream table into one cell per
    configuration.  Sorted by study, then metric.  Every text cell is
    LaTeX-escaped; the study cell is ``\\citet{<study>}`` on the first row of
    each study.
    """
    sel = _select_point_to_point(df)
    if sel.empty:
        raise ValueError("no point-to-point rows (origin == measured) in the reference table")
    split = sel["figure_or_table"].str.extract(_COL_RE)
    sel["_table"] = split["base"].fillna(sel["figure_or_table"])
    sel["_col"] = split["col"].fillna("")
    sel["_order"] = sel["row_id"]
    keys = [
        "study",
        "_table",
        "testbed",
        "virtualization",
        "interconnect",
        "transport_middleware",
        "benchmark",
        "metric",
        "message_size_bytes",
        "comparator",
    ]
    study_rank = {s: i for i, s in enumerate(sorted(set(sel["study"])))}
    rows: list[tuple] = []
    for _, group in sel.groupby(keys, sort=False, dropna=False):
        group = group.sort_values("_order")
        first = group.iloc[0]
        for cell in _value_cell(group):
            rows.append(
                (
                    study_rank[first["study"]],
                    first["metric"],
                    first["_order"],
                    first["study"],
                    _testbed_label(first["testbed"]),
                    _label(_VIRT_LABELS, first["virtualization"]),
                    _transport_label(first),
                    _METRIC_LABELS.get(first["metric"], latex_escape(first["metric"])),
                    cell,
                )
            )
    rows.sort(key=lambda r: (r[0], r[1], r[2]))

    lines = [
        "% Generated by hpcvirt.reference.reference_table_tex from data/reference/*.csv;",
        "% do not edit by hand.",
        r"\begin{table}[tbp]",
        r"\centering",
        r"\footnotesize",
        r"\setlength{\tabcolsep}{4pt}",
        r"\caption{Point-to-point values reported by the studies: absolute",
        r"latency and bandwidth that the authors measured and state in their",
        r"text or tables. Nothing is read off a figure; derived ratios and cited",
        r"results are left out; a range the authors state is one cell.",
        r"Latency (lat.) is half the round-trip time of a ping-pong at the",
        r"smallest message size, ping-pong bandwidth (bw) is message size over",
        r"half the round-trip time. The stream tables (netperf, iperf) give",
        r"MiB/s as labelled: the total of concurrent streams and the range of",
        r"the per-node columns. EC2 CC: Amazon EC2 cluster compute instances;",
        r"shm: shared memory within one node or VM.}",
        r"\label{tab:reference}",
        r"\begin{tabular}{@{}lll>{\raggedright\arraybackslash}p{3.3cm}l"
        r">{\raggedright\arraybackslash}p{2.9cm}@{}}",
        r"\toprule",
        r"Study & Testbed & Virtualization & Transport / link & Metric & Value \\",
        r"\midrule",
    ]
    previous = None
    for r in rows:
        study = r[3]
        if previous is not None and study != previous:
            lines.append(r"\midrule")
        study_cell = rf"\citet{{{study}}}" if study != previous else ""
        previous = study
        lines.append(" & ".join((study_cell,) + r[4:]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)
