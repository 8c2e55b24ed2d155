"""The processes a test started, found by a variable in their environment,
not by name: other tests running at the same time may run the same programs."""

from __future__ import annotations

import os


def running_with(variable: str) -> list[int]:
    """Processes that run with ``variable`` (``NAME=value``) in their
    environment; zombies have ended (this container's init does not reap
    them), so they do not count."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if variable.encode() not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    found.append(int(pid))
        except OSError:
            continue        # ended meanwhile, or not ours to read
    return found
