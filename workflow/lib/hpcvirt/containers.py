"""Container runtimes for the hybrid MPI model.

In the hybrid model the launcher stays on the host (``srun --mpi=pmix`` or the
host's ``mpirun``) and every rank is started *through* a container runtime, so
the application links the MPI library inside the image while the host's
process manager provides PMIx.  That only works when both sides agree on the
MPI implementation (major.minor) and on the PMIx series, which is what the
preflight helpers here check before a benchmark is run.

Nothing here imports Snakemake.  Every function that runs a command takes an
optional ``runner`` (same signature as :func:`subprocess.run`) so it can be
unit-tested without containers.

Testbed runtime settings (``runtime`` dicts) look like::

    {"kind": "none"}
    {"kind": "charliecloud", "image": "/path/img.sqfs",
     "join": True, "join_ct": None, "bind": ["/scratch"], "env": {"K": "V"}}
    {"kind": "apptainer", "image": "/path/img.sif", "bind": ["/scratch:/scratch"],
     "env": {"K": "V"}, "flags": ["--nv"]}

``"singularity"`` is accepted as a kind with the same keys as ``apptainer``.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

__all__ = [
    "PreflightError",
    "container_prefix",
    "launch_env",
    "image_digest",
    "mpi_identity",
    "pmix_version",
    "ucx_version",
    "stack_identity",
    "preflight",
    "check_match",
    "runtime_provenance",
    "verify_image",
    "wireup",
    "testbed_preflight",
]

Runner = Callable[..., subprocess.CompletedProcess]

NATIVE_KINDS = {"none", "native", "", None}
APPTAINER_KINDS = {"apptainer", "singularity"}


class PreflightError(RuntimeError):
    """The host and the image disagree on MPI or PMIx (or a probe failed)."""


# --------------------------------------------------------------------------
# Per-rank wrapper
# --------------------------------------------------------------------------


def _image(runtime: Mapping[str, Any]) -> str:
    image = runtime.get("image")
    if not image:
        raise ValueError(f"container runtime {runtime.get('kind')!r} needs an 'image'")
    return os.fspath(image)


def container_prefix(runtime: Mapping[str, Any] | None, *, single: bool = False) -> list[str]:
    """Argv that wraps ONE rank's command for the given testbed runtime.

    The result goes between the launcher and the program:
    ``[*launcher, *container_prefix(rt), prog, *args]``.  Never put an
    ``mpirun`` inside the container: the launcher is the host's.

    ``single=True`` builds the prefix for a lone process (the preflight
    probes): Charliecloud's ``--join`` is left out because it needs a peer
    group that only exists under a launcher.

    Charliecloud (``ch-run`` 0.31, Debian ``charliecloud-runtime``):
      * ``--join`` makes all ranks of a node share one container (one mount
        and user namespace), which Open MPI needs for its shared-memory/CMA
        path; without it Open MPI cannot use CMA between ranks.
      * ``--join`` reads the peer-group size from the launcher
        (``OMPI_COMM_WORLD_LOCAL_SIZE`` under Open MPI, ``SLURM_*`` under
        srun).  MPICH's hydra does not export one it understands, so set
        ``join_ct`` (ranks per node) there, which yields ``--join-ct=N``.
      * the image may be a SquashFS file (mounted by ch-run's built-in
        squashfuse; needs a usable /dev/fuse, so on hosts where it is mode
        0600 only root can use it) or an unpacked directory (``unsquashfs
        -d DIR IMG``), which works for root and unprivileged users.
      * ch-run refuses to start without ``$USER``: see :func:`launch_env`.

    Apptainer/Singularity: ``exec`` with ``--bind`` for each entry.  No
    ``--cleanenv``: the ranks need the launcher's ``PMIX_*``/``OMPI_*``/
    ``SLURM_*`` variables.
    """
    rt = dict(runtime or {})
    kind = rt.get("kind", "none")
    if kind in NATIVE_KINDS:
        return []

    if kind == "charliecloud":
        argv = [str(rt.get("exe", "ch-run"))]
        if not single:
            join_ct = rt.get("join_ct")
            if join_ct:
                argv.append(f"--join-ct={int(join_ct)}")
            elif rt.get("join", True):
                argv.append("--join")
            if rt.get("join_tag"):
                argv.append(f"--join-tag={rt['join_tag']}")
        for b in rt.get("bind", []) or []:
            argv.append(f"--bind={b}")
        for k, v in sorted((rt.get("env") or {}).items()):
            argv.append(f"--set-env={k}={v}")
        if rt.get("private_tmp"):
            argv.append("--private-tmp")
        argv.extend(str(f) for f in rt.get("flags", []) or [])
        argv += [_image(rt), "--"]
        return argv

    if kind in APPTAINER_KINDS:
        argv = [str(rt.get("exe", kind)), "exec"]
        binds = [str(b) for b in rt.get("bind", []) or []]
        if binds:
            argv += ["--bind", ",".join(binds)]
        for k, v in sorted((rt.get("env") or {}).items()):
            argv += ["--env", f"{k}={v}"]
        argv.extend(str(f) for f in rt.get("flags", []) or [])
        argv.append(_image(rt))
        return argv

    raise ValueError(f"unknown container runtime kind {kind!r}")


def launch_env(runtime: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment variables to ADD to the launcher's environment.

    ``ch-run`` exits with ``$USER not set`` when USER is missing (as in some
    batch and CI environments); this returns ``{"USER": <name>}`` then.
    Open MPI run as root needs the two ``OMPI_ALLOW_RUN_AS_ROOT*`` variables;
    they are added when the current uid is 0.
    """
    env = os.environ if environ is None else environ
    add: dict[str, str] = {}
    kind = (runtime or {}).get("kind", "none")
    if kind == "charliecloud" and not env.get("USER"):
        try:
            add["USER"] = getpass.getuser()
        except Exception:  # no passwd entry
            add["USER"] = str(os.getuid())
    if hasattr(os, "getuid") and os.getuid() == 0:
        add.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        add.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return add


