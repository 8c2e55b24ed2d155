"""The pinned benchmark suites (NPB, IMB, OSU) and MILC, once per MPI, built by
the project's pinned Spack from the committed lock of the laptop stack
(``spack-envs/laptop/spack.lock``), offline from the source mirror
(:mod:`hpcvirt.spack`; the recipes, flags and patches are the project's Spack
recipes, ``spack-envs/repo``).  Which suites there are, and what each builds,
the benchmarks declare (their ``build``, a
:class:`~hpcvirt.benchmarks.PinnedSource` with a ``suite``): this module
names none.

A suite's build for one MPI is the lock's root that builds the suite's Spack
package against that MPI.  Its *build key* is that root's Spack DAG hash
(first 16 digits; for NPB with Open MPI combined with the sha256 of the
project's profiler source, built beside it).  Builds are staged in the cache::

    <cache>/<suite>-<mpi>-<key>/              the build testbeds name
        bin/ or libexec/... share/...         the Spack install prefix's files (hard links)
        lib/...                               a library of the project's that a benchmark builds into it
                                              (``library``: NPB's folder for Open MPI has the PMPI profiler)
        spack-spec.json                       Spack's record of the spec (its .spack/spec.json)
        build.json                            its provenance (below)

where ``<cache>`` is ``$HPCVIRT_BUILD_CACHE`` or ``<workdir>/suites``, and
the testbed files name them through a stable link in the checkout,
``.hpcvirt/suites/<suite>-<mpi>`` -> that directory, which :func:`ensure`
points at the build of the current key (installing it with Spack first when
it is missing).  Staged, not linked to Spack's prefix: the folder, with the
profiler and the record, is what a guest image copies (the container image
gets its own install from Spack, :mod:`hpcvirt.image`).  A failed install
leaves only Spack's output, ``<suite>-<mpi>-<key>.failed.log`` beside the
cache.  A lock file serialises the builds of one suite and MPI; another, Spack's installs.

``build.json`` records the suite, the source file, its checksum and which
copy was used (official archive or mirror copy), the Spack spec, its DAG hash
and the sha256 of the lock, the compilers and their versions, the MPI, the
time Spack took and the sha256 of every binary.  The same builds are copied
into the guest image (``workflow/scripts/build-guest-image.sh``).

Command line: ``python -m hpcvirt.build [--mpi M ...] [SUITE ...]`` builds (or reuses) and
prints ``<suite> <mpi> <directory>`` per build; ``--keys`` prints the build keys only.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import paths, sources
from . import spack as spack_mod
from .staging import binaries, stage


#: The Spack environment (a folder of ``spack-envs/``) the suites are built from.
STACK = "laptop"

#: Each MPI's compiler wrappers (Debian names; the compilers behind them are recorded with each build).
WRAPPERS = {
    "openmpi": {"cc": "mpicc.openmpi", "cxx": "mpicxx.openmpi", "fc": "mpif90.openmpi"},
    "mpich": {"cc": "mpicc.mpich", "cxx": "mpicxx.mpich", "fc": "mpif90.mpich"},
}


#: A testbed ``binary`` that names the project's build of a suite: on the
#: host (``.hpcvirt/suites/``) or in the guest image (``/opt/hpcvirt/suites/``).
PROJECT_BINARY_RE = re.compile(r"^(?P<where>\.hpcvirt|/opt/hpcvirt)/suites/(?P<suite>[a-z]+)-(?P<mpi>openmpi|mpich)(?:/|$)")
GUEST_PREFIX = "/opt/hpcvirt"


def project_build(binary: str) -> tuple[str, str] | None:
    """(suite, mpi) if a testbed's ``binary`` is the project's build, else None."""
    m = PROJECT_BINARY_RE.match(binary)
    return (m["suite"], m["mpi"]) if m and m["suite"] in RECIPES else None


def in_guest(binary: str) -> bool:
    return binary.startswith(GUEST_PREFIX + "/")


class BuildError(RuntimeError):
    """A suite could not be built; the message names the log."""


@dataclass(frozen=True)
class Recipe:
    """A suite: its pinned source, the Spack package of the stack that builds it, where its binaries are
    (what a testbed's ``binary`` names after ``.hpcvirt/suites/<suite>-<mpi>/``), what it installs, and the
    libraries of the project's compiled into it."""
    suite: str
    source: str              # a key of hpcvirt.sources.SOURCES
    package: str             # the Spack package (spack-envs/repo)
    binary_dir: str
    targets: tuple[str, ...] = ()
    libraries: tuple = ()    # hpcvirt.benchmarks.Library

    def describe(self) -> dict:
        return {"suite": self.suite, "source": self.source, "spack_package": self.package,
                "stack": f"spack-envs/{STACK}",
                "targets": [*self.targets, *(f"{lib.lib} ({lib.mpi} only)" for lib in self.libraries)]}

    def libraries_for(self, mpi: str) -> tuple:
        return tuple(lib for lib in self.libraries if lib.mpi == mpi)


def recipes() -> dict[str, Recipe]:
    """The suites the benchmarks declare (``build = PinnedSource(..., suite=...)``): one recipe per suite, from
    the declaration that names its Spack package, with every library a benchmark builds into it."""
    from .benchmarks import REGISTRY

    decls = [d for d in REGISTRY.pinned() if d.suite]
    out = {}
    for d in decls:
        if d.spack_package:
            if d.suite in out:
                raise BuildError(f"suite {d.suite!r} is declared twice with a Spack package")
            libs = tuple(o.library for o in decls if o.suite == d.suite and o.library)
            out[d.suite] = Recipe(d.suite, d.name, d.spack_package, d.binary_dir, d.targets, libs)
    missing = sorted({d.suite for d in decls} - set(out))
    if missing:
        raise BuildError(f"suites {missing} are used but no benchmark declares their Spack package")
    return dict(sorted(out.items()))


RECIPES = recipes()


# ------------------------------------------------------------------ tools
def _version_line(cmd: str) -> str:
    try:
        cp = subprocess.run([cmd, "--version"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise BuildError(f"compiler wrapper {cmd} not found (install the MPI's -dev package and gcc, g++, "
                         f"gfortran: workflow/envs/debian-packages.txt)") from None
    return (cp.stdout or cp.stderr).strip().splitlines()[0] if (cp.stdout or cp.stderr).strip() else "unknown"


def _mpi_version(mpi: str) -> str:
    from .provenance import mpi_identity     # kept between jobs (it is asked for every measurement)

    return mpi_identity(mpi).get("version") or "unknown"


def toolchain(mpi: str) -> dict:
    """The host's compilers behind the MPI's wrappers (versions) and the MPI's version."""
    if mpi not in WRAPPERS:
        raise BuildError(f"unknown MPI {mpi!r}; the project builds for {sorted(WRAPPERS)}")
    return {"mpi": mpi, "mpi_version": _mpi_version(mpi),
            "compilers": {lang: {"wrapper": w, "version": _version_line(w)} for lang, w in WRAPPERS[mpi].items()}}


build_cache = paths.build_cache


def link_path(suite: str, mpi: str) -> Path:
    """The stable name testbed files use: ``.hpcvirt/suites/<suite>-<mpi>``."""
    return paths.root() / ".hpcvirt" / "suites" / f"{suite}-{mpi}"


# ------------------------------------------------------------------ plan
def stack_dir() -> Path:
    return spack_mod.env_path(STACK)


def root_of(suite: str, mpi: str, env_dir: Path | None = None) -> dict:
    """The root of the stack's spack.lock that builds ``suite`` against ``mpi``: ``{"spec", "hash", ...}``."""
    try:
        recipe = RECIPES[suite]
    except KeyError:
        raise BuildError(f"no build recipe for {suite!r}; recipes: {sorted(RECIPES)}") from None
    if mpi not in WRAPPERS:
        raise BuildError(f"unknown MPI {mpi!r}; the project builds for {sorted(WRAPPERS)}")
    env_dir = env_dir or stack_dir()
    found = [r for r in spack_mod.lock_roots(env_dir) if r["name"] == recipe.package and mpi in r["deps"]]
    if len(found) != 1:
        raise BuildError(f"{env_dir / 'spack.lock'}: expected one root {recipe.package} with {mpi}, "
                         f"found {[r['spec'] for r in found]}")
    return found[0]


def _extras(suite: str, mpi: str) -> dict[str, str]:
    """The project's own sources built into a suite's folder: path -> sha256."""
    return {lib.source: sources.sha256_of(_source(lib)) for lib in RECIPES[suite].libraries_for(mpi)}


def _source(lib) -> Path:
    """A library's source, in the checkout this module belongs to (``workflow/src/...``)."""
    return Path(__file__).resolve().parents[3] / lib.source


def build_key(spack_hash: str, extras: dict[str, str]) -> str:
    if not extras:
        return spack_hash[:16]
    return hashlib.sha256(json.dumps({"spack": spack_hash, "extras": extras}, sort_keys=True).encode()).hexdigest()[:16]


def plan(suite: str, mpi: str) -> tuple[Recipe, dict, str]:
    """(recipe, the lock's root, build key) of a build, without building."""
    root = root_of(suite, mpi)
    return RECIPES[suite], root, build_key(root["hash"], _extras(suite, mpi))


# ------------------------------------------------------------------ build
def _point(link: Path, target: Path) -> None:
    """Make ``link`` a symlink to ``target``, atomically."""
    link.parent.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(target, link.parent)
    if link.is_symlink() and os.readlink(link) == rel:
        return
    tmp = link.with_name(f".{link.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(rel, tmp)
    os.replace(tmp, link)


def _install(hashes: list[str], log: Path, *, mirror=None, jobs: int = 2) -> dict:
    """Install roots of the stack with Spack (one Spack install at a time on this machine)."""
    cache = build_cache()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".spack-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return spack_mod.install_roots(stack_dir(), hashes, jobs=jobs, log=log, mirror=mirror)
        except (spack_mod.SpackError, sources.SourceError) as exc:
            raise BuildError(str(exc)) from None


def ensure(suite: str, mpi: str, *, mirror=None, quiet: bool = False, jobs: int = 2,
           installed: dict | None = None) -> dict:
    """The build record of ``suite`` for ``mpi`` (installing and staging it if missing),
    with ``dir`` (the build) and ``link`` (the stable name) added.  ``installed``: what an install of
    :func:`_install` just returned (its roots are not looked up again)."""
    recipe, root, key = plan(suite, mpi)
    cache = build_cache()
    cache.mkdir(parents=True, exist_ok=True)
    out = cache / f"{suite}-{mpi}-{key}"
    with open(cache / f".{suite}-{mpi}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "build.json").is_file():
            _build(recipe, root, key, out, mpi, quiet, mirror=mirror, jobs=jobs, installed=installed)
    _point(link_path(suite, mpi), out)
    rec = json.loads((out / "build.json").read_text())
    return {**rec, "dir": str(out), "link": str(link_path(suite, mpi))}


def _build(recipe: Recipe, root: dict, key: str, out: Path, mpi: str, quiet: bool, *, mirror=None,
           jobs: int = 2, installed: dict | None = None) -> None:
    failed_log = out.with_name(out.name + ".failed.log")
    tools = toolchain(mpi)
    lock_file = stack_dir() / "spack.lock"
    mpi_node = next((n for n in json.loads(lock_file.read_text())["concrete_specs"].values() if n["name"] == mpi),
                    None)
    if mpi_node and tools["mpi_version"] not in ("unknown", mpi_node["version"]):
        raise BuildError(f"{lock_file} was concretized for {mpi} {mpi_node['version']}, this machine has "
                         f"{tools['mpi_version']}: concretize again (python -m hpcvirt.spack concretize {STACK})")
    src = sources.fetch(recipe.source, mirror=mirror)
    if not quiet:
        print(f"hpcvirt.build: {recipe.suite} for {mpi}: Spack {root['spec']} /{root['hash'][:7]}",
              file=sys.stderr, flush=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        tmp = Path(tmp)
        dest, log_path = tmp / "install", tmp / "build.log"
        try:
            done = installed if root["hash"] in (installed or {}).get("prefixes", {}) else _install(
                [root["hash"]], log_path, mirror=mirror, jobs=jobs)
            dest.mkdir()
            stage(Path(done["prefixes"][root["hash"]]), dest)
            for lib in recipe.libraries_for(mpi):
                _compile_library(lib, mpi, dest, log_path)
        except (BuildError, OSError, subprocess.TimeoutExpired) as exc:
            if log_path.is_file():
                shutil.copyfile(log_path, failed_log)
            tail = "\n".join("    " + ln for ln in (log_path.read_text(errors="replace").splitlines()[-20:]
                                                    if log_path.is_file() else []))
            raise BuildError(f"building {recipe.suite} for {mpi} failed: {exc}\n  full log: {failed_log}\n"
                             f"  last lines:\n{tail}") from None
        if not log_path.is_file() and Path(done.get("log") or "/nonexistent").is_file():
            shutil.copyfile(done["log"], log_path)        # the install of several roots at once
        if log_path.is_file():
            shutil.copyfile(log_path, dest / "build.log")
        record = {
            "suite": recipe.suite, "source": {k: src[k] for k in ("name", "version", "file", "sha256", "copy", "from")},
            "recipe": recipe.describe(), **tools, "key": key,
            "spack": {"version": sources.SOURCES[spack_mod.SOURCE].version, "stack": STACK, "spec": root["spec"],
                      "hash": root["hash"], "lock_sha256": sources.sha256_of(lock_file),
                      "prefix": done["prefixes"][root["hash"]], "built_here": root["hash"] in done["built"]},
            "extras": _extras(recipe.suite, mpi),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.monotonic() - start, 1),
            "binaries": binaries(dest),
        }
        (dest / "build.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        os.replace(dest, out)
    if failed_log.exists():
        failed_log.unlink()
    if not quiet:
        print(f"hpcvirt.build: {recipe.suite} for {mpi} ready in {record['build_seconds']} s: {out}",
              file=sys.stderr, flush=True)


def ensure_all(todo: list[tuple[str, str]], *, jobs: int = 2) -> dict[tuple[str, str], dict]:
    """:func:`ensure` of every build of ``todo``: one Spack install of every root missing, ``jobs`` packages
    at a time, then each is staged; progress on standard error."""
    started = time.monotonic()
    missing = [(s, m) for s, m in todo if not (build_cache() / f"{s}-{m}-{plan(s, m)[2]}" / "build.json").is_file()]
    installed = None
    if missing:
        print(f"hpcvirt.build: Spack installs {len(missing)} builds from spack-envs/{STACK}/spack.lock "
              f"({jobs} at a time; about 2-5 minutes the first time on a machine)", file=sys.stderr, flush=True)
        installed = _install([plan(s, m)[1]["hash"] for s, m in missing], build_cache() / "spack-install.log",
                             jobs=jobs)
    out = {}
    for i, (suite, mpi) in enumerate(todo, 1):
        out[(suite, mpi)] = ensure(suite, mpi, jobs=jobs, installed=installed)
        print(f"hpcvirt.build: [{i}/{len(todo)}] {suite} for {mpi} ready", file=sys.stderr, flush=True)
    if todo:
        print(f"hpcvirt.build: {len(todo)} builds ready in {time.monotonic() - started:.1f} s "
              f"(an installed or staged build takes no time)", file=sys.stderr, flush=True)
    return out


def _compile_library(lib, mpi: str, dest: Path, log_path: Path) -> None:
    """A library of the project's (a benchmark's ``library``), by the MPI's C wrapper into the build's folder."""
    (dest / lib.lib).parent.mkdir(parents=True, exist_ok=True)
    argv = [WRAPPERS[mpi]["cc"], "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o",
            str(dest / lib.lib), str(_source(lib)), *lib.link]
    with open(log_path, "a") as log:
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        cp = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=300)
    if cp.returncode != 0:
        raise BuildError(f"`{' '.join(argv)}` failed with exit code {cp.returncode}")


def _named_binaries(node) -> list[str]:
    """Every ``binary`` a testbed file names, at any depth."""
    if isinstance(node, dict):
        own = [node["binary"]] if isinstance(node.get("binary"), str) else []
        return own + [b for v in node.values() for b in _named_binaries(v)]
    return [b for v in node for b in _named_binaries(v)] if isinstance(node, list) else []


def named_builds(tb: dict) -> list[tuple[str, str]]:
    """The project's (suite, mpi) builds a testbed (its file's data) names."""
    return sorted({b for b in map(project_build, _named_binaries(tb)) if b})


def testbed_builds(select, testbed_dir: str | Path = "config/testbeds") -> list[tuple[str, str]]:
    """The project's builds named by the testbed files for which ``select(data)`` holds."""
    import yaml

    files = sorted((paths.root() / testbed_dir).glob("*.yaml"))
    return sorted({b for f in files if select(tb := yaml.safe_load(f.read_text()) or {}) for b in named_builds(tb)})


def image_builds(testbed_dir: str | Path = "config/testbeds") -> list[tuple[str, str]]:
    """The builds the guests' image carries: every project build that a testbed file of a kind whose image
    carries the suites names (the guests run Open MPI's), whatever the study, so that one image serves
    every study."""
    from .kinds import KINDS

    return testbed_builds(lambda tb: getattr(KINDS.get(tb.get("kind")), "image_carries_suites", False), testbed_dir)


def needed(study: dict, testbeds: dict[str, dict]) -> list[tuple[str, str]]:
    """The (suite, mpi) builds a validated study runs on the host: the
    project builds its configurations' testbed entries name, and those the
    guests' image carries when a testbed of such a kind is in the study."""
    from .benchmarks import REGISTRY
    from .kinds import KINDS
    from .matrix import configurations

    out: set[tuple[str, str]] = set()
    for c in configurations(study):
        tb, bench = testbeds[c.testbed], REGISTRY[c.benchmark]
        entry = (tb["mpi"][c.settings["mpi"]] if bench.mpi else tb).get(bench.name, {})
        if KINDS[tb["kind"]].image_carries_suites:
            out.update(image_builds())
        elif project_build(entry.get("binary", "")):
            out.add(project_build(entry["binary"]))
    return sorted(out)


def _overlay(base: dict, over: dict) -> dict:
    """``over`` merged into ``base`` key by key, as Snakemake merges ``--configfile`` files."""
    for k, v in over.items():
        base[k] = _overlay(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return base


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hpcvirt.build", description=__doc__.split("\n")[0])
    ap.add_argument("suites", nargs="*", help=f"suites (default: all of {sorted(RECIPES)})")
    ap.add_argument("--mpi", action="append", choices=sorted(WRAPPERS), help="MPI (repeatable; default: both)")
    ap.add_argument("--study", action="store_true",
                    help="build what the study (config/config.yaml and its testbeds) runs, instead")
    ap.add_argument("--configfile", nargs="+", default=[], metavar="FILE",
                    help="with --study: files merged over config/config.yaml, as snakemake --configfile does")
    ap.add_argument("--image", action="store_true",
                    help="build what the guests' image carries (the project builds the guests' testbed files name)")
    ap.add_argument("--jobs", "-j", type=int, default=1, help="Spack packages built at a time (default 1)")
    ap.add_argument("--keys", action="store_true",
                    help="print '<suite> <mpi> <suite>-<mpi>-<key>' per build, without building")
    args = ap.parse_args(argv)
    try:
        if args.study:
            import yaml

            from .config import ConfigError, load_study

            try:
                study = yaml.safe_load((paths.root() / "config/config.yaml").read_text())
                for f in args.configfile:
                    study = _overlay(study, yaml.safe_load(Path(f).read_text()) or {})
                todo = needed(*load_study(study))
            except (ConfigError, OSError, yaml.YAMLError) as exc:
                raise BuildError(str(exc)) from None
        elif args.image:
            todo = image_builds()
        else:
            todo = [(s, m) for s in (args.suites or sorted(RECIPES)) for m in (args.mpi or sorted(WRAPPERS))]
        for suite, _ in todo:
            if suite not in RECIPES:
                raise BuildError(f"no build recipe for {suite!r}; recipes: {sorted(RECIPES)}")
        if args.keys:
            for suite, mpi in todo:
                print(suite, mpi, f"{suite}-{mpi}-{plan(suite, mpi)[2]}", flush=True)
            return 0
        for (suite, mpi), rec in ensure_all(todo, jobs=args.jobs).items():
            print(suite, mpi, rec["dir"], flush=True)   # one "<suite> <mpi> <dir>" line each (read by scripts)
    except (BuildError, sources.SourceError) as exc:
        print(f"hpcvirt.build: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
