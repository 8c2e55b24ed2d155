"""Builds of the pinned suites (hpcvirt.build): from the verified source,
cached per build key, recorded, never left half-built."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from hpcvirt import build, paths, sources
from hpcvirt import spack as hspack
from hpcvirt.sources import SourceError, sha256_of

MIRROR = os.environ.get(sources.MIRROR_ENV)
needs_mirror = pytest.mark.skipif(not MIRROR or not Path(MIRROR).is_dir(),
                                  reason=f"no source mirror ({sources.MIRROR_ENV} unset)")


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """A checkout root (with the project's Spack environments) and a build cache of its own."""
    monkeypatch.setenv("HPCVIRT_ROOT", str(tmp_path / "repo"))
    monkeypatch.setenv("HPCVIRT_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv(paths.BUILD_CACHE_ENV, str(tmp_path / "cache"))
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "spack-envs").symlink_to(ROOT / "spack-envs")
    return tmp_path


ROOT = Path(__file__).resolve().parents[1]


def test_project_binaries_are_recognised():
    assert build.project_build(".hpcvirt/suites/npb-openmpi/bin") == ("npb", "openmpi")
    assert build.project_build("/opt/hpcvirt/suites/imb-mpich/bin/IMB-MPI1") == ("imb", "mpich")
    assert build.project_build("/opt/spack/osu-micro-benchmarks-7.4/libexec") is None
    assert build.project_build(".hpcvirt/suites/hpl-openmpi/bin") is None     # no such recipe
    assert build.in_guest("/opt/hpcvirt/suites/npb-openmpi/bin") and not build.in_guest(".hpcvirt/suites/x")


def test_every_suite_is_a_spack_package_of_a_pinned_source_and_names_its_binaries():
    for name, recipe in build.RECIPES.items():
        assert recipe.source in sources.SOURCES, name
        assert recipe.binary_dir, name
        assert hspack.MIRRORED[recipe.package][0] == recipe.source, name


def test_each_build_is_one_root_of_the_laptop_lock():
    lock = hspack.lock_hashes(ROOT / "spack-envs" / build.STACK / "spack.lock")
    plans = {(s, m): build.plan(s, m) for s in build.RECIPES for m in build.WRAPPERS}
    assert sorted(p[1]["hash"] for p in plans.values()) == sorted(lock.values())      # each root once
    for (suite, mpi), (recipe, root, key) in plans.items():
        assert root["spec"].startswith(recipe.package + "@") and f"^{mpi}@" in root["spec"]
        assert key == (root["hash"][:16] if (suite, mpi) != ("npb", "openmpi") else key)
    # the profiler built beside NPB with Open MPI is part of that build's key
    npb = plans[("npb", "openmpi")]
    assert npb[2] != npb[1]["hash"][:16] == build.build_key(npb[1]["hash"], {})
    assert build._extras("npb", "openmpi") == {"workflow/src/commprof.c": sources.sha256_of(ROOT / "workflow/src/commprof.c")}
    assert build._extras("npb", "mpich") == {} == build._extras("imb", "openmpi")


def test_the_suites_are_what_the_benchmarks_declare():
    """build.py names no suite: the recipes come from the benchmarks' PinnedSource declarations."""
    assert sorted(build.RECIPES) == ["imb", "milc", "npb", "osu"]
    npb = build.RECIPES["npb"]
    assert (npb.source, npb.package, npb.binary_dir) == ("NPB", "npb", "bin")
    assert "cg.A" in npb.targets and "lib/libhpcvirt-commprof.so (openmpi only)" in npb.describe()["targets"]
    assert [lib.lib for lib in npb.libraries_for("openmpi")] == ["lib/libhpcvirt-commprof.so"]
    assert build.build_key("a" * 32, {"x": "1"}) != build.build_key("a" * 32, {"x": "2"})
    assert build.build_key("a" * 32, {}) != build.build_key("b" * 32, {})


@needs_mirror
@pytest.mark.e2e
def test_build_by_spack_is_recorded_cached_and_linked(isolated):
    """IMB for Open MPI installed by the pinned Spack from the lock (nothing to do when this machine's install
    tree has it), staged, recorded with its Spack hash, linked."""
    rec = build.ensure("imb", "openmpi", mirror=MIRROR, quiet=True)
    out = Path(rec["dir"])
    assert out.parent == isolated / "cache" and out.name == f"imb-openmpi-{rec['key']}"
    root = build.root_of("imb", "openmpi")
    # the record: source checksum and copy, Spack spec and hash, lock, compilers, MPI, binaries
    src = sources.SOURCES["IMB"]
    assert src.match(rec["source"]["file"], rec["source"]["sha256"]) == rec["source"]["copy"]
    assert rec["spack"]["hash"] == root["hash"] and rec["key"] == root["hash"][:16]
    assert rec["spack"]["lock_sha256"] == sha256_of(ROOT / "spack-envs/laptop/spack.lock")
    assert json.loads((out / "spack-spec.json").read_text())["spec"]["nodes"][0]["hash"] == root["hash"]
    assert rec["mpi"] == "openmpi" and rec["mpi_version"]
    assert rec["compilers"]["cxx"]["wrapper"] == "mpicxx.openmpi" and "g++" in rec["compilers"]["cxx"]["version"]
    assert rec["binaries"] == {"bin/IMB-MPI1": sha256_of(out / "bin/IMB-MPI1")}
    assert sha256_of(Path(rec["spack"]["prefix"]) / "bin/IMB-MPI1") == rec["binaries"]["bin/IMB-MPI1"]
    # the stable name testbeds use points at it, relatively
    link = isolated / "repo/.hpcvirt/suites/imb-openmpi"
    assert link.resolve() == out.resolve() and not os.path.isabs(os.readlink(link))
    # the binary runs and is IMB 2021.3
    help_ = subprocess.run([str(link / "bin/IMB-MPI1"), "-help"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    assert "Intel(R) MPI Benchmarks 2021.3" in help_.stdout + help_.stderr
    # a second call reuses the build
    again = build.ensure("imb", "openmpi", mirror=MIRROR, quiet=True)
    assert again["built_at"] == rec["built_at"] and again["dir"] == rec["dir"]


def test_corrupted_source_builds_nothing(isolated):
    mirror = isolated / "mirror"
    mirror.mkdir()
    (mirror / "mpi-benchmarks-IMB-v2021.3.tar.gz").write_bytes(b"not IMB\n")
    with pytest.raises(SourceError) as exc:
        build.ensure("imb", "openmpi", mirror=mirror, quiet=True)
    assert sha256_of(mirror / "mpi-benchmarks-IMB-v2021.3.tar.gz") in str(exc.value)
    assert all(sha in str(exc.value) for _, sha, _ in sources.SOURCES["IMB"].files)
    assert not (isolated / "cache").exists() or not any((isolated / "cache").glob("imb-*"))
    assert not (isolated / "repo/.hpcvirt/suites/imb-openmpi").exists()


@needs_mirror
def test_failed_install_leaves_only_its_log(isolated, monkeypatch):
    def broken(env_dir, hashes, *, jobs, log, mirror=None):
        log.write_text("==> Error: the compiler said no\n")
        raise hspack.SpackError(f"installing {env_dir.name} failed (make exit 2); Spack's output: {log}")

    monkeypatch.setattr(hspack, "install_roots", broken)
    with pytest.raises(build.BuildError, match=r"(?s)make exit 2.*full log: .*failed\.log.*compiler said no"):
        build.ensure("imb", "openmpi", mirror=MIRROR, quiet=True)
    left = sorted(p.name for p in (isolated / "cache").iterdir() if not p.name.startswith("."))
    assert len(left) == 1 and left[0].endswith(".failed.log"), left
    assert not (isolated / "repo/.hpcvirt/suites/imb-openmpi").exists()


def test_unknown_suite_or_mpi_is_refused(isolated):
    with pytest.raises(build.BuildError, match="no build recipe for 'hpl'"):
        build.ensure("hpl", "openmpi")
    with pytest.raises(build.BuildError, match="unknown MPI 'intelmpi'"):
        build.ensure("imb", "intelmpi")
    with pytest.raises(build.BuildError, match="unknown MPI 'intelmpi'"):
        build.toolchain("intelmpi")


def test_study_needs_the_builds_its_testbeds_name():
    from hpcvirt.config import load_study

    root = Path(__file__).resolve().parents[1]
    study, testbeds = load_study(config_path=root / "config/config.yaml", testbed_dir=root / "config/testbeds")
    need = build.needed(study, testbeds)
    # the guests' image carries the builds their testbed files name (Open MPI's); local/bridge name theirs
    # (MPICH: IMB only)
    assert build.image_builds() == [("imb", "openmpi"), ("milc", "openmpi"), ("npb", "openmpi"), ("osu", "openmpi")]
    assert need == sorted(build.image_builds() + [("imb", "mpich")])
    only_local = dict(study, testbeds=["local"], offers={"local": study["offers"]["local"]})
    assert ("npb", "openmpi") in build.needed(only_local, testbeds)
    assert json.dumps(need)


def test_a_study_file_overlays_the_default_study_as_snakemake_merges_it():
    base = {"testbeds": ["local", "vm"], "experiments": {"pingpong": {"paths": ["shm"], "max_bytes": 8}}}
    assert build._overlay(base, {"experiments": {"pingpong": {"max_bytes": 4}}, "testbeds": ["local"]}) == {
        "testbeds": ["local"], "experiments": {"pingpong": {"paths": ["shm"], "max_bytes": 4}}}

