"""Identity of a software stack: image digests, MPI/PMIx/UCX versions seen
on the host or through a container prefix, and the stack columns of every
result row.

Every function that runs a command takes an optional ``runner`` (same
signature as :func:`subprocess.run`) so it can be unit-tested without
containers.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from . import paths
from .runtime import NATIVE_KINDS, _image

Runner = Callable[..., subprocess.CompletedProcess]


class PreflightError(RuntimeError):
    """The host and the image disagree on MPI or PMIx (or a probe failed)."""


def image_digest(path: str | os.PathLike) -> str:
    """``sha256:<hex>`` of an image file (SquashFS, SIF).

    For an unpacked directory image the digest is taken over a sorted list of
    ``relative path, type, mode, sha256(content or link target)`` lines, so it
    does not depend on timestamps or directory order.
    """
    p = Path(path)
    h = hashlib.sha256()
    if p.is_file():
        with p.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return "sha256:" + h.hexdigest()
    if p.is_dir():
        for root, dirs, files in os.walk(p):
            dirs.sort()
            for name in sorted(dirs + files):
                full = Path(root) / name
                rel = full.relative_to(p).as_posix()
                st = full.lstat()
                if full.is_symlink():
                    kind, body = "l", os.readlink(full).encode()
                elif full.is_dir():
                    kind, body = "d", b""
                elif full.is_file():
                    kind, body = "f", _file_sha(full).encode()
                else:
                    kind, body = "o", b""
                line = f"{rel}\0{kind}\0{st.st_mode & 0o7777:o}\0".encode() + body + b"\n"
                h.update(line)
        return "sha256:" + h.hexdigest()
    raise FileNotFoundError(f"no image at {p}")


def _file_sha(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------
# Probes (run on the host with prefix [] or in the image with the prefix)
# --------------------------------------------------------------------------

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?([A-Za-z0-9.~+-]*)")


def _run(argv: Sequence[str], runner: Runner | None, timeout: float, env: Mapping[str, str] | None) -> str | None:
    run = runner or subprocess.run
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    try:
        cp = run(list(argv), capture_output=True, text=True, timeout=timeout, env=full_env)
    except (OSError, subprocess.SubprocessError):
        return None
    if cp.returncode != 0:
        return None
    return cp.stdout or ""


def _dpkg_upstream(version: str) -> str:
    """Debian version -> upstream version: strip epoch and revision."""
    v = version.strip()
    if ":" in v:
        v = v.split(":", 1)[1]
    if "-" in v:
        v = v.rsplit("-", 1)[0]
    return v


def _dpkg_version(pkg: str, prefix: Sequence[str], runner, timeout, env) -> str | None:
    out = _run([*prefix, "dpkg-query", "-W", "-f", "${Version}", pkg], runner, timeout, env)
    if out and out.strip():
        return _dpkg_upstream(out)
    return None


def _first(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else None


def parse_ompi_info(text: str) -> str | None:
    """Version from ``ompi_info --parsable`` (``ompi:version:full:4.1.4``)."""
    return _first(r"^ompi:version:full:(\S+)", text)


def parse_mpichversion(text: str) -> str | None:
    """Version from ``mpichversion`` (``MPICH Version: 4.0.2``)."""
    return _first(r"MPICH Version:\s*(\S+)", text)


def parse_pmix_info(text: str) -> str | None:
    """Version from ``pmix_info --parsable`` (``pmix:version:full:4.2.2rc2``)."""
    return _first(r"^pmix:version:full:(\S+)", text)


def parse_ucx_info(text: str) -> str | None:
    """Version from ``ucx_info -v`` (``# Library version: 1.18.1`` or ``# Version 1.13.1``)."""
    return _first(r"#\s*(?:Library version:|Version)\s*(\d[\w.]*)", text)


MPI_NAMES = {"openmpi": "Open MPI", "mpich": "MPICH"}


def mpi_identity(
    prefix: Sequence[str] = (),
    flavor: str = "openmpi",
    *,
    runner: Runner | None = None,
    timeout: float = 120,
    env: Mapping[str, str] | None = None,
) -> dict[str, str | None]:
    """``{"impl": "openmpi"|"mpich", "name": "Open MPI"|"MPICH", "version":
    "4.1.4", "device": ...}`` seen through ``prefix`` (``()``: the host), from
    the MPI's own tools, else from its Debian package."""
    device = None
    if flavor == "openmpi":
        out = _run([*prefix, "ompi_info", "--parsable"], runner, timeout, env)
        version = parse_ompi_info(out) if out else None
        if version is None:
            version = _dpkg_version("libopenmpi3", prefix, runner, timeout, env)
    elif flavor == "mpich":
        out = _run([*prefix, "mpichversion"], runner, timeout, env)
        version = parse_mpichversion(out) if out else None
        device = _first(r"MPICH Device:\s*(\S+)", out or "")
        if version is None:
            version = _dpkg_version("libmpich12", prefix, runner, timeout, env)
    else:
        raise ValueError(f"unknown MPI flavor {flavor!r}")
    return {"impl": flavor, "name": MPI_NAMES[flavor], "version": version, "device": device}


def pmix_version(prefix: Sequence[str] = (), *, runner: Runner | None = None, timeout: float = 120,
                 env: Mapping[str, str] | None = None) -> str | None:
    out = _run([*prefix, "pmix_info", "--parsable"], runner, timeout, env)
    v = parse_pmix_info(out) if out else None
    # libpmix2t64: the package's name from Debian 13 on (64-bit time_t transition)
    return (v or _dpkg_version("libpmix2", prefix, runner, timeout, env)
            or _dpkg_version("libpmix2t64", prefix, runner, timeout, env))


def ucx_version(prefix: Sequence[str] = (), *, runner: Runner | None = None, timeout: float = 120,
                env: Mapping[str, str] | None = None) -> str | None:
    out = _run([*prefix, "ucx_info", "-v"], runner, timeout, env)
    v = parse_ucx_info(out) if out else None
    return v or _dpkg_version("libucx0", prefix, runner, timeout, env)


def stack_identity(prefix: Sequence[str] = (), flavor: str = "openmpi", *, runner: Runner | None = None,
                   timeout: float = 120, env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """MPI implementation/version, PMIx and UCX versions seen through ``prefix``."""
    mpi = mpi_identity(prefix, flavor, runner=runner, timeout=timeout, env=env)
    return {
        "mpi_impl": mpi["impl"],
        "mpi_version": mpi["version"],
        "pmix_version": pmix_version(prefix, runner=runner, timeout=timeout, env=env),
        "ucx_version": ucx_version(prefix, runner=runner, timeout=timeout, env=env),
    }


# --------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------


def _major_minor(version: str | None) -> tuple[int, int] | None:
    if not version:
        return None
    m = _VERSION.search(version)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2))


