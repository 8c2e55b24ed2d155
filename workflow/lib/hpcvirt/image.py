"""The suites in the offline container image, installed there by the project's
pinned Spack from the committed lock (``spack-envs/laptop/spack.lock``).

``containers/offline/build.sh`` runs ``python -m hpcvirt.image install ROOTFS``
(as root) on the root filesystem ``mmdebstrap`` made, before packing it:

1. the builds the container testbeds name (:func:`builds`: those under
   ``/opt/hpcvirt/suites/`` of every testbed file with a container runtime)
   are made on the host first, the way every run makes them
   (:func:`hpcvirt.build.ensure`: Spack installs the lock's roots);
2. Spack pushes those roots into a build cache of the clone
   (``<workdir>/spack/buildcache``, unsigned: it never leaves the machine);
3. in a private mount namespace where the image's ``/opt`` is ``/opt`` (the
   host's ``HPCVIRT_OPT``, where Spack itself is, bound back in), Spack
   installs the same concrete specs (each root's ``spec.json``) from that
   cache into the image's own install tree, :data:`TREE`, relocating them
   from the host's tree; the image gets Spack's database of what it holds;
4. each root's DAG hash in the image (its ``.spack/spec.json``) must equal
   the lock's, or the build stops;
5. each root is staged into ``/opt/hpcvirt/suites/<suite>-<mpi>`` of the
   image (the path the testbed files name; hard links into the tree), with
   the project's PMPI profiler beside NPB and a ``build.json`` (the host
   build's record, with the image's prefix and its own binaries' sha256);
6. the records of every staged build go to ``/opt/hpcvirt/suites.json`` of
   the image, which build.sh also writes beside the image
   (``<image>.suites.json``): a run in the image records its build from
   there (:func:`record`), and the preflight compares its hashes with the
   lock (:func:`check`).

Spack's database and install records carry times: they are set to
``SOURCE_DATE_EPOCH``, and Spack's build logs and build environment stay on
the host, so the image does not depend on when it was installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import atomic, paths, sources
from . import build as build_mod
from . import spack as spack_mod
from .runtime import NATIVE_KINDS
from .staging import binaries, stage


def containerized(runtime: dict | None) -> bool:
    """Whether a testbed's ``runtime`` runs each rank in an image (which carries the suites)."""
    return (runtime or {}).get("kind", "none") not in NATIVE_KINDS

#: The image's Spack install tree (and its database).
TREE = "/opt/spack"
#: Where the image's staged builds are, and their records.
SUITES = "/opt/hpcvirt/suites"
RECORDS = "/opt/hpcvirt/suites.json"
#: What of a prefix's ``.spack`` folder stays on the host: the build's logs and environment, when and where it was built.
HOST_RECORDS = ("spack-build-*", "install_times.json", "install_environment.json")


class ImageError(RuntimeError):
    """The image's suites cannot be installed, or do not match the lock."""


def _say(msg: str) -> None:
    print(f"hpcvirt.image: {msg}", file=sys.stderr, flush=True)


def builds(testbed_dir: str | Path = "config/testbeds") -> list[tuple[str, str]]:
    """The (suite, mpi) builds the offline image carries: the project's builds that a testbed file with a
    container runtime names (whatever the study, so that one image serves every study)."""
    return build_mod.testbed_builds(lambda tb: containerized(tb.get("runtime")), testbed_dir)


# --------------------------------------------------------------- install
def _scope(cache: Path) -> Path:
    """A Spack configuration scope for the image's install: its tree, the build cache, the project's recipes."""
    scope = spack_mod.state_dir() / "image-scope"
    files = {
        "config.yaml": f"config:\n  install_tree:\n    root: {TREE}\n",
        "mirrors.yaml": f"mirrors::\n  hpcvirt-buildcache:\n    url: file://{cache}\n",
        "repos.yaml": f"repos:\n- {spack_mod.envs_dir() / 'repo'}\n",
    }
    for name, text in files.items():
        f = scope / name
        if not (f.is_file() and f.read_text() == text):
            atomic.write_text(f, text)
    return scope


def _spack(args: list[str], *, scopes: tuple[Path, ...] = (), log) -> str:
    argv, env = spack_mod.command([], copies=None)
    argv = argv + [w for s in scopes for w in ("-C", str(s))] + args     # a later scope takes precedence
    log.write(f"$ spack {' '.join(args)}\n")
    log.flush()
    cp = subprocess.run(argv, env=env, text=True, capture_output=True)
    log.write(cp.stdout + cp.stderr)
    log.flush()
    if cp.returncode != 0:
        raise ImageError(f"`spack {' '.join(args)}` failed (exit {cp.returncode}): "
                         f"{(cp.stderr or cp.stdout).strip().splitlines()[-1:]}; log: {log.name}")
    return cp.stdout


def _bind(src: str | Path, dst: str | Path) -> None:
    subprocess.run(["mount", "--rbind", str(src), str(dst)], check=True)


