"""What every parser needs: reading a raw file, spotting launcher and MPI
errors (one list of them, extended by a parser with its benchmark's own
error texts), and filling argv templates."""

from __future__ import annotations

import re
from pathlib import Path

from ..tidy import ParseError

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


def fill(words, **values) -> list[str]:
    """Fill ``{name}`` placeholders of an argv template (words without braces stay)."""
    return [str(w).format(**values) if "{" in str(w) else str(w) for w in words]


def server_keys(port: int) -> dict:
    """The testbed keys of a client/server benchmark: where its server listens and on which port."""
    return {
        "server_host": {"type": "string", "pattern": "^[A-Za-z0-9.:-]+$", "default": "127.0.0.1",
                        "description": "Where the server listens on a one-host testbed (inside the private "
                                       "namespace of the measurement); multi-host testbeds use the second host."},
        "port": {"type": "integer", "minimum": 1024, "maximum": 65535, "default": port,
                 "description": "Listen port of the server."},
    }
