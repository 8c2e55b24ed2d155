"""A Spack install prefix staged into a folder of the project's (hard links,
Spack's record of the spec), and the sha256 of the executables in a folder:
the host's builds (:mod:`hpcvirt.build`) and the container image's
(:mod:`hpcvirt.image`) are staged the same way."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from . import sources


def binaries(d: Path) -> dict[str, str]:
    """Executable file (relative path) -> its sha256, below ``d``."""
    return {str(p.relative_to(d)): sources.sha256_of(p) for p in sorted(d.rglob("*"))
            if p.is_file() and os.access(p, os.X_OK)}


def stage(prefix: Path, dest: Path) -> None:
    """Hard-link (else copy) the files of a Spack install prefix into ``dest``; Spack's own ``.spack``
    folder stays, but for the spec's record."""
    for src in sorted(prefix.rglob("*")):
        rel = src.relative_to(prefix)
        if rel.parts[0] == ".spack":
            continue
        out = dest / rel
        if src.is_symlink():
            out.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), out)
        elif src.is_dir():
            out.mkdir(parents=True, exist_ok=True)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, out)
            except OSError:
                shutil.copy2(src, out)
    shutil.copy2(prefix / ".spack" / "spec.json", dest / "spack-spec.json")
