"""Where things are: one anchor for every path the library uses.

Every path is relative to the workflow's working directory, the checkout a
job runs in (Snakemake runs every job there): configuration, schemas,
scripts, benchmark sources, raw outputs and the ``.hpcvirt/`` cache.  A
copy of the repository (as the end-to-end tests make) therefore uses its own
files, never those of the checkout the library was installed from.
``HPCVIRT_ROOT`` overrides the anchor.
"""

from __future__ import annotations

import os
from pathlib import Path


def root() -> Path:
    """The workflow's working directory (absolute)."""
    return Path(os.environ.get("HPCVIRT_ROOT") or os.getcwd()).resolve()


def schemas() -> Path:
    return root() / "workflow" / "schemas"


def script(name: str) -> Path:
    """A helper script of ``workflow/scripts/`` (absolute)."""
    return root() / "workflow" / "scripts" / name


def workdir() -> Path:
    """The cache of built images and binaries (``HPCVIRT_WORKDIR`` overrides)."""
    return Path(os.environ.get("HPCVIRT_WORKDIR") or root() / ".hpcvirt")


def resolve(path: str | os.PathLike) -> Path:
    """``path`` as given if absolute, else relative to :func:`root`."""
    p = Path(path)
    return p if p.is_absolute() else root() / p