def _host_paths() -> list[Path]:
    """What of the host under /opt Spack needs while /opt is the image's: Spack itself (and MPICH's prefix
    of links), and the clone, its work folder and this Python when they are there too."""
    want = {spack_mod.opt_root(), paths.root(), paths.workdir(), Path(sys.prefix), Path(sys.base_prefix)}
    under = sorted(p.resolve() for p in want if p.resolve().is_relative_to("/opt"))
    return [p for p in under if not any(p != q and p.is_relative_to(q) for q in under)]


def _mountpoints(rootfs: Path) -> list[Path]:
    """Make the mount points of :func:`_host_paths` in the image; return those made (to remove after)."""
    made = []
    for p in _host_paths():
        d = rootfs / p.relative_to("/")
        missing = [d, *d.parents][:len([q for q in [d, *d.parents] if not q.exists()])]
        d.mkdir(parents=True, exist_ok=True)
        made += missing
    return made


def _inside(rootfs: Path, specfiles: list[str], cache: Path, log_path: Path) -> int:
    """In a private mount namespace (see :func:`install`): the image's /opt at /opt, the host's paths of
    :func:`_host_paths` bound back in, then Spack installs."""
    host_opt = spack_mod.state_dir() / "host-opt"
    host_opt.mkdir(parents=True, exist_ok=True)
    keep = _host_paths()                # resolved before /opt changes
    _bind("/opt", host_opt)
    _bind(rootfs / "opt", "/opt")
    for p in keep:
        _bind(host_opt / p.relative_to("/opt"), p)
    with open(log_path, "a") as log:
        try:
            _spack(["install", "--cache-only", "--no-check-signature", "--only", "package"]
                   + [w for f in specfiles for w in ("-f", f)], scopes=(_scope(cache),), log=log)
            print(_spack(["find", "--format", "{hash} {prefix}"], scopes=(_scope(cache),), log=log), end="")
        except ImageError as exc:
            _say(f"error: {exc}")
            return 1
    return 0


def _normalize_times(tree: Path, epoch: int) -> None:
    """Spack's records of when it installed what, set to ``epoch``; the host build's logs, build environment
    and times (from the build cache) removed: the image keeps Spack's spec, file manifest, the recipes that
    built it and the record that it came from a build cache."""
    index = tree / ".spack-db" / "index.json"
    db = json.loads(index.read_text())
    for rec in db["database"]["installs"].values():
        if "installation_time" in rec:
            rec["installation_time"] = float(epoch)
    index.write_text(json.dumps(db, sort_keys=True, separators=(",", ":")))
    (tree / ".spack-db" / "index_verifier").unlink(missing_ok=True)     # a random id of this write
    for meta in tree.rglob(".spack"):
        if meta.is_dir() and (meta / "spec.json").is_file():
            for pattern in HOST_RECORDS:
                for f in meta.glob(pattern):
                    f.unlink()


