"""The artifact as one file that rebuilds its paper offline, years later.

``python -m hpcvirt.bundle OUT.tar`` (``make bundle``) writes one tar
archive holding, under ``hpcvirt-<commit>/``:

* the repository at its commit (``git archive``: code, configuration, the
  archived campaign's raw outputs, provenance and tables);
* ``bundle/paper.pdf``, the paper built from the archived campaign;
* ``bundle/sources/``, the pinned source archives the campaign's suites were
  built from (the ``source_sha256`` of its tidy rows), verified;
* ``bundle/wheelhouse/``, the wheels of the locked Python packages
  (``requirements.lock``) and of the build backend that installs the project;
* ``bundle/BUNDLE.json`` (commit, campaign, what is inside) and
  ``MANIFEST.sha256``, the checksum of every other file (``sha256sum -c``).

Unpacked on a machine with its distribution's packages but no PyPI and no
other network, ``make paper-from-archive`` installs the Python packages from
the wheelhouse only (``pip --no-index``) and rebuilds ``paper/main.pdf``
from the archived campaign; ``HPCVIRT_SOURCE_MIRROR`` defaults to
``bundle/sources`` there, so the suites can be rebuilt offline too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from . import paths, sources
from .config import archived_campaign

# The build backend pyproject.toml names (setuptools>=68), for the offline
# `pip install -e .` of the project itself.
BUILD_BACKEND = "setuptools==84.2.1"


class BundleError(RuntimeError):
    pass


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(paths.root()), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def campaign_sources(campaign: str) -> list[dict]:
    """The pinned sources whose checksums the campaign's tidy rows carry,
    each fetched (cache or mirror) and verified; records as
    :func:`hpcvirt.sources.fetch` gives them."""
    import pandas as pd

    shas: set[str] = set()
    for tidy in sorted((paths.root() / "data/results" / campaign).glob("*/tidy.csv")):
        col = pd.read_csv(tidy, usecols=["source_sha256"], dtype=str)["source_sha256"].dropna()
        shas |= set(col)
    out = []
    for name in sources.SOURCES:
        if any(sha in shas for _, sha, _ in sources.SOURCES[name].files):
            rec = sources.fetch(name)
            if rec["sha256"] not in shas:
                raise BundleError(f"{name}: the copy at hand ({rec['path']}, sha256 {rec['sha256']}) is not the one "
                                  f"campaign {campaign} was built from")
            out.append(rec)
    return out


def manifest(top: Path) -> str:
    """``sha256sum`` lines of every file below ``top`` (relative, sorted)."""
    files = sorted(p for p in top.rglob("*") if p.is_file() and p.name != "MANIFEST.sha256")
    return "".join(f"{sources.sha256_of(p)}  {p.relative_to(top)}\n" for p in files)


def wheelhouse(dest: Path, lock: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    # `pip wheel`: packages published only as source (e.g. connection_pool) are built into wheels
    # now, so that the offline install builds nothing
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
           "-w", str(dest), "-r", str(lock), BUILD_BACKEND]
    cp = subprocess.run(cmd, capture_output=True, text=True)
    if cp.returncode != 0:
        raise BundleError(f"could not download the locked wheels ({' '.join(cmd)}):\n{cp.stderr[-2000:]}")


def make_bundle(out: str | os.PathLike, campaign: str, paper: str | os.PathLike = "paper/main.pdf") -> dict:
    out, root = Path(out).resolve(), paths.root()
    paper = paths.resolve(paper)
    if not paper.is_file():
        raise BundleError(f"{paper} is missing: build the paper from campaign {campaign} first (make bundle does)")
    commit = _git("rev-parse", "HEAD")
    if _git("status", "--porcelain", "--untracked-files=no"):
        print(f"hpcvirt.bundle: note: uncommitted changes are not in the bundle; it holds commit {commit}",
              file=sys.stderr)
    name = f"hpcvirt-{commit[:12]}"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".bundle-", dir=out.parent) as stage:
        top = Path(stage) / name
        top.mkdir()
        print(f"hpcvirt.bundle: [1/4] repository at {commit[:12]}", file=sys.stderr, flush=True)
        git = subprocess.Popen(["git", "-C", str(root), "archive", "--format=tar", "HEAD"], stdout=subprocess.PIPE)
        with tarfile.open(fileobj=git.stdout, mode="r|") as tar:
            tar.extractall(top, filter="tar")
        if git.wait() != 0:
            raise BundleError("git archive failed")
        extra = top / "bundle"
        extra.mkdir()
        shutil.copyfile(paper, extra / "paper.pdf")
        print("hpcvirt.bundle: [2/4] pinned sources of the campaign", file=sys.stderr, flush=True)
        srcs = campaign_sources(campaign)
        (extra / "sources").mkdir()
        for rec in srcs:
            shutil.copyfile(rec["path"], extra / "sources" / rec["file"])
            if sources.sha256_of(extra / "sources" / rec["file"]) != rec["sha256"]:
                raise BundleError(f"{rec['file']} changed while it was copied")
        print("hpcvirt.bundle: [3/4] wheelhouse of requirements.lock", file=sys.stderr, flush=True)
        wheelhouse(extra / "wheelhouse", root / "requirements.lock")
        info = {
            "commit": commit,
            "campaign": campaign,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "sources": [{k: r[k] for k in ("name", "version", "file", "sha256", "copy")} for r in srcs],
            "wheels": sorted(p.name for p in (extra / "wheelhouse").iterdir()),
            "rebuild": "make paper-from-archive (offline: pip --no-index from bundle/wheelhouse)",
        }
        (extra / "BUNDLE.json").write_text(json.dumps(info, indent=2) + "\n")
        print("hpcvirt.bundle: [4/4] checksum manifest and archive", file=sys.stderr, flush=True)
        (top / "MANIFEST.sha256").write_text(manifest(top))
        tmp = out.with_name(f".{out.name}.partial")
        with tarfile.open(tmp, "w") as tar:
            tar.add(top, arcname=name)
        os.replace(tmp, out)
    info["path"], info["bytes"] = str(out), out.stat().st_size
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hpcvirt.bundle", description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the archive file to write (.tar)")
    ap.add_argument("--campaign", help="the archived campaign (default: config/config.yaml's)")
    args = ap.parse_args(argv)
    try:
        info = make_bundle(args.out, args.campaign or archived_campaign())
    except (BundleError, sources.SourceError) as exc:
        print(f"hpcvirt.bundle: {exc}", file=sys.stderr)
        return 1
    print(f"hpcvirt.bundle: {info['path']} ({info['bytes'] / 2**20:.0f} MiB): commit {info['commit'][:12]}, campaign "
          f"{info['campaign']}, {len(info['sources'])} sources, {len(info['wheels'])} wheels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
