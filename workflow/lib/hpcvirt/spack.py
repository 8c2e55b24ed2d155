"""Spack, pinned: unpacked once per machine from its verified source, run
offline with a configuration of the project's own.

The pinned release (:data:`hpcvirt.sources.SOURCES` ``["spack"]``, verified
by its sha256) is unpacked into a prefix OUTSIDE the clone, named after the
version and the source's checksum, ``$HPCVIRT_OPT/spack-0.21.2-<sha256[:12]>``
(``HPCVIRT_OPT`` defaults to ``/opt/hpcvirt``, as for Apptainer); every later
clone on the machine reuses it and its install tree (``opt/spack`` inside it).
It is unpacked into a temporary folder next to the prefix, stamped
(``.hpcvirt-unpack.json``: the source record) and renamed into place, under a
lock.

Every Spack command runs through :func:`run`, isolated from whatever Spack
configuration the user has:

* ``SPACK_USER_CONFIG_PATH``, ``SPACK_SYSTEM_CONFIG_PATH`` and
  ``SPACK_USER_CACHE_PATH`` point into ``<workdir>/spack/`` (empty scopes and
  a cache of the clone's own);
* ``SPACK_PYTHON`` is this Python, which has ``clingo`` (pinned in
  requirements.lock), and ``patchelf`` is Debian's: Spack never bootstraps
  (``bootstrap:: sources: []``, nothing to bootstrap from);
* a configuration scope of the project's (``-C <workdir>/spack/scope``) sets
  ``mirrors::`` to the local source mirror only, so nothing is downloaded.

The source mirror (``<workdir>/spack/mirror``) is laid out the way Spack
looks for archives, ``<package>/<package>-<version>.tar.gz``, from the
pinned sources, each taken by :func:`hpcvirt.sources.fetch` (verified against
its two acceptable checksums) and linked into place.  Spack checks one
checksum per version, and that checksum is part of a spec's DAG hash: the
project's recipes (``spack-envs/repo``) read which copy to expect from
``HPCVIRT_SPACK_COPY_<PACKAGE>`` (default: the official archive), which
:func:`run` sets from the mirror's records (``<mirror>/copies.json``) and
:func:`concretize` from :func:`archives`: a site's stack is locked for the
official archives, the laptop stack for the copies the mirror holds.

Command line: ``python -m hpcvirt.spack unpack | mirror | concretize ENV |
install ENV | spack ARGS...`` (``ENV``: a folder of ``spack-envs/``).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from . import atomic, paths, sources
from .apptainer import OPT_ENV

SOURCE = "spack"
STAMP = ".hpcvirt-unpack.json"

def _mirrored() -> dict[str, tuple[str, str]]:
    """The Spack packages whose archives the project pins, as the benchmarks declare them (``build =
    PinnedSource(..., spack_package=...)``): package -> (pinned source, Spack version).  A version that is a
    commit is its first 8 digits (a 40-digit version would make Spack fetch with git)."""
    from .benchmarks import REGISTRY

    decls = [d for d in REGISTRY.pinned() if d.spack_package]
    return {d.spack_package: (d.name, d.version[:8] if re.fullmatch(r"[0-9a-f]{40}", d.version) else d.version)
            for d in decls}


#: package -> (pinned source, Spack version) of every package whose archive the project pins (:func:`_mirrored`).
MIRRORED = _mirrored()

#: Debian's MPICH shares /usr with Open MPI (``/usr/bin/mpicc`` is Open MPI's wrapper): Spack gets a prefix of
#: its own for it, links to the ``*.mpich`` tools and MPICH's headers and libraries.  The laptop stack's
#: spack.yaml names this prefix (below ``HPCVIRT_OPT``).
DEBIAN_MPICH = {
    **{f"bin/{t}": f"/usr/bin/{w}.mpich" for t, w in (
        ("mpicc", "mpicc"), ("mpicxx", "mpicxx"), ("mpic++", "mpicxx"), ("mpif77", "mpif77"), ("mpif90", "mpif90"),
        ("mpifort", "mpifort"), ("mpiexec", "mpiexec"), ("mpirun", "mpirun"))},
    "include": "/usr/include/x86_64-linux-gnu/mpich",
    **{f"lib/lib{n}.so": f"/usr/lib/x86_64-linux-gnu/lib{n}.so" for n in ("mpich", "mpichcxx", "mpichfort")},
}
DEBIAN_MPICH_DIR = "debian-mpich-4.0.2"


class SpackError(RuntimeError):
    """Spack cannot be unpacked, configured or run."""


def _say(msg: str) -> None:
    print(f"hpcvirt.spack: {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ where
def opt_root() -> Path:
    from .apptainer import ApptainerError, opt_root as _opt   # one rule for HPCVIRT_OPT

    try:
        return _opt()
    except ApptainerError as exc:
        raise SpackError(str(exc)) from None


def prefix(sha256: str | None = None) -> Path:
    """The folder the pinned Spack is (or would be) unpacked into."""
    src = sources.SOURCES[SOURCE]
    return opt_root() / f"spack-{src.version}-{(sha256 or src.files[0][1])[:12]}"


def envs_dir() -> Path:
    return paths.root() / "spack-envs"


def state_dir() -> Path:
    """The clone's Spack state: configuration scopes, cache, mirror (``<workdir>/spack``)."""
    return paths.workdir() / "spack"


