"""Shared fixtures of the test suite."""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# the library of this checkout, whichever checkout the venv's editable install points at
sys.path.insert(0, str(ROOT / "workflow" / "lib"))

#: Test modules that read the offline image (.hpcvirt/images/offline.sqfs), which `make test`
#: (workflow/scripts/test.sh) builds while the tests marked neither vm nor images run (the guests'
#: image too: a test that boots guests is marked vm).
IMAGE_MODULES = frozenset({"test_apptainer", "test_container_workflow", "test_containers", "test_image"})
#: Modules whose tests with an image or guests check what ran and where, not how fast, under time
#: limits of a minute or more (the containers' preflight and studies, the guests' boot and teardown):
#: `make test` runs them beside the Slurm studies, once the images are built (marker shares_cores).
#: A test elsewhere that may share the cores says so with its own mark.
SHARED_MODULES = IMAGE_MODULES | {"test_qemu"}


def make_test_parts() -> dict[str, str]:
    """The marker expressions of `make test`'s parts (workflow/scripts/test.sh): name -> expression."""
    text = (ROOT / "workflow/scripts/test.sh").read_text()
    names = ("unit", "quiet", "cluster", "studies", "shared", "alone")
    return {name: re.search(rf"^{name}='([^']+)'$", text, re.M).group(1) for name in names}


def pytest_collection_modifyitems(items):
    parts = make_test_parts()
    for item in items:
        if item.module is not None and item.module.__name__ in IMAGE_MODULES:
            item.add_marker(pytest.mark.images)
        marks = {m.name for m in item.iter_markers()}
        if item.module is not None and item.module.__name__ in SHARED_MODULES and marks & {"vm", "images"}:
            item.add_marker(pytest.mark.shares_cores)
            marks.add("shares_cores")
        # a test that shares the cores in phase 1 must be one of the slow ones that measure nothing and need
        # no image, guest or cluster
        if "no_measurement" in marks and ("e2e" not in marks or marks & {"slurm", "vm", "images"}):
            raise pytest.UsageError(f"{item.nodeid}: no_measurement is for e2e tests without slurm, vm or images "
                                    f"(it has {sorted(marks & {'e2e', 'slurm', 'vm', 'images'})})")
        # and `make test` runs every test in exactly one of its parts
        names = collections.defaultdict(bool, dict.fromkeys(marks, True))
        runs_in = [name for name, expr in parts.items() if eval(expr, {"__builtins__": {}}, names)]  # noqa: S307
        if len(runs_in) != 1:
            raise pytest.UsageError(f"{item.nodeid} (markers {sorted(marks)}) would run in {len(runs_in)} parts of "
                                    f"make test ({runs_in}; workflow/scripts/test.sh): exactly one is needed")


@pytest.fixture(scope="session")
def archive_clone(tmp_path_factory) -> Path:
    """A clone of the committed tree with ``paper/main.pdf`` built from the archived campaign (what
    `make paper-from-archive`, `make report` and `make bundle` start from), built once for the tests
    that read it and do not change what they read (the HTML report, the bundle)."""
    repo = tmp_path_factory.mktemp("archive") / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", HPCVIRT_ROOT=str(repo),
               PYTHONPATH=str(repo / "workflow/lib"))
    cp = subprocess.run([str(BIN / "snakemake"), "--workflow-profile", "workflow/profiles/default", "paper/main.pdf"],
                        cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, (cp.stdout + cp.stderr)[-3000:]
    return repo


def _mirror_reachable() -> bool:
    try:
        urllib.request.urlopen("http://deb.debian.org/debian/dists/trixie/Release", timeout=10).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def other_openmpi_image(tmp_path_factory):
    """A real image with a different Open MPI: Debian trixie's openmpi-bin
    (Open MPI 5.0.x, PMIx 5.x), as an unpacked directory; built once for the
    container tests of both runtimes that must refuse it."""
    if not shutil.which("mmdebstrap"):
        pytest.skip("mmdebstrap not installed (apt-get install mmdebstrap)")
    if not _mirror_reachable():
        pytest.skip("deb.debian.org not reachable: cannot build the trixie image")
    root = tmp_path_factory.mktemp("img") / "trixie-openmpi"
    cp = subprocess.run(
        ["mmdebstrap", "--mode=root", "--variant=essential", "--format=directory", "--skip=output/dev",
         "--aptopt=APT::Install-Recommends \"false\"", "--dpkgopt=path-exclude=/usr/share/doc/*",
         "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
         "--include=openmpi-bin", "trixie", str(root), "http://deb.debian.org/debian"],
        capture_output=True, text=True, timeout=900,
    )
    assert cp.returncode == 0, cp.stderr[-3000:]
    return root
