"""Apptainer, the second container runtime: found on the site, or built once
per machine from its pinned source.

A machine that has ``apptainer`` on ``PATH`` (an HPC site) uses its own.
Otherwise :func:`install` builds the pinned source
(:data:`hpcvirt.sources.SOURCES` ``["apptainer"]``, verified by its sha256)
into a prefix OUTSIDE the clone, named after the version and the source's
checksum: ``$HPCVIRT_OPT/apptainer-1.4.5-<sha256[:12]>`` (``HPCVIRT_OPT``
defaults to ``/opt/hpcvirt``).  Every later clone on the machine reuses it.
The build runs in a temporary directory and is installed with ``DESTDIR``
into a temporary tree next to the prefix; a stamp (``.hpcvirt-build.json``:
version, source record, Go version, build time) is written into that tree,
and only then is the tree renamed onto the prefix, so an interrupted build
never leaves a prefix that looks complete.  A lock file keeps two clones from
building at once.

:func:`find` returns the Apptainer to use and its record (path, version,
where it came from, the source checksum when built here) for the
provenance of every run that starts ranks through it.

``python -m hpcvirt.apptainer install`` builds (prints progress: the build
takes about 5 minutes on 2 cores, 14 before :func:`_one_compile`); ``python -m hpcvirt.apptainer find``
prints the record.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import paths, sources

SOURCE = "apptainer"
OPT_ENV = "HPCVIRT_OPT"
STAMP = ".hpcvirt-build.json"
GO_CANDIDATES = ("go", "/usr/local/go/bin/go")


class ApptainerError(RuntimeError):
    """Apptainer cannot be found or built."""


def opt_root() -> Path:
    """Where built tools live (``HPCVIRT_OPT``, default ``/opt/hpcvirt``): an absolute path of plain characters,
    since it reaches mconfig's command line."""
    root = os.environ.get(OPT_ENV) or "/opt/hpcvirt"
    if not re.fullmatch(r"/[A-Za-z0-9_./-]*", root) or "/../" in f"{root}/":
        raise ApptainerError(f"{OPT_ENV}={root!r}: expected an absolute path of letters, digits and _ . / -")
    return Path(root)


def _pinned_sha() -> str:
    src = sources.SOURCES[SOURCE]
    return src.files[0][1]


def prefix(sha256: str | None = None) -> Path:
    """The prefix the pinned source is (or would be) built into."""
    src = sources.SOURCES[SOURCE]
    return opt_root() / f"apptainer-{src.version}-{(sha256 or _pinned_sha())[:12]}"


