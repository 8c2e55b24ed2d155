"""Shared fixtures of the test suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


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