# --------------------------------------------------------------------------
# Image identity
# --------------------------------------------------------------------------


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


def parse_ompi_info(text: str) -> str | None:
    """Version from ``ompi_info --parsable`` (``ompi:version:full:4.1.4``)."""
    m = re.search(r"^ompi:version:full:(\S+)", text, re.M)
    return m.group(1) if m else None


def parse_mpichversion(text: str) -> str | None:
    m = re.search(r"MPICH Version:\s*(\S+)", text)
    return m.group(1) if m else None


def parse_pmix_info(text: str) -> str | None:
    """Version from ``pmix_info --parsable`` (``pmix:version:full:4.2.2rc2``)."""
    m = re.search(r"^pmix:version:full:(\S+)", text, re.M)
    return m.group(1) if m else None


def parse_ucx_info(text: str) -> str | None:
    """Version from ``ucx_info -v`` (``# Library version: 1.18.1`` or ``# Version 1.13.1``)."""
    m = re.search(r"#\s*(?:Library version:|Version)\s*(\d[\w.]*)", text)
    return m.group(1) if m else None


def mpi_identity(
    prefix: Sequence[str] = (),
    flavor: str = "openmpi",
    *,
    runner: Runner | None = None,
    timeout: float = 120,
    env: Mapping[str, str] | None = None,
) -> dict[str, str | None]:
    """``{"impl": "openmpi"|"mpich", "version": "4.1.4"}`` seen through ``prefix``."""
    if flavor == "openmpi":
        out = _run([*prefix, "ompi_info", "--parsable"], runner, timeout, env)
        version = parse_ompi_info(out) if out else None
        if version is None:
            version = _dpkg_version("libopenmpi3", prefix, runner, timeout, env)
    elif flavor == "mpich":
        out = _run([*prefix, "mpichversion"], runner, timeout, env)
        version = parse_mpichversion(out) if out else None
        if version is None:
            version = _dpkg_version("libmpich12", prefix, runner, timeout, env)
    else:
        raise ValueError(f"unknown MPI flavor {flavor!r}")
    return {"impl": flavor, "version": version}


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