def install(rootfs: str | os.PathLike, *, jobs: int = 2) -> dict:
    """Install the image's suites into the root filesystem ``rootfs`` (steps 1 to 6 of the module's text);
    the records written to its ``/opt/hpcvirt/suites.json``."""
    rootfs = Path(rootfs).resolve()
    if os.geteuid() != 0:
        raise ImageError("installing the suites into the image needs root (a private mount namespace)")
    if not (rootfs / "usr").is_dir():
        raise ImageError(f"{rootfs} is not a root filesystem (no usr/)")
    want = builds()
    if not want:
        return {}
    t0 = time.monotonic()
    _say(f"{len(want)} builds for the image: {' '.join(f'{s}-{m}' for s, m in want)}")
    host = build_mod.ensure_all(want, jobs=jobs)
    cache = spack_mod.state_dir() / "buildcache"
    log_path = spack_mod.state_dir() / "image-install.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    hashes = {b: rec["spack"]["hash"] for b, rec in host.items()}
    with open(log_path, "w") as log:
        log.write(f"# the image's suites: {rootfs}\n")
        _spack(["buildcache", "push", "--unsigned", "--only", "package", "--force", "--update-index", str(cache)]
               + [f"/{h}" for h in hashes.values()], log=log)
    specfiles = [str(Path(rec["dir"]) / "spack-spec.json") for rec in host.values()]
    made = _mountpoints(rootfs)
    try:
        cp = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-m", "hpcvirt.image",
                             "_inside", str(rootfs), str(cache), str(log_path), *specfiles], capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    finally:
        for d in made:                  # mount points the image did not have before
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
    sys.stderr.write(cp.stderr)
    if cp.returncode != 0:
        raise ImageError(f"Spack could not install the suites into the image; log: {log_path}")
    found = cp.stdout.split()
    prefixes = dict(zip(found[::2], found[1::2]))
    lock = build_mod.stack_dir() / "spack.lock"
    records = {}
    for (suite, mpi), rec in host.items():
        h = hashes[(suite, mpi)]
        prefix = prefixes.get(h)
        if not prefix or not prefix.startswith(TREE + "/"):
            raise ImageError(f"{suite}-{mpi}: Spack installed no /{h[:7]} under {TREE} of the image; log: {log_path}")
        spec = json.loads((rootfs / prefix.lstrip("/") / ".spack" / "spec.json").read_text())
        got = spec["spec"]["nodes"][0]["hash"]
        if got != h:
            raise ImageError(f"{suite}-{mpi}: the image's Spack spec hash is {got}, the lock's {h} ({lock})")
        dest = rootfs / SUITES.lstrip("/") / f"{suite}-{mpi}"
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        stage(rootfs / prefix.lstrip("/"), dest)
        for lib in build_mod.RECIPES[suite].libraries_for(mpi):     # the project's libraries, as the host built them
            (dest / lib.lib).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(rec["dir"]) / lib.lib, dest / lib.lib)
        image_rec = {k: v for k, v in rec.items() if k not in ("dir", "link", "binaries", "build_seconds")}
        image_rec["spack"] = {**rec["spack"], "prefix": prefix, "built_here": False,
                              "installed_from": "the build cache of the host's install (Spack relocated it)"}
        image_rec["binaries"] = binaries(dest)
        image_rec["dir"] = f"{SUITES}/{suite}-{mpi}"
        (dest / "build.json").write_text(json.dumps(image_rec, indent=2, sort_keys=True) + "\n")
        records[f"{suite}-{mpi}"] = image_rec
    _normalize_times(rootfs / TREE.lstrip("/"), int(os.environ.get("SOURCE_DATE_EPOCH", "0")))
    out = {"lock": str(lock.relative_to(paths.root())), "lock_sha256": sources.sha256_of(lock), "tree": TREE,
           "spack": sources.SOURCES[spack_mod.SOURCE].version, "builds": records}
    (rootfs / RECORDS.lstrip("/")).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    _say(f"{len(records)} builds installed by Spack into {TREE} of the image (hashes of {out['lock']}) and staged "
         f"under {SUITES}, in {time.monotonic() - t0:.0f} s")
    return out


# ------------------------------------------------------------ read back
def records_of(image: str | os.PathLike) -> dict | None:
    """The suites' records of a built image (``<image>.suites.json``), None for an image without them."""
    p = paths.resolve(image)
    side = p.with_name(p.name + ".suites.json")
    return json.loads(side.read_text()) if side.is_file() else None


def record(runtime: dict, suite: str, mpi: str) -> dict | None:
    """The record of the build of ``suite`` for ``mpi`` that a run in the runtime's image runs, or None when
    the runtime has no image that carries it."""
    if not containerized(runtime):
        return None
    recs = records_of(runtime["image"])
    return (recs or {}).get("builds", {}).get(f"{suite}-{mpi}")


def check(image: str | os.PathLike, want: list[tuple[str, str]] | None = None) -> dict:
    """The image carries the lock's builds: every build of ``want`` (default: :func:`builds`), with the lock's
    hash.  Raises :class:`ImageError` saying what differs (and how to rebuild)."""
    recs = records_of(image)
    rebuild = f"rebuild it: snakemake --forcerun build_offline_image {image}"
    if recs is None:
        raise ImageError(f"{image} has no record of the suites it carries ({image}.suites.json): an image built "
                         f"before the suites were installed into it; {rebuild}")
    for suite, mpi in (builds() if want is None else want):
        have = recs["builds"].get(f"{suite}-{mpi}")
        want = build_mod.root_of(suite, mpi)["hash"]
        if have is None or have["spack"]["hash"] != want:
            raise ImageError(f"{image}: its {suite}-{mpi} is Spack /{(have or {}).get('spack', {}).get('hash', '-')[:7]}"
                             f", {build_mod.stack_dir() / 'spack.lock'} says /{want[:7]}; {rebuild}")
    return recs


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_inside"]:
        rootfs, cache, log, *specfiles = argv[1:]
        return _inside(Path(rootfs), specfiles, Path(cache), Path(log))
    ap = argparse.ArgumentParser(prog="python -m hpcvirt.image", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("install", help="install the suites into the root filesystem ROOTFS (as root)")
    i.add_argument("rootfs")
    i.add_argument("--jobs", "-j", type=int, default=2)
    sub.add_parser("builds", help="print the builds the image carries")
    c = sub.add_parser("check", help="check that IMAGE carries the lock's builds")
    c.add_argument("image")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "install":
            install(args.rootfs, jobs=args.jobs)
        elif args.cmd == "builds":
            for s, m in builds():
                print(s, m)
        else:
            print(json.dumps({k: v["spack"]["hash"] for k, v in check(args.image)["builds"].items()}, indent=1))
    except (ImageError, build_mod.BuildError, spack_mod.SpackError, sources.SourceError) as exc:
        _say(f"error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
