"""The tidy result schema: the one contract between parsing and plotting.

One row per measured value.  Parsers return :class:`Measurement` objects that
carry only what the benchmark output itself says (metric, unit, value, message
size, counts); :func:`to_rows` adds the run context (testbed, stack, ...) that
comes from the job, never from the output.  Statistics are computed
downstream from these rows, never inside parsers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

# Column order of the tidy table; each column is described in workflow/schemas/tidy.schema.yaml
# (a test checks that the two agree and validates archived rows against the schema).
COLUMNS: tuple[str, ...] = (
    "run_id",
    "testbed",
    "kind",
    "virtualization",
    "accel",
    "interconnect",
    "link",
    "stack",
    "image_digest",
    "spack_lock",
    "mpi",
    "benchmark",
    "variant",
    "metric",
    "unit",
    "value",
    "msg_bytes",
    "ranks",
    "nodes",
    "ranks_per_node",
    "placement",
    "rank_hosts",
    "host",
    "rep",
    "iteration_count",
    "warmup",
    "verified",
    "suite_version",
    "source_sha256",
    "spack_hash",
    "started_at",
    "raw_path",
)

# Units a parser may emit (the schema's unit enum).  Anything else is a bug in the parser.
UNITS: frozenset[str] = frozenset({"us", "s", "MB/s", "Mbit/s", "Gbit/s", "Mop/s", "count", "fraction", "Ry",
                                   "tau/day"})


#: Units whose values may be below zero (an energy); every other value is a time, a rate, a count or a share.
SIGNED_UNITS: frozenset[str] = frozenset({"Ry"})
#: Units of a time: a measured one is above zero.
TIME_UNITS: frozenset[str] = frozenset({"s", "us"})


class ParseError(ValueError):
    """A raw benchmark output that must not be turned into numbers.

    Raised for truncated, failed or error outputs.  The message always names
    the file so that a user can open it.
    """

    def __init__(self, path: str, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


@dataclass(frozen=True)
class Measurement:
    """One measured value as read from a benchmark output."""

    benchmark: str
    metric: str
    unit: str
    value: float
    msg_bytes: int | None = None
    iteration_count: int | None = None
    ranks: int | None = None
    variant: str = ""
    verified: bool | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit {self.unit!r} is not one of {sorted(UNITS)}")


def to_rows(measurements: Iterable[Measurement], context: Mapping[str, object]) -> list[dict]:
    """Combine parser output with the job context into tidy rows.

    ``context`` supplies every column the output cannot know (run_id, testbed,
    virtualization, interconnect, stack, mpi, nodes, ranks_per_node,
    placement, rep, warmup, started_at, raw_path, and optionally ranks,
    rank_hosts, where the ranks ran as they recorded it, host, the machine
    whose measurement job ran the benchmark, source_sha256, the checksum
    of the pinned source the binary was built from, and spack_hash, the
    Spack DAG hash of that build).
    Values measured by the parser win over the context for ``ranks``.
    """
    rows = []
    for m in measurements:
        row = {col: context.get(col) for col in COLUMNS}
        row.update(
            benchmark=m.benchmark,
            variant=m.variant or context.get("variant", "") or "",
            metric=m.metric,
            unit=m.unit,
            value=float(m.value),
            msg_bytes=m.msg_bytes,
            iteration_count=m.iteration_count,
            verified=m.verified,
            suite_version=m.extra.get("suite_version") or None,
        )
        if m.ranks is not None:
            row["ranks"] = m.ranks
        rows.append(row)
    return rows


def checked(path, measurements: Iterable[Measurement]) -> list[Measurement]:
    """A parser's values, or :class:`ParseError` naming ``path``: every value a finite number (not below
    zero unless its unit is signed; a time above zero), and one value per metric, variant, message size and rank count (a
    result printed twice, e.g. an output holding a restarted run's lines again, would add rows and inflate
    the summaries' n)."""
    out, seen = list(measurements), set()
    for m in out:
        at = (f" at {m.msg_bytes} B" if m.msg_bytes is not None else "") + (f" ({m.variant})" if m.variant else "")
        v = m.value
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or (v < 0 and m.unit not in SIGNED_UNITS):
            raise ParseError(path, f"{m.metric}{at} is {v!r}: not a finite"
                             + ("" if m.unit in SIGNED_UNITS else ", non-negative") + " number")
        if v == 0 and m.unit in TIME_UNITS:
            raise ParseError(path, f"{m.metric}{at} is 0 {m.unit}: a run takes time (below the timer's resolution, "
                                   "or not timed)")
        key = (m.benchmark, m.metric, m.variant, m.msg_bytes, m.ranks)
        if key in seen:
            raise ParseError(path, f"{m.benchmark} {m.metric}{at} is printed twice: a duplicated result")
        seen.add(key)
    return out
