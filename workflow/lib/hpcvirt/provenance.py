"""Provenance of one run: where, with what, how.

Only named facts are recorded.  The process environment is never dumped:
the only environment variables that appear are the ones the testbed file
sets for the benchmark (validated by the testbed schema), so no secret can
leak into a provenance file; what the launch takes from the process
(:data:`hpcvirt.runtime.PROCESS_ENV`, e.g. ``USER``) is left out.

No absolute path of the measuring machine is recorded either
(:func:`portable`): a path in the clone is relative to it, one in a cache
or mirror starts with the variable that names that root
(``$HPCVIRT_SOURCE_MIRROR/``, ``$HPCVIRT_BUILD_CACHE/``,
``$HPCVIRT_WORKDIR/``; the last two default to ``.hpcvirt/suites`` and
``.hpcvirt`` in the clone).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

from . import paths
from .atomic import write_json
from .benchmarks import REGISTRY
from .stack import mpi_identity as _mpi_identity

# Debian packages whose exact versions define the local software stack: the
# MPI libraries and their runtimes, plus the packages each benchmark is built
# from or with (its declaration's ``build``).
BASE_PACKAGES = ("openmpi-bin", "libopenmpi3", "mpich", "libmpich12", "libucx0", "libpmix2", "hwloc")
STACK_PACKAGES = tuple(dict.fromkeys(BASE_PACKAGES + tuple(p for b in REGISTRY for p in b.build.packages)))


def _run(argv: list[str], timeout: float = 20) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 else None


def sha256_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def config_hash(*objs) -> str:
    """Stable hash of configuration objects (sorted-key JSON)."""
    blob = json.dumps(objs, sort_keys=True, default=str).encode()
    return sha256_bytes(blob)


@functools.lru_cache(maxsize=4)
def git_info(repo: str | None = None) -> dict:
    repo = repo or str(paths.root())
    commit = _run(["git", "-C", repo, "rev-parse", "HEAD"])
    dirty = _run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"])
    return {
        "commit": commit.strip() if commit else None,
        "dirty": bool(dirty.strip()) if dirty is not None else None,
    }


@functools.lru_cache(maxsize=1)
def cpu_info() -> dict:
    out = _run(["lscpu", "-J"])
    fields = {}
    if out:
        for item in json.loads(out).get("lscpu", []):
            key = item.get("field", "").rstrip(":")
            if key in (
                "Architecture",
                "Model name",
                "Vendor ID",
                "CPU(s)",
                "Thread(s) per core",
                "Core(s) per socket",
                "Socket(s)",
                "NUMA node(s)",
                "L1d cache",
                "L2 cache",
                "L3 cache",
                "Hypervisor vendor",
                "Virtualization type",
                "Flags",
            ):
                fields[key] = item.get("data")
    flags = (fields.pop("Flags", "") or "").split()
    topo = _run(["lstopo-no-graphics", "--of", "synthetic", "--no-io"])
    return {
        "model": fields.get("Model name"),
        "lscpu": fields,
        "hypervisor_flag": "hypervisor" in flags,
        "hwloc_synthetic": topo.strip() if topo else None,
    }


_HWLOC_CACHE_RE = re.compile(r"\b(L\d[di]?)Cache:\d+\(size=(\d+)\)")


def cache_sizes(host: dict | None) -> dict[str, int]:
    """Bytes of one instance of each cache level (``L1d``, ``L2``, ``L3``, ...)
    from a host record's hwloc topology (what two processes on one socket
    share), or {} when the record has none."""
    topo = ((host or {}).get("cpu") or {}).get("hwloc_synthetic") or ""
    return {level: int(size) for level, size in _HWLOC_CACHE_RE.findall(topo)}


def testbed_caches(records) -> dict[str, dict[str, int]]:
    """Per testbed (the folder of its ``provenance.json``), the cache sizes of
    its host (:func:`cache_sizes`)."""
    return {Path(p).parent.name: cache_sizes(json.loads(Path(p).read_text()).get("host")) for p in records}


def _detect_virt(flag: str) -> str | None:
    """systemd-detect-virt prints 'none' and exits 1 on bare metal."""
    if shutil.which("systemd-detect-virt") is None:
        return None
    try:
        res = subprocess.run(["systemd-detect-virt", flag], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() or None


@functools.lru_cache(maxsize=1)
def virtualization() -> dict:
    """What the host itself runs on (bare metal, a VM, a container), by several witnesses."""
    dmi = {}
    for name in ("sys_vendor", "product_name"):
        p = Path("/sys/class/dmi/id") / name
        try:
            dmi[name] = p.read_text().strip()
        except OSError:
            pass
    cpu = cpu_info()
    vm = _detect_virt("--vm")
    if vm is None:
        vendor = cpu["lscpu"].get("Hypervisor vendor")
        vm = vendor.lower() if vendor else ("unknown" if cpu["hypervisor_flag"] else "none")
    return {
        "vm": vm,
        "container": _detect_virt("--container"),
        "hypervisor_vendor": cpu["lscpu"].get("Hypervisor vendor"),
        "hypervisor_cpu_flag": cpu["hypervisor_flag"],
        "dmi": dmi,
    }


@functools.lru_cache(maxsize=1)
def kernel() -> dict:
    u = platform.uname()
    return {"release": u.release, "version": u.version, "machine": u.machine}


@functools.lru_cache(maxsize=1)
def package_versions(packages: tuple[str, ...] = STACK_PACKAGES) -> dict:
    out = _run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n", *packages])
    versions = {}
    for line in (out or "").splitlines():
        name, version, status = (line.split("\t") + ["", ""])[:3]
        if status.startswith("ii"):
            versions[name] = version
    return versions


#: The tool each MPI names itself with (:func:`hpcvirt.stack.mpi_identity`).
IDENTITY_TOOL = {"openmpi": "ompi_info", "mpich": "mpichversion"}


def _tool_stamp(mpi: str) -> dict | None:
    """:func:`program_stamp` of the identity tool of ``mpi``."""
    return program_stamp(IDENTITY_TOOL.get(mpi, ""))


def program_stamp(program: str) -> dict | None:
    """Which ``program`` ``PATH`` gives, and its inode, size and modification
    time (an upgrade or another installation changes them); None without one."""
    tool = shutil.which(program) if program else None
    if not tool:
        return None
    real = Path(tool).resolve()
    try:
        st = real.stat()
    except OSError:
        return None
    return {"tool": str(real), "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


@functools.lru_cache(maxsize=4)
def mpi_identity(mpi: str) -> dict:
    """Name and version of a host MPI library, from its own tools
    (:func:`hpcvirt.stack.mpi_identity`).  ``ompi_info`` takes about 0.25 s,
    which every measurement job paid twice (its build's key and its record):
    the answer is kept in ``<workdir>/mpi-identity/<mpi>.json`` together with
    the identity tool's path, inode, size and modification time, and asked
    again when any of them changes (an upgraded or another MPI on ``PATH``).
    An identity from the Debian package (no tool found) is not kept."""
    stamp = _tool_stamp(mpi)
    cache = paths.workdir() / "mpi-identity" / f"{mpi}.json"
    if stamp is not None:
        try:
            kept = json.loads(cache.read_text())
            if kept.get("stamp") == stamp and isinstance(kept.get("identity"), dict):
                return kept["identity"]
        except (OSError, ValueError):
            pass
    ident = _mpi_identity((), mpi, timeout=20)
    if stamp is not None and ident.get("version") and stamp == _tool_stamp(mpi):
        try:
            write_json(cache, {"stamp": stamp, "identity": ident})
        except OSError:
            pass        # a read-only work directory: asked again next time
    return ident


@functools.lru_cache(maxsize=1)
def host_id() -> str | None:
    """This machine's identity, not its secret: the first 16 hex digits of
    the sha256 of ``/etc/machine-id`` (None without one)."""
    try:
        mid = Path("/etc/machine-id").read_text().strip()
    except OSError:
        return None
    return hashlib.sha256(mid.encode()).hexdigest()[:16] if mid else None


def host_facts() -> dict:
    return {
        "hostname": platform.node(),
        "host_id": host_id(),
        "cpu": cpu_info(),
        "virtualization": virtualization(),
        "kernel": kernel(),
        "packages": package_versions(),
    }


def path_roots() -> list[tuple[str, str]]:
    """(absolute directory, what a record writes for it) of every root a
    recorded path may lie under, the longest first: the source mirror, the
    build cache, the work directory (``$NAME``) and the clone (``""``:
    relative)."""
    from .sources import MIRROR_ENV, mirror_dir

    mirror = mirror_dir()
    roots = {str(paths.root()): "", str(paths.workdir().resolve()): "$HPCVIRT_WORKDIR",
             str(paths.build_cache().resolve()): f"${paths.BUILD_CACHE_ENV}"}
    if mirror is not None:
        roots[str(Path(mirror).resolve())] = f"${MIRROR_ENV}"
    return sorted(roots.items(), key=lambda kv: -len(kv[0]))


def portable(obj, roots: list[tuple[str, str]] | None = None):
    """``obj`` (a record) with every absolute path under one of
    :func:`path_roots` written relative to it (inside strings too, e.g. an
    argument ``-i/work/x/.hpcvirt/...``)."""
    roots = path_roots() if roots is None else roots
    if isinstance(obj, dict):
        return {k: portable(v, roots) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [portable(v, roots) for v in obj]
    if isinstance(obj, str) and "/" in obj:
        for directory, name in roots:
            if obj == directory:
                return name or "."
            obj = obj.replace(directory + "/", f"{name}/" if name else "")
    return obj


#: Prefixes of the variables that tune an MPI, its fabric or its threads (Open MPI's MCA and PMIx's, UCX,
#: MPICH's CVARs, libfabric, Intel MPI, OpenMP): a run inherits them from the job's environment (a site's
#: modules, a user's shell) beside the testbed's own, so they are recorded; nothing else of the environment is.
TUNING_PREFIXES = ("OMPI_MCA_", "PMIX_MCA_", "UCX_", "MPIR_CVAR_", "MPICH_", "HYDRA_", "FI_", "I_MPI_", "OMP_",
                   "GOMP_", "KMP_")


def inherited_tuning(environ: dict[str, str] | None = None, own: dict | None = None) -> dict[str, str]:
    """The tuning variables (:data:`TUNING_PREFIXES`) of ``environ`` (the process's) that a run inherits
    without the testbed setting them (``own``: the launch's environment, recorded as the command's)."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in sorted(environ) if k.startswith(TUNING_PREFIXES) and k not in (own or {})}


def record(*, launch: dict, status: dict, config_digest: str, context: dict) -> dict:
    """The provenance record written next to a raw output (:func:`portable`)."""
    from .runtime import PROCESS_ENV

    env = {k: v for k, v in launch.get("env", {}).items() if k not in PROCESS_ENV}
    rec = {
        "schema": "hpcvirt-provenance/1",
        "git": git_info(),
        "config_hash": config_digest,
        "command": {"argv": launch["argv"], "env": env, "isolation": launch.get("isolation"),
                    "inherited_env": inherited_tuning(own=launch.get("env", {}))},
        "server": {"argv": launch.get("server_argv")} if launch.get("server_argv") else None,
        "mpi": mpi_identity(launch.get("mpi", "")) if launch.get("mpi") not in ("", "none") else None,
        "host": host_facts(),
        "started_at": status.get("started_at"),
        "finished_at": status.get("finished_at"),
        "exit_code": status.get("exit_code"),
        "timed_out": status.get("timed_out"),
        "context": context,
    }
    return portable(rec)
