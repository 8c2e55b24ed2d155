"""The host MPI's identity (name and version, from ``ompi_info`` or
``mpichversion``) is asked once and kept between measurement jobs, beside
the identity tool's path, inode, size and modification time: another tool
on ``PATH``, or the same tool changed (an upgrade), is asked again.

Real tools: a copy of this machine's ``ompi_info`` in a directory put first
on ``PATH``, so that the test can change it.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from hpcvirt import build, provenance

pytestmark = pytest.mark.skipif(shutil.which("ompi_info") is None, reason="needs Open MPI's ompi_info")


@pytest.fixture
def own_tool(tmp_path, monkeypatch):
    """A copy of ompi_info first on PATH, an empty work directory, no identity in memory."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "ompi_info"
    shutil.copy2(shutil.which("ompi_info"), tool)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HPCVIRT_WORKDIR", str(tmp_path / "work"))
    provenance.mpi_identity.cache_clear()
    yield tool
    provenance.mpi_identity.cache_clear()


def _asked(tool) -> dict:
    provenance.mpi_identity.cache_clear()       # a new measurement job: nothing in memory
    return provenance.mpi_identity("openmpi")


def test_the_identity_is_kept_with_the_tools_stamp(own_tool, tmp_path):
    first = _asked(own_tool)
    assert first["name"] == "Open MPI" and first["version"]
    kept = json.loads((tmp_path / "work" / "mpi-identity" / "openmpi.json").read_text())
    assert kept["identity"] == first
    assert kept["stamp"]["tool"] == str(own_tool.resolve())
    assert kept["stamp"]["size"] == own_tool.stat().st_size


def test_a_later_job_reads_the_kept_identity_and_a_changed_tool_is_asked_again(own_tool, tmp_path):
    real = _asked(own_tool)
    cache = tmp_path / "work" / "mpi-identity" / "openmpi.json"
    kept = json.loads(cache.read_text())
    # the kept answer is what a later job gets (a marked version shows that it was read, not asked)
    kept["identity"] = dict(real, version="kept-answer")
    cache.write_text(json.dumps(kept))
    assert _asked(own_tool)["version"] == "kept-answer"
    # the tool changes (as an upgrade replaces it): asked again, and the answer replaces the kept one
    st = own_tool.stat()
    os.utime(own_tool, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert _asked(own_tool)["version"] == real["version"]
    assert json.loads(cache.read_text())["identity"]["version"] == real["version"]


def test_another_tool_on_path_is_asked_again(own_tool, tmp_path, monkeypatch):
    real = _asked(own_tool)
    cache = tmp_path / "work" / "mpi-identity" / "openmpi.json"
    kept = json.loads(cache.read_text())
    cache.write_text(json.dumps(dict(kept, identity=dict(real, version="kept-answer"))))
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy2(own_tool, other / "ompi_info")
    monkeypatch.setenv("PATH", f"{other}{os.pathsep}{os.environ['PATH']}")
    assert _asked(own_tool)["version"] == real["version"]


def test_the_build_key_uses_the_same_identity(own_tool):
    assert build._mpi_version("openmpi") == _asked(own_tool)["version"]
