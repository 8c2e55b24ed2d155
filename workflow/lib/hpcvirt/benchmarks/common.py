"""What every parser needs: reading a raw file, spotting launcher and MPI
errors (one list of them, extended by a parser with its benchmark's own
error texts), filling argv templates, reading the lines a run wrapper
adds to an application's output, and making the rows of one run."""

from __future__ import annotations

import re
from pathlib import Path

from ..tidy import Measurement, ParseError

# Text that MPI launchers and runtimes print when a job did not complete.
# A file containing any of these is a failed run, whatever else it holds.
MPI_ERRORS = (
    r"mpirun detected that one or more processes exited",
    r"mpirun noticed that process",
    r"mpirun was unable",
    r"Primary job\s+terminated",
    r"MPI_ABORT was invoked",
    r"MPI_Abort",
    r"^Abort\(",
    r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
    r"APPLICATION TERMINATED",
    r"=\s*(?:KILLED|EXIT CODE: [1-9])",
    r"srun: error",
    r"ORTE_ERROR_LOG",
    r"was unable to (?:find the specified executable|launch the specified application)",
    r"Fatal error in \w+",
    r"Segmentation fault",
    r"Killed by signal",
)


def error_re(*extra: str) -> re.Pattern[str]:
    """The launcher/MPI error texts plus a benchmark's own (multi-line mode)."""
    return re.compile("|".join(f"(?:{p})" for p in (*MPI_ERRORS, *extra)), re.MULTILINE)


MPI_ERROR = error_re()


class Patterns:
    """A parser's line patterns by name (``LINES.loop.search(text)``), each
    compiled once as a multiline regex (``^`` and ``$`` match at lines)."""

    def __init__(self, **regexes: str):
        for name, regex in regexes.items():
            setattr(self, name, re.compile(regex, re.M))


def check_once(path: str | Path, text: str, pattern: re.Pattern[str], what: str) -> None:
    """Refuse an output where a line the rows come from (``pattern``) appears twice: two runs in one file,
    or one run's summary printed twice, would give the rows of whichever a parser read first."""
    found = [text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)]
    if len(found) > 1:
        raise ParseError(path, f"line {found[1]}: a second {what} (the first at line {found[0]}): one run per output")


def read_text(path: str | Path) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ParseError(path, f"cannot be read: {exc.strerror}") from None
    if not data.strip():
        raise ParseError(path, "is empty: the benchmark printed nothing")
    return data.decode("utf-8", errors="replace")


def check_no_mpi_error(path: str | Path, text: str, pattern: re.Pattern[str] = MPI_ERROR) -> None:
    m = pattern.search(text)
    if m:
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        line = text[start: end if end >= 0 else len(text)].strip()
        lineno = text.count("\n", 0, m.start()) + 1
        raise ParseError(path, f"the run failed (launcher/MPI error text at line {lineno}: {line!r})")


def check_doubling(path: str | Path, sizes: list[tuple[str, int]], first: int | None = None) -> None:
    """The message sizes of a sweep that doubles (OSU, IMB), each with where
    it was printed (``"line 12"``): every size twice the one before, or a
    power of two after 0.  A size that does not follow is a result line
    lost or repeated in the middle of the sweep, which an end-of-sweep check
    cannot see.  ``first``: the size the run was asked to start at."""
    if first is not None and sizes and sizes[0][1] != first:
        where, size = sizes[0]
        raise ParseError(path, f"{where}: the sweep starts at {size} B, expected {first} B (a result line is missing)")
    for (_, previous), (where, size) in zip(sizes, sizes[1:]):
        if size <= previous:
            raise ParseError(path, f"{where}: size {size} does not increase (previous {previous})")
        if size != 2 * previous if previous else size & (size - 1):
            wanted = f"{2 * previous} B" if previous else "a power of two"
            raise ParseError(path, f"{where}: size {size} B after {previous} B, expected {wanted}: "
                                   "a result line is missing in the middle of the sweep")


def ranks_text(rows) -> str:
    """The rank counts of tidy rows as the text names them (``1, 2 and 4``), or ``none``."""
    from ..labels import and_list

    return and_list(str(r) for r in sorted({int(r) for r in rows["ranks"].dropna()})) or "none"


def fill(words, **values) -> list[str]:
    """Fill ``{name}`` placeholders of an argv template (words without braces stay)."""
    return [str(w).format(**values) if "{" in str(w) else str(w) for w in words]


class WrapperOutput:
    """The lines a per-rank run wrapper (``workflow/scripts/<script>``) adds
    to its application's output on rank 0: a ``hpcvirt-<tag> 1`` header, one
    ``<key> <value>`` line per key of the run (``keys``), and at the end
    ``wall_s <s>``, ``exit <code>`` and ``end`` (the last only when the run
    completed)."""

    def __init__(self, tag: str, script: str, *keys: str):
        self.header, self.script = f"hpcvirt-{tag}", script
        self.field_re = re.compile(rf"^({'|'.join((self.header, *keys))}|wall_s|exit|end)(?: (\S+))?\s*$", re.M)

    def fields(self, path: str | Path, text: str) -> dict[str, str | None]:
        """The wrapper's lines, key -> value (None for ``end``); ParseError
        when the header is missing (not an output of the wrapper) or a line
        appears twice."""
        fields: dict[str, str | None] = {}
        for m in self.field_re.finditer(text):
            if m.group(1) in fields:
                line = text.count("\n", 0, m.start()) + 1
                raise ParseError(path, f"line {line}: the wrapper's {m.group(1)!r} line appears twice "
                                       f"(two runs' outputs in one file, or a garbled output)")
            fields[m.group(1)] = m.group(2)
        if fields.get(self.header) != "1":
            raise ParseError(path, f"no '{self.header} 1' header: not an output of {self.script}")
        return fields

    @staticmethod
    def check_end(path: str | Path, fields: dict[str, str | None]) -> None:
        """ParseError when the wrapper printed no ``end`` (the run was cut, killed or failed)."""
        if "end" not in fields:
            raise ParseError(path, f"no 'end' line: the run did not complete (exit {fields.get('exit', 'not printed')}; "
                                   "cut, killed or failed)")


def results(rows, **common) -> list[Measurement]:
    """The rows of one run, ``(metric, unit, value)`` or ``(metric, unit,
    value, iteration_count)`` each, all with the same other fields
    (``common``: benchmark, ranks, variant, verified, extra)."""
    return [Measurement(metric=metric, unit=unit, value=value, iteration_count=count[0] if count else None, **common)
            for metric, unit, value, *count in rows]
