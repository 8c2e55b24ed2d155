"""Pinned source archives: declared once, taken from a mirror or downloaded,
always verified before use.

A :class:`Source` names its version, its official URL(s) and every
acceptable file with its sha256: the official archive, and the copy an
offline mirror holds (a mirror copy may be re-packed, so it has a file name
and checksum of its own).  The tools' sources are declared here
(:data:`TOOLS`), the benchmarks' in their declarations (``build =
PinnedSource(..., urls=..., files=...)``); :data:`SOURCES` holds them all.
:func:`fetch` looks in the mirror directory when one is set
(``HPCVIRT_SOURCE_MIRROR``, or the ``mirror`` argument), else downloads
from the official URLs; the file lands in the cache
``.hpcvirt/sources/`` only after its checksum matched.  A missing or wrong
file fails with the file name, the expected checksums and the actual one,
and leaves nothing behind.

The record :func:`fetch` returns (name, version, file, sha256, which copy,
where from) goes into the provenance of everything built from the source.
These sources are never committed to the repository.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import paths

MIRROR_ENV = "HPCVIRT_SOURCE_MIRROR"


class SourceError(RuntimeError):
    """A pinned source is missing or does not match its checksum."""


@dataclass(frozen=True)
class Source:
    name: str
    version: str
    urls: tuple[str, ...]
    # acceptable files: (file name, sha256, which copy it is); a mirror copy
    # may have the official name but other bytes (re-packed)
    files: tuple[tuple[str, str, str], ...] = ()

    def names(self) -> list[str]:
        return list(dict.fromkeys(f for f, _, _ in self.files))

    def expected(self) -> str:
        return "; ".join(f"{f}: {sha} ({label})" for f, sha, label in self.files)

    def match(self, filename: str, sha256: str) -> str | None:
        """Which copy a file is, or None if it is not acceptable."""
        return next((label for f, sha, label in self.files if f == filename and sha == sha256), None)


#: The tools the project builds from pinned sources (the benchmarks' sources are their declarations').
TOOLS: tuple[Source, ...] = (
    # The container runtime (hpcvirt.apptainer builds it once per machine).  The mirror copy is
    # ``git archive`` of tag v1.4.5 (commit 3a171cf5ead2f27884de771c515efccb0a8ab4df) with the VERSION file
    # the release archive carries; it has the release archive's name.  The official archive's checksum is
    # not pinned here yet: only the mirror copy is accepted.
    Source("apptainer", "1.4.5",
           ("https://github.com/apptainer/apptainer/releases/download/v1.4.5/apptainer-1.4.5.tar.gz",), (
               ("apptainer-1.4.5.tar.gz", "bfc62b95d8bab2ebe8b4406a0398a14a85e5c8daecee8af030097be49fac5a3d",
                "mirror copy"),
           )),
    # The package manager that builds the suites (hpcvirt.spack unpacks it once per machine).  The mirror
    # copy is ``git archive`` of the release commit 89319413d5d90caa9bea98e3419f8aeab61a2a0d ("set version to
    # v0.21.2"), unpacking to spack-0.21.2/, with the release archive's name.  The official archive's
    # checksum is not pinned here yet: only the mirror copy is accepted.
    Source("spack", "0.21.2", ("https://github.com/spack/spack/releases/download/v0.21.2/spack-0.21.2.tar.gz",), (
        ("spack-0.21.2.tar.gz", "b84d7607fdff2c85005a68a2fb2d5e58bc6336bc45e5f656d98b8a00b0697066", "mirror copy"),
    )),
)


def _declared() -> dict[str, Source]:
    """Every pinned source: the tools', and those the benchmarks declare (``build = PinnedSource(...)`` with its
    URLs and the files accepted)."""
    from .benchmarks import REGISTRY

    pins = [d for d in REGISTRY.pinned() if d.files]
    return {s.name: s for s in (*TOOLS, *(Source(d.name, d.version, d.urls, d.files) for d in pins))}


#: name -> :class:`Source` of every pinned source.
SOURCES: dict[str, Source] = _declared()


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def mirror_dir(mirror: str | os.PathLike | None = None) -> Path | None:
    m = mirror or os.environ.get(MIRROR_ENV)
    return Path(m) if m else None


def _verify(src: Source, filename: str, path: Path, origin: str) -> tuple[str, str]:
    """(sha256, which copy) of an acceptable file; SourceError otherwise."""
    actual = sha256_of(path)
    label = src.match(filename, actual)
    if label is None:
        raise SourceError(f"{filename} ({src.name} {src.version}, from {origin}) has sha256 {actual}, expected "
                          f"{src.expected()}; the file is not used")
    return actual, label


def fetch(name: str, *, mirror: str | os.PathLike | None = None, cache: str | os.PathLike | None = None,
          opener=None) -> dict:
    """The verified archive of source ``name`` in the cache, and its record (``opener``: how a URL is
    opened, ``urllib.request.urlopen`` unless given)."""
    try:
        src = SOURCES[name]
    except KeyError:
        raise SourceError(f"no pinned source {name!r}; declared: {sorted(SOURCES)}") from None
    cache = Path(cache) if cache else paths.workdir() / "sources"
    cache.mkdir(parents=True, exist_ok=True)
    for filename in src.names():                    # already fetched and verified
        if (cache / filename).is_file():
            sha, label = _verify(src, filename, cache / filename, f"the cache {cache}")
            return _record(src, filename, cache / filename, sha, label, f"cache {cache}")
    m = mirror_dir(mirror)
    if m is not None:
        found = [f for f in src.names() if (m / f).is_file()]
        if not found:
            raise SourceError(f"{src.name} {src.version}: none of {src.names()} is in the mirror {m} "
                              f"({MIRROR_ENV}); expected {src.expected()}")
        candidates = [(found[0], m / found[0])]
    else:
        candidates = [(url.rsplit("/", 1)[1], url) for url in src.urls]
    errors = []
    for filename, origin in candidates:
        fd, tmp = tempfile.mkstemp(prefix=f".{filename}.", suffix=".partial", dir=cache)
        os.close(fd)
        try:
            if isinstance(origin, Path):
                shutil.copyfile(origin, tmp)
            else:
                if opener is None:
                    import urllib.request     # only when a source is downloaded: measurement jobs never do

                    opener = urllib.request.urlopen
                with opener(origin, timeout=120) as resp, open(tmp, "wb") as out:
                    shutil.copyfileobj(resp, out)
            sha, label = _verify(src, filename, Path(tmp), str(origin))
            os.replace(tmp, cache / filename)
            return _record(src, filename, cache / filename, sha, label, str(origin))
        except (OSError, SourceError) as exc:
            errors.append(str(exc))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise SourceError(f"{src.name} {src.version} could not be fetched:\n  " + "\n  ".join(errors)
                      + f"\n  (on an offline machine, set {MIRROR_ENV} to a directory holding one of "
                        f"{src.names()})")


def _record(src: Source, filename: str, path: Path, sha: str, label: str, origin: str) -> dict:
    return {"name": src.name, "version": src.version, "file": filename, "sha256": sha, "copy": label,
            "from": origin, "path": str(path)}