def version_of(exe: str | os.PathLike) -> str:
    """``apptainer --version`` of ``exe`` as a bare version, e.g. ``1.4.5``."""
    try:
        out = subprocess.run([os.fspath(exe), "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise ApptainerError(f"{exe}: cannot run ({exc})") from None
    m = re.search(r"(\d+\.\d+\.\d+\S*)", out.stdout)
    if out.returncode != 0 or not m:
        raise ApptainerError(f"{exe} --version failed (exit {out.returncode}): {out.stdout}{out.stderr}".strip())
    return m.group(1)


def _built_prefixes() -> list[Path]:
    """Complete prefixes (with a stamp) for any acceptable copy of the pinned source."""
    src = sources.SOURCES[SOURCE]
    return [prefix(sha) for _, sha, _ in src.files if (prefix(sha) / STAMP).is_file()]


@functools.lru_cache(maxsize=8)
def find(path: str | None = None) -> dict:
    """The Apptainer to use and its record.

    Order: ``path`` (a testbed's ``runtime.exe``), ``apptainer`` on PATH (the
    site's), the prefix :func:`install` built.  ApptainerError if none.
    """
    if path and os.sep in str(path):
        exe = Path(path)
        if not os.access(exe, os.X_OK):
            raise ApptainerError(f"{exe}: not an executable Apptainer")
        origin = "given"
    else:
        on_path = shutil.which(path or "apptainer")
        built = _built_prefixes()
        if on_path and not any(Path(on_path).resolve().is_relative_to(p.resolve()) for p in built):
            exe, origin = Path(on_path), "site (on PATH)"
        elif built:
            exe, origin = built[0] / "bin" / "apptainer", "built from the pinned source"
        else:
            raise ApptainerError(
                f"no Apptainer: none on PATH and none built in {prefix()} "
                f"(run workflow/scripts/install-deps.sh apptainer)")
    rec: dict = {"exe": str(exe), "version": version_of(exe), "origin": origin}
    stamp = exe.resolve().parent.parent / STAMP
    if stamp.is_file():
        built_rec = json.loads(stamp.read_text())
        rec["prefix"] = str(stamp.parent)
        rec["source"] = {k: built_rec["source"][k] for k in ("name", "version", "file", "sha256", "copy")}
        rec["go"] = built_rec.get("go")
        if origin == "given":
            rec["origin"] = "built from the pinned source"
    return rec


def _go() -> tuple[str, str]:
    """A Go toolchain new enough for the source's go.mod (checked by Go itself: GOTOOLCHAIN=local)."""
    for cand in GO_CANDIDATES:
        exe = shutil.which(cand)
        if exe:
            out = subprocess.run([exe, "version"], capture_output=True, text=True,
                                 env={**os.environ, "GOTOOLCHAIN": "local"})
            if out.returncode == 0:
                return exe, out.stdout.strip()
    raise ApptainerError(f"building Apptainer needs a Go toolchain (tried {', '.join(GO_CANDIDATES)}); Debian 12's "
                         f"golang is too old: install Go from go.dev into /usr/local/go")


def _say(msg: str) -> None:
    print(f"install-apptainer: {msg}", flush=True)


def _run(argv: list[str], *, cwd: Path, env: dict, log: Path, what: str, t0: float) -> None:
    """Run one build step, its output to ``log``; print a progress line every minute."""
    _say(f"{what} ... (output in {log})")
    done = threading.Event()

    def tick() -> None:
        while not done.wait(60):
            last = ""
            try:
                lines = log.read_text(errors="replace").strip().splitlines()
                last = lines[-1][:100] if lines else ""
            except OSError:
                pass
            _say(f"  still {what} ({(time.monotonic() - t0) / 60:.1f} min so far): {last}")

    th = threading.Thread(target=tick, daemon=True)
    th.start()
    try:
        with open(log, "a") as fh:
            fh.write(f"$ {' '.join(argv)}\n")
            fh.flush()
            rc = subprocess.run(argv, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    finally:
        done.set()
    if rc != 0:
        tail = "\n    ".join(log.read_text(errors="replace").strip().splitlines()[-15:])
        raise ApptainerError(f"{what} failed (exit {rc}); last lines of {log}:\n    {tail}")


def install(*, mirror: str | None = None, force_build: bool = False) -> dict:
    """Use the site's Apptainer, or build the pinned source once per machine; return :func:`find`'s record."""
    if not force_build:
        try:
            rec = find()
            _say(f"using Apptainer {rec['version']} at {rec['exe']} ({rec['origin']})")
            return rec
        except ApptainerError:
            pass
    src_rec = sources.fetch(SOURCE, mirror=mirror)
    final = prefix(src_rec["sha256"])
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(f"another build of {final} is running; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / STAMP).is_file():
            rec = find(str(final / "bin" / "apptainer"))
            _say(f"using Apptainer {rec['version']} at {rec['exe']} (built earlier)")
            return rec
        if final.exists():                          # no stamp: not ours or incomplete, never trusted
            raise ApptainerError(f"{final} exists but has no {STAMP}: an incomplete or foreign install; "
                                 f"remove it and run again")
        for stale in final.parent.glob(f".{final.name}.build.*"):     # left by a build that was killed
            _say(f"removing {stale}, left by an interrupted build")
            shutil.rmtree(stale, ignore_errors=True)
        return _build(src_rec, final)


def _one_compile(srcdir: Path) -> list[str]:
    """make's variables that let Apptainer's build compile its Go packages once, not three times.

    Its makefiles build the binaries position-independent (``-buildmode=pie``) but run the generators of
    the shell completions and man pages (``go run``) without that flag, which compiles every package a
    second time; and they clear Go's build cache before building the starter (``.clean-starter``, there
    for a build directory whose C sources changed since its last build), which compiles everything a
    third time.  In a fresh build directory with a fresh cache (:func:`_build`) nothing can be stale:
    the stamp is made up to date, and ``GOFLAGS`` (which the makefiles set and export; a variable on
    make's command line takes its place) gives every ``go`` command the same mode.  The binaries are
    built with the same flags as before."""
    (srcdir / "builddir" / ".clean-starter").touch()
    mod = "-mod=vendor" if (srcdir / "vendor" / "modules.txt").is_file() else "-mod=readonly"
    return [f"GOFLAGS={mod} -trimpath -buildmode=pie -modcacherw"]


def _build(src_rec: dict, final: Path) -> dict:
    go, go_version = _go()
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.build.", dir=final.parent))
    stage = work / "destdir"
    log = final.parent / f"{final.name}.build.log"      # kept: the record of the last build (or failure)
    log.write_text("")
    _say(f"building Apptainer {src_rec['version']} from {src_rec['file']} (sha256 {src_rec['sha256']}, "
         f"{src_rec['copy']}) into {final}; about 5 minutes on 2 cores, 1.7 GB of temporary disk in {work}")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOPATH": str(work / "gopath"), "GOCACHE": str(work / "gocache"),
           "GOFLAGS": "-modcacherw", "PATH": f"{Path(go).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    ok = False
    try:
        subprocess.run(["tar", "-xzf", src_rec["path"], "-C", str(work)], check=True)
        tops = [p for p in work.iterdir() if p.is_dir() and p.name.startswith("apptainer-")]
        if len(tops) != 1:
            raise ApptainerError(f"{src_rec['file']}: expected one apptainer-* folder, found {tops}")
        srcdir = tops[0]
        _run([go, "mod", "download"], cwd=srcdir, env=env, log=log, what="downloading Go modules", t0=t0)
        _run(["./mconfig", "--without-suid", f"--prefix={final}"], cwd=srcdir, env=env, log=log,
             what="configuring", t0=t0)
        make_vars = _one_compile(srcdir)
        _run(["make", "-C", "builddir", *make_vars], cwd=srcdir, env=env, log=log, what="compiling", t0=t0)
        _run(["make", "-C", "builddir", *make_vars, "install", f"DESTDIR={stage}"], cwd=srcdir, env=env,
             log=log, what="installing", t0=t0)
        staged = stage / final.relative_to("/")
        exe = staged / "bin" / "apptainer"
        if not os.access(exe, os.X_OK):
            raise ApptainerError(f"the build produced no {exe}")
        seconds = round(time.monotonic() - t0)
        stamp = {"version": src_rec["version"], "source": src_rec, "go": go_version, "build_seconds": seconds,
                 "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "configure": "--without-suid",
                 "make": make_vars}
        (staged / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")     # the stamp first, then
        os.rename(staged, final)                                            # one atomic rename
        ok = True
        _say(f"Apptainer {src_rec['version']} installed in {final} ({seconds / 60:.1f} min)")
    finally:
        shutil.rmtree(work, ignore_errors=True)         # 1.7 GB of Go caches; the log stays
        if not ok:
            _say(f"build failed; nothing was installed in {final}")
    return find(str(final / "bin" / "apptainer"))


# --------------------------------------------------------------------------
# Does `apptainer exec` need --userns here?  Probed, never assumed.
# --------------------------------------------------------------------------

USERNS_CACHE = "apptainer-userns.json"


def _cache_file() -> Path:
    return paths.workdir() / USERNS_CACHE


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _last_line(text: str) -> str:
    """The error an Apptainer run printed: its last ERROR/FATAL line (colour codes removed), else its last line."""
    lines = [ln.strip() for ln in _ANSI.sub("", text or "").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("ERROR", "FATAL"))]
    return (errors or lines or [""])[-1][:300]


def userns_probe(exe: str, image: str | os.PathLike, *, timeout: float = 120) -> dict:
    """Whether ``exe exec`` needs ``--userns`` for this user on this machine.

    Runs ``exe exec IMAGE true``; if that fails, ``exe exec --userns IMAGE
    true``.  The answer and its reason (the error of the failed attempt) are
    cached in ``.hpcvirt/apptainer-userns.json`` per Apptainer (path,
    version), user id and kernel release, and go into the provenance of
    every run.  Raises ApptainerError, naming both errors, when neither
    works.
    """
    info = {"exe": shutil.which(exe) or os.fspath(exe), "version": version_of(exe)}
    key = f"{Path(info['exe']).resolve()}|{info['version']}|uid={os.getuid()}|kernel={os.uname().release}"
    cache = _cache_file()
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return dict(known[key], cached=True)
    t0 = time.monotonic()
    base = [info["exe"], "exec"]
    plain = subprocess.run([*base, os.fspath(image), "true"], capture_output=True, text=True, timeout=timeout)
    if plain.returncode == 0:
        rec = {"userns": False, "reason": "`apptainer exec IMAGE true` works without --userns"}
    else:
        why = _last_line(plain.stderr or plain.stdout)
        user = subprocess.run([*base, "--userns", os.fspath(image), "true"], capture_output=True, text=True,
                              timeout=timeout)
        if user.returncode != 0:
            raise ApptainerError(
                f"{info['exe']} exec cannot start {image}: without --userns: {why or plain.returncode}; "
                f"with --userns: {_last_line(user.stderr or user.stdout) or user.returncode}")
        rec = {"userns": True, "reason": f"without --userns `apptainer exec IMAGE true` failed: {why}"}
    rec.update(exe=info["exe"], version=info["version"], uid=os.getuid(), kernel=os.uname().release,
               probe_image=os.fspath(image), probe_seconds=round(time.monotonic() - t0, 2),
               probed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    known[key] = rec
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
    tmp.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, cache)
    return dict(rec, cached=False)


def provenance(runtime: dict) -> dict:
    """The Apptainer record of a testbed's runtime: executable, version, where it came from, the
    source checksum when built here, and the --userns decision with its reason."""
    exe = runtime.get("exe")
    rec = dict(find(exe if exe and os.sep in str(exe) else None))
    userns = runtime.get("userns", "auto")
    if userns == "auto":
        probe = userns_probe(rec["exe"], paths.resolve(runtime["image"]))
        rec["userns"] = {"flag": probe["userns"], "decided_by": "probe", "reason": probe["reason"],
                         "probed_at": probe["probed_at"]}
    else:
        rec["userns"] = {"flag": bool(userns), "decided_by": "testbed file (runtime.userns)"}
    return rec


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m hpcvirt.apptainer", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("install", help="use the site's Apptainer or build the pinned source once per machine")
    i.add_argument("--force-build", action="store_true", help="build even if an apptainer is on PATH")
    sub.add_parser("find", help="print the record of the Apptainer in use (JSON)")
    sub.add_parser("exe", help="print the path of the Apptainer in use")
    args = ap.parse_args(argv)
    try:
        rec = install(force_build=args.force_build) if args.cmd == "install" else find()
        if args.cmd == "exe":
            print(rec["exe"])
    except (ApptainerError, sources.SourceError) as exc:
        print(f"install-apptainer: error: {exc}", file=sys.stderr)
        return 1
    if args.cmd == "find":
        print(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