def env_path(name: str) -> Path:
    """``spack-envs/<name>``, validated (the name reaches Spack's command line)."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name or ""):
        raise SpackError(f"environment name {name!r}: expected lower-case letters, digits, _ and -")
    d = envs_dir() / name
    if not (d / "spack.yaml").is_file():
        found = sorted(p.parent.name for p in envs_dir().glob("*/spack.yaml"))
        raise SpackError(f"{d / 'spack.yaml'} does not exist; environments: {found}")
    return d


# ----------------------------------------------------------------- unpack
def unpack(*, mirror: str | os.PathLike | None = None) -> Path:
    """The unpacked pinned Spack (unpacking it once per machine): its prefix."""
    src_rec = sources.fetch(SOURCE, mirror=mirror)
    final = prefix(src_rec["sha256"])
    if (final / STAMP).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / STAMP).is_file():
            return final
        if final.exists():
            raise SpackError(f"{final} exists but has no {STAMP}: an incomplete or foreign folder; remove it")
        work = Path(tempfile.mkdtemp(prefix=f".{final.name}.unpack.", dir=final.parent))
        try:
            with tarfile.open(src_rec["path"]) as tf:
                tf.extractall(work, filter="tar")      # Spack's tree has symbolic links of its own
            top = work / f"spack-{src_rec['version']}"
            if not (top / "bin" / "spack").is_file():
                raise SpackError(f"{src_rec['file']}: no spack-{src_rec['version']}/bin/spack inside")
            (top / STAMP).write_text(json.dumps({"source": src_rec, "unpacked": time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1) + "\n")
            os.rename(top, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    _say(f"Spack {src_rec['version']} unpacked into {final} from {src_rec['file']} ({src_rec['copy']})")
    return final


# ----------------------------------------------------------------- mirror
def copy_env_var(package: str) -> str:
    """The variable a recipe of ``spack-envs/repo`` reads to know which copy of its source the mirror holds."""
    return "HPCVIRT_SPACK_COPY_" + package.upper().replace("-", "_")


def build_mirror(*, mirror: str | os.PathLike | None = None, dest: Path | None = None) -> dict[str, dict]:
    """Lay out the pinned sources as a Spack mirror; the fetch record of each package's file."""
    dest = dest or state_dir() / "mirror"
    records = {}
    for pkg, (name, version) in MIRRORED.items():
        rec = sources.fetch(name, mirror=mirror)
        target = dest / pkg / f"{pkg}-{version}.tar.gz"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not (target.is_file() and sources.sha256_of(target) == rec["sha256"]):
            with atomic.atomic_path(target) as tmp:
                tmp.unlink()
                try:
                    os.link(rec["path"], tmp)
                except OSError:
                    shutil.copyfile(rec["path"], tmp)
        records[pkg] = {**{k: rec[k] for k in ("name", "version", "file", "sha256", "copy")},
                        "mirror_file": str(target.relative_to(dest))}
    atomic.write_json(dest / "copies.json", records)
    return records


