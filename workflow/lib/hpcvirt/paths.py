"""Where things are: one anchor for every path the library uses.

Every path is relative to the workflow's working directory, the checkout a
job runs in (Snakemake runs every job there): configuration, schemas,
scripts, benchmark sources, raw outputs and the ``.hpcvirt/`` cache.  A
copy of the repository (as the end-to-end tests make) therefore uses its own
files, never those of the checkout the library was installed from.
``HPCVIRT_ROOT`` overrides the anchor.
"""

from __future__ import annotations

import hashlib
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


#: The code that derives the summary, the views, the numbers, the tables and the figures from the tidy
#: rows: the library and the rules' Python scripts.
DERIVING_CODE = ("workflow/lib/hpcvirt", "workflow/scripts")


def code_digest() -> str:
    """A digest of :data:`DERIVING_CODE` (every ``.py`` file, by path and content).  The rules that derive
    from the tidy rows declare it as a parameter, so that a change of that code makes them run again
    (Snakemake's own code trigger sees only a rule's own lines, and the profiles leave it out: it would
    measure again)."""
    h = hashlib.sha256()
    for top in DERIVING_CODE:
        for p in sorted((root() / top).rglob("*.py")):
            h.update(f"{p.relative_to(root()).as_posix()}\0".encode() + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def workdir() -> Path:
    """The cache of built images and binaries (``HPCVIRT_WORKDIR`` overrides)."""
    return Path(os.environ.get("HPCVIRT_WORKDIR") or root() / ".hpcvirt")


#: Where the suites' builds are kept when not in the work directory.
BUILD_CACHE_ENV = "HPCVIRT_BUILD_CACHE"


def build_cache() -> Path:
    """Where builds are kept: ``$HPCVIRT_BUILD_CACHE`` (e.g. shared by several
    checkouts), else ``<workdir>/suites``."""
    return Path(os.environ.get(BUILD_CACHE_ENV) or workdir() / "suites")


def resolve(path: str | os.PathLike) -> Path:
    """``path`` as given if absolute, else relative to :func:`root`."""
    p = Path(path)
    return p if p.is_absolute() else root() / p


#: Where the campaigns' raw outputs are: ``data/raw/<campaign>/<testbed>/...``
RAW_ROOT = "data/raw"


class RawPathError(ValueError):
    """A raw-output path outside its campaign's directory, or through a symlink."""


def _as_relative(path: str | os.PathLike) -> Path:
    p = Path(path)
    if p.is_absolute():
        try:
            return p.relative_to(root())
        except ValueError:
            raise RawPathError(f"{p}: a raw output must be under {root() / RAW_ROOT}/<campaign>/") from None
    return p


def _symlink_error(rel: Path, campaign: str) -> RawPathError:
    return RawPathError(f"{rel}: a symlink (to {os.readlink(root() / rel)}); raw outputs are files in "
                        f"{RAW_ROOT}/{campaign}/ itself, never links (remove the link; nothing was read or "
                        f"written through it)")


def raw_output(path: str | os.PathLike) -> Path:
    """``path`` (relative to :func:`root`) checked as a raw output or record
    of a campaign before it is written or read: it must be
    ``data/raw/<campaign>/<...>``, stay there once resolved, and neither the
    campaign's directory, nor a directory below it, nor the file may be a
    symlink (a link would put measurements outside the archive, or pass a
    planted file off as a finished one).  Returns the relative path."""
    rel = _as_relative(path)
    parts = rel.parts
    if len(parts) < 4 or Path(*parts[:2]) != Path(RAW_ROOT) or ".." in parts:
        raise RawPathError(f"{rel}: a raw output must be under {RAW_ROOT}/<campaign>/")
    campaign = parts[2]
    for i in range(3, len(parts) + 1):
        if (root() / Path(*parts[:i])).is_symlink():
            raise _symlink_error(Path(*parts[:i]), campaign)
    top = (root() / RAW_ROOT / campaign).resolve()
    if not (root() / rel).resolve().is_relative_to(top):
        raise RawPathError(f"{rel}: resolves to {(root() / rel).resolve()}, outside {RAW_ROOT}/{campaign}/")
    return rel


def check_raw_tree(campaign: str) -> None:
    """Refuse a campaign whose directory, or anything in it, is a symlink
    (see :func:`raw_output`), naming the first ones found; run before any
    of its raw outputs is planned, written or parsed."""
    if not campaign or "/" in campaign or campaign in (".", ".."):
        raise RawPathError(f"{campaign!r} is not a campaign name (a directory of {RAW_ROOT}/)")
    top = Path(RAW_ROOT) / campaign
    links = [top] if (root() / top).is_symlink() else []
    for d, dirs, files in os.walk(root() / top):
        links += [Path(d, n).relative_to(root()) for n in sorted(dirs + files) if os.path.islink(os.path.join(d, n))]
        if len(links) >= 10:
            break
    if links:
        raise RawPathError("\n  ".join([str(_symlink_error(p, campaign)) for p in links[:10]]))