def preflight(
    runtime: Mapping[str, Any],
    flavor: str = "openmpi",
    *,
    runner: Runner | None = None,
    timeout: float = 120,
    check_ucx: bool = False,
) -> dict[str, Any]:
    """Probe host and image, compare, and return a provenance record.

    Returns ``{"host": {...}, "container": {...}, "image_digest": ...,
    "prefix": [...]}``; raises :class:`PreflightError` on a mismatch.  For
    ``kind: none`` the container side is the host itself.
    """
    env = launch_env(runtime)
    host = stack_identity((), flavor, runner=runner, timeout=timeout)
    prefix = container_prefix(runtime, single=True)
    if prefix:
        container = stack_identity(prefix, flavor, runner=runner, timeout=timeout, env=env)
    else:
        container = dict(host)
    check_match(host, container, check_ucx=check_ucx)
    digest = None
    image = (runtime or {}).get("image")
    if image and Path(image).exists():
        digest = image_digest(image)
    return {
        "host": host,
        "container": container,
        "image_digest": digest,
        "prefix": container_prefix(runtime),
    }


# --------------------------------------------------------------------------
# Provenance of a testbed's software stack (one set of values per result row)
# --------------------------------------------------------------------------

_REPO_ROOT = Path(__file__).resolve().parents[3]


def _resolve(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p if p.is_absolute() or p.exists() else _REPO_ROOT / p


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
        return _resolve(rt["spack_lock"])
    stack = rt.get("stack")
    if stack:
        p = _REPO_ROOT / "spack-envs" / str(stack) / "spack.lock"
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
        "image_digest": _cached_digest(_resolve(image)),
        "spack_lock": ("sha256:" + _file_sha(lock)) if lock is not None else "",
    }


def verify_image(image: str | os.PathLike) -> dict[str, Any]:
    """Digest and size of an image; for a file with a ``<image>.sha256``
    sidecar (written by containers/offline/build.sh) the digest must match it.
    Raises :class:`PreflightError` when the image is missing or differs."""
    p = _resolve(image)
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


# --------------------------------------------------------------------------
# Whole-testbed preflight: versions of every MPI, then a real 2-rank wire-up
# --------------------------------------------------------------------------


def _tail_text(text: str, n: int = 15) -> str:
    return "\n".join("    " + line for line in text.splitlines()[-n:])


def wireup(tb: Mapping[str, Any], mpi: str, path: str, *, timeout: float = 120,
           max_bytes: int = 64) -> dict[str, Any]:
    """Run a short 2-rank NetPIPE through the testbed's launcher, its path
    options and the container prefix, exactly as a measurement runs it
    (same argv builder, same runner, same network isolation).  Returns a
    record; raises :class:`PreflightError` with the command and the last
    lines of output when the ranks do not complete the exchange."""
    import json
    import sys
    import tempfile
    import time

    from . import launch as launch_mod
    from .matrix import Configuration
    from .parsers import netpipe
    from .tidy import ParseError

    settings = {"mpi": mpi, "path": path, "min_bytes": 1, "max_bytes": int(max_bytes)}
    conf = Configuration(str(tb["name"]), "netpipe", f"preflight-{mpi}-{path}", settings)
    la = launch_mod.build(conf, dict(tb))
    with tempfile.TemporaryDirectory(prefix="hpcvirt-preflight-") as tmp:
        spec_path, out_path, status_path = (os.path.join(tmp, n) for n in ("spec.json", "out", "status.json"))
        with open(spec_path, "w", encoding="utf-8") as fh:
            json.dump({**la.to_dict(), "timeout_s": timeout}, fh)
        argv = [sys.executable, "-m", "hpcvirt.runner", spec_path, out_path, status_path]
        if la.isolation == "netns":
            argv = ["unshare", "--net", "--", *argv]
        lib = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [lib, os.environ.get("PYTHONPATH")])))
        t0 = time.monotonic()
        try:
            cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 30, env=env)
            runner_err = cp.stderr.strip()
        except subprocess.TimeoutExpired:
            runner_err = "the runner did not return"
        seconds = round(time.monotonic() - t0, 3)
        try:
            with open(status_path, encoding="utf-8") as fh:
                status = json.load(fh)
        except (OSError, ValueError):
            status = {"exit_code": None, "timed_out": None, "note": runner_err[-1000:]}
        try:
            with open(out_path, encoding="utf-8", errors="replace") as fh:
                output = fh.read()
        except OSError:
            output = ""
        rec = {"mpi": mpi, "path": path, "argv": la.argv, "env": la.env, "isolation": la.isolation,
               "exit_code": status.get("exit_code"), "timed_out": status.get("timed_out"), "seconds": seconds}
        problem = None
        if status.get("exit_code") != 0 or status.get("timed_out"):
            problem = status.get("note") or f"exit code {status.get('exit_code')}"
        else:
            try:
                rows = netpipe.parse(out_path, expected_max_bytes=int(max_bytes))
                rec["max_bytes_reached"] = max(m.msg_bytes or 0 for m in rows)
            except (ParseError, ValueError) as exc:
                problem = f"output rejected: {exc}"
        if problem:
            hint = ""
            if "$USER not set" in output or "$USER not set" in runner_err:
                hint = ("\n  hint: ch-run needs $USER; the launch environment lacks it "
                        "(export USER=$(id -un), or add hpcvirt.containers.launch_env() to the launch env)")
            raise PreflightError(
                f"2-rank wire-up of {mpi}/{path} on testbed {tb['name']} failed ({problem})\n"
                f"  command: {' '.join(la.argv)}\n  last lines:\n{_tail_text(output)}"
                + (f"\n  runner: {runner_err[-500:]}" if runner_err else "") + hint
            )
        return rec


