"""Things every parser needs: reading a raw file and spotting launcher errors."""

from __future__ import annotations

import re
from pathlib import Path

from ..tidy import ParseError

# Text that MPI launchers and runtimes print when a job did not complete.
# A file containing any of these is a failed run, whatever else it holds.
MPI_ERROR = re.compile(
    r"mpirun detected that one or more processes exited|"
    r"mpirun noticed that process|"
    r"Primary job\s+terminated|"
    r"MPI_ABORT was invoked|"
    r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES|"
    r"=\s*(KILLED|EXIT CODE: [1-9])|"
    r"srun: error:|"
    r"ORTE_ERROR_LOG|"
    r"was unable to (find the specified executable|launch the specified application)|"
    r"Fatal error in \w+|"
    r"Segmentation fault|"
    r"Killed by signal"
)


def read_text(path: str | Path) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ParseError(path, f"cannot be read: {exc.strerror}") from None
    if not data.strip():
        raise ParseError(path, "is empty: the benchmark printed nothing")
    return data.decode("utf-8", errors="replace")


def check_no_mpi_error(path: str | Path, text: str) -> None:
    m = MPI_ERROR.search(text)
    if m:
        line = text[text.rfind("\n", 0, m.start()) + 1 : text.find("\n", m.end())].strip()
        raise ParseError(path, f"the run failed (launcher/MPI error: {line!r})")