def check_match(host: Mapping[str, Any], container: Mapping[str, Any], *, check_ucx: bool = False) -> None:
    """Raise :class:`PreflightError` unless host and image agree.

    Compared: MPI implementation, MPI major.minor and PMIx major.minor (the
    ABI-relevant parts for the hybrid model).  UCX is compared only with
    ``check_ucx=True`` (a mismatch there costs performance, not correctness).
    Missing values on either side are an error: an unverified pair must not
    be benchmarked silently.
    """
    problems: list[str] = []
    h_impl, c_impl = host.get("mpi_impl"), container.get("mpi_impl")
    if h_impl and c_impl and h_impl != c_impl:
        problems.append(f"MPI implementation differs: host {h_impl}, container {c_impl}")

    fields = [("MPI", "mpi_version"), ("PMIx", "pmix_version")]
    if check_ucx:
        fields.append(("UCX", "ucx_version"))
    for label, key in fields:
        hv, cv = host.get(key), container.get(key)
        hmm, cmm = _major_minor(hv), _major_minor(cv)
        if hmm is None or cmm is None:
            problems.append(f"{label} version unknown: host {hv!r}, container {cv!r}")
        elif hmm != cmm:
            problems.append(
                f"{label} mismatch: host {hv} (series {hmm[0]}.{hmm[1]}) vs "
                f"container {cv} (series {cmm[0]}.{cmm[1]})"
            )
    if problems:
        raise PreflightError("hybrid-model preflight failed: " + "; ".join(problems))




_DIGESTS: dict[tuple[str, int, int], str] = {}


def _cached_digest(path: Path) -> str:
    """:func:`image_digest`, hashed once per process per (path, size, mtime)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = image_digest(path)
    return _DIGESTS[key]


def spack_lock_path(runtime: Mapping[str, Any] | None) -> Path | None:
    """The spack.lock behind a runtime: ``runtime.spack_lock`` when set, else
    ``spack-envs/<stack>/spack.lock`` when that file exists; None otherwise."""
    rt = runtime or {}
    if rt.get("spack_lock"):
        return paths.resolve(rt["spack_lock"])
    stack = rt.get("stack")
    if stack:
        p = paths.root() / "spack-envs" / str(stack) / "spack.lock"
        if p.is_file():
            return p
    return None


def runtime_provenance(runtime: Mapping[str, Any] | None) -> dict[str, str]:
    """Software-stack columns of every result row of a testbed.

    ``{"stack": ..., "image": ..., "image_digest": "sha256:..." , "spack_lock": "sha256:..."}``;
    empty strings where a value does not apply (bare host, no spack.lock).
    ``stack`` is ``host`` for ``kind: none``.  A configured image that does
    not exist raises FileNotFoundError: a row must never claim an image it
    did not run in.  A configured ``spack_lock`` that does not exist raises
    too; the implicit ``spack-envs/<stack>/spack.lock`` is optional.
    """
    rt = dict(runtime or {})
    kind = rt.get("kind", "none")
    if kind in NATIVE_KINDS:
        return {"stack": "host", "image": "", "image_digest": "", "spack_lock": ""}
    image = _image(rt)
    lock = spack_lock_path(rt)
    if lock is not None and not lock.is_file():
        raise FileNotFoundError(f"runtime.spack_lock: no file {lock}")
    return {
        "stack": str(rt.get("stack") or "host"),
        "image": image,
        "image_digest": _cached_digest(paths.resolve(image)),
        "spack_lock": ("sha256:" + _file_sha(lock)) if lock is not None else "",
    }


def verify_image(image: str | os.PathLike) -> dict[str, Any]:
    """Digest and size of an image; for a file with a ``<image>.sha256``
    sidecar (written by containers/offline/build.sh) the digest must match it.
    Raises :class:`PreflightError` when the image is missing or differs."""
    p = paths.resolve(image)
    if not p.exists():
        raise PreflightError(f"container image {image} does not exist (build it first, e.g. "
                             f"snakemake {image})")
    digest = _cached_digest(p)
    rec: dict[str, Any] = {"image": os.fspath(image), "image_digest": digest, "sidecar": None}
    if p.is_file():
        rec["image_bytes"] = p.stat().st_size
        side = p.with_name(p.name + ".sha256")
        if side.is_file():
            words = side.read_text().split()
            expected = words[0] if words else ""
            rec["sidecar"] = str(side.name)
            if expected != digest:
                raise PreflightError(f"container image {image} has digest {digest}, but {side} records "
                                     f"{expected}: the image changed after it was built")
    return rec