def _study_mpis_paths(study: Mapping[str, Any], tb: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    pp = (study.get("experiments") or {}).get("pingpong") or {}
    if pp.get("enabled", False):
        return [(m, list(pp["paths"])) for m in pp["mpis"]]
    return [(m, sorted(v.get("paths", {}))[:1]) for m, v in sorted(tb.get("mpi", {}).items())]


def testbed_preflight(
    study: Mapping[str, Any],
    tb: Mapping[str, Any],
    *,
    timeout: float = 120,
    runner: Runner | None = None,
    wire: bool = True,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Everything that must hold before a benchmark runs on a containerized
    testbed, as one record (``data/raw/<campaign>/<testbed>/preflight.json``).

    1. the image exists and matches its ``.sha256`` sidecar (digest recorded);
    2. for every MPI the study uses: host vs image MPI implementation and
       major.minor, PMIx major.minor, and UCX major.minor when the runtime
       says ``check_ucx: true`` (all four versions are always recorded);
    3. for every MPI and data path the study uses (native testbeds): a
       2-rank NetPIPE wire-up through the launcher and the container prefix.

    Raises :class:`PreflightError` at the first failure; the message names
    both versions or the failing command.
    """
    from datetime import datetime, timezone

    say = log or (lambda _msg: None)
    rt = dict(tb.get("runtime") or {"kind": "none"})
    rec: dict[str, Any] = {
        "schema": "hpcvirt-preflight/1",
        "campaign": study.get("campaign"),
        "testbed": tb["name"],
        "runtime": rt,
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    prov = {"stack": "host", "image": "", "image_digest": "", "spack_lock": ""}
    if rt.get("kind", "none") not in NATIVE_KINDS:
        img = verify_image(_image(rt))
        say(f"image {img['image']}: {img['image_digest']}")
        prov = runtime_provenance(rt)
        rec["image_bytes"] = img.get("image_bytes")
        rec["image_sidecar"] = img.get("sidecar")
    rec.update(prov)
    check_ucx = bool(rt.get("check_ucx", False))
    rec["compared"] = ["mpi_impl", "mpi major.minor", "pmix major.minor"] + (["ucx major.minor"] if check_ucx else [])
    rec["stacks"] = {}
    pairs = _study_mpis_paths(study, tb)
    for mpi, _paths in pairs:
        r = preflight(rt, mpi, runner=runner, timeout=timeout, check_ucx=check_ucx)
        rec["stacks"][mpi] = {"host": r["host"], "container": r["container"]}
        say(f"{mpi}: host {r['host']} | image {r['container']}: match")
    rec["wireup"] = []
    if wire:
        if tb.get("kind") != "native":
            rec["wireup_skipped"] = f"kind {tb.get('kind')}: the wire-up runs with the first measurement"
        else:
            for mpi, paths in pairs:
                for path in paths:
                    w = wireup(tb, mpi, path, timeout=timeout)
                    rec["wireup"].append(w)
                    say(f"wire-up {mpi}/{path}: ok in {w['seconds']} s")
    rec["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rec["ok"] = True
    return rec
