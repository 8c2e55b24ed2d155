"""Builds of the pinned benchmark suites (NPB, IMB, OSU) and of MILC, once per MPI.

A build takes its source from :func:`hpcvirt.sources.fetch` (mirror or
official URL, always verified) and compiles it with one MPI's compiler
wrappers.  It is made once per *build key*: the sha256 of the source
checksum, the recipe (flags, patches, targets), the compilers' versions and
the MPI's version.  Builds live in the cache::

    <cache>/<suite>-<mpi>-<key>/              the installed build
        bin/ or libexec/...                   the binaries
        build.json                            its provenance (below)
        build.log                             the compiler output

where ``<cache>`` is ``$HPCVIRT_BUILD_CACHE`` or ``<workdir>/suites``,
and the testbed files name them through a stable link in the checkout,
``.hpcvirt/suites/<suite>-<mpi>`` -> that directory, which
:func:`ensure` points at the build of the current key (building it first
when it is missing).  A build happens in a temporary directory and is
renamed into place only when complete: a failed build leaves nothing but
its log, kept beside the cache as ``<suite>-<mpi>-<key>.failed.log``.
Builds of one suite and MPI are serialised by a lock file.

``build.json`` records the suite and version, the source file, its
checksum and which copy was used (official archive or mirror copy), the
compilers and their versions, the MPI, the flags, the build-time patches,
the build time and the sha256 of every binary.  The same builds are copied
into the guest image (``workflow/scripts/build-guest-image.sh``).

Command line: ``python -m hpcvirt.build [--mpi M ...] [SUITE ...]`` builds
(or reuses) and prints ``<suite> <mpi> <directory>`` per build; ``--keys``
prints the build keys without building.
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
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import paths, sources

CACHE_ENV = paths.BUILD_CACHE_ENV

#: Bump when a recipe changes in a way its declared fields do not show.
RECIPE_FORMAT = 1

#: Each MPI's compiler wrappers (Debian names; a site's Spack build is named
#: in the testbed file instead of being built here).
WRAPPERS = {
    "openmpi": {"cc": "mpicc.openmpi", "cxx": "mpicxx.openmpi", "fc": "mpif90.openmpi"},
    "mpich": {"cc": "mpicc.mpich", "cxx": "mpicxx.mpich", "fc": "mpif90.mpich"},
}

#: NPB kernels and classes the project builds (the classes fit a laptop; a
#: site builds B/C with Spack and names them in its testbed file).
NPB_KERNELS = ("cg", "ep", "ft", "is", "lu", "mg")
NPB_CLASSES = ("S", "W", "A")

#: The project's communication profiler (a PMPI library for Open MPI), built
#: with NPB into ``lib/libhpcvirt-commprof.so`` of the Open MPI build.
COMMPROF_SRC = Path(__file__).resolve().parents[2] / "src" / "commprof.c"
COMMPROF_LIB = "lib/libhpcvirt-commprof.so"

#: Where a build's binaries are, below its directory (what a testbed's
#: ``binary`` names after ``.hpcvirt/suites/<suite>-<mpi>/``).
BINARY_DIRS = {"npb": "bin", "imb": "bin/IMB-MPI1", "osu": "libexec/osu-micro-benchmarks/mpi",
               "milc": "bin/su3_rhmd_hisq"}

#: MILC: the application folder and target built (``su3_rhmd_hisq``, the
#: RHMD HISQ program nearest the classic benchmark ``ks_imp_dyn/su3_rmd``,
#: which does not link at the pinned commit), its make variables (MILC's own
#: defaults -O3 and single precision, stated; CGTIME makes every solve print
#: its time and iterations), and the rational-function file of MILC's test
#: suite the project's input uses, installed with the binary.
MILC_APP, MILC_TARGET = "ks_imp_rhmc", "su3_rhmd_hisq"
MILC_MAKE_VARS = ("MPP=true", "PRECISION=1", "OPT=-O3", "CTIME=-DCGTIME")
MILC_RATIONALS = "ks_imp_rhmc/test/rationals.sample.su3_rhmc_hisq_f211"
#: MPI-1 functions removed in MPI-3 that ``generic/com_mpi.c`` calls, and their MPI-2 replacements.
MILC_MPI3_RENAMES = (("MPI_Errhandler_create", "MPI_Comm_create_errhandler"),
                     ("MPI_Errhandler_set", "MPI_Comm_set_errhandler"), ("MPI_Attr_get", "MPI_Comm_get_attr"))


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


IMAGE_BUILD_RE = re.compile(r"/opt/hpcvirt/suites/(?P<suite>[a-z]+)-(?P<mpi>openmpi|mpich)(?=/|$)")


def container_binds(argv: list[str]) -> list[str]:
    """Bind mounts (``host:image``) that put the project's builds a
    containerized rank runs (``/opt/hpcvirt/suites/<suite>-<mpi>/...`` in its
    argv, e.g. a binary or an ``LD_PRELOAD``) into the image: the host's build
    itself, so host and container run the same binaries.  The offline image
    has the empty mount points."""
    out = []
    for word in argv:
        for m in IMAGE_BUILD_RE.finditer(word):
            if m["suite"] in RECIPES:
                bind = f"{link_path(m['suite'], m['mpi']).resolve()}:{m.group(0)}"
                if bind not in out:
                    out.append(bind)
    return out


class BuildError(RuntimeError):
    """A suite could not be built; the message names the log."""


@dataclass(frozen=True)
class Recipe:
    suite: str
    source: str              # a key of hpcvirt.sources.SOURCES
    languages: tuple[str, ...]
    flags: str
    patches: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    extras: tuple[Path, ...] = ()  # the project's own sources built with the suite (workflow/src/...)

    def describe(self) -> dict:
        return {"suite": self.suite, "source": self.source, "languages": list(self.languages),
                "flags": self.flags, "patches": list(self.patches), "targets": list(self.targets),
                "extras": {f"workflow/src/{e.name}": sources.sha256_of(e) for e in self.extras}, "format": RECIPE_FORMAT}


RECIPES = {r.suite: r for r in (
    Recipe("npb", "NPB", ("fc", "cc"), "FFLAGS=-O3 -fallow-argument-mismatch CFLAGS=-O3",
           targets=tuple(f"{k}.{c}" for c in NPB_CLASSES for k in NPB_KERNELS)
           + ("lib/libhpcvirt-commprof.so (Open MPI only)",), extras=(COMMPROF_SRC,)),
    Recipe("imb", "IMB", ("cc", "cxx"), "-O2 (replaces IMB's default -O0; -g kept)",
           patches=("src_cpp/Makefile: '-g -O0' -> '-g -O2' in CFLAGS and CXXFLAGS",), targets=("IMB-MPI1",)),
    Recipe("osu", "osu-micro-benchmarks", ("cc", "cxx"), "CFLAGS=-O2 CXXFLAGS=-O2",
           targets=("c/mpi (pt2pt, collective, one-sided, startup)",)),
    Recipe("milc", "MILC", ("cc",), " ".join(MILC_MAKE_VARS) + " (MILC's default OPT and PRECISION, stated)",
           patches=tuple(f"generic/com_mpi.c: {old}( -> {new}( (MPI-1 function removed in MPI-3)"
                         for old, new in MILC_MPI3_RENAMES)
           + (f"top-level Makefile copied into {MILC_APP}/ (MILC's build procedure)",),
           targets=(f"{MILC_APP}/{MILC_TARGET}", f"share/milc/{Path(MILC_RATIONALS).name} (input data)")),
)}


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


def toolchain(mpi: str, recipe: Recipe) -> dict:
    """Compilers (wrapper, version of the compiler behind it) and MPI version."""
    if mpi not in WRAPPERS:
        raise BuildError(f"unknown MPI {mpi!r}; the project builds for {sorted(WRAPPERS)}")
    w = WRAPPERS[mpi]
    return {"mpi": mpi, "mpi_version": _mpi_version(mpi),
            "compilers": {lang: {"wrapper": w[lang], "version": _version_line(w[lang])} for lang in recipe.languages}}


def build_key(recipe: Recipe, source_sha256: str, tools: dict) -> str:
    blob = json.dumps({"recipe": recipe.describe(), "source": source_sha256, "tools": tools}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


build_cache = paths.build_cache


def link_path(suite: str, mpi: str) -> Path:
    """The stable name testbed files use: ``.hpcvirt/suites/<suite>-<mpi>``."""
    return paths.root() / ".hpcvirt" / "suites" / f"{suite}-{mpi}"


# ---------------------------------------------------------------- recipes
def _run(argv: list[str], cwd: Path, log, env: dict | None = None) -> None:
    log.write(f"$ {' '.join(argv)}   (in {cwd})\n")
    log.flush()
    cp = subprocess.run(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=1800)
    if cp.returncode != 0:
        raise BuildError(f"`{' '.join(argv)}` failed with exit code {cp.returncode}")


def _only_dir(root: Path, pattern: str) -> Path:
    found = sorted(root.glob(pattern))
    if len(found) != 1:
        raise BuildError(f"expected one {pattern} in the unpacked source, found {[str(f) for f in found]}")
    return found[0]


def _build_npb(src: Path, dest: Path, w: dict, log) -> None:
    tree = _only_dir(src, "*/NPB3.4-MPI")
    template = (tree / "config" / "make.def.template").read_text()
    lines = []
    for line in template.splitlines():
        key = line.split("=", 1)[0].strip() if "=" in line and not line.startswith("#") else None
        value = {"MPIFC": w["fc"], "MPICC": w["cc"], "FFLAGS": "-O3 -fallow-argument-mismatch",
                 "CFLAGS": "-O3"}.get(key)
        lines.append(f"{key} = {value}" if value else line)
    (tree / "config" / "make.def").write_text("\n".join(lines) + "\n")
    (tree / "config" / "suite.def").write_text(
        "".join(f"{k} {c}\n" for c in NPB_CLASSES for k in NPB_KERNELS))
    (tree / "bin").mkdir(exist_ok=True)
    _run(["make", "suite"], tree, log)
    (dest / "bin").mkdir(parents=True)
    for k in NPB_KERNELS:
        for c in NPB_CLASSES:
            exe = tree / "bin" / f"{k}.{c}.x"
            if not exe.is_file():
                raise BuildError(f"NPB built no {exe.name}")
            shutil.copy2(exe, dest / "bin" / exe.name)
    if w["cc"] == WRAPPERS["openmpi"]["cc"]:
        (dest / "lib").mkdir()
        _run([w["cc"], "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o",
              str(dest / COMMPROF_LIB), str(COMMPROF_SRC), "-lmpi_mpifh"], tree, log)


def _build_imb(src: Path, dest: Path, w: dict, log) -> None:
    tree = _only_dir(src, "*/src_cpp").parent
    mk = tree / "src_cpp" / "Makefile"
    text = mk.read_text()
    if text.count("-g -O0") != 2:
        raise BuildError(f"{mk}: expected two '-g -O0' flag lines to patch")
    mk.write_text(text.replace("-g -O0", "-g -O2"))
    _run(["make", "-j2", "-C", "src_cpp", "-f", "Makefile", "TARGET=MPI1", f"CC={w['cc']}", f"CXX={w['cxx']}"],
         tree, log)
    (dest / "bin").mkdir(parents=True)
    shutil.copy2(tree / "src_cpp" / "IMB-MPI1", dest / "bin" / "IMB-MPI1")


def _build_osu(src: Path, dest: Path, w: dict, log) -> None:
    tree = _only_dir(src, "*/configure").parent
    _run(["./configure", f"--prefix={dest}", f"CC={w['cc']}", f"CXX={w['cxx']}", "CFLAGS=-O2", "CXXFLAGS=-O2"],
         tree, log)
    _run(["make", "-j2"], tree, log)
    _run(["make", "install"], tree, log)


def _build_milc(src: Path, dest: Path, w: dict, log) -> None:
    tree = _only_dir(src, f"*/{MILC_APP}").parent
    com = tree / "generic" / "com_mpi.c"
    text = com.read_text()
    for old, new in MILC_MPI3_RENAMES:
        calls = len(re.findall(rf"\b{old}\(", text))
        if calls != 1:
            raise BuildError(f"{com}: expected one call of {old} to patch, found {calls}")
        text = re.sub(rf"\b{old}\(", f"{new}(", text)
    com.write_text(text)
    shutil.copy2(tree / "Makefile", tree / MILC_APP / "Makefile")
    # one make at a time: the application's Makefile builds MILC's libraries by recursive make
    _run(["make", *MILC_MAKE_VARS, f"MY_CC={w['cc']}", MILC_TARGET], tree / MILC_APP, log)
    (dest / "bin").mkdir(parents=True)
    shutil.copy2(tree / MILC_APP / MILC_TARGET, dest / "bin" / MILC_TARGET)
    (dest / "share" / "milc").mkdir(parents=True)
    shutil.copy2(tree / MILC_RATIONALS, dest / "share" / "milc" / Path(MILC_RATIONALS).name)


BUILDERS = {"npb": _build_npb, "imb": _build_imb, "osu": _build_osu, "milc": _build_milc}


# ------------------------------------------------------------------ build
def _binaries(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): sources.sha256_of(p) for p in sorted(d.rglob("*"))
            if p.is_file() and os.access(p, os.X_OK)}


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


def plan(suite: str, mpi: str, *, mirror=None) -> tuple[Recipe, dict, dict, str]:
    """(recipe, verified source record, toolchain, build key) of a build, without building."""
    try:
        recipe = RECIPES[suite]
    except KeyError:
        raise BuildError(f"no build recipe for {suite!r}; recipes: {sorted(RECIPES)}") from None
    src = sources.fetch(recipe.source, mirror=mirror)
    tools = toolchain(mpi, recipe)
    return recipe, src, tools, build_key(recipe, src["sha256"], tools)


def ensure(suite: str, mpi: str, *, mirror=None, quiet: bool = False) -> dict:
    """The build record of ``suite`` for ``mpi`` (building it if missing),
    with ``dir`` (the build) and ``link`` (the stable name) added."""
    recipe, src, tools, key = plan(suite, mpi, mirror=mirror)
    cache = build_cache()
    cache.mkdir(parents=True, exist_ok=True)
    out = cache / f"{suite}-{mpi}-{key}"
    with open(cache / f".{suite}-{mpi}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "build.json").is_file():
            _build(recipe, src, tools, key, out, quiet)
    _point(link_path(suite, mpi), out)
    rec = json.loads((out / "build.json").read_text())
    return {**rec, "dir": str(out), "link": str(link_path(suite, mpi))}


def _build(recipe: Recipe, src: dict, tools: dict, key: str, out: Path, quiet: bool) -> None:
    mpi = tools["mpi"]
    failed_log = out.with_name(out.name + ".failed.log")
    if not quiet:
        print(f"hpcvirt.build: building {recipe.suite} for {mpi} from {src['file']} ({src['copy']}) ...",
              file=sys.stderr, flush=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        tmp = Path(tmp)
        work, dest = tmp / "src", tmp / "install"
        work.mkdir()
        log_path = tmp / "build.log"
        with open(log_path, "w") as log:
            try:
                with tarfile.open(src["path"]) as tf:
                    tf.extractall(work, filter="data")
                BUILDERS[recipe.suite](work, dest, WRAPPERS[mpi], log)
            except (BuildError, OSError, tarfile.TarError, subprocess.TimeoutExpired) as exc:
                log.close()
                shutil.copyfile(log_path, failed_log)
                tail = "\n".join("    " + ln for ln in log_path.read_text(errors="replace").splitlines()[-20:])
                raise BuildError(f"building {recipe.suite} for {mpi} failed: {exc}\n  full log: {failed_log}\n"
                                 f"  last lines:\n{tail}") from None
        shutil.copyfile(log_path, dest / "build.log")
        record = {
            "suite": recipe.suite, "source": {k: src[k] for k in ("name", "version", "file", "sha256", "copy", "from")},
            "recipe": recipe.describe(), **tools, "key": key,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.monotonic() - start, 1),
            "binaries": _binaries(dest),
        }
        (dest / "build.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        os.replace(dest, out)
    if failed_log.exists():
        failed_log.unlink()
    if not quiet:
        print(f"hpcvirt.build: {recipe.suite} for {mpi} built in {record['build_seconds']} s: {out}",
              file=sys.stderr, flush=True)


def needed(study: dict, testbeds: dict[str, dict]) -> list[tuple[str, str]]:
    """The (suite, mpi) builds a validated study runs on the host: the
    project builds its configurations' testbed entries name, and every build
    when a qemu testbed is in the study (the guest image carries them all)."""
    from .benchmarks import REGISTRY
    from .matrix import configurations

    out: set[tuple[str, str]] = set()
    for c in configurations(study):
        tb, bench = testbeds[c.testbed], REGISTRY[c.benchmark]
        entry = (tb["mpi"][c.settings["mpi"]] if bench.mpi else tb).get(bench.name, {})
        if tb["kind"] == "qemu":
            out.update((s, m) for s in RECIPES for m in WRAPPERS)
        elif project_build(entry.get("binary", "")):
            out.add(project_build(entry["binary"]))
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hpcvirt.build", description=__doc__.split("\n")[0])
    ap.add_argument("suites", nargs="*", help=f"suites (default: all of {sorted(RECIPES)})")
    ap.add_argument("--mpi", action="append", choices=sorted(WRAPPERS), help="MPI (repeatable; default: both)")
    ap.add_argument("--study", action="store_true",
                    help="build what the study (config/config.yaml and its testbeds) runs, instead")
    ap.add_argument("--jobs", "-j", type=int, default=1, help="builds at a time (default 1)")
    ap.add_argument("--keys", action="store_true",
                    help="print '<suite> <mpi> <suite>-<mpi>-<key>' per build, without building")
    args = ap.parse_args(argv)
    try:
        if args.study:
            from .config import ConfigError, load_study

            try:
                todo = needed(*load_study())
            except ConfigError as exc:
                raise BuildError(str(exc)) from None
        else:
            todo = [(s, m) for s in (args.suites or sorted(RECIPES)) for m in (args.mpi or sorted(WRAPPERS))]
        for suite, _ in todo:
            if suite not in RECIPES:
                raise BuildError(f"no build recipe for {suite!r}; recipes: {sorted(RECIPES)}")
        if args.keys:
            for suite, mpi in todo:
                print(suite, mpi, f"{suite}-{mpi}-{plan(suite, mpi)[3]}", flush=True)
            return 0
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for i, ((suite, mpi), rec) in enumerate(zip(todo, pool.map(lambda sm: ensure(*sm), todo)), 1):
                print(suite, mpi, rec["dir"], flush=True)   # one "<suite> <mpi> <dir>" line each (read by scripts)
                print(f"hpcvirt.build: [{i}/{len(todo)}] {suite} for {mpi} ready", file=sys.stderr, flush=True)
        if todo:
            print(f"hpcvirt.build: {len(todo)} builds ready in {time.monotonic() - started:.1f} s "
                  f"({args.jobs} at a time; a cached build takes no time)", file=sys.stderr, flush=True)
    except (BuildError, sources.SourceError) as exc:
        print(f"hpcvirt.build: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