def debian_mpich_prefix() -> Path:
    """The prefix of links that stands for Debian's MPICH (made when missing)."""
    d = opt_root() / DEBIAN_MPICH_DIR
    for rel, target in DEBIAN_MPICH.items():
        link = d / rel
        if link.is_symlink() and os.readlink(link) == target:
            continue
        if not os.path.exists(target):
            raise SpackError(f"{target} is missing: Debian's MPICH (libmpich-dev, mpich) is not installed")
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink():
            link.unlink()
        os.symlink(target, link)
    return d


# -------------------------------------------------------------------- run
SCOPE_FILES = {
    # no source to bootstrap from: clingo comes from SPACK_PYTHON, patchelf from Debian, or Spack stops
    # (``enable: false`` would stop it before it even imports clingo)
    "bootstrap.yaml": "bootstrap::\n  enable: true\n  sources: []\n  trusted: {{}}\n",
    # template_dirs: the project's template for `spack containerize` (containers/templates/container/hpcvirt.def)
    "config.yaml": "config:\n  build_jobs: {jobs}\n  template_dirs:\n  - {templates}\n",
    "mirrors.yaml": "mirrors::\n  hpcvirt-sources:\n    url: file://{mirror}\n",
}


def environment(copies: dict[str, str]) -> dict:
    """The process environment of a Spack command: isolated scopes, this Python, the mirror's copies."""
    st = state_dir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACK_") and k != "SPACK_ROOT"}
    for var, sub in (("SPACK_USER_CONFIG_PATH", "user-config"), ("SPACK_SYSTEM_CONFIG_PATH", "system-config"),
                     ("SPACK_USER_CACHE_PATH", "user-cache")):
        (st / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(st / sub)
    env["SPACK_PYTHON"] = sys.executable
    for pkg in MIRRORED:
        env[copy_env_var(pkg)] = copies.get(pkg, "official archive")
    return env


def _scope(mirror_dir: Path) -> Path:
    scope = state_dir() / "scope"
    for name, text in SCOPE_FILES.items():
        want = text.format(mirror=mirror_dir, jobs=max(1, min(os.cpu_count() or 1, 16)),
                           templates=paths.root() / "containers" / "templates")
        f = scope / name
        if not (f.is_file() and f.read_text() == want):
            atomic.write_text(f, want)
    return scope


def check_clingo() -> str:
    try:
        import clingo
    except ImportError:
        raise SpackError(f"{sys.executable} has no clingo (Spack's solver): install requirements.lock "
                         f"(workflow/scripts/install-deps.sh)") from None
    return clingo.__version__


def command(args: list[str], *, env_dir: Path | None = None, copies: dict[str, str] | None = None,
            mirror=None) -> tuple[list[str], dict]:
    """(argv, process environment) of ``spack ARGS`` run the project's way.  ``copies``: package -> which copy
    of its source the recipes expect (default: what the clone's mirror holds, else the official archives)."""
    check_clingo()
    spack_root = unpack(mirror=mirror)
    mirror_dir = state_dir() / "mirror"
    if copies is None:
        try:
            copies = {k: v["copy"] for k, v in json.loads((mirror_dir / "copies.json").read_text()).items()}
        except (OSError, ValueError, KeyError):
            copies = {}
    argv = [str(spack_root / "bin" / "spack"), "-C", str(_scope(mirror_dir))]
    if env_dir is not None:
        argv += ["-e", str(env_dir)]
    return argv + list(args), environment(copies)


def run(args: list[str], *, env_dir: Path | None = None, copies: dict[str, str] | None = None, mirror=None,
        check: bool = True, capture: bool = False) -> subprocess.CompletedProcess:
    argv, env = command(args, env_dir=env_dir, copies=copies, mirror=mirror)
    cp = subprocess.run(argv, env=env, text=True, capture_output=capture)
    if check and cp.returncode != 0:
        detail = f":\n{(cp.stderr or '')[-3000:]}" if capture else ""
        raise SpackError(f"`spack {' '.join(args)}` failed (exit {cp.returncode}){detail}")
    return cp


def lock_hashes(lock: Path) -> dict[str, str]:
    """Root spec -> DAG hash of a ``spack.lock``."""
    data = json.loads(Path(lock).read_text())
    return {r["spec"]: r["hash"] for r in data["roots"]}


#: The stacks a site builds, downloading the official archives: their locks are concretized for those.  The
#: others (the laptop stack) are built offline from the source mirror: their locks are for the mirror's copies.
SITE_STACKS = ("openmpi-ucx", "mpich")


def archives(env_dir: Path, *, mirror=None) -> dict[str, str]:
    """Package -> which copy of its source the lock of ``env_dir`` is for (the archive's checksum is part of
    Spack's DAG hash): the official archives for a site's stack, else the copies the mirror holds (the
    mirror is laid out first, every file verified)."""
    if env_dir.name in SITE_STACKS:
        return {pkg: "official archive" for pkg in MIRRORED}
    return {pkg: rec["copy"] for pkg, rec in build_mirror(mirror=mirror).items()}


def concretize(env_dir: Path, *, mirror=None) -> dict:
    """Concretize ``env_dir`` from scratch (``-f``), writing its spack.lock: the roots' hashes, which copies of
    the sources they are for, and the time taken."""
    copies = archives(env_dir, mirror=mirror)
    t0 = time.monotonic()
    run(["concretize", "-f"], env_dir=env_dir, copies=copies, mirror=mirror, capture=True)
    return {"seconds": round(time.monotonic() - t0, 1), "copies": copies,
            "roots": lock_hashes(env_dir / "spack.lock")}


def _check_installable(env_dir: Path) -> None:
    """An environment can be installed here: it has its lock, and its MPICH external is the prefix made here."""
    if not (env_dir / "spack.lock").is_file():
        raise SpackError(f"{env_dir / 'spack.lock'} is missing: concretize first (python -m hpcvirt.spack "
                         f"concretize {env_dir.name})")
    manifest = (env_dir / "spack.yaml").read_text()
    if DEBIAN_MPICH_DIR in manifest and f"prefix: {debian_mpich_prefix()}\n" not in manifest:
        raise SpackError(f"{env_dir / 'spack.yaml'}: MPICH's external prefix is not {debian_mpich_prefix()}, "
                         f"the folder of links made for it here ({OPT_ENV}={opt_root()})")


def install(env_dir: Path, *, mirror=None, jobs: int | None = None) -> dict:
    """Install ``env_dir`` from its committed spack.lock, offline from the source mirror (every archive
    verified twice: by hpcvirt.sources, then by Spack against the recipe's checksum of that copy): the
    copies used, the time taken and each root's install prefix."""
    _check_installable(env_dir)
    copies = archives(env_dir, mirror=mirror)
    t0 = time.monotonic()
    args = ["install", "--fail-fast"] + ([f"-j{jobs}"] if jobs else [])
    run(args, env_dir=env_dir, copies=copies, mirror=mirror)
    seconds = round(time.monotonic() - t0, 1)
    prefixes = installed(env_dir, mirror=mirror)
    return {"seconds": seconds, "copies": copies,
            "roots": {spec: {"hash": h, "prefix": prefixes.get(h)} for spec, h in
                      lock_hashes(env_dir / "spack.lock").items()}}


def lock_roots(env_dir: Path) -> list[dict]:
    """The roots of ``env_dir``'s spack.lock: ``{"spec", "hash", "name", "deps"}`` (``deps``: the names of every
    package in the root's DAG, e.g. its MPI)."""
    data = json.loads((env_dir / "spack.lock").read_text())
    nodes = data["concrete_specs"]          # DAG hash -> node

    def names(h: str, seen: set) -> set:
        if h in seen or h not in nodes:
            return set()
        seen.add(h)
        out = {nodes[h]["name"]}
        for d in nodes[h].get("dependencies", []):
            out |= names(d["hash"], seen)
        return out

    return [{"spec": r["spec"], "hash": r["hash"], "name": nodes[r["hash"]]["name"],
             "deps": sorted(names(r["hash"], set()) - {nodes[r["hash"]]["name"]})} for r in data["roots"]]


def installed(env_dir: Path, *, mirror=None) -> dict[str, str]:
    """DAG hash -> install prefix of what of ``env_dir`` is installed in the install tree."""
    copies = archives(env_dir, mirror=mirror)
    found = run(["find", "--format", "{hash} {prefix}"], env_dir=env_dir, copies=copies, mirror=mirror,
                capture=True).stdout.split()
    return dict(zip(found[::2], found[1::2]))


def install_roots(env_dir: Path, hashes: list[str], *, jobs: int = 2, log: Path, mirror=None) -> dict:
    """Install the roots ``hashes`` of ``env_dir``'s committed spack.lock (with what they depend on), offline
    from the source mirror, ``jobs`` packages at a time: Spack writes a Makefile of the DAG (``spack env
    depfile``, Spack's own way to install an environment in parallel) and ``make -j`` runs one ``spack
    install --only=package`` per package.  Spack's output goes to ``log`` (a package's start and end also to
    standard error).  Returns ``{"seconds", "built": [hashes], "prefixes", "log"}`` (``log``: None if none)."""
    _check_installable(env_dir)
    roots = {r["hash"] for r in lock_roots(env_dir)}
    unknown = [h for h in hashes if h not in roots]
    if unknown:
        raise SpackError(f"{env_dir / 'spack.lock'} has no root {unknown}")
    copies = archives(env_dir, mirror=mirror)
    have = installed(env_dir, mirror=mirror)
    todo = [h for h in hashes if h not in have]
    t0 = time.monotonic()
    if todo:
        if shutil.which("make") is None:
            raise SpackError("GNU make is missing (apt-get install make)")
        # the repositories' provider index (about 80 s), alone: make's Spack processes wait for it at most 120 s
        run(["providers", "mpi"], env_dir=env_dir, copies=copies, mirror=mirror, capture=True)
        with tempfile.TemporaryDirectory(prefix=".depfile.", dir=state_dir()) as tmp:
            depfile = Path(tmp) / "Makefile"
            run(["env", "depfile", "--make-prefix", str(Path(tmp) / "targets"), "-o", str(depfile),
                 *[f"/{h}" for h in todo]], env_dir=env_dir, copies=copies, mirror=mirror, capture=True)
            argv, env = command([], env_dir=None, copies=copies, mirror=mirror)
            spack_cmd = " ".join(shlex.quote(a) for a in argv) + " -c config:install_status:false"
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "w") as fh:
                fh.write(f"# spack env depfile + make -j{jobs}: {env_dir.name} roots {' '.join(todo)}\n")
                fh.flush()
                proc = subprocess.Popen(["make", "-f", str(depfile), f"-j{max(1, jobs)}", "--no-print-directory",
                                         f"SPACK={spack_cmd}"], cwd=tmp, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
                for line in proc.stdout:
                    fh.write(line)
                    fh.flush()
                    if line.startswith("==> ") and ("Installing " in line or "Successfully installed" in line
                                                    or "Error" in line):
                        _say(line[4:].rstrip())
                if proc.wait() != 0:
                    raise SpackError(f"installing {env_dir.name} failed (make exit {proc.returncode}); "
                                     f"Spack's output: {log}")
        have = installed(env_dir, mirror=mirror)
    missing = [h for h in hashes if h not in have]
    if missing:
        raise SpackError(f"after installing, {missing} of {env_dir / 'spack.lock'} are still not installed; "
                         f"Spack's output: {log}")
    return {"seconds": round(time.monotonic() - t0, 1), "built": todo, "prefixes": {h: have[h] for h in hashes},
            "log": str(log) if todo else None}


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m hpcvirt.spack", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("unpack", help="unpack the pinned Spack once per machine; print its prefix")
    sub.add_parser("mirror", help="lay out the pinned sources as a Spack mirror; print the copies (JSON)")
    c = sub.add_parser("concretize", help="concretize spack-envs/ENV from scratch, writing its spack.lock")
    c.add_argument("env")
    i = sub.add_parser("install", help="install spack-envs/ENV from its spack.lock, offline from the mirror")
    i.add_argument("env")
    s = sub.add_parser("spack", help="run spack with the project's configuration (e.g. -e DIR find)")
    s.add_argument("args", nargs="*", help="spack's arguments, options included")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["spack"]:       # everything after it is Spack's, options included
        args = argparse.Namespace(cmd="spack", args=argv[1:])
    else:
        args = ap.parse_args(argv)
    try:
        if args.cmd == "unpack":
            print(unpack())
        elif args.cmd == "mirror":
            print(json.dumps(build_mirror(), indent=1))
        elif args.cmd == "concretize":
            rec = concretize(env_path(args.env))
            print(json.dumps(rec, indent=1))
        elif args.cmd == "install":
            print(json.dumps(install(env_path(args.env)), indent=1))
        else:
            return run(args.args, check=False).returncode
    except (SpackError, sources.SourceError) as exc:
        _say(f"error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
